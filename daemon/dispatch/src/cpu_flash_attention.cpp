// Flash attention over the F16 KV cache: an online softmax (running maximum and sum, the
// output rescaled when the maximum grows), never the whole row of scores. Two algorithms, as
// the reference engine has them, with its arithmetic so that its flash-attention logits are
// reproduced:
// - short batches (fewer than 64 queries, decode): one key at a time, the query rounded to
//   f16, the f16 vector dot product, the output accumulated in f16;
// - batches of 64 queries or more: tiles of 64 queries x 64 keys, scores and the weighted sum
//   of values as f32 fused-multiply-add GEMMs, exp over 16-key chunks summed in double.
// Work is split over (head, query) or (head, query tile); every result is independent of the
// thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attention_mask.hpp"
#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "simd_math.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
float accumulate_f16_scalar(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                            const float* weight, const float* rescale, std::int64_t n, std::int64_t d0, std::int64_t dv,
                            float sum) {
  for (std::int64_t d = d0; d < dv; ++d) {
    std::uint16_t acc = fp32_to_fp16(out[d]);  // exact: out holds an f16 value
    for (std::int64_t i = 0; i < n; ++i) {
      if (rescale[i] != 1.0f) acc = fp32_to_fp16(fp16_to_fp32(acc) * rescale[i]);
      acc = fp32_to_fp16(std::fma(fp16_to_fp32(values[keys[i] * stride + d]), weight[i], fp16_to_fp32(acc)));
    }
    out[d] = fp16_to_fp32(acc);
  }
  for (std::int64_t i = 0; i < n; ++i) sum = std::fma(sum, rescale[i], weight[i]);
  return sum;
}

float online_max_scalar(float* weight, float* rescale, std::int64_t n, float scale, float max) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = weight[i] * scale;
    if (s > max) {
      rescale[i] = std::exp(max - s);  // exp(-inf) = 0 for the first key
      weight[i] = 0.0f;
      max = s;
    } else {
      rescale[i] = 1.0f;
      weight[i] = s - max;
    }
  }
  return max;
}

namespace {

constexpr std::int64_t k_tile = 64;  // queries and keys per tile
constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// Each piece: the SIMD twin where the processor has one, else the same arithmetic in scalar.
float dot_f16_blocks(const simd_math* simd, const std::uint16_t* a, const float* b, std::int64_t n) {
  if (simd != nullptr) return simd->dot_f16_blocks(a, b, n);
  const std::int64_t np = n & ~std::int64_t{63};
  double sum = 0.0;
  if (np > 0) {
    float acc[4][16] = {};
    for (std::int64_t i = 0; i < np; ++i) acc[(i / 16) % 4][i % 16] += fp16_to_fp32(a[i]) * b[i];
    for (int l = 0; l < 16; ++l) acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    sum = reduce16(acc[0]);
  }
  for (std::int64_t i = np; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(a[i]) * b[i]);
  return static_cast<float>(sum);
}

void dot_f16_rows(const simd_math* simd, const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys,
                  std::int64_t count, const float* b, std::int64_t n, float* out) {
  if (simd != nullptr) return simd->dot_f16_rows(rows, stride, keys, count, b, n, out);
  for (std::int64_t i = 0; i < count; ++i) out[i] = dot_f16_blocks(nullptr, rows + keys[i] * stride, b, n);
}

float accumulate_f16(const simd_math* simd, float* out, const std::uint16_t* values, std::int64_t stride,
                     const std::int32_t* keys, const float* weight, const float* rescale, std::int64_t n, std::int64_t dv,
                     float sum) {
  if (simd != nullptr) return simd->accumulate_f16(out, values, stride, keys, weight, rescale, n, dv, sum);
  return accumulate_f16_scalar(out, values, stride, keys, weight, rescale, n, 0, dv, sum);
}

void exp_nonpositive(const simd_math* simd, const float* x, float* y, std::int64_t n) {
  if (simd != nullptr) return simd->exp_nonpositive(x, y, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void gemm_acc(const simd_math* simd, float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n) {
  if (simd != nullptr) return simd->gemm_acc(c, a, b, m, k, n);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float s = c[i * n + j];
      for (std::int64_t kk = 0; kk < k; ++kk) s = std::fma(a[i * k + kk], b[kk * n + j], s);
      c[i * n + j] = s;
    }
  }
}

void widen(const simd_math* simd, const std::uint16_t* h, float* out, std::int64_t n) {
  if (simd != nullptr) return simd->widen(h, out, n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
}

struct shape {
  std::int64_t group, dk, dv, k_stride, v_stride;
  float scale;  // applied before the soft cap, which the reference folds into it
};

shape shape_of(const attention_args& a) {
  shape s{};
  s.group = a.n_head / a.n_head_kv;  // consecutive query heads share a kv head
  s.dk = a.head_dim;
  s.dv = a.head_dim_v;
  s.k_stride = a.k_stride > 0 ? a.k_stride : a.n_head_kv * a.head_dim;
  s.v_stride = a.v_stride > 0 ? a.v_stride : a.n_head_kv * a.head_dim_v;
  s.scale = a.softcap > 0.0f ? a.scale / a.softcap : a.scale;
  return s;
}

// The sink's logit joins the denominator only; then the output is normalised.
void finish(const attention_args& a, std::int64_t h, float m, float s, float* out, std::int64_t dv) {
  if (a.sinks != nullptr) {
    const float sink = a.sinks[h];
    float ms = 1.0f, vs = 1.0f;
    if (sink > m) {
      ms = std::exp(m - sink);
      for (std::int64_t d = 0; d < dv; ++d) out[d] *= ms;
    } else {
      vs = std::exp(sink - m);
    }
    s = std::fma(s, ms, vs);
  }
  const float inv = s == 0.0f ? 0.0f : 1.0f / s;
  for (std::int64_t d = 0; d < dv; ++d) out[d] *= inv;
}

// One query row of the heads [h0, h1) that share a kv head, key by key.
struct group_scratch {
  std::vector<float> q, weight, rescale, m, sum;  // per head: [dk], [n], [n], 1, 1
  std::vector<std::int32_t> keys;                 // the keys the query may see, shared by the heads
};

// Keys per block: the block's key and value rows (8 KiB each for 64-element f16 heads) stay in
// L1 while every head of the group takes them, so each row comes from memory once per group
// instead of once per head (8 times for an 8-head group at long contexts).
constexpr std::size_t key_block = 64;

// The online softmax is sequential in its f16 accumulator only: the scores, the running
// maximum and the exponentials are worked out first (independent calls that the processor
// overlaps), then the accumulator takes the keys in order, a block at a time for each head.
// Each head sees the same operations in the same order as when it ran alone.
void attend_group(const attention_args& a, const shape& sh, const simd_math* simd, std::int64_t t, std::int64_t h0,
                  std::int64_t h1, group_scratch& w) {
  const std::int64_t hk = h0 / sh.group;
  const auto heads = static_cast<std::size_t>(h1 - h0), dk = static_cast<std::size_t>(sh.dk);
  w.q.resize(heads * dk);
  for (std::size_t h = 0; h < heads; ++h) {
    const float* qs = a.q + (t * a.n_head + h0 + static_cast<std::int64_t>(h)) * sh.dk;
    float* q = w.q.data() + h * dk;
    if (simd != nullptr) {
      simd->round_f16(qs, q, sh.dk);
    } else {
      for (std::size_t d = 0; d < dk; ++d) q[d] = fp16_to_fp32(fp32_to_fp16(qs[d]));
    }
  }
  w.keys.clear();
  for (std::int64_t j = 0; j < a.n_kv; ++j) {
    if (!key_masked(a, t, j)) w.keys.push_back(static_cast<std::int32_t>(j));
  }
  const std::size_t n = w.keys.size();
  // The kernels fetch the rows of keys a few places ahead: entries past the last key repeat it.
  w.keys.resize(n + key_lookahead, n > 0 ? w.keys[n - 1] : 0);
  w.weight.resize(heads * n);
  w.rescale.resize(heads * n);
  for (std::size_t i0 = 0; i0 < n; i0 += key_block) {
    const std::size_t i1 = std::min(n, i0 + key_block);
    const bool together = simd != nullptr && simd->dot_f16_rows_heads != nullptr;
    if (together) {
      simd->dot_f16_rows_heads(a.k + hk * sh.dk, sh.k_stride, w.keys.data() + i0, static_cast<std::int64_t>(i1 - i0), w.q.data(),
                               sh.dk, w.weight.data() + i0, static_cast<std::int64_t>(n), static_cast<std::int64_t>(heads));
    } else {
      for (std::size_t h = 0; h < heads; ++h) {
        dot_f16_rows(simd, a.k + hk * sh.dk, sh.k_stride, w.keys.data() + i0, static_cast<std::int64_t>(i1 - i0),
                     w.q.data() + h * dk, sh.dk, w.weight.data() + h * n + i0);
      }
    }
  }
  // The scores scaled (and soft-capped); a new maximum rescales what came before by
  // exp(old - new) and weighs its key 1; any other key weighs exp(s - max). One pass over the
  // keys makes the scores, the rescales (rare: the C library's expf, one key at a time) and the
  // weights' arguments, whose exponentials follow in one vector pass.
  w.m.assign(heads, neg_inf);
  w.sum.assign(heads, 0.0f);
  for (std::size_t h = 0; h < heads; ++h) {
    float* weight = w.weight.data() + h * n;  // the raw scores, until they become weights here
    float* rescale = w.rescale.data() + h * n;
    // A soft cap scales and caps the scores first; the pass then scales by 1 (exact).
    float scale = sh.scale;
    if (a.softcap > 0.0f) {
      for (std::size_t i = 0; i < n; ++i) weight[i] = a.softcap * std::tanh(weight[i] * sh.scale);
      scale = 1.0f;
    }
    const auto keys = static_cast<std::int64_t>(n);
    w.m[h] = simd != nullptr && simd->online_max != nullptr ? simd->online_max(weight, rescale, keys, scale, neg_inf)
                                                            : online_max_scalar(weight, rescale, keys, scale, neg_inf);
    exp_nonpositive(simd, weight, weight, static_cast<std::int64_t>(n));
    std::fill_n(a.out + (t * a.n_head + h0 + static_cast<std::int64_t>(h)) * sh.dv, sh.dv, 0.0f);
  }
  for (std::size_t i0 = 0; i0 < n; i0 += key_block) {
    const auto len = static_cast<std::int64_t>(std::min(n, i0 + key_block) - i0);
    if (simd != nullptr && simd->accumulate_f16_heads != nullptr) {
      // The group's heads are consecutive: their outputs dv apart, weights and rescales n apart.
      simd->accumulate_f16_heads(a.out + (t * a.n_head + h0) * sh.dv, a.v + hk * sh.dv, sh.v_stride, w.keys.data() + i0,
                                 w.weight.data() + i0, w.rescale.data() + i0, static_cast<std::int64_t>(n), len, sh.dv,
                                 w.sum.data(), static_cast<std::int64_t>(heads));
      continue;
    }
    for (std::size_t h = 0; h < heads; ++h) {
      float* out = a.out + (t * a.n_head + h0 + static_cast<std::int64_t>(h)) * sh.dv;
      w.sum[h] = accumulate_f16(simd, out, a.v + hk * sh.dv, sh.v_stride, w.keys.data() + i0, w.weight.data() + h * n + i0,
                                w.rescale.data() + h * n + i0, len, sh.dv, w.sum[h]);
    }
  }
  for (std::size_t h = 0; h < heads; ++h) {
    finish(a, h0 + static_cast<std::int64_t>(h), w.m[h], w.sum[h], a.out + (t * a.n_head + h0 + static_cast<std::int64_t>(h)) * sh.dv,
           sh.dv);
  }
}

// The keys and values widened to f32 once per call, shared by every head of a group and every
// query tile: per kv head and tile of 64 keys, the keys transposed ([dk][64], so that the
// scores of 8 or 16 keys form one vector) and the values as rows ([64][dv]); zeros past n_kv.
struct widened_kv {
  std::int64_t n_tiles, dk, dv;
  std::vector<float> kt, v;
  std::int64_t at(std::int64_t hk, std::int64_t tile) const { return (hk * n_tiles + tile) * k_tile; }
  const float* keys(std::int64_t hk, std::int64_t tile) const { return kt.data() + at(hk, tile) * dk; }
  const float* values(std::int64_t hk, std::int64_t tile) const { return v.data() + at(hk, tile) * dv; }
};

widened_kv widen_kv(const attention_args& a, const shape& sh, const simd_math* simd, thread_pool& pool) {
  widened_kv kv{(a.n_kv + k_tile - 1) / k_tile, sh.dk, sh.dv, {}, {}};
  kv.kt.assign(static_cast<std::size_t>(a.n_head_kv * kv.n_tiles * sh.dk * k_tile), 0.0f);
  kv.v.assign(static_cast<std::size_t>(a.n_head_kv * kv.n_tiles * k_tile * sh.dv), 0.0f);
  pool.parallel_for(a.n_head_kv * kv.n_tiles, [&](std::int64_t begin, std::int64_t end, int) {
    std::vector<float> row(static_cast<std::size_t>(sh.dk));
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t hk = i / kv.n_tiles, tile = i % kv.n_tiles, c = tile * k_tile;
      float* kt = kv.kt.data() + kv.at(hk, tile) * sh.dk;
      float* v = kv.v.data() + kv.at(hk, tile) * sh.dv;
      for (std::int64_t j = 0; j < std::min(k_tile, a.n_kv - c); ++j) {
        widen(simd, a.k + (c + j) * sh.k_stride + hk * sh.dk, row.data(), sh.dk);
        for (std::int64_t d = 0; d < sh.dk; ++d) kt[d * k_tile + j] = row[static_cast<std::size_t>(d)];
        widen(simd, a.v + (c + j) * sh.v_stride + hk * sh.dv, v + j * sh.dv, sh.dv);
      }
    }
  });
  return kv;
}

// Which keys of each 64 x 64 tile (query tile, key tile) the queries may see, worked out once
// per call for every head: none (the tile is skipped), all (no per-key test), or some (a
// flag per query row and key, kept only for those tiles: the diagonal of a causal batch).
struct tile_visibility {
  enum : char { none, all, some };
  std::int64_t key_tiles = 0;
  std::vector<char> state;           // [query tile][key tile]
  std::vector<std::int64_t> at;      // offset of a `some` tile's flags in `visible`
  std::vector<std::uint8_t> visible;  // [rows][64]: 1 = the row may see the key

  char of(std::int64_t qt, std::int64_t kt) const { return state[static_cast<std::size_t>(qt * key_tiles + kt)]; }
  const std::uint8_t* flags(std::int64_t qt, std::int64_t kt) const {
    return visible.data() + at[static_cast<std::size_t>(qt * key_tiles + kt)];
  }
};

tile_visibility tile_visibility_of(const attention_args& a) {
  tile_visibility v;
  const std::int64_t query_tiles = (a.n_tokens + k_tile - 1) / k_tile;
  v.key_tiles = (a.n_kv + k_tile - 1) / k_tile;
  v.state.assign(static_cast<std::size_t>(query_tiles * v.key_tiles), tile_visibility::none);
  v.at.assign(v.state.size(), 0);
  std::vector<std::uint8_t> flags(static_cast<std::size_t>(k_tile * k_tile));
  for (std::int64_t qt = 0; qt < query_tiles; ++qt) {
    const std::int64_t t0 = qt * k_tile, rows = std::min(k_tile, a.n_tokens - t0);
    for (std::int64_t kt = 0; kt < v.key_tiles; ++kt) {
      const std::int64_t c = kt * k_tile, n_keys = std::min(k_tile, a.n_kv - c);
      std::int64_t seen = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < k_tile; ++j) {
          const bool see = j < n_keys && !key_masked(a, t0 + r, c + j);
          flags[static_cast<std::size_t>(r * k_tile + j)] = see ? 1 : 0;
          seen += see ? 1 : 0;
        }
      }
      const auto i = static_cast<std::size_t>(qt * v.key_tiles + kt);
      if (seen == 0) continue;
      if (seen == rows * k_tile) {
        v.state[i] = tile_visibility::all;
        continue;
      }
      v.state[i] = tile_visibility::some;
      v.at[i] = static_cast<std::int64_t>(v.visible.size());
      v.visible.insert(v.visible.end(), flags.begin(), flags.begin() + rows * k_tile);
    }
  }
  return v;
}

// Up to 64 query rows of one head against the keys 64 at a time.
struct tile_scratch {
  std::vector<float> q, kq, out, s, m;
  std::vector<char> skip;
};

// The largest of a tile row's 64 scores: 8 running maxima (one vector for the compiler) instead
// of one chain of 64 comparisons. The same value as std::max_element's for scores that are not
// NaN (of +0 and -0 either may come out; every use of the maximum gives the same bits for both).
float largest_score(const float* kq) {
  float lane[8];
  std::copy_n(kq, 8, lane);
  for (std::int64_t j = 8; j < k_tile; j += 8) {
    for (int l = 0; l < 8; ++l) lane[l] = std::max(lane[l], kq[j + l]);
  }
  return *std::max_element(lane, lane + 8);
}

void attend_tile(const attention_args& a, const shape& sh, const simd_math* simd, const widened_kv& kv,
                 const tile_visibility& vis, std::int64_t t0, std::int64_t rows, std::int64_t h, tile_scratch& w) {
  const std::int64_t hk = h / sh.group, dk = sh.dk, dv = sh.dv;
  w.q.resize(static_cast<std::size_t>(rows * dk));
  for (std::int64_t r = 0; r < rows; ++r) std::copy_n(a.q + ((t0 + r) * a.n_head + h) * dk, dk, w.q.data() + r * dk);
  w.kq.resize(static_cast<std::size_t>(rows * k_tile));
  w.out.assign(static_cast<std::size_t>(rows * dv), 0.0f);
  w.s.assign(static_cast<std::size_t>(rows), 0.0f);
  w.m.assign(static_cast<std::size_t>(rows), neg_inf);
  w.skip.resize(static_cast<std::size_t>(rows));
  for (std::int64_t c = 0; c < a.n_kv; c += k_tile) {
    // Keys no row of the tile may see are skipped whole.
    const char seen = vis.of(t0 / k_tile, c / k_tile);
    if (seen == tile_visibility::none) continue;
    const std::uint8_t* visible = seen == tile_visibility::some ? vis.flags(t0 / k_tile, c / k_tile) : nullptr;
    std::fill(w.kq.begin(), w.kq.end(), 0.0f);
    gemm_acc(simd, w.kq.data(), w.q.data(), kv.keys(hk, c / k_tile), rows, dk, k_tile);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* kq = w.kq.data() + r * k_tile;
      const std::uint8_t* row_visible = visible != nullptr ? visible + r * k_tile : nullptr;
      float tile_max;
      if (a.softcap <= 0.0f && simd != nullptr && simd->scale_mask_max != nullptr) {
        tile_max = simd->scale_mask_max(kq, k_tile, sh.scale, row_visible);
      } else {
        if (a.softcap > 0.0f) {
          for (std::int64_t j = 0; j < k_tile; ++j) kq[j] = a.softcap * std::tanh(kq[j] * sh.scale);
        } else {
          for (std::int64_t j = 0; j < k_tile; ++j) kq[j] *= sh.scale;
        }
        if (row_visible != nullptr) {
          for (std::int64_t j = 0; j < k_tile; ++j) kq[j] = row_visible[j] != 0 ? kq[j] : neg_inf;
        }
        tile_max = largest_score(kq);
      }
      w.skip[static_cast<std::size_t>(r)] = tile_max == neg_inf;
      if (tile_max == neg_inf) continue;
      float& m = w.m[static_cast<std::size_t>(r)];
      float& s_sum = w.s[static_cast<std::size_t>(r)];
      const float m_new = std::max(m, tile_max);
      if (m_new > m) {
        const float ms = std::exp(m - m_new);
        for (std::int64_t d = 0; d < dv; ++d) w.out[static_cast<std::size_t>(r * dv + d)] *= ms;
        s_sum *= ms;
      }
      m = m_new;
      double sum = 0.0;
      if (simd != nullptr && simd->exp_row != nullptr) {
        sum = simd->exp_row(kq, k_tile, m);
      } else {
        for (std::int64_t j = 0; j < k_tile; j += 16) {
          if (simd != nullptr) {
            sum += simd->exp16(kq + j, m);
            continue;
          }
          for (int l = 0; l < 16; ++l) kq[j + l] = ref_expf(kq[j + l] - m);
          sum += reduce16(kq + j);
        }
      }
      s_sum = static_cast<float>(static_cast<double>(s_sum) + sum);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      if (w.skip[static_cast<std::size_t>(r)]) std::fill_n(w.kq.data() + r * k_tile, k_tile, 0.0f);
    }
    gemm_acc(simd, w.out.data(), w.kq.data(), kv.values(hk, c / k_tile), rows, k_tile, dv);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = a.out + ((t0 + r) * a.n_head + h) * dv;
    std::copy_n(w.out.data() + r * dv, dv, out);
    finish(a, h, w.m[static_cast<std::size_t>(r)], w.s[static_cast<std::size_t>(r)], out, dv);
  }
}

}  // namespace

bool flash_attention_by_query(const attention_args& a) {
  // The reference tiles batches of at least one tile whose values fill whole 16-lane vectors.
  return a.n_tokens < k_tile || a.head_dim_v % 16 != 0;
}

void flash_attention_by_query(std::span<const attention_args> calls, thread_pool& pool) {
  // Work items: one query row of a part of a kv head's group of query heads; the groups are
  // cut into parts only as far as needed for two items per thread, counting the groups of all
  // the calls. Several calls (the sequences of a decode step) make one job: one call each
  // cost a job's start and end per sequence, and had each thread wait at every one of them.
  struct call_items {
    shape sh;
    std::int64_t first, parts, per_part;  // the call's first item; parts per group
  };
  std::int64_t groups = 0;
  for (const attention_args& a : calls) groups += a.n_tokens * a.n_head_kv;
  if (groups <= 0) return;
  std::vector<call_items> items(calls.size() + 1);
  std::int64_t n_items = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    call_items& it = items[c];
    it.sh = shape_of(calls[c]);
    it.first = n_items;
    it.parts = std::clamp<std::int64_t>((2 * pool.size() + groups - 1) / groups, 1, it.sh.group);
    it.per_part = (it.sh.group + it.parts - 1) / it.parts;
    n_items += calls[c].n_tokens * calls[c].n_head_kv * it.parts;
  }
  items.back().first = n_items;
  const simd_math* simd = fast_math();
  pool.parallel_for(n_items, [&](std::int64_t begin, std::int64_t end, int) {
    group_scratch w;
    std::size_t c = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      while (i >= items[c + 1].first) ++c;
      const attention_args& a = calls[c];
      const call_items& it = items[c];
      const std::int64_t j = i - it.first;
      const std::int64_t t = j / (a.n_head_kv * it.parts), hk = j / it.parts % a.n_head_kv, part = j % it.parts;
      const std::int64_t h0 = hk * it.sh.group + part * it.per_part, h1 = std::min((hk + 1) * it.sh.group, h0 + it.per_part);
      if (h0 < h1) attend_group(a, it.sh, simd, t, h0, h1, w);
    }
  });
}

void flash_attention(const attention_args& a, thread_pool& pool) {
  if (flash_attention_by_query(a)) {
    flash_attention_by_query(std::span<const attention_args>(&a, 1), pool);
    return;
  }
  const shape sh = shape_of(a);
  const simd_math* simd = fast_math();
  const widened_kv kv = widen_kv(a, sh, simd, pool);
  const tile_visibility vis = tile_visibility_of(a);
  const std::int64_t n_tiles = (a.n_tokens + k_tile - 1) / k_tile;
  pool.parallel_for(n_tiles * a.n_head, [&](std::int64_t begin, std::int64_t end, int) {
    tile_scratch w;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t h = i / n_tiles, t0 = (i % n_tiles) * k_tile;
      attend_tile(a, sh, simd, kv, vis, t0, std::min(k_tile, a.n_tokens - t0), h, w);
    }
  });
}

}  // namespace spite::dispatch::cpu
