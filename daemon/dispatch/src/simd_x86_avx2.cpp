// SIMD versions of the exact matmuls (ref_dot_*.cpp) for x86-64 processors with AVX2, FMA and
// F16C: Q8_0, Q4_0, Q4_K and Q6_K, the types of the common Q8_0 / Q4_0 / Q4_K_M files. Each
// computes the same exact integer block sums and then the same float operations in the same
// order as its reference, so results are bit-identical to it (tests/unit/dispatch/
// cpu_kernels_test.cpp checks that on odd shapes). What changes: 32 products per instruction,
// 8 output rows per float vector for the repacked types, weight blocks unpacked in registers
// and reused across the activation rows of a batch.
//
// The kernels carry a target attribute instead of the file a -mavx2 flag: header code
// (std::vector, ...) instantiated here must stay baseline code, as the linker may keep this copy
// for the whole program.
#include "ref_quant.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "spite/core/half.hpp"

namespace spite::dispatch::cpu {
namespace {

#define SPITE_AVX2 __attribute__((target("avx2,fma,f16c")))

constexpr int qk0 = gguf::qk_legacy;
constexpr int qkk = gguf::qk_k;
using gguf::tensor_type;

// ---- building blocks

// Eight vectors of eight int32 partial sums to one vector whose lane r is the total of vector r.
SPITE_AVX2 inline __m256i transpose_sum8(const __m256i* v) {
  const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i s23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i s67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23);  // [r0..r3 low halves | r0..r3 high halves]
  const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// Unsigned bytes times signed bytes: int32 lane j holds the sum of products 4j..4j+3 (exact:
// the int16 pair sums cannot saturate for quants below 64 or |weights| <= 128 with |x| <= 127).
SPITE_AVX2 inline __m256i dot_lanes(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The same, each int16 pair sum multiplied by `scales` first.
SPITE_AVX2 inline __m256i dot_lanes_scaled(__m256i u, __m256i s, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales);
}

// The 32 quants of a Q4_0 block (0..15, element order: low nibbles, then high nibbles).
SPITE_AVX2 inline __m256i nibbles32(const std::uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

SPITE_AVX2 inline __m256 halves8(const gguf::half_bits* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

inline float reduce8_vec(__m256 v) {
  alignas(32) float lanes[8];
  std::memcpy(lanes, &v, sizeof lanes);
  return reduce8(lanes);
}

// Activation block scales as floats and the Q4_0 offset sums, once per batch.
struct q8_0_batch {
  std::vector<gguf::block_q8_0> q;
  std::vector<float> d;
  std::vector<int> sum;
  q8_0_batch(const float* x, std::int64_t in, std::int64_t n_tokens) {
    const std::int64_t nb = in / qk0;
    q.resize(static_cast<std::size_t>(nb * n_tokens));
    d.resize(q.size());
    sum.resize(q.size());
    for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_0(x + t * in, q.data() + t * nb, in);
    for (std::size_t i = 0; i < q.size(); ++i) {
      d[i] = fp16_to_fp32(q[i].d);
      int s = 0;
      for (const std::int8_t v : q[i].qs) s += v;
      sum[i] = s;
    }
  }
};

// ---- Q8_0 (reference: dot_q8_0 in ref_dot_legacy.cpp, 8 lanes of 4 products per block)

template <int K>
SPITE_AVX2 void q8_0_row_tokens(const gguf::block_q8_0* w, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0,
                                std::int64_t out, std::int64_t o, float* y) {
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i wabs = _mm256_sign_epi8(wv, wv);
    const float dw = fp16_to_fp32(w[b].d);
    for (int k = 0; k < K; ++k) {
      const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
      const __m256i lanes = dot_lanes(wabs, _mm256_sign_epi8(xv, wv));
      acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d[i]), _mm256_cvtepi32_ps(lanes), acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) y[(t0 + k) * out + o] = reduce8_vec(acc[k]);
}

void matmul_q8_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens);
  const std::int64_t out = w.out;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t o = begin; o < end; ++o) {
      const auto* row = reinterpret_cast<const gguf::block_q8_0*>(w.row(o));
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) q8_0_row_tokens<4>(row, xb, nb, t, out, o, y);
      for (; t < n_tokens; ++t) q8_0_row_tokens<1>(row, xb, nb, t, out, o, y);
    }
  });
}

// ---- Q4_0 repacked (reference: dot32_repacked in ref_dot_repack.cpp, one lane per output and
// one fma per block). Eight rows at a time, every activation row against each unpacked block.

SPITE_AVX2 void q4_0_rows8(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens,
                           float* acc, float* y) {
  const gguf::block_q4_0* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = reinterpret_cast<const gguf::block_q4_0*>(w.row(o + r));
  for (std::int64_t t = 0; t < n_tokens; ++t) _mm256_storeu_ps(acc + 8 * t, _mm256_setzero_ps());
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i wq[8];
    alignas(16) gguf::half_bits dh[8];
    for (int r = 0; r < 8; ++r) {
      wq[r] = nibbles32(rows[r][b].qs);
      dh[r] = rows[r][b].d;
    }
    const __m256 dw = halves8(dh);
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const std::size_t i = static_cast<std::size_t>(t * nb + b);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
      __m256i p[8];
      for (int r = 0; r < 8; ++r) p[r] = dot_lanes(wq[r], xv);
      // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
      const __m256i isum = _mm256_sub_epi32(transpose_sum8(p), _mm256_set1_epi32(8 * xb.sum[i]));
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xb.d[i]));
      _mm256_storeu_ps(acc + 8 * t, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, _mm256_loadu_ps(acc + 8 * t)));
    }
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) std::memcpy(y + t * w.out + o, acc + 8 * t, 8 * sizeof(float));
}

void matmul_q4_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_0)(w, x, n_tokens, y, pool);
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens);
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    std::vector<float> acc(static_cast<std::size_t>(8 * n_tokens));
    for (std::int64_t g = begin; g < end; ++g) q4_0_rows8(w, 8 * g, xb, nb, n_tokens, acc.data(), y);
  });
}

// ---- Q4_K repacked (reference: dot_q4_K_repacked, one lane per output; the GEMV rows one fma
// per super-block, the GEMM rows one per pair of 32-element sub-blocks; mins separately).

struct q4_K_block8 {
  alignas(32) std::uint8_t q[8][qkk];  // row r, element order, 0..15
  alignas(32) std::int32_t mins[8][8];  // [sub-block][row]
  std::uint8_t sc[8][8];                // [row][sub-block]
  __m256 d, dmin;
};

SPITE_AVX2 void unpack_q4_K_block8(const gguf::block_q4_K* const* rows, std::int64_t b, q4_K_block8& u) {
  alignas(16) gguf::half_bits dh[8], mh[8];
  const __m256i m = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < 8; ++r) {
    const gguf::block_q4_K& blk = rows[r][b];
    std::uint8_t mn[8];
    unpack_scales_mins_k4(blk.scales, u.sc[r], mn);
    for (int g = 0; g < 8; ++g) u.mins[g][r] = mn[g];
    dh[r] = blk.d;
    mh[r] = blk.dmin;
    for (int j = 0; j < 4; ++j) {  // element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: high
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * j));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q[r] + 64 * j), _mm256_and_si256(v, m));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.q[r] + 64 * j + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
    }
  }
  u.d = halves8(dh);
  u.dmin = halves8(mh);
}

SPITE_AVX2 void q4_K_rows8(const weight& w, std::int64_t o, const gguf::block_q8_K* xq, std::int64_t nb,
                           std::int64_t n_tokens, std::int64_t ng, float* acc, float* acc_min, float* y,
                           q4_K_block8& u) {
  const gguf::block_q4_K* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = reinterpret_cast<const gguf::block_q4_K*>(w.row(o + r));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    _mm256_storeu_ps(acc + 8 * t, _mm256_setzero_ps());
    _mm256_storeu_ps(acc_min + 8 * t, _mm256_setzero_ps());
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    unpack_q4_K_block8(rows, b, u);
    __m256i mins[8];
    for (int g = 0; g < 8; ++g) mins[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(u.mins[g]));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      const gguf::block_q8_K& x = xq[t * nb + b];
      const __m256 xd = _mm256_set1_ps(x.d);
      const __m256 ds = _mm256_mul_ps(u.d, xd);
      const __m256 dm = _mm256_mul_ps(u.dmin, xd);
      __m256 a = _mm256_loadu_ps(acc + 8 * t), am = _mm256_loadu_ps(acc_min + 8 * t);
      auto min_sum = [&](int g) SPITE_AVX2 {  // sub-block g's mins (rows as lanes) times its activation sum
        return _mm256_mullo_epi32(mins[g], _mm256_set1_epi32(x.bsums[2 * g] + x.bsums[2 * g + 1]));
      };
      const bool pairs = t < ng;  // GEMM rows: one fma per pair of sub-blocks
      __m256i all[8];
      for (int r = 0; r < 8; ++r) all[r] = _mm256_setzero_si256();
      for (int pr = 0; pr < 4; ++pr) {
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * pr));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * pr + 32));
        __m256i tot[8];
        for (int r = 0; r < 8; ++r) {
          const auto* q = reinterpret_cast<const __m256i*>(u.q[r] + 64 * pr);
          tot[r] = _mm256_add_epi32(dot_lanes_scaled(_mm256_load_si256(q), x0, _mm256_set1_epi16(u.sc[r][2 * pr])),
                                    dot_lanes_scaled(_mm256_load_si256(q + 1), x1, _mm256_set1_epi16(u.sc[r][2 * pr + 1])));
        }
        if (pairs) {
          a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), ds, a);
          am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(min_sum(2 * pr), min_sum(2 * pr + 1))), dm, am);
        } else {
          for (int r = 0; r < 8; ++r) all[r] = _mm256_add_epi32(all[r], tot[r]);
        }
      }
      if (!pairs) {
        __m256i ms = min_sum(0);
        for (int g = 1; g < 8; ++g) ms = _mm256_add_epi32(ms, min_sum(g));
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(all)), ds, a);
        am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), dm, am);
      }
      _mm256_storeu_ps(acc + 8 * t, a);
      _mm256_storeu_ps(acc_min + 8 * t, am);
    }
  }
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    _mm256_storeu_ps(y + t * w.out + o, _mm256_sub_ps(_mm256_loadu_ps(acc + 8 * t), _mm256_loadu_ps(acc_min + 8 * t)));
  }
}

void matmul_q4_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_K)(w, x, n_tokens, y, pool);
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_rows_q8_K(w, x, n_tokens, true, xq);
  const std::int64_t ng = gemm_rows(n_tokens);
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    std::vector<float> acc(static_cast<std::size_t>(16 * n_tokens));
    auto u = std::make_unique<q4_K_block8>();
    for (std::int64_t g = begin; g < end; ++g) {
      q4_K_rows8(w, 8 * g, xq.data(), nb, n_tokens, ng, acc.data(), acc.data() + 8 * n_tokens, y, *u);
    }
  });
}

// ---- Q6_K (reference: dot_row<q6_K> in ref_dot_kquants.cpp: 8 lanes, unsigned quants times
// the 16-element scales, the -32 offset through the activation sums, one fma per super-block).

struct q6_K_row {
  std::vector<std::uint8_t> q;  // element order, 0..63
  std::vector<float> d;
  explicit q6_K_row(std::int64_t in) : q(static_cast<std::size_t>(in)), d(static_cast<std::size_t>(in / qkk)) {}
};

SPITE_AVX2 void unpack_q6_K_row(const gguf::block_q6_K* w, std::int64_t nb, std::uint8_t* q) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  for (std::int64_t b = 0; b < nb; ++b) {
    // Element 128c + 32k + l: nibble of ql[64c + 32(k & 1) + l] (low for k < 2) with bits
    // 2k..2k+1 of qh[32c + l] above it.
    for (int c = 0; c < 2; ++c) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * c));
      for (int k = 0; k < 4; ++k) {
        const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * c + 32 * (k & 1)));
        const __m256i nib = k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m2);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * qkk + 128 * c + 32 * k),
                            _mm256_or_si256(nib, _mm256_slli_epi16(hi, 4)));
      }
    }
  }
}

SPITE_AVX2 float q6_K_dot(const gguf::block_q6_K* w, const std::uint8_t* q, const float* dw,
                          const gguf::block_q8_K* x, std::int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* sc = w[b].scales;
    __m256i lanes = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * qkk + 32 * g));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * g));
      lanes = _mm256_add_epi32(lanes, dot_lanes_scaled(qv, xv, scales));
    }
    // lane L -= 32 * (sc[2L] * bsum[2L] + sc[2L+1] * bsum[2L+1])
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    lanes = _mm256_sub_epi32(lanes, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x[b].d * dw[b]), _mm256_cvtepi32_ps(lanes), acc);
  }
  return reduce8_vec(acc);
}

void matmul_q6_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
  const std::int64_t out = w.out;
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    q6_K_row r(w.in);
    for (std::int64_t o = begin; o < end; ++o) {
      const auto* row = reinterpret_cast<const gguf::block_q6_K*>(w.row(o));
      unpack_q6_K_row(row, nb, r.q.data());
      for (std::int64_t b = 0; b < nb; ++b) r.d[static_cast<std::size_t>(b)] = fp16_to_fp32(row[b].d);
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = q6_K_dot(row, r.q.data(), r.d.data(), xq.data() + t * nb, nb);
    }
  });
}

constexpr exact_matmul k_table[] = {
    {tensor_type::q8_0, matmul_q8_0},
    {tensor_type::q4_0, matmul_q4_0},
    {tensor_type::q4_K, matmul_q4_K},
    {tensor_type::q6_K, matmul_q6_K},
};

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

}  // namespace

std::span<const exact_matmul> fast_matmuls() {
  static const bool usable = has_avx2();
  if (!usable) return {};
  return k_table;
}

}  // namespace spite::dispatch::cpu

#else  // not x86-64: the reference kernels only

namespace spite::dispatch::cpu {
std::span<const exact_matmul> fast_matmuls() { return {}; }
}  // namespace spite::dispatch::cpu

#endif
