// Gated DeltaNet, the linear-attention mixer of Qwen3.5's recurrent layers, as the reference
// computes it token by token: projections, a causal depthwise convolution (kernel K) with SiLU,
// L2-normalized q and k, the gated delta rule on a per-head state, a gated RMS norm, the output
// projection. Each sequence's conv inputs and states live in the KV memory (kv_access::state).
#include <algorithm>
#include <cmath>

#include "decoder.hpp"

namespace spite::models {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / max(||x||, eps), the norm summed in double
void l2_norm(float* x, std::int64_t n, float eps) {
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

void delta_net_block(forward_context& ctx, const delta_net_layer& l, float eps, int layer, const float* in, float* out) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t C = l.conv_dim(), K = l.K, Sk = l.Sk, Sv = l.Sv, Hk = l.Hk, Hv = l.Hv;
  const std::int64_t key_dim = Hk * Sk, value_dim = Hv * Sv;
  std::vector<float> qkv(static_cast<std::size_t>(n * C)), z(static_cast<std::size_t>(n * value_dim)),
      beta(static_cast<std::size_t>(n * Hv)), alpha(static_cast<std::size_t>(n * Hv));
  l.qkv.apply(ctx, in, n, qkv.data());
  l.z.apply(ctx, in, n, z.data());
  l.beta.apply(ctx, in, n, beta.data());
  l.alpha.apply(ctx, in, n, alpha.data());

  // The convolution, SiLU and the L2 norms of q and k, token by token (the conv state is shared
  // by a sequence's tokens, in position order: the memory checks it).
  std::vector<float> xs(static_cast<std::size_t>(n * C));
  std::vector<float*> states(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < n; ++t) {
    float* st = ctx.kv.state(layer, ctx.batch.seq[static_cast<std::size_t>(t)]);
    states[static_cast<std::size_t>(t)] = st + (K - 1) * C;  // [Hv][Sk][Sv]
    float* conv_state = st;                                  // [K - 1, C], oldest first
    const float* cur = qkv.data() + t * C;
    float* x = xs.data() + t * C;
    for (std::int64_t c = 0; c < C; ++c) {
      const float* w = l.conv.data() + c * K;
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K - 1; ++k) acc += conv_state[k * C + c] * w[k];
      acc += cur[c] * w[K - 1];
      x[c] = silu(acc);
    }
    for (std::int64_t k = 0; k + 1 < K - 1; ++k) std::copy_n(conv_state + (k + 1) * C, C, conv_state + k * C);
    if (K > 1) std::copy_n(cur, C, conv_state + (K - 2) * C);
    for (std::int64_t h = 0; h < Hk; ++h) {
      l2_norm(x + h * Sk, Sk, eps);
      l2_norm(x + key_dim + h * Sk, Sk, eps);
    }
  }

  // The delta rule: value heads are independent, so they run in parallel, each over the tokens
  // in order; the inner loops run along a state row (contiguous), the same operations in the
  // same order as one head at a time.
  std::vector<float> o(static_cast<std::size_t>(n * value_dim));
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(Sk));
  ctx.pool.parallel_for(Hv, [&](std::int64_t h_begin, std::int64_t h_end, int) {
    std::vector<float> kv_mem(static_cast<std::size_t>(Sv));
    for (std::int64_t h = h_begin; h < h_end; ++h) {
      for (std::int64_t t = 0; t < n; ++t) {
        const float* x = xs.data() + t * C;
        const float* qh = x + (h % Hk) * Sk;
        const float* kh = x + key_dim + (h % Hk) * Sk;
        const float* vh = x + 2 * key_dim + h * Sv;
        float* Sh = states[static_cast<std::size_t>(t)] + h * Sk * Sv;
        const float b = sigmoid(beta[static_cast<std::size_t>(t * Hv + h)]);
        const float g = softplus(alpha[static_cast<std::size_t>(t * Hv + h)] + l.dt_bias[static_cast<std::size_t>(h)]) *
                        l.a[static_cast<std::size_t>(h)];
        const float decay = std::exp(g);
        for (std::int64_t i = 0; i < Sk * Sv; ++i) Sh[i] *= decay;
        std::fill(kv_mem.begin(), kv_mem.end(), 0.0f);
        for (std::int64_t i = 0; i < Sk; ++i) {
          const float* row = Sh + i * Sv;
          const float ki = kh[i];
          for (std::int64_t j = 0; j < Sv; ++j) kv_mem[static_cast<std::size_t>(j)] += row[j] * ki;
        }
        for (std::int64_t j = 0; j < Sv; ++j) kv_mem[static_cast<std::size_t>(j)] = (vh[j] - kv_mem[static_cast<std::size_t>(j)]) * b;
        float* oh = o.data() + t * value_dim + h * Sv;
        for (std::int64_t j = 0; j < Sv; ++j) oh[j] = 0.0f;
        for (std::int64_t i = 0; i < Sk; ++i) {
          float* row = Sh + i * Sv;
          const float ki = kh[i], qi = qh[i];
          for (std::int64_t j = 0; j < Sv; ++j) {
            row[j] += ki * kv_mem[static_cast<std::size_t>(j)];
            oh[j] += row[j] * qi;
          }
        }
        for (std::int64_t j = 0; j < Sv; ++j) oh[j] *= out_scale;
      }
    }
  });
  // Gated RMS norm per head: RMSNorm(o) * w * silu(z).
  rms_norm_rows(ctx, o.data(), l.norm.data(), o.data(), Sv, n * Hv, eps);
  for (std::size_t i = 0; i < o.size(); ++i) o[i] *= silu(z[i]);
  l.out.apply(ctx, o.data(), n, out);
}

}  // namespace spite::models
