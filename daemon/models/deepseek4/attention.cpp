// DeepSeek-V4 attention, as the reference computes it. One KV head K = V = RMSNorm(kv(x)) with
// RoPE on its last R dimensions, stored in f16 for a sliding window; layers with a compress
// ratio also pool every `ratio` positions into one compressed key (compressor below) and attend
// to those too: all of them (ratio 128) or the top_k a lightning indexer picks (ratio 4).
// Per-head sinks; the output is rotated back (inverse RoPE) before a grouped low-rank
// projection.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "../blocks/dsa_indexer.hpp"
#include "deepseek4.hpp"
#include "spite/core/half.hpp"

namespace spite::models::dsv4 {
namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// RoPE of the last rp.n_dims of each `width`-wide head of x [width, heads, n] at pos [n].
void rope_last(forward_context& ctx, const rope_params& rp, float* x, std::int64_t n, std::int64_t heads, std::int64_t width,
               const std::int32_t* pos) {
  const std::int64_t R = rp.n_dims;
  std::vector<float> pe(static_cast<std::size_t>(n * heads * R));
  for (std::int64_t r = 0; r < n * heads; ++r) std::copy_n(x + r * width + width - R, R, pe.data() + r * R);
  const dispatch::rope_args a{.x = pe.data(), .n_tokens = n, .n_head = heads, .head_dim = R, .n_dims = R, .pos = pos,
                              .neox = rp.kind == rope_kind::neox, .freq_base = rp.freq_base, .freq_scale = rp.freq_scale,
                              .ext_factor = rp.ext_factor, .attn_factor = rp.attn_factor, .beta_fast = rp.beta_fast,
                              .beta_slow = rp.beta_slow, .n_ctx_orig = rp.n_ctx_orig};
  ctx.ops.rope(a);
  for (std::int64_t r = 0; r < n * heads; ++r) std::copy_n(pe.data() + r * R, R, x + r * width + width - R);
}

// Block k of a compressor from its rings: per channel, softmax over the block's entries of their
// scores, the values summed with those weights; RMSNorm, RoPE at position k * ratio, the
// optional rotation; stored f16-rounded in key [dim].
void compress_block(forward_context& ctx, const compressor& c, const rope_params& rp, float eps, const float* ring_kv,
                    const float* ring_score, std::int64_t k, const std::vector<float>* hadamard, float* key) {
  const std::int64_t ratio = c.ratio, D = c.dim, W = c.width(), S = c.ring_rows();
  const std::int64_t entries = c.overlap ? 2 * ratio : ratio;
  std::vector<float> value(static_cast<std::size_t>(entries * D)), score(value.size());
  for (std::int64_t e = 0; e < entries; ++e) {
    // Overlapped: the previous block through the first half of its rows, this block through the second.
    const bool previous = c.overlap && e < ratio;
    const std::int64_t p = previous ? (k - 1) * ratio + e : k * ratio + (c.overlap ? e - ratio : e);
    const std::int64_t half = c.overlap && !previous ? D : 0;
    float* v = value.data() + e * D;
    float* s = score.data() + e * D;
    if (p < 0) {
      std::fill_n(v, D, 0.0f);
      std::fill_n(s, D, neg_inf);
      continue;
    }
    const std::int64_t row = p % S;
    std::copy_n(ring_kv + row * W + half, D, v);
    std::copy_n(ring_score + row * W + half, D, s);
  }
  std::vector<float> pooled(static_cast<std::size_t>(D)), w(static_cast<std::size_t>(entries));
  for (std::int64_t d = 0; d < D; ++d) {
    float max = neg_inf;
    for (std::int64_t e = 0; e < entries; ++e) max = std::max(max, score[static_cast<std::size_t>(e * D + d)]);
    double sum = 0.0;
    for (std::int64_t e = 0; e < entries; ++e) {
      const float x = score[static_cast<std::size_t>(e * D + d)];
      w[static_cast<std::size_t>(e)] = x == neg_inf ? 0.0f : std::exp(x - max);
      sum += w[static_cast<std::size_t>(e)];
    }
    const auto inv = static_cast<float>(1.0 / sum);
    double acc = 0.0;
    for (std::int64_t e = 0; e < entries; ++e) {
      acc += static_cast<double>(value[static_cast<std::size_t>(e * D + d)] * (w[static_cast<std::size_t>(e)] * inv));
    }
    pooled[static_cast<std::size_t>(d)] = static_cast<float>(acc);
  }
  rms_norm_rows(ctx, pooled.data(), c.norm.data(), pooled.data(), D, 1, eps);
  const auto pos = static_cast<std::int32_t>(k * ratio);
  rope_last(ctx, rp, pooled.data(), 1, 1, D, &pos);
  if (hadamard != nullptr) hadamard_rotate(*hadamard, pooled.data(), D, 1);
  for (std::int64_t d = 0; d < D; ++d) key[d] = fp16_to_fp32(fp32_to_fp16(pooled[static_cast<std::size_t>(d)]));
}

// Projected compressor rows of the batch: kv [n, W] and scores [n, W] (gate + ape[pos % ratio]).
struct projected {
  std::vector<float> kv, score;
};

projected project(forward_context& ctx, const compressor& c, const float* in, std::int64_t n) {
  projected p;
  const std::int64_t W = c.width();
  p.kv.resize(static_cast<std::size_t>(n * W));
  p.score.resize(p.kv.size());
  c.kv.apply(ctx, in, n, p.kv.data());
  c.gate.apply(ctx, in, n, p.score.data());
  for (std::int64_t t = 0; t < n; ++t) {
    const float* ape = c.ape.data() + (ctx.batch.pos[static_cast<std::size_t>(t)] % c.ratio) * W;
    for (std::int64_t i = 0; i < W; ++i) p.score[static_cast<std::size_t>(t * W + i)] += ape[i];
  }
  return p;
}

// Appends batch row t to the rings and, at a block's last position, compresses the block.
result<void> advance(forward_context& ctx, const compressor& c, const rope_params& rp, float eps, const projected& rows,
                     std::int64_t t, float* ring_kv, float* ring_score, float* keys, std::int64_t capacity,
                     const std::vector<float>* hadamard) {
  const std::int64_t p = ctx.batch.pos[static_cast<std::size_t>(t)], W = c.width();
  const std::int64_t row = p % c.ring_rows();
  std::copy_n(rows.kv.data() + t * W, W, ring_kv + row * W);
  std::copy_n(rows.score.data() + t * W, W, ring_score + row * W);
  if ((p + 1) % c.ratio != 0) return ok();
  const std::int64_t k = p / c.ratio;
  if (k >= capacity) {
    return make_error(errc::out_of_range, "position " + std::to_string(p) + " is past the context the compressed keys were sized for");
  }
  compress_block(ctx, c, rp, eps, ring_kv, ring_score, k, hadamard, keys + k * c.dim);
  return ok();
}

}  // namespace

result<void> attention(forward_context& ctx, const layer& l, const dims& d, int il, const float* in, float* out) {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t H = d.n_head, D = d.head_dim;
  const std::int32_t* pos = ctx.batch.pos.data();
  const std::int64_t rank = l.q_a.w.out;
  std::vector<float> qr(static_cast<std::size_t>(n * rank)), q(static_cast<std::size_t>(n * H * D)), kv(static_cast<std::size_t>(n * D));
  l.q_a.apply(ctx, in, n, qr.data());
  rms_norm_rows(ctx, qr.data(), l.q_a_norm.data(), qr.data(), rank, n, d.rms_eps);
  l.q_b.apply(ctx, qr.data(), n, q.data());
  rms_norm_rows(ctx, q.data(), nullptr, q.data(), D, n * H, d.rms_eps);
  rope_last(ctx, l.rope, q.data(), n, H, D, pos);
  l.kv.apply(ctx, in, n, kv.data());
  rms_norm_rows(ctx, kv.data(), l.kv_norm.data(), kv.data(), D, n, d.rms_eps);
  rope_last(ctx, l.rope, kv.data(), n, 1, D, pos);
  for (std::int64_t t = 0; t < n; ++t) ctx.kv.store(il, t, kv.data() + t * D, kv.data() + t * D);

  projected comp_rows, ix_rows;
  std::vector<float> iq, iw;
  const indexer* ix = l.index.get();
  if (l.comp) comp_rows = project(ctx, *l.comp, in, n);
  if (ix != nullptr) {
    ix_rows = project(ctx, ix->keys, in, n);
    const std::int64_t Hi = ix->n_head, Di = ix->head_dim;
    iq.resize(static_cast<std::size_t>(n * Hi * Di));
    ix->q_b.apply(ctx, qr.data(), n, iq.data());
    rope_last(ctx, l.rope, iq.data(), n, Hi, Di, pos);
    hadamard_rotate(ix->hadamard, iq.data(), Di, n * Hi);
    for (float& x : iq) x = fp16_to_fp32(fp32_to_fp16(x));  // its score is an f16 product
    iw.resize(static_cast<std::size_t>(n * Hi));
    ix->proj.apply(ctx, in, n, iw.data());
    const float scale = 1.0f / std::sqrt(static_cast<float>(Di * Hi));
    for (float& w : iw) w *= scale;
  }

  std::map<std::int32_t, std::vector<std::int64_t>> by_seq;
  for (std::int64_t t = 0; t < n; ++t) by_seq[ctx.batch.seq[static_cast<std::size_t>(t)]].push_back(t);
  std::vector<float> o(static_cast<std::size_t>(n * H * D));
  const state_layout& sl = l.state;
  for (auto& [seq, rows] : by_seq) {
    std::stable_sort(rows.begin(), rows.end(), [&](std::int64_t a, std::int64_t b) { return pos[a] < pos[b]; });
    float* st = nullptr;
    if (l.comp) {
      st = ctx.kv.state(il, seq);
      if (st == nullptr) return make_error(errc::internal, "deepseek4 layer " + std::to_string(il) + ": no compressor state");
      for (const std::int64_t t : rows) {
        SPITE_TRY(advance(ctx, *l.comp, l.rope, d.rms_eps, comp_rows, t, st + sl.ring_kv, st + sl.ring_score, st + sl.keys,
                          sl.capacity, nullptr));
        if (ix != nullptr) {
          SPITE_TRY(advance(ctx, ix->keys, l.rope, d.rms_eps, ix_rows, t, st + sl.ix_ring_kv, st + sl.ix_ring_score,
                            st + sl.ix_keys, sl.capacity, &ix->hadamard));
        }
      }
    }
    // Keys: the window's raw rows, then the compressed blocks the batch can see.
    const kv_view view = ctx.kv.view(il, seq);
    std::int64_t n_comp = 0;
    if (l.comp) {
      for (const std::int64_t t : rows) n_comp = std::max<std::int64_t>(n_comp, (pos[t] + 1) / l.ratio);
    }
    const std::int64_t total = view.n + n_comp, m = static_cast<std::int64_t>(rows.size());
    std::vector<std::uint16_t> keys(static_cast<std::size_t>(total * D));
    std::vector<std::int32_t> key_pos(static_cast<std::size_t>(total), 0);
    const std::int64_t stride = view.k_stride > 0 ? view.k_stride : D;
    for (std::int64_t j = 0; j < view.n; ++j) {
      std::copy_n(view.k + j * stride, D, keys.data() + j * D);
      key_pos[static_cast<std::size_t>(j)] = view.pos[j];
    }
    for (std::int64_t k = 0; k < n_comp; ++k) {
      const float* ck = st + sl.keys + k * D;
      for (std::int64_t i = 0; i < D; ++i) keys[static_cast<std::size_t>((view.n + k) * D + i)] = fp32_to_fp16(ck[i]);
    }
    std::vector<std::uint8_t> allowed(static_cast<std::size_t>(m * total), 0);
    std::vector<float> score;
    std::vector<std::int32_t> chosen;
    const std::int64_t padded = (n_comp + 255) / 256 * 256;
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t t = rows[static_cast<std::size_t>(r)];
      const std::int32_t qp = pos[t];
      std::uint8_t* a = allowed.data() + r * total;
      for (std::int64_t j = 0; j < view.n; ++j) a[j] = view.pos[j] <= qp && qp - view.pos[j] < d.window;
      const std::int64_t visible = l.comp ? (qp + 1) / l.ratio : 0;
      if (ix == nullptr) {
        for (std::int64_t k = 0; k < visible; ++k) a[view.n + k] = 1;
        continue;
      }
      // The indexer ranks every visible block of its own keys; the view is padded as the reference's.
      score.assign(static_cast<std::size_t>(padded), neg_inf);
      for (std::int64_t k = 0; k < visible; ++k) {
        score[static_cast<std::size_t>(k)] = indexer_score(iq.data() + t * ix->n_head * ix->head_dim, iw.data() + t * ix->n_head,
                                                           st + sl.ix_keys + k * ix->head_dim, ix->n_head, ix->head_dim);
      }
      top_cells(score, ix->top_k, chosen);
      for (const std::int32_t k : chosen) {
        if (k < visible) a[view.n + k] = 1;
      }
    }
    std::vector<float> qs(static_cast<std::size_t>(m * H * D)), os(qs.size());
    std::vector<std::int32_t> qpos(static_cast<std::size_t>(m));
    for (std::int64_t r = 0; r < m; ++r) {
      const std::int64_t t = rows[static_cast<std::size_t>(r)];
      std::copy_n(q.data() + t * H * D, H * D, qs.data() + r * H * D);
      qpos[static_cast<std::size_t>(r)] = pos[t];
    }
    dispatch::attention_args a{};
    a.q = qs.data();
    a.out = os.data();
    a.n_tokens = m;
    a.n_head = H;
    a.n_head_kv = 1;
    a.head_dim = D;
    a.head_dim_v = D;
    a.q_pos = qpos.data();
    a.k = keys.data();
    a.v = keys.data();
    a.v_stride = D;
    a.k_stride = D;
    a.kv_pos = key_pos.data();
    a.n_kv = total;
    a.scale = 1.0f / std::sqrt(static_cast<float>(D));
    a.sinks = l.sinks.data();
    a.key_allowed = allowed.data();
    a.flash = ctx.flash_attn;
    ctx.ops.attention(a, ctx.pool);
    for (std::int64_t r = 0; r < m; ++r) std::copy_n(os.data() + r * H * D, H * D, o.data() + rows[static_cast<std::size_t>(r)] * H * D);
  }

  // The values carry the keys' rotation: undo it at the query's position.
  std::vector<std::int32_t> back(ctx.batch.pos.begin(), ctx.batch.pos.end());
  for (auto& p : back) p = -p;
  rope_last(ctx, l.rope, o.data(), n, H, D, back.data());

  // Grouped low-rank output: group g's heads through rows g * o_rank .. of o_a, then o_b.
  const std::int64_t G = d.groups, R = d.o_rank, width = H * D / G;
  std::vector<float> oa(static_cast<std::size_t>(n * G * R)), xg(static_cast<std::size_t>(n * width)), yg(static_cast<std::size_t>(n * R));
  for (std::int64_t g = 0; g < G; ++g) {
    linear part;
    part.w = l.o_a;
    part.w.data = l.o_a.row(g * R);
    part.w.out = R;
    part.w.no_gemm = true;  // the reference applies it to a strided view of the heads
    for (std::int64_t t = 0; t < n; ++t) std::copy_n(o.data() + t * H * D + g * width, width, xg.data() + t * width);
    part.apply(ctx, xg.data(), n, yg.data());
    for (std::int64_t t = 0; t < n; ++t) std::copy_n(yg.data() + t * R, R, oa.data() + t * G * R + g * R);
  }
  l.o_b.apply(ctx, oa.data(), n, out);
  return ok();
}

}  // namespace spite::models::dsv4
