// Attention over an F16 KV cache, as the reference computes it without flash attention: the
// query is rounded to f16 for K.q, scores and softmax are F32 (vector exp, sums of 16-lane
// chunks in double), and the probabilities are rounded to f16 for V.p. Reduction orders follow
// the reference's kernels because f16 rounding turns 1-ulp differences into 1e-4 ones.
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
namespace {

// Dot product of two f16-valued vectors (products are exact in float). Lengths that are a
// multiple of 16 go through 16 lane sums (the reference's GEMM path); others through its vector
// dot product: 64-element blocks in four lane groups, the tail summed in double.
float dot_f16(const float* a, const float* b, std::int64_t n, std::int64_t stride_b = 1) {
  if (n % 16 == 0 && stride_b == 1) {
    if (const simd_math* simd = fast_math()) return simd->dot16(a, b, n);
  }
  if (n % 16 == 0) {
    float lanes[16] = {};
    for (std::int64_t i = 0; i < n; ++i) lanes[i % 16] += a[i] * b[i * stride_b];
    return reduce16(lanes);
  }
  const std::int64_t np = n & ~std::int64_t{63};
  double sum = 0.0;
  if (np > 0) {
    float acc[4][16] = {};
    for (std::int64_t i = 0; i < np; ++i) acc[(i / 16) % 4][i % 16] += a[i] * b[i * stride_b];
    for (int l = 0; l < 16; ++l) {
      acc[0][l] += acc[2][l];
      acc[1][l] += acc[3][l];
      acc[0][l] += acc[1][l];
    }
    sum = reduce16(acc[0]);
  }
  for (std::int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i * stride_b]);
  return static_cast<float>(sum);
}

}  // namespace

void attention_many(std::span<const attention_args> calls, thread_pool& pool) {
  const bool by_query = std::all_of(calls.begin(), calls.end(),
                                    [](const attention_args& a) { return a.flash && flash_attention_by_query(a); });
  if (by_query) {
    flash_attention_by_query(calls, pool);
    return;
  }
  for (const attention_args& a : calls) attention(a, pool);
}

void attention(const attention_args& a, thread_pool& pool) {
  if (a.flash) {
    flash_attention(a, pool);
    return;
  }
  const std::int64_t group = a.n_head / a.n_head_kv;  // consecutive query heads share a kv head
  const std::int64_t kv_stride = a.k_stride > 0 ? a.k_stride : a.n_head_kv * a.head_dim, v_stride = a.v_stride > 0 ? a.v_stride : a.n_head_kv * a.head_dim_v;
  const std::int64_t dk = a.head_dim, dv = a.head_dim_v;
  const simd_math* simd = fast_math();
  const bool simd_keys = simd != nullptr && dk % 16 == 0;
  // The reference's KV view is padded (to 256 cells); padding cells are masked and add zeros,
  // but they decide which reduction path and chunking apply, so they are reproduced.
  constexpr std::int64_t k_cache_pad = 256;
  const std::int64_t n_kv = (a.n_kv + k_cache_pad - 1) / k_cache_pad * k_cache_pad;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  // V.p is the reference's dot product over the keys: 16 lane sums (lane j % 16 takes key j,
  // keys in order). Several query rows (prefill) share one widened copy of the keys and a
  // transposed one of the values, made in parallel, so that V.p walks keys contiguously. One
  // query row (decode) reads the f16 cache where it lies: keys widened inside the dot product,
  // value rows added into the lane sums, keys with a zero probability (masked, padding,
  // underflowed: exact zeros) skipped, nothing copied per call.
  const bool wide = a.n_tokens > 1;
  std::vector<float> k_wide, vt;
  if (wide) {
    k_wide.resize(static_cast<std::size_t>(a.n_kv * kv_stride));
    vt.assign(static_cast<std::size_t>(n_kv * v_stride), 0.0f);
    pool.parallel_for(a.n_kv, [&](std::int64_t begin, std::int64_t end, int) {
      std::vector<float> row(static_cast<std::size_t>(v_stride));
      const auto widen = [&](const std::uint16_t* h, float* out, std::int64_t n) {
        if (simd != nullptr) {
          simd->widen(h, out, n);
        } else {
          for (std::int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
        }
      };
      widen(a.k + begin * kv_stride, k_wide.data() + begin * kv_stride, (end - begin) * kv_stride);
      for (std::int64_t j = begin; j < end; ++j) {
        widen(a.v + j * v_stride, row.data(), v_stride);
        for (std::int64_t c = 0; c < v_stride; ++c) vt[static_cast<std::size_t>(c * n_kv + j)] = row[static_cast<std::size_t>(c)];
      }
    });
  }
  pool.parallel_for(a.n_tokens * a.n_head, [&](std::int64_t begin, std::int64_t end, int) {
    std::vector<float> q(static_cast<std::size_t>(dk)), key(static_cast<std::size_t>(dk)), p(static_cast<std::size_t>(n_kv));
    std::vector<float> lanes(static_cast<std::size_t>(16 * dv)), value(static_cast<std::size_t>(dv));
    for (std::int64_t th = begin; th < end; ++th) {
      const std::int64_t t = th / a.n_head, h = th % a.n_head, hk = h / group;
      const float* qs = a.q + (t * a.n_head + h) * dk;
      if (simd != nullptr) {
        simd->round_f16(qs, q.data(), dk);
      } else {
        for (std::int64_t d = 0; d < dk; ++d) q[static_cast<std::size_t>(d)] = fp16_to_fp32(fp32_to_fp16(qs[d]));
      }
      float max = neg_inf;
      for (std::int64_t j = a.n_kv; j < n_kv; ++j) p[static_cast<std::size_t>(j)] = neg_inf;
      for (std::int64_t j = 0; j < a.n_kv; ++j) {
        if (key_masked(a, t, j)) {
          p[static_cast<std::size_t>(j)] = neg_inf;
          continue;
        }
        const std::uint16_t* k = a.k + j * kv_stride + hk * dk;
        float s;
        if (wide) {
          s = dot_f16(k_wide.data() + j * kv_stride + hk * dk, q.data(), dk);
        } else if (simd_keys) {
          s = simd->dot16_h(k, q.data(), dk);
        } else {
          for (std::int64_t d = 0; d < dk; ++d) key[static_cast<std::size_t>(d)] = fp16_to_fp32(k[d]);
          s = dot_f16(key.data(), q.data(), dk);
        }
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s * (1.0f / a.softcap));
        s *= a.scale;
        p[static_cast<std::size_t>(j)] = s;
        max = std::max(max, s);
      }
      const float sink = a.sinks != nullptr ? a.sinks[h] : neg_inf;
      max = std::max(max, sink);
      // exp and the sum: whole chunks of 16 keys with the vector exp (each chunk reduced, then
      // added in double), the remaining keys one by one with the C library's exp.
      double sum = 0.0;
      const std::int64_t whole = n_kv / 16 * 16;
      for (std::int64_t c = 0; c < whole; c += 16) {
        float* chunk = p.data() + c;
        if (simd != nullptr) {
          sum += simd->exp16(chunk, max);
        } else {
          for (int l = 0; l < 16; ++l) chunk[l] = ref_expf(chunk[l] - max);
          sum += reduce16(chunk);
        }
      }
      for (std::int64_t j = whole; j < n_kv; ++j) {
        const float x = p[static_cast<std::size_t>(j)];
        const float e = x == neg_inf ? 0.0f : std::exp(x - max);
        p[static_cast<std::size_t>(j)] = e;
        sum += e;
      }
      if (a.sinks != nullptr) sum += std::exp(sink - max);  // the reference adds the sink with the C library's exp
      const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
      for (std::int64_t j = 0; j < a.n_kv; ++j) p[static_cast<std::size_t>(j)] *= inv;
      if (simd != nullptr) {
        simd->round_f16(p.data(), p.data(), a.n_kv);
      } else {
        for (std::int64_t j = 0; j < a.n_kv; ++j) p[static_cast<std::size_t>(j)] = fp16_to_fp32(fp32_to_fp16(p[static_cast<std::size_t>(j)]));
      }
      float* o = a.out + (t * a.n_head + h) * dv;
      if (wide) {
        for (std::int64_t d = 0; d < dv; ++d) o[d] = dot_f16(vt.data() + (hk * dv + d) * n_kv, p.data(), n_kv);
        continue;
      }
      std::fill(lanes.begin(), lanes.end(), 0.0f);
      for (std::int64_t j = 0; j < a.n_kv; ++j) {
        const float pj = p[static_cast<std::size_t>(j)];
        if (pj == 0.0f) continue;
        float* lane = lanes.data() + (j % 16) * dv;
        const std::uint16_t* v = a.v + j * v_stride + hk * dv;
        if (simd != nullptr) {
          simd->axpy_h(lane, v, pj, dv);
        } else {
          for (std::int64_t d = 0; d < dv; ++d) lane[d] += pj * fp16_to_fp32(v[d]);
        }
      }
      for (std::int64_t d = 0; d < dv; ++d) {
        float column[16];
        for (int l = 0; l < 16; ++l) column[l] = lanes[static_cast<std::size_t>(l * dv + d)];
        o[d] = reduce16(column);
      }
    }
  });
}

}  // namespace spite::dispatch::cpu
