// Feed-forward blocks: gated FFNs (SwiGLU, GeGLU, clamped SwiGLU; separate or fused gate|up) and
// routed mixtures of such experts (softmax / sigmoid / softmax-of-top-K gating, optional expert
// biases) with an optional gated shared expert.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "decoder.hpp"

namespace spite::models {
namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// h = act(g) * u over `rows` rows of F values.
void activate(forward_context& ctx, const decoder_config& c, const float* g, const float* u, float* h, std::int64_t F,
              std::int64_t rows) {
  for_row_blocks(ctx, rows, F, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t at = begin * F, n = end - begin;
    switch (c.activation) {
      case ffn_activation::silu: ctx.ops.swiglu(g + at, u + at, h + at, F, n); break;
      case ffn_activation::gelu: ctx.ops.geglu(g + at, u + at, h + at, F, n); break;
      case ffn_activation::silu_oai: ctx.ops.swiglu_oai(g + at, u + at, h + at, F, n, c.oai_alpha, c.oai_limit); break;
    }
  });
}

// Per-expert biases added after each projection (gpt-oss); null when absent.
struct expert_bias {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

void add_rows(float* y, const float* b, std::int64_t width, std::int64_t n) {
  if (b == nullptr) return;
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t o = 0; o < width; ++o) y[t * width + o] += b[o];
  }
}

// DeepSeek-V4's SwiGLU inputs: gate <= limit, -limit <= up <= limit.
void clamp_swiglu(float* g, float* u, std::int64_t count, float limit) {
  for (std::int64_t i = 0; i < count; ++i) {
    g[i] = std::min(g[i], limit);
    u[i] = std::clamp(u[i], -limit, limit);
  }
}

// One dense gated FFN: out [E, n] = down(act(gate x) * up x).
void dense(forward_context& ctx, const decoder_config& c, const linear& gate, const linear& up, const linear& down,
           const float* in, std::int64_t n, float* out, const expert_bias& bias = {}, float limit = 0.0f) {
  work_buffer h;
  if (!gate.empty()) {
    const std::int64_t F = gate.w.out;
    work_buffer g(static_cast<std::size_t>(F * n)), u(static_cast<std::size_t>(F * n));
    apply_parts(ctx, {{&gate, g.data()}, {&up, u.data()}}, in, n);
    add_rows(g.data(), bias.gate, F, n);
    add_rows(u.data(), bias.up, F, n);
    if (limit > 0.0f) clamp_swiglu(g.data(), u.data(), F * n, limit);
    h.resize(g.size());
    activate(ctx, c, g.data(), u.data(), h.data(), F, n);
  } else {
    // Fused: each row of `up` output is [gate | up].
    const std::int64_t F = up.w.out / 2;
    work_buffer gu(static_cast<std::size_t>(2 * F * n));
    up.apply(ctx, in, n, gu.data());
    h.resize(static_cast<std::size_t>(F * n));
    for (std::int64_t t = 0; t < n; ++t) {
      if (limit > 0.0f) clamp_swiglu(gu.data() + t * 2 * F, gu.data() + t * 2 * F + F, F, limit);
    }
    for (std::int64_t t = 0; t < n; ++t) activate(ctx, c, gu.data() + t * 2 * F, gu.data() + t * 2 * F + F, h.data() + t * F, F, 1);
  }
  down.apply(ctx, h.data(), n, out);
  add_rows(out, bias.down, down.w.out, n);
}

}  // namespace

void softmax(float* p, std::int64_t n) {
  const float max = *std::max_element(p, p + n);
  double sum = 0.0;
  for (std::int64_t e = 0; e < n; ++e) {
    p[e] = std::exp(p[e] - max);
    sum += p[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t e = 0; e < n; ++e) p[e] *= inv;
}

namespace {

// Masks (to -inf) the experts outside the best n_group_used groups; a group scores the sum of
// its best two selection scores.
void limit_groups(const decoder_config& c, float* sel, std::int64_t X) {
  const std::int64_t G = c.n_expert_groups, per = X / G;
  std::vector<float> score(static_cast<std::size_t>(G));
  for (std::int64_t g = 0; g < G; ++g) {
    std::vector<float> v(sel + g * per, sel + (g + 1) * per);
    std::partial_sort(v.begin(), v.begin() + std::min<std::int64_t>(2, per), v.end(), std::greater<>());
    score[static_cast<std::size_t>(g)] = per >= 2 ? v[0] + v[1] : v[0];
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(G));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return score[a] > score[b]; });
  for (std::int64_t k = c.n_group_used; k < G; ++k) {
    const std::int64_t g = order[static_cast<std::size_t>(k)];
    std::fill(sel + g * per, sel + (g + 1) * per, -std::numeric_limits<float>::infinity());
  }
}

// The experts and weights of each token: probabilities by the gating function, the top K of
// them (plus the layer's selection bias, within the allowed groups; ties: lower index), weights
// (the probabilities without bias) optionally softmaxed over the K, renormalized and scaled.
std::vector<std::vector<std::pair<std::int64_t, float>>> route(const decoder_config& c, const ffn_layer& l, float* logits,
                                                               std::int64_t X, std::int64_t n, const std::int32_t* tokens) {
  const std::int64_t K = c.n_expert_used;
  std::vector<std::vector<std::pair<std::int64_t, float>>> routes(static_cast<std::size_t>(n));
  std::vector<std::int64_t> order(static_cast<std::size_t>(X));
  std::vector<float> w(static_cast<std::size_t>(K)), sel(static_cast<std::size_t>(X));
  for (std::int64_t t = 0; t < n; ++t) {
    float* p = logits + t * X;
    if (c.gating == moe_gating::softmax) softmax(p, X);
    if (c.gating == moe_gating::sigmoid) {
      for (std::int64_t e = 0; e < X; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    }
    if (c.gating == moe_gating::sqrt_softplus) {
      // the reference's softplus: x above 20, else log(1 + exp(x))
      for (std::int64_t e = 0; e < X; ++e) p[e] = std::sqrt(p[e] > 20.0f ? p[e] : std::log(1.0f + std::exp(p[e])));
    }
    for (std::int64_t e = 0; e < X; ++e) sel[static_cast<std::size_t>(e)] = l.select_bias.empty() ? p[e] : p[e] + l.select_bias[static_cast<std::size_t>(e)];
    if (c.n_expert_groups > 1 && c.n_group_used < c.n_expert_groups) limit_groups(c, sel.data(), X);
    std::iota(order.begin(), order.end(), 0);
    if (!l.fixed_experts.empty()) {
      const std::int32_t* fixed = l.fixed_experts.data() + static_cast<std::int64_t>(tokens[t]) * K;
      for (std::int64_t k = 0; k < K; ++k) order[static_cast<std::size_t>(k)] = fixed[k];
    } else {
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return sel[a] > sel[b]; });
    }
    for (std::int64_t k = 0; k < K; ++k) w[static_cast<std::size_t>(k)] = p[order[static_cast<std::size_t>(k)]];
    if (c.gating == moe_gating::softmax_selected) softmax(w.data(), K);
    if (c.moe_normalize) {
      float wsum = 0.0f;
      for (float v : w) wsum += v;
      const float norm = std::max(wsum, 6.103515625e-5f);
      for (float& v : w) v /= norm;
    }
    if (c.expert_weights_scale != 0.0f && c.expert_weights_scale != 1.0f) {
      for (float& v : w) v *= c.expert_weights_scale;
    }
    for (std::int64_t k = 0; k < K; ++k) routes[static_cast<std::size_t>(t)].emplace_back(order[static_cast<std::size_t>(k)], w[static_cast<std::size_t>(k)]);
  }
  return routes;
}

const float* bias_of(const std::vector<float>& b, std::int64_t e, std::int64_t width) {
  return b.empty() ? nullptr : b.data() + e * width;
}

void moe(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, const float* router_in,
         std::int64_t n, float* out) {
  const std::int64_t E = l.router.w.in, X = l.router.w.out;
  std::vector<float> logits(static_cast<std::size_t>(X * n));
  l.router.apply(ctx, router_in, n, logits.data());
  const auto routes = route(c, l, logits.data(), X, n, ctx.batch.tokens.data());

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
    for (std::int64_t i = 0; i < m; ++i) {
      const float* src = in + rows[static_cast<std::size_t>(i)] * E;
      float* dst = x.data() + i * E;
      const float w = weights[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < E; ++j) dst[j] = c.moe_weight_before ? src[j] * w : src[j];
    }
    static const linear none;
    const linear& gate = l.gate_x.empty() ? none : l.gate_x[static_cast<std::size_t>(e)];
    const linear& up = l.up_x[static_cast<std::size_t>(e)];
    const linear& down = l.down_x[static_cast<std::size_t>(e)];
    const expert_bias bias{bias_of(l.gate_exps_b, e, down.w.in), bias_of(l.up_exps_b, e, down.w.in), bias_of(l.down_exps_b, e, E)};
    dense(ctx, c, gate, up, down, x.data(), m, y.data(), bias, l.swiglu_limit);
    for (std::int64_t i = 0; i < m; ++i) {
      float* o = out + rows[static_cast<std::size_t>(i)] * E;
      const float w = c.moe_weight_before ? 1.0f : weights[static_cast<std::size_t>(i)];
      if (!l.down_exps_scale.empty()) {
        const float s = l.down_exps_scale[static_cast<std::size_t>(e)];
        for (std::int64_t j = 0; j < E; ++j) y[static_cast<std::size_t>(i * E + j)] *= s;
      }
      for (std::int64_t j = 0; j < E; ++j) o[j] += y[static_cast<std::size_t>(i * E + j)] * w;
    }
  }

  if (!l.shared_down.empty()) {
    std::vector<float> shared(static_cast<std::size_t>(E * n));
    dense(ctx, c, l.shared_gate, l.shared_up, l.shared_down, in, n, shared.data(), {}, l.shared_swiglu_limit);
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

void ffn_block(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, float* out,
               const float* router_in) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  if (l.is_moe()) moe(ctx, l, c, in, router_in != nullptr ? router_in : in, n, out);
  else dense(ctx, c, l.gate, l.up, l.down, in, n, out);
}

}  // namespace spite::models
