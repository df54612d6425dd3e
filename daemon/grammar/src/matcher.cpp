// The stack matcher: stepping parse stacks over characters and bytes, and querying a vocabulary.
#include "spite/grammar/matcher.hpp"

#include <algorithm>
#include <unordered_map>
#include <stdexcept>
#include <utility>

#include "utf8.hpp"

namespace spite::grammar {

namespace {

constexpr std::uint64_t finished_hash = 0x6a09e667f3bcc908ULL;
constexpr std::uint64_t bottom_hash = 0xbb67ae8584caa73bULL;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

detail::partial_utf8 partial_of(std::uint32_t value, std::uint8_t remaining, std::uint8_t length) {
  detail::partial_utf8 p;
  p.value = value;
  p.remaining = remaining;
  p.length = length;
  return p;
}

}  // namespace

// ---- vocabulary

vocabulary::vocabulary(std::vector<std::string> texts, std::vector<std::int32_t> end_tokens)
    : texts_(std::move(texts)), is_end_(texts_.size(), 0) {
  for (const std::int32_t id : end_tokens) {
    if (id < 0 || static_cast<std::size_t>(id) >= texts_.size()) {
      throw std::invalid_argument("grammar::vocabulary: end token " + std::to_string(id) + " is not in the vocabulary");
    }
    if (!is_end_[static_cast<std::size_t>(id)]) ends_.push_back(id);
    is_end_[static_cast<std::size_t>(id)] = 1;
  }
  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < texts_.size(); ++i) {
    if (!texts_[i].empty() && !is_end_[i]) order.push_back(static_cast<std::int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    const auto& ta = texts_[static_cast<std::size_t>(a)];
    const auto& tb = texts_[static_cast<std::size_t>(b)];
    return ta != tb ? ta < tb : a < b;
  });
  // Breadth-first: a node covers a sorted range of texts sharing its prefix; the texts that end
  // at the node come first, the rest split by their next byte into contiguous children.
  struct pending {
    std::uint32_t node;
    std::size_t begin, end, depth;
  };
  nodes_.emplace_back();
  std::vector<pending> queue{{0, 0, order.size(), 0}};
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const pending p = queue[q];
    std::size_t i = p.begin;
    nodes_[p.node].tokens_begin = static_cast<std::uint32_t>(node_tokens_.size());
    while (i < p.end && texts_[static_cast<std::size_t>(order[i])].size() == p.depth) node_tokens_.push_back(order[i++]);
    nodes_[p.node].tokens_end = static_cast<std::uint32_t>(node_tokens_.size());
    max_len_ = std::max(max_len_, p.depth);
    nodes_[p.node].first_child = static_cast<std::uint32_t>(nodes_.size());
    while (i < p.end) {
      const auto byte = static_cast<unsigned char>(texts_[static_cast<std::size_t>(order[i])][p.depth]);
      std::size_t j = i;
      while (j < p.end && static_cast<unsigned char>(texts_[static_cast<std::size_t>(order[j])][p.depth]) == byte) ++j;
      node child;
      child.byte = byte;
      nodes_.push_back(child);
      nodes_[p.node].children++;
      queue.push_back({static_cast<std::uint32_t>(nodes_.size() - 1), i, j, p.depth + 1});
      i = j;
    }
  }
}

// ---- matcher

matcher::matcher(std::shared_ptr<const grammar> g, const match_limits& lim) : g_(std::move(g)), lim_(lim) {
  if (!g_) throw std::invalid_argument("grammar::matcher: no grammar");
  reset();
}

void matcher::reset() {
  frames_.clear();
  cur_ = {};
  ended_ = false;
  failure_.reset();
  work_ = 0;
  const auto alts = g_->alternatives(g_->root());
  for (const std::uint32_t a : alts) todo_.push_back({a, -1, -1});
  settle(cur_.heads);
  dedupe(cur_.heads);
}

bool matcher::fail(std::string what) {
  if (!failure_) failure_ = make_error(errc::out_of_range, "grammar: " + std::move(what));
  return false;
}

std::int32_t matcher::new_frame(std::uint32_t pos, std::int32_t parent) {
  const std::uint32_t depth = parent >= 0 ? frames_[static_cast<std::size_t>(parent)].depth + 1 : 1;
  if (depth > lim_.max_depth) {
    fail("the text nests rules deeper than " + std::to_string(lim_.max_depth));
    return -1;
  }
  const std::uint64_t below = parent >= 0 ? frames_[static_cast<std::size_t>(parent)].hash : bottom_hash;
  frames_.push_back({pos, parent, depth, mix(below ^ (std::uint64_t{pos} * 0x100000001b3ULL))});
  return static_cast<std::int32_t>(frames_.size() - 1);
}

// Expands the work list into stack tops: rule references open their alternatives (with the rest
// of the current alternative pushed below, unless nothing is left of it: a tail call, which keeps
// right recursion flat), ends of alternatives pop back to the frame below.
bool matcher::settle(std::vector<std::int32_t>& out) {
  const auto syms = g_->symbols();
  while (!todo_.empty()) {
    const todo_item it = todo_.back();
    todo_.pop_back();
    if (++work_ > lim_.max_work) {
      todo_.clear();
      return fail("more than " + std::to_string(lim_.max_work) + " steps for one token (the grammar is too ambiguous)");
    }
    const symbol s = syms[it.pos];
    if (s.type == symbol::kind::end) {
      if (it.parent < 0) {
        out.push_back(-1);
      } else {
        const frame& below = frames_[static_cast<std::size_t>(it.parent)];
        todo_.push_back({below.pos, below.parent, it.parent});
      }
    } else if (s.type == symbol::kind::chars) {
      const std::int32_t id = it.self >= 0 ? it.self : new_frame(it.pos, it.parent);
      if (id < 0) {
        todo_.clear();
        return false;
      }
      out.push_back(id);
    } else {
      std::int32_t rest = it.parent;
      if (syms[it.pos + 1].type != symbol::kind::end) {
        rest = new_frame(it.pos + 1, it.parent);
        if (rest < 0) {
          todo_.clear();
          return false;
        }
      }
      for (const std::uint32_t a : g_->alternatives(s.index)) todo_.push_back({a, rest, -1});
    }
  }
  return true;
}

bool matcher::same_stack(std::int32_t a, std::int32_t b) const {
  while (a != b) {
    if (a < 0 || b < 0) return false;
    const frame& fa = frames_[static_cast<std::size_t>(a)];
    const frame& fb = frames_[static_cast<std::size_t>(b)];
    if (fa.pos != fb.pos || fa.hash != fb.hash) return false;
    a = fa.parent;
    b = fb.parent;
  }
  return true;
}

// Different parses often arrive at the same stack; keeping one of each is what keeps ambiguous
// grammars (x* inside y*, alternatives sharing a prefix) from multiplying the work every step.
void matcher::dedupe(std::vector<std::int32_t>& heads) {
  if (heads.size() < 2) return;
  auto hash_of = [&](std::int32_t h) { return h < 0 ? finished_hash : frames_[static_cast<std::size_t>(h)].hash; };
  std::sort(heads.begin(), heads.end(), [&](std::int32_t a, std::int32_t b) {
    const auto ha = hash_of(a), hb = hash_of(b);
    return ha != hb ? ha < hb : a < b;
  });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    bool dup = false;
    for (std::size_t j = kept; j-- > 0 && hash_of(heads[j]) == hash_of(heads[i]);) {
      if (same_stack(heads[j], heads[i])) {
        dup = true;
        break;
      }
    }
    if (!dup) heads[kept++] = heads[i];
  }
  heads.resize(kept);
  if (heads.size() > lim_.max_stacks) {
    fail("more than " + std::to_string(lim_.max_stacks) + " parses alive at once (the grammar is too ambiguous)");
  }
}

bool matcher::step_char(const std::vector<std::int32_t>& in, char32_t c, std::vector<std::int32_t>& out) {
  out.clear();
  const auto syms = g_->symbols();
  for (const std::int32_t h : in) {
    if (h < 0) continue;
    const frame& f = frames_[static_cast<std::size_t>(h)];
    if (g_->chars(syms[f.pos].index).contains(c)) todo_.push_back({f.pos + 1, f.parent, -1});
  }
  if (!settle(out)) return false;
  dedupe(out);
  return !failure_ && !out.empty();
}

bool matcher::alive(const state& s) const {
  if (s.partial_remaining == 0) return !s.heads.empty();
  const auto [lo, hi] = partial_of(s.partial_value, s.partial_remaining, s.partial_length).range();
  const auto syms = g_->symbols();
  for (const std::int32_t h : s.heads) {
    if (h >= 0 && g_->chars(syms[frames_[static_cast<std::size_t>(h)].pos].index).intersects(lo, hi)) return true;
  }
  return false;
}

bool matcher::step_byte(const state& in, unsigned char b, state& out) {
  auto p = partial_of(in.partial_value, in.partial_remaining, in.partial_length);
  char32_t c = 0;
  switch (detail::feed_byte(p, b, c)) {
    case detail::byte_step::invalid:
      return false;
    case detail::byte_step::need_more:
      out.heads = in.heads;
      out.partial_value = p.value;
      out.partial_remaining = p.remaining;
      out.partial_length = p.length;
      return alive(out);
    case detail::byte_step::complete:
      out.partial_value = 0;
      out.partial_remaining = 0;
      out.partial_length = 0;
      return step_char(in.heads, c, out.heads);
  }
  return false;
}

bool matcher::step_bytes(std::string_view bytes, state& out) {
  state* a = &tmp_a_;
  state* b = &tmp_b_;
  *a = cur_;
  for (const char ch : bytes) {
    if (!step_byte(*a, static_cast<unsigned char>(ch), *b)) return false;
    std::swap(a, b);
  }
  out = *a;
  return true;
}

bool matcher::accept(std::string_view bytes) {
  if (failure_ || ended_) return false;
  work_ = 0;
  const std::size_t mark = frames_.size();
  state next;
  if (!step_bytes(bytes, next)) {
    frames_.resize(mark);
    return false;
  }
  cur_ = std::move(next);
  compact();
  return true;
}

bool matcher::allows(std::string_view bytes) {
  if (failure_ || ended_) return false;
  work_ = 0;
  const std::size_t mark = frames_.size();
  const bool ok = step_bytes(bytes, tmp_a_);
  frames_.resize(mark);
  return ok && !failure_;
}

bool matcher::accept_token(const vocabulary& v, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= v.size() || failure_ || ended_) return false;
  if (v.is_end(id)) {
    if (!can_end()) return false;
    ended_ = true;
    return true;
  }
  const std::string_view text = v.text(id);
  return !text.empty() && accept(text);
}

bool matcher::allows_token(const vocabulary& v, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= v.size() || failure_ || ended_) return false;
  if (v.is_end(id)) return can_end();
  const std::string_view text = v.text(id);
  return !text.empty() && allows(text);
}

bool matcher::can_end() const noexcept {
  if (failure_ || ended_ || cur_.partial_remaining != 0) return false;
  return std::find(cur_.heads.begin(), cur_.heads.end(), -1) != cur_.heads.end();
}

void matcher::allowed_tokens(const vocabulary& v, std::vector<std::uint8_t>& mask) {
  mask.assign(v.size(), 0);
  if (failure_ || ended_) return;
  work_ = 0;
  if (can_end()) {
    for (const std::int32_t e : v.end_tokens()) mask[static_cast<std::size_t>(e)] = 1;
  }
  const std::size_t entry_mark = frames_.size();
  if (!walk_memo(v, mask)) walk_plain(v, mask);
  frames_.resize(entry_mark);
  if (failure_) std::fill(mask.begin(), mask.end(), 0);
}

// Stacks inside a long run of the same construct (the characters of a string, digits) come back
// to the same state byte after byte; interning states and remembering (state, byte) -> state
// turns most of the trie walk into table lookups. Gives up (false) past a number of states, for
// walk_plain to do without.
bool matcher::walk_memo(const vocabulary& v, std::vector<std::uint8_t>& mask) {
  constexpr std::size_t max_states = 4096;
  constexpr std::int32_t unknown = -2, dead = -1;
  const std::size_t entry_mark = frames_.size();
  memo_states_.clear();
  memo_next_.clear();
  memo_index_.clear();
  auto find = [&](const state& s) -> std::int32_t {
    const auto it = memo_index_.find(state_key(s));
    if (it == memo_index_.end()) return dead;
    for (const std::int32_t id : it->second) {
      if (same_state(memo_states_[static_cast<std::size_t>(id)], s)) return id;
    }
    return dead;
  };
  auto intern = [&](state&& s) {
    const auto id = static_cast<std::int32_t>(memo_states_.size());
    memo_index_[state_key(s)].push_back(id);
    memo_states_.push_back(std::move(s));
    memo_next_.resize(memo_next_.size() + 256, unknown);
    return id;
  };
  intern(state(cur_));
  struct position {
    std::uint32_t node;
    std::uint32_t next;
    std::int32_t state;
  };
  std::vector<position> path{{0, 0, 0}};
  while (!path.empty()) {
    position& at = path.back();
    const vocabulary::node& n = v.nodes_[at.node];
    if (at.next == n.children) {
      path.pop_back();
      continue;
    }
    const std::uint32_t child = n.first_child + at.next++;
    const vocabulary::node& c = v.nodes_[child];
    const std::size_t slot = static_cast<std::size_t>(at.state) * 256 + c.byte;
    std::int32_t to = memo_next_[slot];
    if (to == unknown) {
      const std::size_t mark = frames_.size();
      const bool ok = step_byte(memo_states_[static_cast<std::size_t>(at.state)], c.byte, tmp_a_);
      if (failure_) return true;
      to = ok ? find(tmp_a_) : dead;
      if (to == dead && ok) {
        if (memo_states_.size() >= max_states) {
          frames_.resize(entry_mark);
          return false;
        }
        to = intern(std::move(tmp_a_));
        tmp_a_ = {};
      } else {
        frames_.resize(mark);  // a state seen before, or none: the new frames are unused
      }
      memo_next_[slot] = to;
    }
    if (to == dead) continue;
    for (std::uint32_t t = c.tokens_begin; t < c.tokens_end; ++t) mask[static_cast<std::size_t>(v.node_tokens_[t])] = 1;
    if (c.children > 0) path.push_back({child, 0, to});
  }
  return true;
}

// Depth-first over the trie with an explicit stack; levels_[d] is the state after the first d
// bytes of the current prefix. Frames made below a level are dropped when it is left.
void matcher::walk_plain(const vocabulary& v, std::vector<std::uint8_t>& mask) {
  if (levels_.size() < v.max_len_ + 1) levels_.resize(v.max_len_ + 1);
  levels_[0] = cur_;
  struct position {
    std::uint32_t node;
    std::uint32_t next;  // next child to visit
    std::size_t mark;    // frames_.size() when the node was entered
  };
  std::vector<position> path{{0, 0, frames_.size()}};
  while (!path.empty()) {
    position& at = path.back();
    const vocabulary::node& n = v.nodes_[at.node];
    if (at.next == n.children) {
      frames_.resize(at.mark);
      path.pop_back();
      continue;
    }
    const std::uint32_t child = n.first_child + at.next++;
    const std::size_t depth = path.size();
    const std::size_t mark = frames_.size();
    if (!step_byte(levels_[depth - 1], v.nodes_[child].byte, levels_[depth])) {
      frames_.resize(mark);
      if (failure_) return;
      continue;
    }
    const vocabulary::node& c = v.nodes_[child];
    for (std::uint32_t t = c.tokens_begin; t < c.tokens_end; ++t) mask[static_cast<std::size_t>(v.node_tokens_[t])] = 1;
    if (c.children > 0) {
      path.push_back({child, 0, mark});
    } else {
      frames_.resize(mark);
    }
  }
}

std::uint64_t matcher::state_key(const state& s) const {
  std::uint64_t k = mix(s.partial_value ^ (std::uint64_t{s.partial_remaining} << 32) ^ (std::uint64_t{s.partial_length} << 40));
  for (const std::int32_t h : s.heads) k = mix(k ^ (h < 0 ? finished_hash : frames_[static_cast<std::size_t>(h)].hash));
  return k;
}

// Heads are in de-duplicated order (by hash), so equal states list equal stacks in step.
bool matcher::same_state(const state& a, const state& b) const {
  if (a.partial_value != b.partial_value || a.partial_remaining != b.partial_remaining || a.heads.size() != b.heads.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.heads.size(); ++i) {
    if (!same_stack(a.heads[i], b.heads[i])) return false;
  }
  return true;
}

// Keeps only the frames the current stacks use, renumbered (parents always precede children,
// so one forward pass suffices). Without it the frame store would grow with every token.
void matcher::compact() {
  std::vector<std::int32_t> remap(frames_.size(), -1);
  for (std::int32_t h : cur_.heads) {
    while (h >= 0 && remap[static_cast<std::size_t>(h)] == -1) {
      remap[static_cast<std::size_t>(h)] = -2;
      h = frames_[static_cast<std::size_t>(h)].parent;
    }
  }
  std::vector<frame> kept;
  for (std::size_t i = 0; i < frames_.size(); ++i) {
    if (remap[i] != -2) continue;
    frame f = frames_[i];
    if (f.parent >= 0) f.parent = remap[static_cast<std::size_t>(f.parent)];
    remap[i] = static_cast<std::int32_t>(kept.size());
    kept.push_back(f);
  }
  for (std::int32_t& h : cur_.heads) {
    if (h >= 0) h = remap[static_cast<std::size_t>(h)];
  }
  frames_ = std::move(kept);
}

bool matches(const std::shared_ptr<const grammar>& g, std::string_view text) {
  matcher m(g);
  return m.accept(text) && m.can_end();
}

}  // namespace spite::grammar
