// Feed-forward blocks: gated FFNs (SwiGLU, GeGLU, clamped SwiGLU; separate or fused gate|up) and
// routed mixtures of such experts (softmax / sigmoid / softmax-of-top-K gating, optional expert
// biases) with an optional gated shared expert.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "decoder.hpp"
#include "spite/core/thread_pool.hpp"

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
    // gate beside up in one buffer: a decode step's pair comes out of the one matmul that runs
    // them together without a copy (matmul_parts writes its row in place).
    work_buffer gu(static_cast<std::size_t>(2 * F * n));
    float *g = gu.data(), *u = g + F * n;
    apply_parts(ctx, {{&gate, g}, {&up, u}}, in, n);
    add_rows(g, bias.gate, F, n);
    add_rows(u, bias.up, F, n);
    if (limit > 0.0f) clamp_swiglu(g, u, F * n, limit);
    h.resize(static_cast<std::size_t>(F * n));
    activate(ctx, c, g, u, h.data(), F, n);
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

// Batches up to this many rows may run their experts side by side (moe): decode steps, whose
// products are small and many; a longer batch's experts take many rows each.
constexpr std::int64_t side_by_side_rows = 8;

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
  // Each expert runs once over the tokens routed to it: its rows gathered into x, its results
  // y added to the tokens' outputs in expert order.
  struct routed {
    std::int64_t e = 0;
    std::vector<std::int64_t> rows;
    std::vector<float> weights, x, y;
  };
  const auto gather = [&](std::int64_t e, routed& r) {
    r.e = e;
    r.rows.clear();
    r.weights.clear();
    for (std::int64_t t = 0; t < n; ++t) {
      for (const auto& [ex, w] : routes[static_cast<std::size_t>(t)]) {
        if (ex == e) {
          r.rows.push_back(t);
          r.weights.push_back(w);
        }
      }
    }
    if (r.rows.empty()) return false;
    const auto m = static_cast<std::int64_t>(r.rows.size());
    r.x.resize(static_cast<std::size_t>(E * m));
    r.y.resize(static_cast<std::size_t>(E * m));
    for (std::int64_t i = 0; i < m; ++i) {
      const float* src = in + r.rows[static_cast<std::size_t>(i)] * E;
      float* dst = r.x.data() + i * E;
      const float w = r.weights[static_cast<std::size_t>(i)];
      for (std::int64_t j = 0; j < E; ++j) dst[j] = c.moe_weight_before ? src[j] * w : src[j];
    }
    return true;
  };
  const auto run = [&](forward_context& on, routed& r) {
    static const linear none;
    const auto e = static_cast<std::size_t>(r.e);
    const linear& down = l.down_x[e];
    const expert_bias bias{bias_of(l.gate_exps_b, r.e, down.w.in), bias_of(l.up_exps_b, r.e, down.w.in), bias_of(l.down_exps_b, r.e, E)};
    dense(on, c, l.gate_x.empty() ? none : l.gate_x[e], l.up_x[e], down, r.x.data(), static_cast<std::int64_t>(r.rows.size()),
          r.y.data(), bias, l.swiglu_limit);
  };
  const auto add = [&](routed& r) {
    const auto m = static_cast<std::int64_t>(r.rows.size());
    for (std::int64_t i = 0; i < m; ++i) {
      float* o = out + r.rows[static_cast<std::size_t>(i)] * E;
      float* y = r.y.data() + i * E;
      const float w = c.moe_weight_before ? 1.0f : r.weights[static_cast<std::size_t>(i)];
      if (!l.down_exps_scale.empty()) {
        const float s = l.down_exps_scale[static_cast<std::size_t>(r.e)];
        for (std::int64_t j = 0; j < E; ++j) y[j] *= s;
      }
      for (std::int64_t j = 0; j < E; ++j) o[j] += y[j] * w;
    }
  };

  if (n > side_by_side_rows || !ctx.ops.concurrent || ctx.pool.size() < 2) {
    routed r;
    for (std::int64_t e = 0; e < X; ++e) {
      if (!gather(e, r)) continue;
      run(ctx, r);
      add(r);
    }
  } else {
    std::vector<routed> active;
    for (std::int64_t e = 0; e < X; ++e) {
      routed r;
      if (gather(e, r)) active.push_back(std::move(r));
    }
    const auto count = static_cast<std::int64_t>(active.size()), threads = static_cast<std::int64_t>(ctx.pool.size());
    if (count >= threads && (count % threads == 0 || count >= 3 * threads)) {
      // The step's experts side by side, each on one thread with a pool of its own: one
      // hand-off for all of them instead of one per product, and each thread streams whole
      // matrices (a small expert split over many threads gives each a few KB). Each expert's
      // result is the one the shared pool gives. (Two threads, Qwen3-30B-A3B's shape: 1-5 %
      // more tokens/s in seven alternated pairs; four sequences 362 -> 423 t/s.)
      ctx.pool.parallel_for(count, [&](std::int64_t begin, std::int64_t end, int) {
        thread_local thread_pool alone(1, false);
        forward_context own{ctx.ops, alone, ctx.batch, ctx.kv, nullptr, ctx.loras};
        for (std::int64_t i = begin; i < end; ++i) run(own, active[static_cast<std::size_t>(i)]);
      });
    } else {
      for (routed& r : active) run(ctx, r);
    }
    for (routed& r : active) add(r);
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
