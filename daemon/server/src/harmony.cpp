#include "spite/server/harmony.hpp"

#include <algorithm>
#include <array>

namespace spite::server {

namespace {

constexpr std::string_view message_tag = "<|message|>";
constexpr std::array<std::string_view, 4> body_ends = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};

// How many bytes at the end of `s` could begin one of `tags` (held back while streaming).
std::size_t partial_tag(std::string_view s) {
  std::size_t keep = 0;
  for (std::string_view tag : body_ends) {
    for (std::size_t k = std::min(tag.size() - 1, s.size()); k > keep; --k) {
      if (s.substr(s.size() - k) == tag.substr(0, k)) {
        keep = k;
        break;
      }
    }
  }
  return keep;
}

}  // namespace

harmony_stream::delta harmony_stream::feed(std::string_view text) {
  raw_ += text;
  return parse(false);
}

harmony_stream::delta harmony_stream::finish() { return parse(true); }

harmony_stream::delta harmony_stream::parse(bool at_end) {
  delta out;
  const auto emit = [&](std::string_view s) {
    if (part_ == part::content) out.content += s;
    if (part_ == part::reasoning) out.reasoning += s;
  };
  for (;;) {
    const std::string_view rest = std::string_view(raw_).substr(done_);
    if (part_ == part::header) {
      const auto at = rest.find(message_tag);
      if (at == std::string_view::npos) {
        if (at_end && !structured_) {  // no harmony layout at all: the text is the answer
          out.content += rest;
          done_ = raw_.size();
        }
        return out;
      }
      const std::string_view header = rest.substr(0, at);
      structured_ = true;
      if (header.find("to=") != std::string_view::npos) {
        part_ = part::hidden;  // a tool call: parsed from raw() at the end
      } else if (header.find("final") != std::string_view::npos) {
        part_ = part::content;
      } else if (header.find("analysis") != std::string_view::npos) {
        part_ = part::reasoning;
      } else {
        part_ = part::content;  // a commentary preamble, meant for the user
      }
      done_ += at + message_tag.size();
      continue;
    }
    std::size_t end = std::string_view::npos, tag = 0;
    for (std::string_view t : body_ends) {
      const auto at = rest.find(t);
      if (at < end) {
        end = at;
        tag = t.size();
      }
    }
    if (end == std::string_view::npos) {
      const std::size_t ready = at_end ? rest.size() : rest.size() - partial_tag(rest);
      emit(rest.substr(0, ready));
      done_ += ready;
      return out;
    }
    emit(rest.substr(0, end));
    done_ += end + tag;
    part_ = part::header;
  }
}

}  // namespace spite::server
