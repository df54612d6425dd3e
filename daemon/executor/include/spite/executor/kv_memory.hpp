// KV memory: where a layer's keys and values live between steps. A memory kind is a plugin
// (registry below). Changes go plan-then-apply: prepare() checks a batch against the memory and
// returns a plan without changing anything; apply() is the only mutation of a step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/models/model.hpp"

namespace spite::executor {

struct kv_layout {
  std::int64_t n_layer = 0;
  std::vector<std::int64_t> k_width, v_width;  // per layer: n_head_kv * head_dim
  std::vector<std::int64_t> state_width;        // per layer: recurrent state floats per sequence (0: none)
  std::int32_t n_ctx = 0;                       // positions per sequence
  std::int32_t n_seq_max = 1;
  // Per layer: the attention window (0: the whole context). A layer whose window plus one
  // step's tokens is shorter than n_ctx keeps only that many cells, as a ring.
  std::vector<std::int32_t> window;
  std::int32_t max_batch = 512;  // tokens of one sequence per step (the rings' slack)
  // The values are the first v_width elements of each key row (latent attention): kept once.
  bool value_in_key = false;
};

class kv_memory : public models::kv_access {
 public:
  struct plan {
    std::vector<std::int32_t> seq, pos;  // the batch's tokens as accepted
  };

  virtual std::string_view kind() const noexcept = 0;
  virtual result<plan> prepare(const models::batch_view& batch) const = 0;
  virtual void apply(const plan& p) = 0;

  // Sequence operations for prefix reuse. Ranges are [p0, p1); p1 < 0 means "to the end".
  virtual result<void> seq_rm(std::int32_t seq, std::int32_t p0, std::int32_t p1) = 0;
  virtual result<void> seq_cp(std::int32_t src, std::int32_t dst, std::int32_t p0, std::int32_t p1) = 0;
  virtual void seq_keep(std::int32_t seq) = 0;
  // Highest position held for `seq`, -1 when empty.
  virtual std::int32_t seq_pos_max(std::int32_t seq) const = 0;
  virtual void clear() = 0;
  virtual std::size_t bytes() const = 0;           // allocated now
  virtual std::size_t bytes_when_full() const = 0; // with every sequence in use
};

struct kv_kind {
  std::string_view name;
  std::unique_ptr<kv_memory> (*create)(const kv_layout& layout);
};

std::span<const kv_kind> kv_kinds();
result<std::unique_ptr<kv_memory>> make_kv_memory(std::string_view kind, const kv_layout& layout);

}  // namespace spite::executor
