// BF16-weight matmul with AVX-512 BF16 (Intel since Cooper Lake, AMD since Zen 4). VDPBF16PS
// adds, in each of 16 float lanes, the products of one bf16 pair: the odd element's first, then
// the even one's, each product exact and each addition rounded; that is the order the reference
// (dot_bf16 in cpu_matmul.cpp) gives every lane, so one instruction does the work of the AVX2
// kernel's mask, shift and two FMAs per 8 pairs (simd_x86_float.cpp), 16 pairs at a time.
//
// The instruction flushes denormal inputs and results to zero, which the reference's arithmetic
// does not; weights and activations of real models are far from that range. Before the kernel is
// used, a probe checks that this processor's instruction rounds and orders the two additions as
// the reference does (the manuals describe the order but not every implementation need follow
// it): where it does not, BF16 weights keep the AVX2 kernel.

// GCC 12's AVX-512 headers build some results from _mm512_undefined values and then warn about
// them (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "simd_x86.hpp"

#define SPITE_AVX512_BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))
#define SPITE_FLOAT_X16 SPITE_AVX512_BF16
#include "simd_x86_float_x16.hpp"

#if defined(__x86_64__)
#include <bit>
#include <cmath>

#include "ref_math.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

SPITE_AVX512_BF16 inline __m512 add_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

SPITE_AVX512_BF16 inline __m512i load32(const std::uint16_t* p) { return _mm512_loadu_si512(p); }

// R weight rows from row o times K activation rows from t0 (bf16, w.in apart); w.in % 32 == 0.
// The 16 lanes of each output are reduced as the reference reduces them.
template <int R, int K>
SPITE_AVX512_BF16 void bf16_tile(const weight& w, std::int64_t o, const std::uint16_t* xs, std::int64_t t0, float* y,
                                 bool prefetch) {
  const std::int64_t n = w.in;
  const std::uint16_t* rows[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const std::uint16_t*>(w.row(o + r));
  // The loops over the tile unrolled in full, so that the accumulators live in registers: rolled,
  // GCC kept them in registers but also stored all 16 to the stack on every step, and the stores
  // bounded the tile at half an instruction a cycle (BF16:2048:5632, 128 tokens, one thread: 95-115
  // GFLOP/s before).
  __m512 acc[R][K];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm512_setzero_ps();
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, n / 32);
  for (std::int64_t i = 0; i < n; i += 32) {
    if (prefetch) ahead.step(i / 32);
    __m512i xv[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) xv[k] = load32(xs + (t0 + k) * n + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i wv = load32(rows[r] + i);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[r][k] = add_pairs(acc[r][k], wv, xv[k]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][k]);
      y[(t0 + k) * w.out + o + r] = reduce16(lanes);
    }
  }
}

// Rows o..o+R-1 against activation rows [t0, t1): 4 at a time, then the rest.
template <int R>
void bf16_rows(const weight& w, std::int64_t o, const std::uint16_t* xs, std::int64_t t0, std::int64_t t1, float* y) {
  std::int64_t t = t0;
  for (; t + 4 <= t1; t += 4) bf16_tile<R, 4>(w, o, xs, t, y, t == 0);
  switch (t1 - t) {
    case 3: return bf16_tile<R, 3>(w, o, xs, t, y, t == 0);
    case 2: return bf16_tile<R, 2>(w, o, xs, t, y, t == 0);
    case 1: return bf16_tile<R, 1>(w, o, xs, t, y, t == 0);
    default: return;
  }
}

void matmul_bf16_avx512(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  aligned_vector<std::uint16_t> xs(static_cast<std::size_t>(w.in * n_tokens));
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = fp32_to_bf16(x[i]);
  const auto rows = [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    if (4 * g + 4 <= w.out) return bf16_rows<4>(w, 4 * g, xs.data(), t0, t1, y);
    for (std::int64_t o = 4 * g; o < w.out; ++o) bf16_rows<1>(w, o, xs.data(), t0, t1, y);
  };
  const std::int64_t groups = (w.out + 3) / 4;
  if (n_tokens < 4) {  // decode: each group's rows streamed once for all activation rows
    pool.parallel_for(groups, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) rows(g, 0, n_tokens);
    });
    return;
  }
  by_groups_and_token_blocks(groups, n_tokens, token_block(static_cast<std::size_t>(w.in) * sizeof(std::uint16_t)), pool,
                             rows);
}

// The 16-row layout's chunk (simd_x86_float_x16.cpp): 16 bf16 pairs of a row against the
// activations' 32 bf16 values as they come, one VDPBF16PS.
struct bf16_dot_chunks {
  static constexpr std::size_t chunk_bytes = 64;
  static constexpr std::int64_t elements = 32, x_floats = 16;
  static constexpr bool loads_in_order = false;
  SPITE_AVX512_BF16 static __m512 add(const std::byte* w, const float* x, __m512 acc) {
    return add_pairs(acc, _mm512_load_si512(w), _mm512_loadu_si512(x));
  }
};

// The reference's arithmetic for one step of 32 values into 16 lanes (dot_bf16's bf16_pairs).
float reference_lane(float acc, std::uint16_t a_even, std::uint16_t a_odd, std::uint16_t b_even, std::uint16_t b_odd) {
  const float odd = bf16_to_fp32(a_odd) * bf16_to_fp32(b_odd);
  const float even = bf16_to_fp32(a_even) * bf16_to_fp32(b_even);
  return (acc + odd) + even;
}

// Lanes whose results tell the possible orders and roundings apart, and ordinary values.
SPITE_AVX512_BF16 bool instruction_follows_reference() {
  alignas(64) std::uint16_t a[32], b[32];
  alignas(64) float acc[16], got[16];
  const std::uint16_t one = fp32_to_bf16(1.0f), minus_one = fp32_to_bf16(-1.0f);
  const std::uint16_t tiny = fp32_to_bf16(std::ldexp(1.0f, -12));   // tiny * tiny = 2^-24
  const std::uint16_t small = fp32_to_bf16(std::ldexp(1.0f, -15));  // small * small = 2^-30
  std::uint32_t state = 0x9e3779b9u;
  for (int l = 0; l < 16; ++l) {
    state = state * 1664525u + 1013904223u;
    a[2 * l] = fp32_to_bf16(static_cast<float>(static_cast<int>(state >> 8) % 2001 - 1000) / 37.0f);
    state = state * 1664525u + 1013904223u;
    a[2 * l + 1] = fp32_to_bf16(static_cast<float>(static_cast<int>(state >> 8) % 2001 - 1000) / 53.0f);
    b[2 * l] = fp32_to_bf16(static_cast<float>(l - 8) / 3.0f);
    b[2 * l + 1] = fp32_to_bf16(static_cast<float>(7 - l) / 5.0f);
    acc[l] = static_cast<float>(l) / 7.0f;
  }
  // Odd first: (1 - 1) + 2^-30 is 2^-30; even first would give 0.
  a[1] = minus_one, b[1] = one, a[0] = small, b[0] = small, acc[0] = 1.0f;
  // Two roundings: (1 + 2^-24) + 2^-24 is 1 (ties to even); one rounding of the sum would not be.
  a[3] = tiny, b[3] = tiny, a[2] = tiny, b[2] = tiny, acc[1] = 1.0f;
  _mm512_store_ps(got, add_pairs(_mm512_load_ps(acc), load32(a), load32(b)));
  for (int l = 0; l < 16; ++l) {
    const float want = reference_lane(acc[l], a[2 * l], a[2 * l + 1], b[2 * l], b[2 * l + 1]);
    if (std::bit_cast<std::uint32_t>(want) != std::bit_cast<std::uint32_t>(got[l])) return false;
  }
  return true;
}

bool usable() {
  __builtin_cpu_init();
  const bool present = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
                       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return present && instruction_follows_reference();
}

}  // namespace

matmul_fn avx512_bf16_matmul() {
  static const bool present = usable();
  return present && avx512_allowed() ? matmul_bf16_avx512 : nullptr;
}

bool matmul_bf16_x16_dot(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (avx512_bf16_matmul() == nullptr) return false;
  // bf16 values, two to a float's place; batches' rows a little longer than theirs (see
  // prepared_stride in simd_x86_float_x16.cpp).
  const std::int64_t ldx = w.in / 2 + (n_tokens > 1 ? 16 : 0);
  aligned_vector<float> xs(static_cast<std::size_t>(ldx * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    auto* row = reinterpret_cast<std::uint16_t*>(xs.data() + t * ldx);
    for (std::int64_t i = 0; i < w.in; ++i) row[i] = fp32_to_bf16(x[t * w.in + i]);
  }
  matmul_groups<bf16_dot_chunks>(w, xs.data(), ldx, n_tokens, y, pool);
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
