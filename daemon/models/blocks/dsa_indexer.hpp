// DeepSeek sparse attention's lightning indexer (blocks/dsa_indexer.cpp).
#pragma once

#include "decoder.hpp"

namespace spite::models {

// The indexer's view of one batch: rotated queries [Di, Hi, n] (f16-rounded), keys [Di, n] to
// store, per-head weights [Hi, n] (already divided by sqrt(Di Hi)).
struct indexer_batch {
  std::vector<float> q, k, w;
};

// The orthonormal n x n Walsh-Hadamard matrix (n a power of two).
std::vector<float> walsh_hadamard(std::int64_t n);
// x [n, rows] = H x per row of n.
void hadamard_rotate(const std::vector<float>& hadamard, float* x, std::int64_t n, std::int64_t rows);
// sum_h relu(q_h . key) w_h (in double, as the reference sums the heads); q [Di, Hi], w [Hi].
float indexer_score(const float* q, const float* w, const float* key, std::int64_t n_head, std::int64_t head_dim);
// The indices of the `keep` best scores (masked cells -inf), chosen among ties as the reference
// chooses: `score` holds every cell of the reference's padded view.
void top_cells(const std::vector<float>& score, std::int64_t keep, std::vector<std::int32_t>& order);

indexer_batch run_indexer(forward_context& ctx, const dsa_indexer& ix, const rope_params& rope, const float* rope_freqs,
                          const float* q_low_rank, const float* in);

// For the batch rows `rows` of one sequence: which of its cached keys (indexer keys at
// `key_offset` in each KV row) each may attend: the top_k by score among the causal ones.
void select_keys(const dsa_indexer& ix, const indexer_batch& b, const forward_context& ctx, const std::vector<std::int64_t>& rows,
                 const kv_view& view, std::int64_t key_offset, std::vector<std::uint8_t>& allowed);

}  // namespace spite::models
