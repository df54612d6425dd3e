// Feed-forward blocks: gated SwiGLU (separate or fused gate|up) and softmax-routed mixtures of
// SwiGLU experts with an optional gated shared expert.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "decoder.hpp"

namespace spite::models {
namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// One dense SwiGLU FFN: out [E, n] = down(silu(gate x) * up x).
void dense(forward_context& ctx, const linear& gate, const linear& up, const linear& down, const float* in,
           std::int64_t n, float* out) {
  std::vector<float> h;
  if (!gate.empty()) {
    const std::int64_t F = gate.w.out;
    std::vector<float> g(static_cast<std::size_t>(F * n)), u(static_cast<std::size_t>(F * n));
    gate.apply(ctx, in, n, g.data());
    up.apply(ctx, in, n, u.data());
    h.resize(g.size());
    ctx.ops.swiglu(g.data(), u.data(), h.data(), F, n);
  } else {
    // Fused: each row of `up` output is [gate | up].
    const std::int64_t F = up.w.out / 2;
    std::vector<float> gu(static_cast<std::size_t>(2 * F * n));
    up.apply(ctx, in, n, gu.data());
    h.resize(static_cast<std::size_t>(F * n));
    for (std::int64_t t = 0; t < n; ++t) ctx.ops.swiglu(gu.data() + t * 2 * F, gu.data() + t * 2 * F + F, h.data() + t * F, F, 1);
  }
  down.apply(ctx, h.data(), n, out);
}

void moe(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, std::int64_t n, float* out) {
  const std::int64_t E = l.router.w.in, X = l.router.w.out, K = c.n_expert_used;
  std::vector<float> logits(static_cast<std::size_t>(X * n));
  l.router.apply(ctx, in, n, logits.data());

  // Routing: softmax over the experts, top-K by probability (ties: lower index), weights are
  // the selected probabilities, optionally renormalized.
  std::vector<std::vector<std::pair<std::int64_t, float>>> routes(static_cast<std::size_t>(n));
  std::vector<std::int64_t> order(static_cast<std::size_t>(X));
  for (std::int64_t t = 0; t < n; ++t) {
    float* p = logits.data() + t * X;
    const float max = *std::max_element(p, p + X);
    double sum = 0.0;
    for (std::int64_t e = 0; e < X; ++e) {
      p[e] = std::exp(p[e] - max);
      sum += p[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (std::int64_t e = 0; e < X; ++e) p[e] *= inv;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return p[a] > p[b]; });
    float wsum = 0.0f;
    for (std::int64_t k = 0; k < K; ++k) wsum += p[order[static_cast<std::size_t>(k)]];
    const float norm = c.moe_normalize ? std::max(wsum, 6.103515625e-5f) : 1.0f;
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t e = order[static_cast<std::size_t>(k)];
      routes[static_cast<std::size_t>(t)].emplace_back(e, p[e] / norm);
    }
  }

  std::fill(out, out + E * n, 0.0f);
  // Each expert runs once over the tokens routed to it.
  for (std::int64_t e = 0; e < X; ++e) {
    std::vector<std::int64_t> rows;
    std::vector<float> weights;
    for (std::int64_t t = 0; t < n; ++t) {
      for (const auto& [ex, w] : routes[static_cast<std::size_t>(t)]) {
        if (ex == e) {
          rows.push_back(t);
          weights.push_back(w);
        }
      }
    }
    if (rows.empty()) continue;
    const auto m = static_cast<std::int64_t>(rows.size());
    std::vector<float> x(static_cast<std::size_t>(E * m)), y(static_cast<std::size_t>(E * m));
    for (std::int64_t i = 0; i < m; ++i) std::copy(in + rows[static_cast<std::size_t>(i)] * E, in + (rows[static_cast<std::size_t>(i)] + 1) * E, x.data() + i * E);
    linear gate, up, down;
    gate.w = dispatch::weight_of(*l.gate_exps, e);
    up.w = dispatch::weight_of(*l.up_exps, e);
    down.w = dispatch::weight_of(*l.down_exps, e);
    dense(ctx, gate, up, down, x.data(), m, y.data());
    for (std::int64_t i = 0; i < m; ++i) {
      float* o = out + rows[static_cast<std::size_t>(i)] * E;
      const float w = weights[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < E; ++j) o[j] += y[static_cast<std::size_t>(i * E + j)] * w;
    }
  }

  if (!l.shared_down.empty()) {
    std::vector<float> shared(static_cast<std::size_t>(E * n));
    dense(ctx, l.shared_gate, l.shared_up, l.shared_down, in, n, shared.data());
    std::vector<float> gate(static_cast<std::size_t>(n), 1.0f);
    if (!l.shared_router.empty()) {
      l.shared_router.apply(ctx, in, n, gate.data());
      // sigmoid, computed as the reference does for this family: silu(g) / g
      for (float& g : gate) g = c.shared_gate_silu_div ? silu(g) / g : 1.0f / (1.0f + std::exp(-g));
    }
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t j = 0; j < E; ++j) out[t * E + j] += shared[static_cast<std::size_t>(t * E + j)] * gate[static_cast<std::size_t>(t)];
    }
  }
}

}  // namespace

void ffn_block(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, float* out) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  if (l.is_moe()) moe(ctx, l, c, in, n, out);
  else dense(ctx, l.gate, l.up, l.down, in, n, out);
}

}  // namespace spite::models
