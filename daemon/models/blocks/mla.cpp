// Multi-head latent attention, absorbed form (DeepSeek-2/3, Kimi-K2, Mistral 4): per head
// q = [k_b^T q_nope | RoPE(q_pe)], one KV head K = [RMSNorm(c) | RoPE(k_pe)], V = RMSNorm(c);
// each head's output goes back through v_b before the output projection.
#include <algorithm>

#include "dsa_indexer.hpp"

namespace spite::models {
namespace {

// y[h] [out, n] = W[h] x[h] for the per-head matrices of a {in, out, H} tensor; x [in, H, n].
// `strided`: the reference's activations are a strided view here, which keeps it off its GEMM.
void per_head(forward_context& ctx, const gguf::tensor_info& w, const float* x, std::int64_t H, std::int64_t n, bool strided,
              float* y) {
  linear m;
  for (std::int64_t h = 0; h < H; ++h) {
    m.w = dispatch::weight_of(w, h);
    m.w.no_gemm = strided;
    const std::int64_t in = m.w.in, out = m.w.out;
    std::vector<float> xh(static_cast<std::size_t>(in * n)), yh(static_cast<std::size_t>(out * n));
    for (std::int64_t t = 0; t < n; ++t) std::copy_n(x + (t * H + h) * in, in, xh.data() + t * in);
    m.apply(ctx, xh.data(), n, yh.data());
    for (std::int64_t t = 0; t < n; ++t) std::copy_n(yh.data() + t * out, out, y + (t * H + h) * out);
  }
}

}  // namespace

void mla_attention_block(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer,
                         const float* rope_freqs, const float* in, float* out) {
  const mla_layer& m = *l.mla;
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t H = l.n_head, C = m.kv_lora, R = m.rope_dim, Dn = m.nope_dim, Dk = Dn + R, Dv = m.v_dim;
  // q [Dk, H, n]
  std::vector<float> q(static_cast<std::size_t>(n * H * Dk));
  indexer_batch ix;
  if (!m.q_a.empty()) {
    const std::int64_t rank = m.q_a.w.out;
    std::vector<float> qa(static_cast<std::size_t>(n * rank));
    m.q_a.apply(ctx, in, n, qa.data());
    rms_norm_rows(ctx, qa.data(), m.q_a_norm.data(), qa.data(), rank, n, c.rms_eps);
    if (m.indexer) ix = run_indexer(ctx, *m.indexer, l.rope, rope_freqs, qa.data(), in);
    m.q_b.apply(ctx, qa.data(), n, q.data());
  } else {
    m.q.apply(ctx, in, n, q.data());
  }
  // kv [C + R, n] = [c | k_pe]
  std::vector<float> kv(static_cast<std::size_t>(n * (C + R)));
  m.kv_a.apply(ctx, in, n, kv.data());

  std::vector<float> q_nope(static_cast<std::size_t>(n * H * Dn)), q_pe(static_cast<std::size_t>(n * H * R)),
      k_pe(static_cast<std::size_t>(n * R)), latent(static_cast<std::size_t>(n * C));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t h = 0; h < H; ++h) {
      const float* src = q.data() + (t * H + h) * Dk;
      std::copy_n(src, Dn, q_nope.data() + (t * H + h) * Dn);
      std::copy_n(src + Dn, R, q_pe.data() + (t * H + h) * R);
    }
    std::copy_n(kv.data() + t * (C + R), C, latent.data() + t * C);
    std::copy_n(kv.data() + t * (C + R) + C, R, k_pe.data() + t * R);
  }
  apply_rope(ctx, l.rope, rope_freqs, q_pe.data(), n, H, R);
  apply_rope(ctx, l.rope, rope_freqs, k_pe.data(), n, 1, R);
  rms_norm_rows(ctx, latent.data(), m.kv_a_norm.data(), latent.data(), C, n, c.rms_eps);

  // Absorbed queries [C + R, H, n] and the single KV head [C + R, n], V = latent [C, n].
  std::vector<float> q_abs(static_cast<std::size_t>(n * H * C));
  per_head(ctx, *m.k_b, q_nope.data(), H, n, true, q_abs.data());
  const std::int64_t D = C + R;
  // A KV row is [c | k_pe], followed by the indexer's key when the layer has an indexer.
  const std::int64_t Di = m.indexer ? m.indexer->head_dim : 0, row = D + Di;
  std::vector<float> qf(static_cast<std::size_t>(n * H * D)), kf(static_cast<std::size_t>(n * row));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t h = 0; h < H; ++h) {
      float* dst = qf.data() + (t * H + h) * D;
      std::copy_n(q_abs.data() + (t * H + h) * C, C, dst);
      std::copy_n(q_pe.data() + (t * H + h) * R, R, dst + C);
    }
    std::copy_n(latent.data() + t * C, C, kf.data() + t * row);
    std::copy_n(k_pe.data() + t * R, R, kf.data() + t * row + C);
    if (Di > 0) std::copy_n(ix.k.data() + t * Di, Di, kf.data() + t * row + D);
  }
  if (l.temperature) apply_temperature(ctx, c, qf.data(), H * D);
  std::vector<float> o(static_cast<std::size_t>(n * H * C)), ov(static_cast<std::size_t>(n * H * Dv));
  attend_extras extras;
  extras.k_row = row;
  if (m.indexer) {
    extras.select = [&](std::int32_t seq, const std::vector<std::int64_t>& rows, const kv_view& view, std::vector<std::uint8_t>& allowed) {
      select_keys(*m.indexer, ix, ctx, rows, view, D, allowed);
      ctx.key_selection[seq] = allowed;
    };
  } else if (m.reuses_selection) {
    extras.select = [&](std::int32_t seq, const std::vector<std::int64_t>& rows, const kv_view& view, std::vector<std::uint8_t>& allowed) {
      const auto it = ctx.key_selection.find(seq);
      if (it != ctx.key_selection.end() && it->second.size() == rows.size() * static_cast<std::size_t>(view.n)) allowed = it->second;
    };
  }
  attend(ctx, l, c, layer, c.kq_scale, qf.data(), kf.data(), latent.data(), D, C, o.data(), extras);
  per_head(ctx, *m.v_b, o.data(), H, n, false, ov.data());
  l.o.apply(ctx, ov.data(), n, out);
}

}  // namespace spite::models
