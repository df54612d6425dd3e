// Self-attention of one layer for a batch that may mix sequences: projections, optional
// per-head norms, RoPE, KV storage, then attention per sequence over what it has cached.
#include <algorithm>
#include <cmath>
#include <map>
#include <span>

#include "decoder.hpp"

namespace spite::models {

bool apply_rope(forward_context& ctx, const rope_params& rp, const float* freqs, float* x, std::int64_t n, std::int64_t n_head,
                std::int64_t head_dim) {
  if (rp.kind == rope_kind::none || rp.n_dims <= 0) return false;
  const dispatch::rope_args r{.x = x, .n_tokens = n, .n_head = n_head, .head_dim = head_dim, .n_dims = rp.n_dims,
                              .pos = ctx.batch.pos.data(), .neox = rp.kind == rope_kind::neox, .freq_base = rp.freq_base,
                              .freq_scale = rp.freq_scale, .ext_factor = rp.ext_factor, .attn_factor = rp.attn_factor,
                              .beta_fast = rp.beta_fast, .beta_slow = rp.beta_slow, .n_ctx_orig = rp.n_ctx_orig,
                              .freq_factors = freqs};
  rope_rows(ctx, r);
  return true;
}

void apply_temperature(forward_context& ctx, const decoder_config& c, float* q, std::int64_t width) {
  if (c.temperature_length <= 0) return;
  for (std::size_t t = 0; t < ctx.batch.pos.size(); ++t) {
    const float pos = static_cast<float>(ctx.batch.pos[t]);
    const double steps = std::floor((pos + c.temperature_offset) / static_cast<float>(c.temperature_length));
    const auto scale = static_cast<float>(std::log(steps + 1.0) * c.temperature_scale + 1.0);
    for (std::int64_t i = 0; i < width; ++i) q[static_cast<std::int64_t>(t) * width + i] *= scale;
  }
}

void attend(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer, float scale, const float* q,
            const float* k, const float* v, std::int64_t D, std::int64_t Dv, float* out, const attend_extras& extras) {
  const std::int64_t n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t H = l.n_head, Hkv = l.n_head_kv;
  const std::int64_t k_row = extras.k_row > 0 ? extras.k_row : Hkv * D;
  if (l.kv_layer >= 0) {
    layer = l.kv_layer;  // attends over another layer's keys and values, stores none
  } else {
    for (std::int64_t t = 0; t < n; ++t) ctx.kv.store(layer, t, k + t * k_row, v + t * Hkv * Dv);
  }

  // One attention call per sequence in the batch, the calls handed to the kernels together.
  std::map<std::int32_t, std::vector<std::int64_t>> by_seq;
  for (std::int64_t t = 0; t < n; ++t) by_seq[ctx.batch.seq[static_cast<std::size_t>(t)]].push_back(t);
  // A batch of one sequence (every prefill) attends in place; the rows of a mixed batch are
  // gathered per sequence and scattered back.
  const bool whole_batch = by_seq.size() == 1;
  struct sequence_call {
    const std::vector<std::int64_t>* rows;
    work_buffer qs, os;
    std::vector<std::int32_t> qpos;
    std::vector<std::uint8_t> allowed;
  };
  std::vector<sequence_call> seqs(by_seq.size());
  std::vector<dispatch::attention_args> calls(by_seq.size());
  std::size_t s_index = 0;
  for (const auto& [seq, rows] : by_seq) {
    sequence_call& sc = seqs[s_index];
    dispatch::attention_args& a = calls[s_index++];
    const auto m = static_cast<std::int64_t>(rows.size());
    sc.rows = &rows;
    if (!whole_batch) {
      sc.qs.resize(static_cast<std::size_t>(m * H * D));
      sc.os.resize(static_cast<std::size_t>(m * H * Dv));
    }
    sc.qpos.resize(rows.size());
    for (std::int64_t i = 0; i < m; ++i) {
      const std::int64_t t = rows[static_cast<std::size_t>(i)];
      if (!whole_batch) std::copy(q + t * H * D, q + (t + 1) * H * D, sc.qs.data() + i * H * D);
      sc.qpos[static_cast<std::size_t>(i)] = ctx.batch.pos[static_cast<std::size_t>(t)];
    }
    const kv_view view = ctx.kv.view(layer, seq);
    if (extras.select) extras.select(seq, rows, view, sc.allowed);
    a.q = whole_batch ? q : sc.qs.data();
    a.out = whole_batch ? out : sc.os.data();
    a.n_tokens = m;
    a.n_head = H;
    a.n_head_kv = Hkv;
    a.head_dim = D;
    a.head_dim_v = Dv;
    a.q_pos = sc.qpos.data();
    a.k = view.k;
    a.v = view.v;
    a.v_stride = view.v_stride;
    a.k_stride = view.k_stride;
    a.key_allowed = sc.allowed.empty() ? nullptr : sc.allowed.data();
    a.kv_pos = view.pos;
    a.n_kv = view.n;
    a.scale = scale;
    a.softcap = c.attn_softcap;
    a.sinks = l.sinks.empty() ? nullptr : l.sinks.data();
    a.mask = l.mask;
    a.flash = ctx.flash_attn;
  }
  if (calls.size() > 1 && ctx.ops.attention_many) {
    ctx.ops.attention_many(calls, ctx.pool);
  } else {
    for (const dispatch::attention_args& a : calls) ctx.ops.attention(a, ctx.pool);
  }
  if (whole_batch) return;
  for (const sequence_call& sc : seqs) {
    for (std::size_t i = 0; i < sc.rows->size(); ++i) {
      const std::int64_t t = (*sc.rows)[i];
      std::copy(sc.os.data() + static_cast<std::int64_t>(i) * H * Dv, sc.os.data() + static_cast<std::int64_t>(i + 1) * H * Dv,
                out + t * H * Dv);
    }
  }
}

void attention_block(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer,
                     const float* rope_freqs, const float* in, float* out) {
  const std::int64_t n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  if (l.mla) {
    mla_attention_block(ctx, l, c, layer, rope_freqs, in, out);
    return;
  }
  if (l.delta_net) {
    delta_net_block(ctx, *l.delta_net, c.rms_eps, layer, in, out);
    return;
  }
  const std::int64_t H = l.n_head, Hkv = l.n_head_kv, D = l.head_dim > 0 ? l.head_dim : c.head_dim,
                     Dv = l.head_dim_v > 0 ? l.head_dim_v : c.head_dim_v;
  if (!l.rope_freqs) rope_freqs = nullptr;
  const bool own_kv = l.kv_layer < 0;
  // q, k and v side by side in one buffer: a decode step's three projections then come out of
  // the one matmul that runs them together without a copy (matmul_parts writes its row in place).
  const std::int64_t q_size = n * H * D, k_size = n * Hkv * D, v_size = n * Hkv * std::max(D, Dv);
  work_buffer projections(static_cast<std::size_t>(q_size + k_size + v_size)), gate;
  const std::span<float> q(projections.data(), static_cast<std::size_t>(q_size)),
      k(q.data() + q_size, static_cast<std::size_t>(k_size)), v(k.data() + k_size, static_cast<std::size_t>(v_size));
  if (!l.qkv.empty()) {
    // Fused projection: each token's row is [q | k | v].
    const std::int64_t width = H * D + Hkv * D + Hkv * Dv;
    work_buffer qkv(static_cast<std::size_t>(n * width));
    l.qkv.apply(ctx, in, n, qkv.data());
    for (std::int64_t t = 0; t < n; ++t) {
      const float* row = qkv.data() + t * width;
      std::copy(row, row + H * D, q.data() + t * H * D);
      std::copy(row + H * D, row + H * D + Hkv * D, k.data() + t * Hkv * D);
      std::copy(row + H * D + Hkv * D, row + width, v.data() + t * Hkv * Dv);
    }
  } else if (l.q_gate) {
    // Per head [q | gate]: q goes on, the gate waits for the attention's output.
    work_buffer qg(static_cast<std::size_t>(n * H * 2 * D));
    apply_parts(ctx, {{&l.q, qg.data()}, {&l.k, k.data()}, {&l.v, v.data()}}, in, n);
    gate.resize(static_cast<std::size_t>(n * H * D));
    for (std::int64_t r = 0; r < n * H; ++r) {
      std::copy_n(qg.data() + r * 2 * D, D, q.data() + r * D);
      std::copy_n(qg.data() + r * 2 * D + D, D, gate.data() + r * D);
    }
  } else if (own_kv && !l.v.empty()) {
    apply_parts(ctx, {{&l.q, q.data()}, {&l.k, k.data()}, {&l.v, v.data()}}, in, n);
  } else {
    l.q.apply(ctx, in, n, q.data());
    if (own_kv) {
      l.k.apply(ctx, in, n, k.data());
      if (l.v.empty()) {
        std::copy(k.begin(), k.end(), v.begin());  // no attn_v: the values are the keys' projection
      } else {
        l.v.apply(ctx, in, n, v.data());
      }
    }
  }
  if (l.v_norm && own_kv) rms_norm_rows(ctx, v.data(), nullptr, v.data(), Dv, n * Hkv, c.rms_eps);
  if (!l.q_norm.empty()) rms_norm_rows(ctx, q.data(), l.q_norm.data(), q.data(), D, n * H, c.rms_eps);
  if (!l.k_norm.empty() && own_kv) rms_norm_rows(ctx, k.data(), l.k_norm.data(), k.data(), D, n * Hkv, c.rms_eps);

  if (apply_rope(ctx, l.rope, rope_freqs, q.data(), n, H, D) &&
      (!own_kv || apply_rope(ctx, l.rope, rope_freqs, k.data(), n, Hkv, D)) && c.qk_rms_after_rope) {
    rms_norm_rows(ctx, q.data(), nullptr, q.data(), D, n * H, c.rms_eps);
    if (own_kv) rms_norm_rows(ctx, k.data(), nullptr, k.data(), D, n * Hkv, c.rms_eps);
  }
  if (l.temperature) apply_temperature(ctx, c, q.data(), H * D);
  if (c.q_prescale != 1.0f) {
    for (float& x : q) x *= c.q_prescale;
  }
  work_buffer attn(static_cast<std::size_t>(n * H * Dv));
  attend(ctx, l, c, layer, c.kq_scale, q.data(), k.data(), v.data(), D, Dv, attn.data());
  if (l.q_gate) {
    for (std::size_t i = 0; i < attn.size(); ++i) attn[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  }
  l.o.apply(ctx, attn.data(), n, out);
}

}  // namespace spite::models
