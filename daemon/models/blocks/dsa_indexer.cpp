// DeepSeek sparse attention's lightning indexer (GLM-5), as the reference computes it: q from the
// low-rank query, k from the layer input through a LayerNorm, both RoPE'd on their first R
// dimensions and rotated by a Walsh-Hadamard matrix; k is kept in f16 after the attention key of
// the KV row. score(t, s) = sum_h relu(q_h(t) . k(s)) w_h(t) / sqrt(Di Hi) over the causal keys,
// and query t attends to the top_k best of them only.
#include "dsa_indexer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "spite/core/half.hpp"

namespace spite::models {
namespace {

// y = (x - mean) / sqrt(var + eps) * w + b, sums in double as the reference's norm does.
void layer_norm(float* x, const std::vector<float>& w, const std::vector<float>& b, std::int64_t n, float eps) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += x[i];
  const auto mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] -= mean;
    sum2 += static_cast<double>(x[i] * x[i]);
  }
  const auto variance = static_cast<float>(sum2 / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] *= scale;
    if (!w.empty()) x[i] *= w[static_cast<std::size_t>(i)];
    if (!b.empty()) x[i] += b[static_cast<std::size_t>(i)];
  }
}

}  // namespace

void hadamard_rotate(const std::vector<float>& hadamard, float* x, std::int64_t n, std::int64_t rows) {
  std::vector<float> y(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    for (std::int64_t i = 0; i < n; ++i) {
      const float* h = hadamard.data() + i * n;
      float s = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) s += h[j] * v[j];
      y[static_cast<std::size_t>(i)] = s;
    }
    std::copy(y.begin(), y.end(), v);
  }
}

float indexer_score(const float* q, const float* w, const float* key, std::int64_t n_head, std::int64_t head_dim) {
  double s = 0.0;
  for (std::int64_t h = 0; h < n_head; ++h) {
    const float* qh = q + h * head_dim;
    float dot = 0.0f;
    for (std::int64_t d = 0; d < head_dim; ++d) dot += qh[d] * key[d];
    s += static_cast<double>(std::max(dot, 0.0f) * w[h]);
  }
  return static_cast<float>(s);
}

void top_cells(const std::vector<float>& score, std::int64_t keep, std::vector<std::int32_t>& order) {
  // Exact ties are common (every head's ReLU at zero): the choice among them is the
  // reference's, a partial sort of all padded cells by descending score.
  order.resize(score.size());
  std::iota(order.begin(), order.end(), 0);
  keep = std::min<std::int64_t>(keep, static_cast<std::int64_t>(score.size()));
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](std::int32_t x, std::int32_t y) { return score[static_cast<std::size_t>(x)] > score[static_cast<std::size_t>(y)]; });
  order.resize(static_cast<std::size_t>(keep));
}

std::vector<float> walsh_hadamard(std::int64_t n) {
  // Sylvester's construction, scaled to be orthonormal (and its own inverse).
  std::vector<float> h(static_cast<std::size_t>(n * n));
  h[0] = 1.0f / std::sqrt(static_cast<float>(n));
  for (std::int64_t s = 1; s < n; s *= 2) {
    for (std::int64_t i = 0; i < s; ++i) {
      for (std::int64_t j = 0; j < s; ++j) {
        const float v = h[static_cast<std::size_t>(i * n + j)];
        h[static_cast<std::size_t>((i + s) * n + j)] = v;
        h[static_cast<std::size_t>(i * n + j + s)] = v;
        h[static_cast<std::size_t>((i + s) * n + j + s)] = -v;
      }
    }
  }
  return h;
}

indexer_batch run_indexer(forward_context& ctx, const dsa_indexer& ix, const rope_params& rope, const float* rope_freqs,
                          const float* q_low_rank, const float* in) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t Hi = ix.n_head, Di = ix.head_dim;
  indexer_batch b;
  b.q.resize(static_cast<std::size_t>(n * Hi * Di));
  b.k.resize(static_cast<std::size_t>(n * Di));
  b.w.resize(static_cast<std::size_t>(n * Hi));
  ix.q_b.apply(ctx, q_low_rank, n, b.q.data());
  apply_rope(ctx, rope, rope_freqs, b.q.data(), n, Hi, Di);
  hadamard_rotate(ix.hadamard, b.q.data(), Di, n * Hi);
  ix.k.apply(ctx, in, n, b.k.data());
  for (std::int64_t t = 0; t < n; ++t) layer_norm(b.k.data() + t * Di, ix.k_norm, ix.k_norm_b, Di, 0.0f);
  apply_rope(ctx, rope, rope_freqs, b.k.data(), n, 1, Di);
  hadamard_rotate(ix.hadamard, b.k.data(), Di, n);
  ix.proj.apply(ctx, in, n, b.w.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(Di * Hi));
  for (float& w : b.w) w *= scale;
  // The reference's score is an f16 product: the query is rounded as the cached key was.
  for (float& x : b.q) x = fp16_to_fp32(fp32_to_fp16(x));
  return b;
}

void select_keys(const dsa_indexer& ix, const indexer_batch& b, const forward_context& ctx, const std::vector<std::int64_t>& rows,
                 const kv_view& view, std::int64_t key_offset, std::vector<std::uint8_t>& allowed) {
  const std::int64_t Hi = ix.n_head, Di = ix.head_dim, n_kv = view.n;
  const std::int64_t stride = view.k_stride;
  // The reference ranks a KV view padded to 256 cells and keeps min(top_k, that) of them.
  const std::int64_t padded = (n_kv + 255) / 256 * 256;
  const std::int64_t keep = std::min(ix.top_k, padded);
  allowed.assign(static_cast<std::size_t>(rows.size()) * static_cast<std::size_t>(n_kv), 0);
  std::vector<float> key(static_cast<std::size_t>(Di)), score(static_cast<std::size_t>(padded));
  std::vector<std::int32_t> order;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t t = rows[r];
    const std::int32_t qp = ctx.batch.pos[static_cast<std::size_t>(t)];
    std::fill(score.begin(), score.end(), -std::numeric_limits<float>::infinity());
    for (std::int64_t j = 0; j < n_kv; ++j) {
      if (view.pos[j] > qp) continue;
      const std::uint16_t* kh = view.k + j * stride + key_offset;
      for (std::int64_t d = 0; d < Di; ++d) key[static_cast<std::size_t>(d)] = fp16_to_fp32(kh[d]);
      score[static_cast<std::size_t>(j)] = indexer_score(b.q.data() + t * Hi * Di, b.w.data() + t * Hi, key.data(), Hi, Di);
    }
    top_cells(score, keep, order);
    for (const std::int32_t j : order) {
      if (j < n_kv) allowed[r * static_cast<std::size_t>(n_kv) + static_cast<std::size_t>(j)] = 1;
    }
  }
}

}  // namespace spite::models
