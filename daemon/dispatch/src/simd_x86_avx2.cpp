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

SPITE_AVX2 inline __m128i insert_half(__m128i h, gguf::half_bits v, int r) {
  switch (r) {
    case 0: return _mm_insert_epi16(h, v, 0);
    case 1: return _mm_insert_epi16(h, v, 1);
    case 2: return _mm_insert_epi16(h, v, 2);
    case 3: return _mm_insert_epi16(h, v, 3);
    case 4: return _mm_insert_epi16(h, v, 4);
    case 5: return _mm_insert_epi16(h, v, 5);
    case 6: return _mm_insert_epi16(h, v, 6);
    default: return _mm_insert_epi16(h, v, 7);
  }
}

// The f16 scale that starts block b of eight rows `stride` bytes apart, as floats.
SPITE_AVX2 inline __m256 gather_scales8(const std::byte* row0, std::size_t stride, std::size_t block_offset) {
  const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(static_cast<int>(stride)));
  const __m256i words = _mm256_and_si256(
      _mm256_i32gather_epi32(reinterpret_cast<const int*>(row0 + block_offset), offsets, 1), _mm256_set1_epi32(0xFFFF));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(words, words), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

SPITE_AVX2 inline float reduce8_vec(__m256 v) {
  alignas(32) float lanes[8];
  std::memcpy(lanes, &v, sizeof lanes);
  return reduce8(lanes);
}

// Decode streams each weight once. A group of rows is a contiguous region and the next group
// follows it, so while one group is multiplied the next one is prefetched at the same pace:
// rows of a few KiB are too short for the hardware prefetchers to ramp up on by themselves.
struct next_group_prefetch {
  const char* next;
  std::size_t per_block;  // bytes of the next group to touch per block step
  next_group_prefetch(const std::byte* group_end, std::size_t group_bytes, std::int64_t nb)
      : next(reinterpret_cast<const char*>(group_end)), per_block((group_bytes + static_cast<std::size_t>(nb) - 1) / static_cast<std::size_t>(nb)) {}
  SPITE_AVX2 void step(std::int64_t b) const {
    const std::size_t begin = static_cast<std::size_t>(b) * per_block;
    for (std::size_t off = begin; off < begin + per_block; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
  }
};

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

// R rows times K activation rows: several rows in flight keep enough loads outstanding to stream
// from memory at full speed, several activation rows reuse each loaded weight block.
template <int R, int K>
SPITE_AVX2 void q8_0_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const gguf::block_q8_0* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_q8_0*>(w.row(o + r));
  __m256 acc[R][K];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    for (int r = 0; r < R; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r][b].qs));
      const __m256i wabs = _mm256_sign_epi8(wv, wv);
      const float dw = _cvtsh_ss(rows[r][b].d);
      for (int k = 0; k < K; ++k) {
        const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
        const __m256i lanes = dot_lanes(wabs, _mm256_sign_epi8(xv, wv));
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d[i]), _mm256_cvtepi32_ps(lanes), acc[r][k]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8_vec(acc[r][k]);
  }
}

template <int R>
void q8_0_rows(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, float* y) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) q8_0_tile<R, 4>(w, o, xb, nb, t, y);
  for (; t < n_tokens; ++t) q8_0_tile<R, 1>(w, o, xb, nb, t, y);
}

void matmul_q8_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens);
  const std::int64_t groups = (w.out + 3) / 4;
  pool.parallel_for(groups, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::int64_t o = 4 * g;
      if (o + 4 <= w.out) {
        q8_0_rows<4>(w, o, xb, nb, n_tokens, y);
      } else {
        for (std::int64_t r = o; r < w.out; ++r) q8_0_rows<1>(w, r, xb, nb, n_tokens, y);
      }
    }
  });
}

// ---- Q4_0 repacked (reference: dot32_repacked in ref_dot_repack.cpp, one lane per output and
// one fma per block). Eight rows at a time: unpacked once into a buffer that stays in L1, then
// dotted with every activation row of the batch.

struct rows8_buffer {
  std::vector<std::uint8_t> q;  // row r at r * in, element order
  std::vector<float> d;         // block b, row r at 8 * b + r
  std::vector<float> dmin;      // (Q4_K) as d
  std::vector<std::int16_t> sc;  // (Q4_K) row r's sub-block scales at r * in / 32
  std::vector<std::int32_t> mins;  // (Q4_K) block b, sub-block g, row r at 64 * b + 8 * g + r
  std::vector<float> acc;        // per token, 8 lanes (two sets for Q4_K)
};

SPITE_AVX2 void unpack_q4_0_rows8(const weight& w, std::int64_t o, rows8_buffer& u) {
  const std::int64_t nb = w.in / qk0;
  for (int r = 0; r < 8; ++r) {
    const auto* row = reinterpret_cast<const gguf::block_q4_0*>(w.row(o + r));
    std::uint8_t* q = u.q.data() + r * w.in;
    for (std::int64_t b = 0; b < nb; ++b) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qk0 * b), nibbles32(row[b].qs));
      u.d[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].d);
    }
  }
}

SPITE_AVX2 void q4_0_dot_rows8(const rows8_buffer& u, std::int64_t in, const q8_0_batch& xb, std::int64_t t, float* y8) {
  const std::int64_t nb = in / qk0;
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
    __m256i p[8];
    for (int r = 0; r < 8; ++r) {
      p[r] = dot_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u.q.data() + r * in + qk0 * b)), xv);
    }
    // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
    const __m256i isum = _mm256_sub_epi32(transpose_sum8(p), _mm256_set1_epi32(8 * xb.sum[i]));
    const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(u.d.data() + 8 * b), _mm256_set1_ps(xb.d[i]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
  }
  _mm256_storeu_ps(y8, acc);
}

// Decode: few activation rows, so each block is unpacked in registers right where it is used,
// 128 bits at a time (only the block total matters here, not the lane split).
SPITE_AVX2 void q4_0_fused_rows8(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t t, float* y8) {
  const std::int64_t nb = w.in / qk0;
  const std::byte* row0 = w.row(o);
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i ones = _mm_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + 8), 8 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t == 0) ahead.step(b);
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.q[i].qs));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.q[i].qs + 16));
    __m128i p[8];
    __m128i h = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      const auto& blk = reinterpret_cast<const gguf::block_q4_0*>(row0 + r * w.row_bytes)[b];
      h = insert_half(h, blk.d, r);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
      const __m128i lo = _mm_maddubs_epi16(_mm_and_si128(v, m), x0);
      const __m128i hi = _mm_maddubs_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m), x1);
      p[r] = _mm_madd_epi16(_mm_add_epi16(lo, hi), ones);  // |pair sums| <= 2 * 2 * 15 * 127
    }
    const __m128i s0123 = _mm_hadd_epi32(_mm_hadd_epi32(p[0], p[1]), _mm_hadd_epi32(p[2], p[3]));
    const __m128i s4567 = _mm_hadd_epi32(_mm_hadd_epi32(p[4], p[5]), _mm_hadd_epi32(p[6], p[7]));
    const __m256i isum = _mm256_sub_epi32(_mm256_set_m128i(s4567, s0123), _mm256_set1_epi32(8 * xb.sum[i]));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(xb.d[i]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
  }
  _mm256_storeu_ps(y8, acc);
}

// ---- Q4_0 packed at load time (pack_weight): per group of 8 rows and per block, the 8 scales
// (f16), then 4 chunks of 32 bytes where bytes 4r..4r+3 of chunk j are row r's qs[4j..4j+3]
// (elements 4j..4j+3 in the low nibbles, 16+4j..16+4j+3 in the high ones). A chunk times the
// 4 activation bytes broadcast to every lane gives each row's partial sum in its own lane: no
// horizontal sums, and the scales are one load.
constexpr std::size_t q4_0_packed_block = 16 + 128;

std::size_t pack_q4_0(weight& w) {
  const std::int64_t nb = w.in / qk0, groups = w.out / 8;
  const std::size_t bytes = static_cast<std::size_t>(groups * nb) * q4_0_packed_block;
  auto buffer = std::make_shared_for_overwrite<std::byte[]>(bytes);
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t b = 0; b < nb; ++b) {
      std::byte* dst = buffer.get() + static_cast<std::size_t>(g * nb + b) * q4_0_packed_block;
      for (int r = 0; r < 8; ++r) {
        const auto& blk = reinterpret_cast<const gguf::block_q4_0*>(w.row(8 * g + r))[b];
        std::memcpy(dst + 2 * r, &blk.d, 2);
        for (int j = 0; j < 4; ++j) std::memcpy(dst + 16 + 32 * j + 4 * r, blk.qs + 4 * j, 4);
      }
    }
  }
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  return bytes;
}

inline std::int32_t load_u32(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int K>
SPITE_AVX2 void q4_0_packed_tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                                 std::int64_t out, float* y) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * q4_0_packed_block,
                                  static_cast<std::size_t>(nb) * q4_0_packed_block, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * q4_0_packed_block;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    __m256i lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * j));
      lo[j] = _mm256_and_si256(v, m);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    }
    for (int k = 0; k < K; ++k) {
      const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
      const std::int8_t* xq = xb.q[i].qs;
      // Eight int16 pair sums of at most 2 * 15 * 127 each: no overflow before the widening.
      __m256i s16 = _mm256_maddubs_epi16(lo[0], _mm256_set1_epi32(load_u32(xq)));
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[0], _mm256_set1_epi32(load_u32(xq + 16))));
      for (int j = 1; j < 4; ++j) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo[j], _mm256_set1_epi32(load_u32(xq + 4 * j))));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[j], _mm256_set1_epi32(load_u32(xq + 16 + 4 * j))));
      }
      // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
      const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), _mm256_set1_epi32(8 * xb.sum[i]));
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d[i])), acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out, acc[k]);
}

void matmul_q4_0_packed(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::byte* group = w.packed + static_cast<std::size_t>(g * nb) * q4_0_packed_block;
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) q4_0_packed_tile<4>(group, nb, xb, t, w.out, y + 8 * g);
      for (; t < n_tokens; ++t) q4_0_packed_tile<1>(group, nb, xb, t, w.out, y + 8 * g);
    }
  });
}

void matmul_q4_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_0)(w, x, n_tokens, y, pool);
  const q8_0_batch xb(x, w.in, n_tokens);
  if (w.packed != nullptr) return matmul_q4_0_packed(w, xb, n_tokens, y, pool);
  if (n_tokens < 4) {
    pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) {
        for (std::int64_t t = 0; t < n_tokens; ++t) q4_0_fused_rows8(w, 8 * g, xb, t, y + t * w.out + 8 * g);
      }
    });
    return;
  }
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    rows8_buffer u;
    u.q.resize(static_cast<std::size_t>(8 * w.in));
    u.d.resize(static_cast<std::size_t>(w.in / qk0 * 8));
    for (std::int64_t g = begin; g < end; ++g) {
      unpack_q4_0_rows8(w, 8 * g, u);
      for (std::int64_t t = 0; t < n_tokens; ++t) q4_0_dot_rows8(u, w.in, xb, t, y + t * w.out + 8 * g);
    }
  });
}

// The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K super-block from its 12 packed
// bytes: j < 4 in the low 6 bits of bytes j / j + 4; j >= 4 the low / high nibble of byte j + 4
// with the top two bits of bytes j - 4 / j above it.
inline void scales_mins_k4(const std::uint8_t* packed, std::uint32_t* out) {
  std::uint32_t u[3];
  std::memcpy(u, packed, sizeof u);
  constexpr std::uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  out[0] = u[0] & low6;
  out[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  out[2] = u[1] & low6;
  out[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
}

// ---- Q4_K repacked (reference: dot_q4_K_repacked, one lane per output; the GEMV rows one fma
// per super-block, the GEMM rows one per pair of 32-element sub-blocks; mins separately).

SPITE_AVX2 void unpack_q4_K_rows8(const weight& w, std::int64_t o, rows8_buffer& u) {
  const std::int64_t nb = w.in / qkk;
  const __m256i m = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < 8; ++r) {
    const auto* row = reinterpret_cast<const gguf::block_q4_K*>(w.row(o + r));
    std::uint8_t* q = u.q.data() + r * w.in;
    std::int16_t* sc = u.sc.data() + r * (w.in / 32);
    for (std::int64_t b = 0; b < nb; ++b) {
      std::uint32_t sm[4];
      scales_mins_k4(row[b].scales, sm);
      const auto* s8 = reinterpret_cast<const std::uint8_t*>(sm);
      const auto* m8 = s8 + 8;
      for (int g = 0; g < 8; ++g) {
        sc[8 * b + g] = s8[g];
        u.mins[static_cast<std::size_t>(64 * b + 8 * g + r)] = m8[g];
      }
      u.d[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].d);
      u.dmin[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].dmin);
      for (int j = 0; j < 4; ++j) {  // element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: high
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs + 32 * j));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qkk * b + 64 * j), _mm256_and_si256(v, m));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qkk * b + 64 * j + 32),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
      }
    }
  }
}

// Sub-blocks [g0, g0 + count) of super-block b of row r, each times its scale, as 8 lanes.
SPITE_AVX2 inline __m256i q4_K_lanes(const rows8_buffer& u, std::int64_t in, int r, std::int64_t b, int g0, int count,
                                     const std::int8_t* x) {
  const std::uint8_t* q = u.q.data() + r * in + qkk * b;
  const std::int16_t* sc = u.sc.data() + r * (in / 32) + 8 * b;
  __m256i tot = _mm256_setzero_si256();
  for (int g = g0; g < g0 + count; ++g) {
    tot = _mm256_add_epi32(tot, dot_lanes_scaled(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * g)),
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * g)),
                                                 _mm256_set1_epi16(sc[g])));
  }
  return tot;
}

SPITE_AVX2 void q4_K_dot_rows8(const rows8_buffer& u, std::int64_t in, const gguf::block_q8_K* x, bool pairs, float* y8) {
  const std::int64_t nb = in / qkk;
  __m256 a = _mm256_setzero_ps(), am = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const __m256 xd = _mm256_set1_ps(x[b].d);
    const __m256 ds = _mm256_mul_ps(_mm256_loadu_ps(u.d.data() + 8 * b), xd);
    const __m256 dm = _mm256_mul_ps(_mm256_loadu_ps(u.dmin.data() + 8 * b), xd);
    // Sub-block g's mins (rows as lanes) times its activation sum.
    auto min_sum = [&](int g) SPITE_AVX2 {
      const auto* mn = reinterpret_cast<const __m256i*>(u.mins.data() + 64 * b + 8 * g);
      return _mm256_mullo_epi32(_mm256_loadu_si256(mn), _mm256_set1_epi32(x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]));
    };
    __m256i tot[8];
    if (pairs) {  // GEMM rows: one fma per pair of sub-blocks
      for (int pr = 0; pr < 4; ++pr) {
        for (int r = 0; r < 8; ++r) tot[r] = q4_K_lanes(u, in, r, b, 2 * pr, 2, x[b].qs);
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), ds, a);
        am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(min_sum(2 * pr), min_sum(2 * pr + 1))), dm, am);
      }
    } else {
      for (int r = 0; r < 8; ++r) tot[r] = q4_K_lanes(u, in, r, b, 0, 8, x[b].qs);
      __m256i ms = min_sum(0);
      for (int g = 1; g < 8; ++g) ms = _mm256_add_epi32(ms, min_sum(g));
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), ds, a);
      am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), dm, am);
    }
  }
  _mm256_storeu_ps(y8, _mm256_sub_ps(a, am));
}

// Decode: each super-block unpacked in registers where it is used (GEMV semantics only, which
// is what batches below the GEMM split get).
SPITE_AVX2 void q4_K_fused_rows8(const weight& w, std::int64_t o, const gguf::block_q8_K* x, bool first, float* y8) {
  const std::int64_t nb = w.in / qkk;
  const std::byte* row0 = w.row(o);
  const __m256i m = _mm256_set1_epi8(0x0F);
  // Byte pairs (2g, 2g + 1) repeated: broadcasts int16 element g of a 128-bit lane.
  alignas(32) static constexpr std::uint8_t pick[8][32] = {
#define SPITE_PICK(g) {2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
                       2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
                       2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1}
      SPITE_PICK(0), SPITE_PICK(1), SPITE_PICK(2), SPITE_PICK(3), SPITE_PICK(4), SPITE_PICK(5), SPITE_PICK(6), SPITE_PICK(7)};
#undef SPITE_PICK
  __m256 a = _mm256_setzero_ps(), am = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + 8), 8 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (first) ahead.step(b);
    const gguf::block_q8_K& xb = x[b];
    alignas(16) std::int16_t pair_sums[8];
    for (int g = 0; g < 8; ++g) pair_sums[g] = static_cast<std::int16_t>(xb.bsums[2 * g] + xb.bsums[2 * g + 1]);
    const __m128i bp = _mm_load_si128(reinterpret_cast<const __m128i*>(pair_sums));
    __m256i tot[8];
    __m128i mins[8];
    __m128i dh = _mm_setzero_si128(), mh = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      const auto& blk = reinterpret_cast<const gguf::block_q4_K*>(row0 + r * w.row_bytes)[b];
      dh = insert_half(dh, blk.d, r);
      mh = insert_half(mh, blk.dmin, r);
      std::uint32_t sm[4];
      scales_mins_k4(blk.scales, sm);
      const __m128i sm16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm));
      const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm16));
      mins[r] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm16, 8)), bp);
      __m256i t = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {  // element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: high
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * j));
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j + 32));
        const __m256i s0 = _mm256_shuffle_epi8(sc, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick[2 * j])));
        const __m256i s1 = _mm256_shuffle_epi8(sc, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick[2 * j + 1])));
        t = _mm256_add_epi32(t, dot_lanes_scaled(_mm256_and_si256(v, m), x0, s0));
        t = _mm256_add_epi32(t, dot_lanes_scaled(_mm256_and_si256(_mm256_srli_epi16(v, 4), m), x1, s1));
      }
      tot[r] = t;
    }
    const __m128i m0123 = _mm_hadd_epi32(_mm_hadd_epi32(mins[0], mins[1]), _mm_hadd_epi32(mins[2], mins[3]));
    const __m128i m4567 = _mm_hadd_epi32(_mm_hadd_epi32(mins[4], mins[5]), _mm_hadd_epi32(mins[6], mins[7]));
    const __m256 xd = _mm256_set1_ps(xb.d);
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), _mm256_mul_ps(_mm256_cvtph_ps(dh), xd), a);
    am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(m4567, m0123)), _mm256_mul_ps(_mm256_cvtph_ps(mh), xd), am);
  }
  _mm256_storeu_ps(y8, _mm256_sub_ps(a, am));
}

// ---- Q4_K packed at load time (pack_weight). Per group of 8 rows and super-block:
//   d[8], dmin[8] (f16); scales[8 sub-blocks][8 rows] (u8); mins[4 pairs][8 rows][2] (u8);
//   quants[4][8 chunks] of 32 bytes: bytes 4r..4r+3 of chunk c of j are row r's
//   qs[32j + 4c .. 32j + 4c + 3] (sub-block 2j in the low nibbles, 2j + 1 in the high ones).
// Each row's sums land in its own lanes, as in the reference's repacked kernel.
constexpr std::size_t q4_K_packed_block = 32 + 64 + 64 + 1024;

std::size_t pack_q4_K(weight& w) {
  const std::int64_t nb = w.in / qkk, groups = w.out / 8;
  const std::size_t bytes = static_cast<std::size_t>(groups * nb) * q4_K_packed_block;
  auto buffer = std::make_shared_for_overwrite<std::byte[]>(bytes);
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t b = 0; b < nb; ++b) {
      std::byte* dst = buffer.get() + static_cast<std::size_t>(g * nb + b) * q4_K_packed_block;
      auto* sc = reinterpret_cast<std::uint8_t*>(dst + 32);
      auto* mn = reinterpret_cast<std::uint8_t*>(dst + 96);
      for (int r = 0; r < 8; ++r) {
        const auto& blk = reinterpret_cast<const gguf::block_q4_K*>(w.row(8 * g + r))[b];
        std::memcpy(dst + 2 * r, &blk.d, 2);
        std::memcpy(dst + 16 + 2 * r, &blk.dmin, 2);
        std::uint32_t sm[4];
        scales_mins_k4(blk.scales, sm);
        const auto* s8 = reinterpret_cast<const std::uint8_t*>(sm);
        for (int sb = 0; sb < 8; ++sb) {
          sc[8 * sb + r] = s8[sb];
          mn[16 * (sb / 2) + 2 * r + sb % 2] = s8[8 + sb];
        }
        for (int j = 0; j < 4; ++j) {
          for (int c = 0; c < 8; ++c) std::memcpy(dst + 160 + 256 * j + 32 * c + 4 * r, blk.qs + 32 * j + 4 * c, 4);
        }
      }
    }
  }
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  return bytes;
}

// Eight u8 scales (one per row) as int16 pairs (s, s) per int32 lane, for madd.
SPITE_AVX2 inline __m256i row_scales(const std::uint8_t* s) {
  std::int64_t v;
  std::memcpy(&v, s, 8);
  const __m256i w = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
  return _mm256_or_si256(w, _mm256_slli_epi32(w, 16));
}

template <int K>
SPITE_AVX2 void q4_K_packed_tile(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                                 std::int64_t ng, std::int64_t out, float* y) {
  const __m256i m = _mm256_set1_epi8(0x0F);
  __m256 acc[K], acc_min[K];
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm256_setzero_ps();
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * q4_K_packed_block,
                                  static_cast<std::size_t>(nb) * q4_K_packed_block, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * q4_K_packed_block;
    const auto* sc = reinterpret_cast<const std::uint8_t*>(blk + 32);
    const auto* mn = reinterpret_cast<const std::uint8_t*>(blk + 96);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
    __m256i is[K], ms[K];
    for (int k = 0; k < K; ++k) is[k] = ms[k] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      __m256i lo[8], hi[8];
      for (int c = 0; c < 8; ++c) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 160 + 256 * j + 32 * c));
        lo[c] = _mm256_and_si256(v, m);
        hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
      }
      const __m256i s_lo = row_scales(sc + 16 * j), s_hi = row_scales(sc + 16 * j + 8);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mn + 16 * j)));
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_K& x = xq[(t0 + k) * nb + b];
        const std::int8_t* x0 = x.qs + 64 * j;
        // Eight int16 pair sums of at most 2 * 15 * 128 each per sub-block: no overflow.
        __m256i a0 = _mm256_maddubs_epi16(lo[0], _mm256_set1_epi32(load_u32(x0)));
        __m256i a1 = _mm256_maddubs_epi16(hi[0], _mm256_set1_epi32(load_u32(x0 + 32)));
        for (int c = 1; c < 8; ++c) {
          a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(lo[c], _mm256_set1_epi32(load_u32(x0 + 4 * c))));
          a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(hi[c], _mm256_set1_epi32(load_u32(x0 + 32 + 4 * c))));
        }
        const __m256i pair = _mm256_add_epi32(_mm256_madd_epi16(a0, s_lo), _mm256_madd_epi16(a1, s_hi));
        const std::uint32_t bp = static_cast<std::uint16_t>(x.bsums[4 * j] + x.bsums[4 * j + 1]) |
                                 (static_cast<std::uint32_t>(static_cast<std::uint16_t>(x.bsums[4 * j + 2] + x.bsums[4 * j + 3])) << 16);
        const __m256i pair_min = _mm256_madd_epi16(mins, _mm256_set1_epi32(static_cast<int>(bp)));
        if (t0 + k < ng) {  // GEMM rows: one fma per pair of sub-blocks
          const __m256 xd = _mm256_set1_ps(x.d);
          acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair), _mm256_mul_ps(dw, xd), acc[k]);
          acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_min), _mm256_mul_ps(dmw, xd), acc_min[k]);
        } else {
          is[k] = _mm256_add_epi32(is[k], pair);
          ms[k] = _mm256_add_epi32(ms[k], pair_min);
        }
      }
    }
    for (int k = 0; k < K; ++k) {
      if (t0 + k >= ng) {  // GEMV rows: one fma per super-block
        const __m256 xd = _mm256_set1_ps(xq[(t0 + k) * nb + b].d);
        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[k]), _mm256_mul_ps(dw, xd), acc[k]);
        acc_min[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms[k]), _mm256_mul_ps(dmw, xd), acc_min[k]);
      }
    }
  }
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out, _mm256_sub_ps(acc[k], acc_min[k]));
}

void matmul_q4_K_packed(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                        thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::byte* group = w.packed + static_cast<std::size_t>(g * nb) * q4_K_packed_block;
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) q4_K_packed_tile<4>(group, nb, xq, t, ng, w.out, y + 8 * g);
      for (; t < n_tokens; ++t) q4_K_packed_tile<1>(group, nb, xq, t, ng, w.out, y + 8 * g);
    }
  });
}

void matmul_q4_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_K)(w, x, n_tokens, y, pool);
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_rows_q8_K(w, x, n_tokens, true, xq);
  const std::int64_t ng = gemm_rows(n_tokens);
  if (w.packed != nullptr) return matmul_q4_K_packed(w, xq.data(), n_tokens, ng, y, pool);
  if (ng == 0) {
    pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) {
        for (std::int64_t t = 0; t < n_tokens; ++t) q4_K_fused_rows8(w, 8 * g, xq.data() + t * nb, t == 0, y + t * w.out + 8 * g);
      }
    });
    return;
  }
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    rows8_buffer u;
    u.q.resize(static_cast<std::size_t>(8 * w.in));
    u.d.resize(static_cast<std::size_t>(8 * nb));
    u.dmin.resize(u.d.size());
    u.sc.resize(static_cast<std::size_t>(8 * w.in / 32));
    u.mins.resize(static_cast<std::size_t>(64 * nb));
    for (std::int64_t g = begin; g < end; ++g) {
      unpack_q4_K_rows8(w, 8 * g, u);
      for (std::int64_t t = 0; t < n_tokens; ++t) q4_K_dot_rows8(u, w.in, xq.data() + t * nb, t < ng, y + t * w.out + 8 * g);
    }
  });
}

// ---- Q6_K (reference: dot_row<q6_K> in ref_dot_kquants.cpp: 8 lanes, unsigned quants times
// the 16-element scales, the -32 offset through the activation sums, one fma per super-block).

struct q6_K_row {
  std::vector<std::uint8_t> q;    // element order, 0..63
  std::vector<std::int16_t> scales;   // 16 per 32 elements: sc[2g] x 8, sc[2g+1] x 8
  std::vector<std::int16_t> offsets;  // 16 per super-block: its scales, for the -32 term
  std::vector<float> d;
  explicit q6_K_row(std::int64_t in)
      : q(static_cast<std::size_t>(in)),
        scales(static_cast<std::size_t>(in / 32 * 16)),
        offsets(static_cast<std::size_t>(in / qkk * 16)),
        d(static_cast<std::size_t>(in / qkk)) {}
};

SPITE_AVX2 void unpack_q6_K_row(const gguf::block_q6_K* w, std::int64_t nb, q6_K_row& r) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  std::uint8_t* q = r.q.data();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::int8_t* sc = w[b].scales;
    r.d[static_cast<std::size_t>(b)] = _cvtsh_ss(w[b].d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.offsets.data() + 16 * b),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))));
    for (int g = 0; g < 8; ++g) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.scales.data() + 16 * (8 * b + g)),
                          _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g])));
    }
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

// K activation rows against one unpacked row; each keeps its own 8 lanes.
template <int K>
SPITE_AVX2 void q6_K_dot(const q6_K_row& r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                         std::int64_t out, std::int64_t o, float* y) {
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i lanes[K];
    for (int k = 0; k < K; ++k) lanes[k] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.q.data() + b * qkk + 32 * g));
      const __m256i scales = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.scales.data() + 16 * (8 * b + g)));
      for (int k = 0; k < K; ++k) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + b].qs + 32 * g));
        lanes[k] = _mm256_add_epi32(lanes[k], dot_lanes_scaled(qv, xv, scales));
      }
    }
    for (int k = 0; k < K; ++k) {
      const gguf::block_q8_K& x = xq[(t0 + k) * nb + b];
      // lane L -= 32 * (sc[2L] * bsum[2L] + sc[2L+1] * bsum[2L+1])
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
      const __m256i l = _mm256_sub_epi32(lanes[k], _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.offsets.data() + 16 * b)), bs), 5));
      acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(x.d * r.d[static_cast<std::size_t>(b)]), _mm256_cvtepi32_ps(l), acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) y[(t0 + k) * out + o] = reduce8_vec(acc[k]);
}

// Decode: the quants built in registers where they are used, R rows at a time (several rows in
// flight stream from memory faster); each row keeps its own 8 lanes, as in the reference.
template <int R>
SPITE_AVX2 void q6_K_fused(const weight& w, std::int64_t o, const gguf::block_q8_K* x, bool first, float* y) {
  const std::int64_t nb = w.in / qkk;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const gguf::block_q6_K* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_q6_K*>(w.row(o + r));
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (first) ahead.step(b);
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    for (int r = 0; r < R; ++r) {
      const gguf::block_q6_K& blk = rows[r][b];
      const std::int8_t* sc = blk.scales;
      __m256i lanes = _mm256_setzero_si256();
      for (int c = 0; c < 2; ++c) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * c));
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * c));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * c + 32));
        for (int k = 0; k < 4; ++k) {
          // Element 128c + 32k + l: nibble of ql[64c + 32(k & 1) + l] (low for k < 2) with bits
          // 2k..2k+1 of qh[32c + l] above it.
          const __m256i l = (k & 1) != 0 ? l1 : l0;
          const __m256i nib = k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
          const __m256i q = _mm256_or_si256(nib, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m2), 4));
          const int g = 4 * c + k;
          const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * g));
          lanes = _mm256_add_epi32(lanes, dot_lanes_scaled(q, xv, scales));
        }
      }
      // lane L -= 32 * (sc[2L] * bsum[2L] + sc[2L+1] * bsum[2L+1])
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
      lanes = _mm256_sub_epi32(lanes, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[b].d * _cvtsh_ss(blk.d)), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[o + r] = reduce8_vec(acc[r]);
}

void matmul_q6_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq(static_cast<std::size_t>(nb * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_K(x + t * w.in, xq.data() + t * nb, w.in);
  const std::int64_t out = w.out;
  if (n_tokens < 4) {
    pool.parallel_for((out + 3) / 4, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) {
        for (std::int64_t t = 0; t < n_tokens; ++t) {
          if (4 * g + 4 <= out) {
            q6_K_fused<4>(w, 4 * g, xq.data() + t * nb, t == 0, y + t * out);
          } else {
            for (std::int64_t o = 4 * g; o < out; ++o) q6_K_fused<1>(w, o, xq.data() + t * nb, t == 0, y + t * out);
          }
        }
      }
    });
    return;
  }
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    q6_K_row r(w.in);
    for (std::int64_t o = begin; o < end; ++o) {
      unpack_q6_K_row(reinterpret_cast<const gguf::block_q6_K*>(w.row(o)), nb, r);
      std::int64_t t = 0;
      for (; t + 4 <= n_tokens; t += 4) q6_K_dot<4>(r, xq.data(), nb, t, out, o, y);
      for (; t < n_tokens; ++t) q6_K_dot<1>(r, xq.data(), nb, t, out, o, y);
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

std::size_t pack_weight(weight& w) {
  if (fast_matmuls().empty() || w.packed != nullptr || w.out % 8 != 0) return 0;
  if (w.type == tensor_type::q4_0) return pack_q4_0(w);
  if (w.type == tensor_type::q4_K) return pack_q4_K(w);
  return 0;
}

}  // namespace spite::dispatch::cpu

#else  // not x86-64: the reference kernels only

namespace spite::dispatch::cpu {
std::span<const exact_matmul> fast_matmuls() { return {}; }
std::size_t pack_weight(weight&) { return 0; }
}  // namespace spite::dispatch::cpu

#endif
