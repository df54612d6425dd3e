#include <algorithm>
#include <functional>
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

// A queued pair is only its rank and its left symbol, lowest rank first and among equals the
// leftmost (one integer compare). Popped, it stands for whatever pair is at that position now
// if that pair has the same rank: that pair's own entry has the same key, so nothing else
// could come between them. Eight bytes per entry keep the queue of a long word in cache.
using pair_key = std::uint64_t;
pair_key key_of(std::int32_t rank, int left) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 32) | static_cast<std::uint32_t>(left);
}

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
  std::vector<pair_key> queue;
  queue.reserve(symbols.size());
  const auto rank_of = [&](int left, int right) {
    if (left < 0 || right < 0) return vocab::merge_result{};
    return v.merge(symbols[static_cast<std::size_t>(left)].id, symbols[static_cast<std::size_t>(right)].id);
  };
  const auto try_add = [&](int left, int right) {
    const vocab::merge_result m = rank_of(left, right);
    if (m.rank < 0) return;
    queue.push_back(key_of(m.rank, left));
    std::push_heap(queue.begin(), queue.end(), std::greater<>{});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) {
    const vocab::merge_result m = rank_of(i - 1, i);
    if (m.rank >= 0) queue.push_back(key_of(m.rank, i - 1));
  }
  std::make_heap(queue.begin(), queue.end(), std::greater<>{});
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>{});
    const pair_key key = queue.back();
    queue.pop_back();
    const int left = static_cast<int>(static_cast<std::uint32_t>(key));
    symbol& l = symbols[static_cast<std::size_t>(left)];
    if (l.len == 0 || l.next < 0) continue;
    const vocab::merge_result m = rank_of(left, l.next);
    if (m.rank != static_cast<std::int32_t>(key >> 32)) continue;  // that pair has changed
    symbol& r = symbols[static_cast<std::size_t>(l.next)];
    l.id = m.merged;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = left;
    try_add(l.prev, left);
    try_add(left, l.next);
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
