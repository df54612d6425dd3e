#include <queue>
#include <string>

#include "algorithms.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

struct symbol {
  int prev, next;
  std::size_t begin, len;  // bytes of the text; len 0 = merged away
};

struct bigram {
  int left, right;
  float score;
  std::size_t len;
  // Highest score first; among equals the leftmost pair.
  bool operator<(const bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
};

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
  std::priority_queue<bigram> queue;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::size_t len = symbols[static_cast<std::size_t>(left)].len + symbols[static_cast<std::size_t>(right)].len;
    const token t = v.find(text.substr(symbols[static_cast<std::size_t>(left)].begin, len));
    if (t == no_token) return;
    queue.push({left, right, v.score(t), len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const bigram b = queue.top();
    queue.pop();
    symbol& l = symbols[static_cast<std::size_t>(b.left)];
    symbol& r = symbols[static_cast<std::size_t>(b.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
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
