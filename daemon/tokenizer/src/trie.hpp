// A compact byte trie over token texts: a direct table for the first byte, sibling lists below.
// About 16 bytes per node, so a 250k-token vocabulary costs a few MB.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "spite/tokenizer/vocab.hpp"

namespace spite::tokenizer {

class byte_trie {
 public:
  static constexpr std::uint32_t none = 0xffffffffu;

  byte_trie() { root_.fill(none); }

  void insert(std::string_view s, token value) {
    if (s.empty()) return;
    std::uint32_t parent = none;  // none = the root table
    for (unsigned char c : s) {
      std::uint32_t at = step(parent, c);
      if (at == none) {
        // New node at the head of the parent's child list (indices, not pointers: nodes_ grows).
        at = static_cast<std::uint32_t>(nodes_.size());
        const std::uint32_t head = parent == none ? root_[c] : nodes_[parent].first_child;
        nodes_.push_back({none, head, no_token, c});
        if (parent == none) root_[c] = at;
        else nodes_[parent].first_child = at;
      }
      parent = at;
    }
    nodes_[parent].value = value;
  }

  // Walks one byte: from the root when `node` is none.
  std::uint32_t step(std::uint32_t node, unsigned char c) const noexcept {
    std::uint32_t at = node == none ? root_[c] : nodes_[node].first_child;
    while (at != none && nodes_[at].byte != c) at = nodes_[at].next_sibling;
    return at;
  }
  token value(std::uint32_t node) const noexcept { return nodes_[node].value; }

  // Length of the longest key that is a prefix of s (0 if none).
  std::size_t longest_prefix(std::string_view s) const noexcept {
    std::size_t best = 0;
    std::uint32_t node = none;
    for (std::size_t i = 0; i < s.size(); ++i) {
      node = step(node, static_cast<unsigned char>(s[i]));
      if (node == none) break;
      if (value(node) != no_token) best = i + 1;
    }
    return best;
  }

 private:
  struct node_t {
    std::uint32_t first_child, next_sibling;
    token value;
    unsigned char byte;
  };
  std::array<std::uint32_t, 256> root_;
  std::vector<node_t> nodes_;
};

}  // namespace spite::tokenizer
