// Unigram (T5-style SentencePiece) tokenization: normalization through the model's precompiled
// character map, then the Viterbi search for the highest-scoring segmentation.
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <string>

#include "algorithms.hpp"
#include "trie.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {

class ugm_model {
 public:
  explicit ugm_model(const vocab& v) {
    const std::string_view map = v.precompiled_charsmap();
    // Layout: u32 size of the double array, the array (u32 entries), then NUL-terminated
    // replacement strings. Anything inconsistent leaves normalization to the identity.
    if (map.size() >= 4) {
      std::uint32_t blob = 0;
      std::memcpy(&blob, map.data(), 4);
      if (blob % 4 == 0 && static_cast<std::uint64_t>(blob) + 4 < map.size()) {
        xcda_.resize(blob / 4);
        std::memcpy(xcda_.data(), map.data() + 4, blob);
        replacements_ = map.substr(4 + blob);
      }
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto id = static_cast<token>(i);
      if (v.has_attr(id, attr_normal)) {
        min_score_ = std::min(min_score_, v.score(id));
      }
      if (v.has_attr(id, attr_normal | attr_user_defined | attr_unused)) tokens_.insert(v.text(id), id);
      if (v.has_attr(id, attr_user_defined)) user_defined_.insert(v.text(id), id);
    }
    unknown_score_ = min_score_ - 10.0f;  // the penalty SentencePiece gives an unknown piece
  }

  // Normalized form of the longest prefix the character map knows (or one character as is).
  struct prefix {
    std::string_view text;
    std::size_t consumed;
  };
  prefix normalize_prefix(std::string_view input, std::size_t at) const {
    const std::string_view rest = input.substr(at);
    if (const std::size_t n = user_defined_.longest_prefix(rest); n > 0) return {rest.substr(0, n), n};

    std::size_t best_len = 0, best_value = 0;
    if (!xcda_.empty()) {
      std::uint32_t node = base(0);
      for (std::size_t i = 0; i < rest.size(); ++i) {
        const auto c = static_cast<unsigned char>(rest[i]);
        if (c == 0) break;
        node ^= c;
        if (node >= xcda_.size() || lcheck(node) != c) break;
        const bool leaf = (xcda_[node] >> 8) & 1u;
        node ^= base(node);
        if (node >= xcda_.size()) break;
        if (leaf) {
          best_len = i + 1;
          best_value = xcda_[node] & 0x7fffffffu;
        }
      }
    }
    if (best_len > 0 && best_value < replacements_.size()) {
      const std::string_view r = replacements_.substr(best_value);
      return {r.substr(0, std::min(r.find('\0'), r.size())), best_len};
    }
    std::size_t next = 0;
    const std::uint32_t cp = unicode::decode_next(rest, next);
    if (cp == unicode::replacement_char && rest.compare(0, 3, "\xEF\xBF\xBD") != 0) return {"\xEF\xBF\xBD", 1};
    return {rest.substr(0, next), next};
  }

  const byte_trie& tokens() const noexcept { return tokens_; }
  float unknown_score() const noexcept { return unknown_score_; }

 private:
  std::uint32_t base(std::size_t i) const noexcept {
    const std::uint32_t p = xcda_[i];
    return (p >> 10) << ((p & (1u << 9)) >> 6);
  }
  std::uint32_t lcheck(std::size_t i) const noexcept { return xcda_[i] & ((1u << 31) | 0xffu); }

  std::vector<std::uint32_t> xcda_;
  std::string_view replacements_;  // views the vocabulary's copy of the map
  byte_trie tokens_, user_defined_;
  float min_score_ = FLT_MAX;
  float unknown_score_ = 0;
};

std::shared_ptr<const ugm_model> build_ugm_model(const vocab& v) { return std::make_shared<ugm_model>(v); }

namespace {

std::string normalize(const vocab& v, const ugm_model& m, std::string_view input) {
  static constexpr std::string_view space = "\xe2\x96\x81";  // whitespace is escaped to U+2581
  const bool prepend_space = v.add_space_prefix();
  const bool merge_spaces = v.remove_extra_whitespaces();
  std::string out;
  out.reserve(input.size() * 3);
  bool space_prepended = false, in_word = false;
  for (std::size_t at = 0; at < input.size();) {
    const ugm_model::prefix p = m.normalize_prefix(input, at);
    for (char c : p.text) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend_space && !space_prepended) || merge_spaces) {
            out.append(space);
            space_prepended = true;
          }
        }
        out.push_back(c);
      } else {
        in_word = false;
        if (!merge_spaces) out.append(space);
      }
    }
    at += std::max<std::size_t>(p.consumed, 1);
  }
  return out;
}

}  // namespace

void ugm_tokenize(const vocab& v, const ugm_model& m, std::string_view text, std::vector<token>& out) {
  const std::string normalized = normalize(v, m, text);
  const std::size_t n = normalized.size();
  if (n == 0) return;
  struct best {
    token id;
    std::size_t from;
    float score;
  };
  const token unk = v.special().unk;
  std::vector<best> results(n + 1, {unk, 0, -FLT_MAX});
  results[0] = {unk, 0, 0.0f};
  for (std::size_t at = 0; at < n;) {
    const std::size_t char_len = std::min(unicode::sequence_length(static_cast<unsigned char>(normalized[at])), n - at);
    const best current = results[at];
    bool whole_char_token = false;
    std::uint32_t node = byte_trie::none;
    for (std::size_t end = at; end < n; ++end) {
      node = m.tokens().step(node, static_cast<unsigned char>(normalized[end]));
      if (node == byte_trie::none) break;
      const token t = m.tokens().value(node);
      if (t == no_token) continue;
      if (end + 1 - at == char_len) whole_char_token = true;
      // User-defined pieces score 0 so that they win; scores add in double as SentencePiece does.
      const double s = static_cast<double>(current.score) + (v.has_attr(t, attr_user_defined) ? 0.0 : v.score(t));
      best& champ = results[end + 1];
      if (s > champ.score) champ = {t, at, static_cast<float>(s)};
    }
    if (!whole_char_token) {
      const double s = static_cast<double>(current.score) + m.unknown_score();
      best& champ = results[at + char_len];
      if (s > champ.score) champ = {unk, at, static_cast<float>(s)};
    }
    at += char_len;
  }
  // Walk back from the end; runs of unknown pieces become one unknown token.
  const std::size_t mark = out.size();
  bool prev_unknown = false;
  for (std::size_t at = n;;) {
    const best& b = results[at];
    const bool unknown = b.id == unk;
    if (!(prev_unknown && unknown)) out.push_back(b.id);
    if (b.from == 0) break;
    prev_unknown = unknown;
    at = b.from;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(mark), out.end());
}

}  // namespace spite::tokenizer
