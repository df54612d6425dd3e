#include <string>

#include "algorithms.hpp"
#include "spite/tokenizer/tokenizer.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {

std::string compute_piece(const vocab& v, token id) {
  const std::string_view text = v.text(id);
  const std::uint32_t attr = v.attr(id);
  if (attr & (attr_control | attr_unknown | attr_user_defined)) return std::string(text);
  switch (v.kind()) {
    case vocab_kind::spm:
    case vocab_kind::wpm:
    case vocab_kind::ugm: {
      if (attr & attr_normal) {
        std::string out;
        out.reserve(text.size());
        for (std::size_t i = 0; i < text.size(); ++i) {
          if (text.compare(i, 3, "\xe2\x96\x81") == 0) {  // U+2581 stands for a space
            out.push_back(' ');
            i += 2;
          } else {
            out.push_back(text[i]);
          }
        }
        return out;
      }
      if (attr & attr_byte) {
        const int b = v.token_byte(id);
        return b < 0 ? std::string() : std::string(1, static_cast<char>(b));
      }
      return {};
    }
    case vocab_kind::bpe: {
      if ((attr & attr_normal) == 0) return {};
      // Byte-level symbols back to the bytes they stand for.
      std::string out;
      for (std::size_t i = 0; i < text.size();) {
        const std::size_t at = i;
        const std::uint32_t cp = unicode::decode_next(text, i);
        const int b = unicode::symbol_to_byte(cp);
        if (b >= 0) {
          out.push_back(static_cast<char>(b));
          continue;
        }
        out += "[UNK_BYTE_0x";  // what the reference prints for a symbol outside the alphabet
        static constexpr char hex[] = "0123456789abcdef";
        for (std::size_t k = at; k < i; ++k) {
          out.push_back(hex[static_cast<unsigned char>(text[k]) >> 4]);
          out.push_back(hex[static_cast<unsigned char>(text[k]) & 15]);
        }
        out.append(text).push_back(']');
      }
      return out;
    }
    case vocab_kind::none: break;
  }
  return {};
}

std::string_view tokenizer::piece(token t, bool special) const {
  if (!vocab_->valid(t)) return {};
  return special ? pieces_[static_cast<std::size_t>(t)] : pieces_plain_[static_cast<std::size_t>(t)];
}

namespace {

// The reference's space cleanup for families that tokenize " ," as a separate space. Three
// in-place passes, kept literally (including the NUL the second pass leaves behind, which
// changes what the next character sees).
void clean_spaces(std::string& s) {
  if (s.empty()) return;
  char* text = s.data();
  std::size_t total = s.size();

  std::size_t n = total;  // 1: " ?" " !" " ." " ,"
  total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }

  n = total;  // 2: " ' " -> "'"
  total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }

  n = total;  // 3: " 's" " 'm" " 're" " 've" lose their space
  total = 1;
  for (std::size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  s.resize(total);
}

}  // namespace

std::string tokenizer::detokenize(std::span<const token> tokens, bool remove_special, bool unparse_special) const {
  const vocab& v = *vocab_;
  bool remove_space = v.add_space_prefix();
  if (remove_special && v.add_bos() && !tokens.empty() && tokens.front() == v.special().bos) {
    remove_space = false;
    tokens = tokens.subspan(1);
  }
  if (remove_special && v.add_eos() && !tokens.empty() && tokens.back() == v.special().eos) {
    tokens = tokens.subspan(0, tokens.size() - 1);
  }
  std::string text;
  for (token t : tokens) {
    std::string_view p = piece(t, unparse_special);
    if (remove_space && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    remove_space = false;
    text.append(p);
  }
  if (v.clean_spaces()) clean_spaces(text);
  return text;
}

// ---- streaming

std::string stream_detokenizer::push(token t) {
  std::string_view p = tok_->piece(t, special_);
  const vocab& v = tok_->vocabulary();
  if (first_) {
    // The first piece loses the space SentencePiece prefixed, unless it is BOS itself.
    first_ = false;
    const bool is_bos = t == v.special().bos && v.add_bos();
    if (!is_bos && v.add_space_prefix() && !p.empty() && p.front() == ' ') p.remove_prefix(1);
  }
  pending_.append(p);
  const std::size_t hold = unicode::incomplete_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string stream_detokenizer::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace spite::tokenizer
