// Shared preamble of the AVX-512 VNNI kernel files (simd_x86_avx512.cpp, simd_x86_q8_0_packed.cpp,
// simd_x86_q4k_x16.cpp): their target attribute. Internal to spite::dispatch; x86-64 only.
#pragma once

// GCC 12's AVX-512 headers build some results from _mm512_undefined values and then warn about
// them (a known false positive); this header is included only by files of AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "simd_x86.hpp"

#define SPITE_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {

// The 16-row tiles (simd_x86_q5k_x16.cpp, simd_x86_q6k_x16.cpp) take T activation rows `stride`
// blocks apart; for super-block b: each row's block and quants, and its 8 lanes zeroed.
template <int T>
struct x16_activations {
  const gguf::block_q8_K* block[T];
  const std::int8_t* qs[T];
  SPITE_AVX512 x16_activations(const gguf::block_q8_K* x, std::int64_t stride, std::int64_t b, __m512i (*lanes)[8]) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      block[t] = x + t * stride + b;
      qs[t] = block[t]->qs;
#pragma GCC unroll 8
      for (int L = 0; L < 8; ++L) lanes[t][L] = _mm512_setzero_si512();
    }
  }
};

// The 8 lane vectors of 16 rows added as reduce8_vec adds a row's 8 lanes:
// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
SPITE_AVX512 inline __m512 x16_lane_sum(const __m512* acc) {
  const __m512 s0 = _mm512_add_ps(acc[0], acc[4]), s1 = _mm512_add_ps(acc[1], acc[5]);
  const __m512 s2 = _mm512_add_ps(acc[2], acc[6]), s3 = _mm512_add_ps(acc[3], acc[7]);
  return _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
}

// A 16-row tile: T activation rows from x (`stride` blocks apart) against the group at
// group_base; results `out` floats apart from y16.
using x16_tile_fn = void (*)(const std::byte* group_base, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t stride,
                             std::int64_t out, float* y16);

// A matmul on a 16-row layout of `block_bytes` per group and super-block: each group against
// each block of activation rows, two rows per pass (each chunk unpacked once for both), then
// the last one alone.
inline void x16_matmul(const weight& w, std::size_t block_bytes, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y,
                       thread_pool& pool, x16_tile_fn two, x16_tile_fn one) {
  const std::int64_t nb = w.in / qkk;
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * block_bytes;
  const std::int64_t block = token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K));
  by_groups_and_token_blocks(w.out / 16, n_tokens, block, pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group_base = w.packed + static_cast<std::size_t>(g) * group_bytes;
    std::int64_t t = t0;
    for (; t + 2 <= t1; t += 2) two(group_base, nb, xq + t * nb, nb, w.out, y + t * w.out + 16 * g);
    if (t < t1) one(group_base, nb, xq + t * nb, nb, w.out, y + t * w.out + 16 * g);
  });
}

}  // namespace spite::dispatch::cpu::x86
#endif
