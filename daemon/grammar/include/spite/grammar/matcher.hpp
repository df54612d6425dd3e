// Following a grammar through generated text, and telling which tokens may come next.
//
// The matcher keeps every way the text so far can be parsed as a set of stacks (a pushdown
// recognizer in the manner of llama.cpp's grammar stacks): each stack is the chain of rule
// positions still to finish, its top a character class waiting for the next character. Stacks
// share their tails (a parent-pointer forest), so a step costs what changes, not the depth.
// Text arrives as bytes; a character split across tokens waits as a pending partial character.
//
// Everything a request can make expensive is bounded (stacks alive at once, nesting depth, work
// per call); crossing a bound is a sticky failure the caller reports, never a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/grammar/grammar.hpp"

namespace spite::grammar {

struct match_limits {
  std::size_t max_stacks = 1024;          // parses alive at once (ambiguity)
  std::size_t max_depth = 4096;           // nested rules on one stack
  std::uint64_t max_work = 50'000'000;    // stack operations per call (a whole-vocabulary query counts as one call)
};

// The bytes each token adds to the output, arranged as a trie so that a whole-vocabulary query
// walks shared prefixes once and drops a subtree at its first impossible byte. Built once per
// model and shared by every request.
class vocabulary {
 public:
  // texts[id]: the token's bytes (a tokenizer's piece, maybe part of a UTF-8 character; empty for
  // tokens that add no text, which a grammar never allows). end_tokens: ids that end generation,
  // allowed exactly when the grammar can end.
  vocabulary(std::vector<std::string> texts, std::vector<std::int32_t> end_tokens);

  std::size_t size() const noexcept { return texts_.size(); }
  std::string_view text(std::int32_t id) const { return texts_.at(static_cast<std::size_t>(id)); }
  bool is_end(std::int32_t id) const noexcept {
    return id >= 0 && static_cast<std::size_t>(id) < is_end_.size() && is_end_[static_cast<std::size_t>(id)] != 0;
  }
  std::span<const std::int32_t> end_tokens() const noexcept { return ends_; }

 private:
  friend class matcher;
  struct node {
    std::uint32_t first_child = 0, children = 0;  // children are nodes_[first_child ..+children]
    std::uint32_t tokens_begin = 0, tokens_end = 0;  // ids in node_tokens_ whose text ends here
    unsigned char byte = 0;
  };
  std::vector<std::string> texts_;
  std::vector<char> is_end_;
  std::vector<std::int32_t> ends_;
  std::vector<node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<std::int32_t> node_tokens_;
  std::size_t max_len_ = 0;
};

class matcher {
 public:
  explicit matcher(std::shared_ptr<const grammar> g, const match_limits& lim = {});

  // Consumes bytes (UTF-8, possibly ending or starting mid-character). False, with the state
  // unchanged, when they cannot continue any parse (or after a failure).
  bool accept(std::string_view bytes);
  // accept() of the token's text; an end token is accepted only where the grammar can end, and
  // then nothing more is. A token with no text is never accepted.
  bool accept_token(const vocabulary& v, std::int32_t id);

  // Whether accept() / accept_token() would succeed; the state does not change.
  bool allows(std::string_view bytes);
  bool allows_token(const vocabulary& v, std::int32_t id);
  // mask[id] = 1 for every token accept_token() would take, 0 for the others (all 0 after a
  // failure). One walk of the vocabulary's trie.
  void allowed_tokens(const vocabulary& v, std::vector<std::uint8_t>& mask);

  // The text so far is a whole sentence of the grammar (no partial character pending).
  bool can_end() const noexcept;
  // An end token was accepted.
  bool ended() const noexcept { return ended_; }
  // Set once a limit was crossed; sticky until reset().
  const std::optional<error>& failure() const noexcept { return failure_; }
  std::size_t stack_count() const noexcept { return cur_.heads.size(); }
  // Back to the start of the grammar.
  void reset();

 private:
  struct frame {
    std::uint32_t pos;     // position in grammar::symbols()
    std::int32_t parent;   // frame below, or -1
    std::uint32_t depth;
    std::uint64_t hash;    // of the whole chain, for cheap de-duplication
  };
  struct state {
    std::vector<std::int32_t> heads;  // stack tops (frames at a character class), -1: finished
    std::uint32_t partial_value = 0;
    std::uint8_t partial_remaining = 0, partial_length = 0;
  };
  struct todo_item {
    std::uint32_t pos;
    std::int32_t parent;
    std::int32_t self;  // an existing frame for (pos, parent), or -1
  };

  bool fail(std::string what);
  std::int32_t new_frame(std::uint32_t pos, std::int32_t parent);
  bool settle(std::vector<std::int32_t>& out);
  bool step_char(const std::vector<std::int32_t>& in, char32_t c, std::vector<std::int32_t>& out);
  bool step_byte(const state& in, unsigned char b, state& out);
  bool step_bytes(std::string_view bytes, state& out);
  bool alive(const state& s) const;
  bool same_stack(std::int32_t a, std::int32_t b) const;
  void dedupe(std::vector<std::int32_t>& heads);
  void compact();
  bool walk_memo(const vocabulary& v, std::vector<std::uint8_t>& mask);
  void walk_plain(const vocabulary& v, std::vector<std::uint8_t>& mask);
  std::uint64_t state_key(const state& s) const;
  bool same_state(const state& a, const state& b) const;

  std::shared_ptr<const grammar> g_;
  match_limits lim_;
  std::vector<frame> frames_;
  state cur_;
  bool ended_ = false;
  std::optional<error> failure_;
  std::uint64_t work_ = 0;
  // Scratch, kept between calls to avoid allocating per token.
  std::vector<todo_item> todo_;
  std::vector<state> levels_;
  state tmp_a_, tmp_b_;
  std::vector<state> memo_states_;        // interned states of one vocabulary walk
  std::vector<std::int32_t> memo_next_;   // [state * 256 + byte] -> state, -1 dead, -2 not computed
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> memo_index_;
};

}  // namespace spite::grammar
