#include "spite/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "algorithms.hpp"
#include "pretokenize.hpp"
#include "trie.hpp"

namespace spite::tokenizer {

// Finds every occurrence of every special token in a text in one pass, so that partitioning
// costs O(text x longest special) however many specials the vocabulary has.
struct tokenizer::special_matcher {
  byte_trie trie;
  bool first_byte[256] = {};

  void insert(std::string_view s, token t) {
    trie.insert(s, t);
    if (!s.empty()) first_byte[static_cast<unsigned char>(s[0])] = true;
  }

  // Occurrences (start, token): every start with every length that matches.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, token>>& found) const {
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (!first_byte[static_cast<unsigned char>(text[i])]) continue;
      std::uint32_t node = byte_trie::none;
      for (std::size_t j = i; j < text.size(); ++j) {
        node = trie.step(node, static_cast<unsigned char>(text[j]));
        if (node == byte_trie::none) break;
        if (trie.value(node) != no_token) found.emplace_back(i, trie.value(node));
      }
    }
  }
};

result<std::shared_ptr<const tokenizer>> tokenizer::create(std::shared_ptr<const vocab> v) {
  if (v->kind() == vocab_kind::none) {
    return make_error(errc::unsupported, "the model has no vocabulary (tokenizer.ggml.model = none)");
  }
  std::shared_ptr<tokenizer> t(new tokenizer());
  t->vocab_ = std::move(v);
  const vocab& voc = *t->vocab_;
  if (voc.kind() == vocab_kind::bpe) {
    auto splitter = regex_splitter::compile(voc.pretokenizer()->regexes);
    if (!splitter) return std::move(splitter).err();
    t->splitter_ = std::move(*splitter);
  }
  if (voc.kind() == vocab_kind::ugm) t->ugm_ = build_ugm_model(voc);
  auto matcher = std::make_shared<special_matcher>();
  for (token s : voc.special_tokens()) matcher->insert(voc.text(s), s);
  t->matcher_ = std::move(matcher);

  // Pieces are precomputed once: detokenization is then a concatenation.
  t->pieces_.resize(voc.size());
  t->pieces_plain_.resize(voc.size());
  for (std::size_t i = 0; i < voc.size(); ++i) {
    const auto id = static_cast<token>(i);
    t->pieces_[i] = compute_piece(voc, id);
    if (!voc.has_attr(id, attr_control | attr_unknown)) t->pieces_plain_[i] = t->pieces_[i];
  }
  return std::shared_ptr<const tokenizer>(std::move(t));
}

result<std::shared_ptr<const tokenizer>> tokenizer::from_metadata(const gguf::metadata& meta) {
  auto v = vocab::load(meta);
  if (!v) return std::move(v).err();
  return create(std::move(*v));
}

std::vector<tokenizer::fragment> tokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<fragment> out;
  if (text.empty()) return out;
  std::vector<std::pair<std::size_t, token>> found;
  matcher_->find_all(text, found);
  // Without parse_special only user-defined tokens are split out (as the reference does).
  if (!parse_special) {
    std::erase_if(found, [&](const auto& f) { return vocab_->has_attr(f.second, attr_control | attr_unknown); });
  }
  if (found.empty()) {
    out.push_back({no_token, 0, text.size()});
    return out;
  }
  // The reference splits the text on one special token at a time, longest text first; each
  // token's occurrences are taken left to right inside what is still raw text.
  std::unordered_map<token, std::vector<std::size_t>> starts;
  for (const auto& [start, t] : found) starts[t].push_back(start);
  std::map<std::size_t, fragment> pieces;  // by begin
  pieces[0] = {no_token, 0, text.size()};
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  for (token t : vocab_->special_tokens()) {
    const auto it = starts.find(t);
    if (it == starts.end()) continue;
    const std::size_t len = vocab_->text(t).size();
    for (std::size_t s : it->second) {
      auto piece = pieces.upper_bound(s);
      if (piece == pieces.begin()) continue;
      --piece;
      fragment raw = piece->second;
      if (raw.special != no_token || s < raw.begin || s + len > raw.end) continue;
      pieces.erase(piece);
      std::size_t left_end = s;
      if (vocab_->has_attr(t, attr_lstrip)) {
        while (left_end > raw.begin && is_space(text[left_end - 1])) --left_end;
      }
      if (left_end > raw.begin) pieces[raw.begin] = {no_token, raw.begin, left_end};
      pieces[s] = {t, s, s + len};
      std::size_t right_begin = s + len;
      if (vocab_->has_attr(t, attr_rstrip)) {
        while (right_begin < raw.end && is_space(text[right_begin])) ++right_begin;
      }
      if (right_begin < raw.end) pieces[right_begin] = {no_token, right_begin, raw.end};
    }
  }
  out.reserve(pieces.size());
  for (const auto& [begin, f] : pieces) out.push_back(f);
  return out;
}

result<void> tokenizer::tokenize_fragment(std::string_view text, std::vector<token>& out) const {
  switch (vocab_->kind()) {
    case vocab_kind::spm: {
      std::string escaped;  // spaces become U+2581, as SentencePiece stores them
      escaped.reserve(text.size() + 8);
      for (char c : text) {
        if (c == ' ') escaped += "\xe2\x96\x81";
        else escaped.push_back(c);
      }
      spm_tokenize(*vocab_, escaped, out);
      return ok();
    }
    case vocab_kind::bpe: return bpe_tokenize(*vocab_, *splitter_, text, out);
    case vocab_kind::wpm: wpm_tokenize(*vocab_, text, out); return ok();
    case vocab_kind::ugm: ugm_tokenize(*vocab_, *ugm_, text, out); return ok();
    case vocab_kind::none: break;
  }
  return make_error(errc::unsupported, "no vocabulary");
}

result<std::vector<token>> tokenizer::tokenize(std::string_view text, const tokenize_options& options) const {
  const vocab& v = *vocab_;
  const special_ids& sp = v.special();
  std::vector<token> out;
  out.reserve(text.size() / 3 + 4);
  const bool add_bos = options.add_special && v.add_bos() && sp.bos != no_token;
  if (add_bos || (options.add_special && v.kind() == vocab_kind::wpm && sp.bos != no_token)) out.push_back(sp.bos);

  bool prev_special = true;  // SPM prefixes a space to text at the start and after a special
  for (const fragment& f : partition(text, options.parse_special)) {
    if (f.special != no_token) {
      out.push_back(f.special);
      prev_special = true;
      continue;
    }
    std::string_view raw = text.substr(f.begin, f.end - f.begin);
    std::string prefixed;
    if (v.kind() == vocab_kind::spm && v.add_space_prefix() && prev_special) {
      prefixed = " ";
      prefixed.append(raw);
      raw = prefixed;
    }
    SPITE_TRY(tokenize_fragment(raw, out));
    prev_special = false;
  }

  if (options.add_special) {
    if (v.add_eos() && sp.eos != no_token && v.kind() != vocab_kind::wpm) out.push_back(sp.eos);
    if (v.add_sep() && sp.sep != no_token) out.push_back(sp.sep);
  }
  return out;
}

}  // namespace spite::tokenizer
