// The working set of a sampling step: one entry per token still in the running, with its logit
// and (once normalized) its probability. Samplers narrow and reshape it; a selecting sampler
// (greedy, dist) marks the chosen entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace spite::scheduler {

class rng;

struct token_prob {
  std::int32_t id;
  float logit;
  float p;  // probability; meaningful only while the container is `normalized`
};

// The order `sorted` promises: higher logit first, ties to the lower id. A total order (no NaN
// logits exist after assign), so every sort algorithm gives the same result.
inline bool ranks_before(const token_prob& a, const token_prob& b) noexcept {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// Invariants the flags promise (a sampler that changes the data keeps them true):
//   sorted:     data is in descending logit order, ties in ascending id order.
//   normalized: every p is the softmax of the logits over exactly the current entries.
struct candidates {
  std::vector<token_prob> data;
  bool sorted = false;
  bool normalized = false;
  std::optional<std::size_t> selected;  // index into data, set by a selecting sampler
  rng* random = nullptr;                // the chain's random source, for samplers that draw

  candidates() = default;
  explicit candidates(std::span<const float> logits) { assign(logits); }

  // One entry per logit, id = index, in id order. A NaN logit becomes -inf (the token can never be
  // chosen) so that a bad value from the model cannot poison the whole step. Keeps `random`.
  void assign(std::span<const float> logits);

  std::size_t size() const noexcept { return data.size(); }
  bool empty() const noexcept { return data.empty(); }

  // Sorts (see `sorted`) if not sorted yet.
  void sort();
  // Computes p as the softmax of the logits if not normalized yet. Deterministic across
  // platforms (spite's own exp, sequential double accumulation). If every logit is -inf all p
  // are 0; if some are +inf they share the probability equally.
  void normalize();
  // Keeps the n best entries (highest logits, ties to the lowest ids), sorted; cheaper than a full
  // sort when n is small.
  void keep_best(std::size_t n);
  // Keeps the first n entries (n >= size() keeps all); p values become stale.
  void truncate(std::size_t n);
  // Call after changing logits: `order_kept` says the change was monotone (sorting still holds).
  void logits_changed(bool order_kept) noexcept;

  // Index of the highest logit, ties to the lowest id, whatever the order; size() if empty.
  std::size_t argmax() const noexcept;

  // True while data[i].id == i for every entry (the layout `assign` makes): samplers that touch a
  // few ids by number can then index directly instead of searching.
  bool in_id_order() const noexcept;
  // Index of the entry with this id, or nullopt.
  std::optional<std::size_t> find(std::int32_t id) const noexcept;
};

}  // namespace spite::scheduler
