#include "batch_rows.hpp"

namespace spite::models {

void for_row_blocks(thread_pool& pool, std::int64_t rows, std::int64_t row_elems,
                    const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (rows < 2 || pool.size() < 2 || rows * row_elems < parallel_row_elements) {
    if (rows > 0) fn(0, rows);
    return;
  }
  // In pairs of rows (the last unit takes an odd row too): every call still sees a batch of
  // rows, so a plug-in kernel chosen for batches (the dispatcher's choice depends on rows > 1)
  // takes every block, whatever the split.
  const std::int64_t units = rows / 2;
  pool.parallel_for(units, [&](std::int64_t begin, std::int64_t end, int) { fn(2 * begin, end == units ? rows : 2 * end); });
}

void rms_norm_rows(const dispatch::op_table& ops, thread_pool& pool, const float* x, const float* w, float* y, std::int64_t n,
                   std::int64_t rows, float eps) {
  for_row_blocks(pool, rows, n, [&](std::int64_t begin, std::int64_t end) {
    ops.rms_norm(x + begin * n, w, y + begin * n, n, end - begin, eps);
  });
}

void rope_rows(const dispatch::op_table& ops, thread_pool& pool, const dispatch::rope_args& a) {
  const std::int64_t token_elems = a.n_head * a.head_dim;
  for_row_blocks(pool, a.n_tokens, token_elems, [&](std::int64_t begin, std::int64_t end) {
    dispatch::rope_args part = a;
    part.x = a.x + begin * token_elems;
    part.pos = a.pos + begin;
    part.n_tokens = end - begin;
    ops.rope(part);
  });
}

}  // namespace spite::models
