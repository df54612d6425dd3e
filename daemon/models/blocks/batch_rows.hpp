// Per-row operations of a batch (norms, RoPE, gated activations, residual adds) split across
// the compute threads. A prefill's matmuls run on every thread; left on the calling thread,
// these ops were ~6 % of a 2-thread prefill with the other thread idle. A decode step (one row
// per sequence) stays on the calling thread, where a hand-off would cost more than the work.
// Every row is computed by exactly one op call, as before the split, so results do not depend
// on it.
#pragma once

#include <cstdint>
#include <functional>

#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/models/model.hpp"

namespace spite::models {

// Fewer elements than this take a few microseconds: less than waking the pool.
inline constexpr std::int64_t parallel_row_elements = 32 * 1024;

// fn(begin, end) over [0, rows) in contiguous blocks of at least 2 rows, in parallel when
// rows * row_elems is at least parallel_row_elements.
void for_row_blocks(thread_pool& pool, std::int64_t rows, std::int64_t row_elems,
                    const std::function<void(std::int64_t begin, std::int64_t end)>& fn);
// ops.rms_norm, rows split as above.
void rms_norm_rows(const dispatch::op_table& ops, thread_pool& pool, const float* x, const float* w, float* y, std::int64_t n,
                   std::int64_t rows, float eps);
// ops.rope, split by tokens.
void rope_rows(const dispatch::op_table& ops, thread_pool& pool, const dispatch::rope_args& a);

inline void for_row_blocks(forward_context& ctx, std::int64_t rows, std::int64_t row_elems,
                           const std::function<void(std::int64_t, std::int64_t)>& fn) {
  for_row_blocks(ctx.pool, rows, row_elems, fn);
}
inline void rms_norm_rows(forward_context& ctx, const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows,
                          float eps) {
  rms_norm_rows(ctx.ops, ctx.pool, x, w, y, n, rows, eps);
}
inline void rope_rows(forward_context& ctx, const dispatch::rope_args& a) { rope_rows(ctx.ops, ctx.pool, a); }

}  // namespace spite::models
