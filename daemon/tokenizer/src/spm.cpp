#include <algorithm>
#include <bit>
#include <functional>
#include <optional>
#include <string>

#include "algorithms.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

struct symbol {
  int prev, next;
  std::size_t begin, len;  // bytes of the text; len 0 = merged away
};

// A queued pair: highest score first, among equals the leftmost, folded into one integer
// (smaller is first) so that the queue of a long text stays small and compares cheaply.
struct bigram {
  std::uint64_t order;
  std::uint32_t len;  // of the pair when queued: a different length now means it changed
  int left() const { return static_cast<int>(static_cast<std::uint32_t>(order)); }
  bool operator>(const bigram& o) const { return order > o.order; }
};

bigram make_bigram(float score, int left, std::size_t len) {
  // Float bits made to sort as unsigned integers, then inverted: the highest score is smallest.
  const auto bits = std::bit_cast<std::uint32_t>(score == 0.0f ? 0.0f : score);  // -0 ties with +0
  const std::uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return {(static_cast<std::uint64_t>(~ascending) << 32) | static_cast<std::uint32_t>(left), static_cast<std::uint32_t>(len)};
}

}  // namespace

void spm_tokenize(const vocab& v, std::string_view text, std::vector<token>& out) {
  // One symbol per UTF-8 character as its lead byte announces it (not validated, as the
  // reference does: a broken sequence becomes a symbol that falls back to bytes).
  std::vector<symbol> symbols;
  symbols.reserve(text.size());
  for (std::size_t offset = 0; offset < text.size();) {
    const std::size_t len = std::min(unicode::sequence_length(static_cast<unsigned char>(text[offset])), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
    offset += len;
  }
  std::vector<bigram> queue;
  queue.reserve(symbols.size());
  const auto pair_of = [&](int left, int right) -> std::optional<bigram> {
    if (left < 0 || right < 0) return std::nullopt;
    const std::size_t len = symbols[static_cast<std::size_t>(left)].len + symbols[static_cast<std::size_t>(right)].len;
    const token t = v.find(text.substr(symbols[static_cast<std::size_t>(left)].begin, len));
    if (t == no_token) return std::nullopt;
    return make_bigram(v.score(t), left, len);
  };
  const auto try_add = [&](int left, int right) {
    if (const auto b = pair_of(left, right)) {
      queue.push_back(*b);
      std::push_heap(queue.begin(), queue.end(), std::greater<>{});
    }
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) {
    if (const auto b = pair_of(i - 1, i)) queue.push_back(*b);
  }
  std::make_heap(queue.begin(), queue.end(), std::greater<>{});

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), std::greater<>{});
    const bigram b = queue.back();
    queue.pop_back();
    const int left = b.left();
    symbol& l = symbols[static_cast<std::size_t>(left)];
    if (l.len == 0 || l.next < 0) continue;
    symbol& r = symbols[static_cast<std::size_t>(l.next)];
    if (r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = left;
    try_add(l.prev, left);
    try_add(left, l.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<std::size_t>(i)].next) {
    const symbol& s = symbols[static_cast<std::size_t>(i)];
    const std::string_view piece = text.substr(s.begin, s.len);
    const token t = v.find(piece);
    if (t != no_token) {
      out.push_back(t);
      continue;
    }
    for (char c : piece) out.push_back(v.byte_token(static_cast<std::uint8_t>(c)));
  }
}

}  // namespace spite::tokenizer
