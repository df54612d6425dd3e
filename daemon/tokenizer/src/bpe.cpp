#include <queue>
#include <string>
#include <unordered_map>

#include "algorithms.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

struct symbol {
  std::int32_t id;  // interned text (vocab::symbol), -1 if it takes part in no merge
  int prev, next;
  std::uint32_t begin, len;  // bytes of the encoded word; len 0 = merged away
};

struct bigram {
  std::int32_t rank;
  int left, right;
  std::int32_t left_id, right_id, merged;
  // Lowest rank first; among equals the leftmost pair.
  bool operator<(const bigram& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
};

// Merges one byte-encoded word and appends its tokens.
void merge_word(const vocab& v, const std::string& word, std::vector<token>& out) {
  if (v.ignore_merges()) {
    const token whole = v.find(word);
    if (whole != no_token) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<symbol> symbols;
  symbols.reserve(word.size());
  for (std::size_t offset = 0; offset < word.size();) {
    const std::size_t len = std::min(unicode::sequence_length(static_cast<unsigned char>(word[offset])), word.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({v.symbol(std::string_view(word).substr(offset, len)), index - 1,
                       offset + len == word.size() ? -1 : index + 1, static_cast<std::uint32_t>(offset),
                       static_cast<std::uint32_t>(len)});
    offset += len;
  }
  std::priority_queue<bigram> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const symbol& l = symbols[static_cast<std::size_t>(left)];
    const symbol& r = symbols[static_cast<std::size_t>(right)];
    const vocab::merge_result m = v.merge(l.id, r.id);
    if (m.rank < 0) return;
    queue.push({m.rank, left, right, l.id, r.id, m.merged});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const bigram b = queue.top();
    queue.pop();
    symbol& l = symbols[static_cast<std::size_t>(b.left)];
    symbol& r = symbols[static_cast<std::size_t>(b.right)];
    // Stale if either side has changed since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.id != b.left_id || r.id != b.right_id) continue;
    l.id = b.merged;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (const symbol& s : symbols) {
    if (s.len == 0) continue;
    const std::string_view piece = std::string_view(word).substr(s.begin, s.len);
    const token t = v.find(piece);
    if (t != no_token) {
      out.push_back(t);
      continue;
    }
    // Not a token: each byte that happens to be a token on its own (the reference's fallback).
    for (char c : piece) {
      const token b = v.find(std::string_view(&c, 1));
      if (b != no_token) out.push_back(b);
    }
  }
}

constexpr std::size_t k_word_cache_limit = 1 << 16;

}  // namespace

result<void> bpe_tokenize(const vocab& v, const regex_splitter& splitter, std::string_view text, std::vector<token>& out) {
  const std::vector<std::uint32_t> cpts = unicode::decode(text);
  std::vector<std::pair<std::size_t, std::size_t>> words;
  SPITE_TRY(splitter.split(cpts, words));
  // Text repeats its words; caching their tokens makes long inputs several times faster.
  std::unordered_map<std::string, std::vector<token>> cache;
  std::string word, raw;
  std::vector<token> tokens;
  for (const auto& [begin, end] : words) {
    raw.clear();
    for (std::size_t i = begin; i < end; ++i) unicode::append_utf8(raw, cpts[i]);
    word.clear();
    for (char c : raw) word += unicode::byte_to_symbol(static_cast<std::uint8_t>(c));
    if (const auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      continue;
    }
    tokens.clear();
    merge_word(v, word, tokens);
    out.insert(out.end(), tokens.begin(), tokens.end());
    if (cache.size() < k_word_cache_limit && word.size() < 256) cache.emplace(word, tokens);
  }
  return ok();
}

}  // namespace spite::tokenizer
