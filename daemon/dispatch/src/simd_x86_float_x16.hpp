// The 16-row float layouts' kernels (simd_x86_float_x16.cpp describes the layout), shared by
// the files of the instruction sets that multiply them: every template here takes the chunk kind
// E of its includer (a type of that file's own), so each file's instantiations are its own and
// carry its target attribute, SPITE_FLOAT_X16, which the includer defines first. A chunk kind
// gives chunk_bytes (a row's bytes per chunk), elements (a row's elements per chunk), x_floats
// (floats of prepared activations per chunk), add(w, x, acc) (a row's chunk times them into its
// 16 lanes) and loads_in_order (whether decode keeps its loads in address order, tile_in_order).
// Internal to spite::dispatch; x86-64 only.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>

#ifndef SPITE_FLOAT_X16
#error "define SPITE_FLOAT_X16 (the includer's target attribute) before including simd_x86_float_x16.hpp"
#endif

namespace spite::dispatch::cpu::x86 {

// reduce16 of each of 16 registers at once: lane j of the result is reduce16(a[j]), with the same
// additions (v[i] + v[i + 8], then + 4, then (s[0] + s[2]) + (s[1] + s[3])) on whole registers.
template <class E>
SPITE_FLOAT_X16 inline __m512 reduce16_each(const __m512* a) {
  __m512 s8[8];  // rows 2p and 2p + 1: their v[i] + v[i + 8] in lanes 0-7 and 8-15
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    s8[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 s4[4];  // rows 4q..4q + 3: their s8[i] + s8[i + 4], a 128-bit block each
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    s4[q] = _mm512_add_ps(_mm512_shuffle_f32x4(s8[2 * q], s8[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(s8[2 * q], s8[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Block j of s4[m] holds row 4m + j's s4[0..3]; transposed within the blocks, lane m of block j
  // of tk is s4[k] of row 4m + j.
  const __m512 ab_lo = _mm512_unpacklo_ps(s4[0], s4[1]), ab_hi = _mm512_unpackhi_ps(s4[0], s4[1]);
  const __m512 cd_lo = _mm512_unpacklo_ps(s4[2], s4[3]), cd_hi = _mm512_unpackhi_ps(s4[2], s4[3]);
  const __m512 t0 = _mm512_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(1, 0, 1, 0)), t1 = _mm512_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512 t2 = _mm512_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(1, 0, 1, 0)), t3 = _mm512_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(3, 2, 3, 2));
  const __m512 sums = _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));  // lane 4j + m: row 4m + j
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), sums);
}

// Rows r0..r0 + R - 1 of a group against K activation rows (xs, `ldx` floats apart), over the
// whole reduction; their results, activation row k's R at out[k x R + r]. Every loop unrolled in
// full, so the R x K accumulators stay in registers. With `next`, each chunk's step also fetches
// share `part` of `parts` of the same chunk's lines of the next group into L2 (the group's tiles
// after the first read it from there).
template <class E, int R, int K>
[[gnu::always_inline]] SPITE_FLOAT_X16 inline void tile_body(const std::byte* group, int r0, std::int64_t chunks, const float* xs,
                                                             std::int64_t ldx, float* out, const std::byte* next, int part, int parts) {
  static_assert(R * K <= 16);
  constexpr std::size_t step = 16 * E::chunk_bytes;
  constexpr int lines = static_cast<int>(step / cache_line);
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  const std::byte* at = group + static_cast<std::size_t>(r0) * E::chunk_bytes;
  const int first_line = part * lines / parts, end_line = (part + 1) * lines / parts;
  for (std::int64_t c = 0; c < chunks; ++c, at += step) {
    if (next != nullptr) {
      for (int l = first_line; l < end_line; ++l) prefetch_l2(next + static_cast<std::size_t>(c) * step + cache_line * static_cast<std::size_t>(l));
    }
    const float* x = xs + c * E::x_floats;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[k * R + r] = E::add(at + r * E::chunk_bytes, x + k * ldx, acc[k * R + r]);
    }
  }
  _mm512_storeu_ps(out, reduce16_each<E>(acc));
}

template <class E, int R, int K>
SPITE_FLOAT_X16 void tile(const std::byte* group, int r0, std::int64_t chunks, const float* xs, std::int64_t ldx, float* out,
                          const std::byte* next = nullptr, int part = 0, int parts = 1) {
  tile_body<E, R, K>(group, r0, chunks, xs, ldx, out, next, part, parts);
}

// The same, its instructions left in the source's order: each chunk's loads go through the 16
// rows' lines in address order. Scheduled, GCC started F32's 1 KB steps at their fifteenth line and
// went back to the first, and one thread read 71-80 % of a plain read from memory against 86-93 %
// so, two threads 76-87 % against 93-96 % (F32:2048:5632 --cold, rounds alternated); F16, whose
// conversions the scheduler interleaves with the fmas, read 79-86 % in order against 90-97 %.
template <class E, int R, int K>
__attribute__((optimize("no-schedule-insns", "no-schedule-insns2"))) SPITE_FLOAT_X16 void tile_in_order(
    const std::byte* group, int r0, std::int64_t chunks, const float* xs, std::int64_t ldx, float* out) {
  tile_body<E, R, K>(group, r0, chunks, xs, ldx, out, nullptr, 0, 1);
}

// A group's rows against activation rows [0, n_tokens): y16 is the group's first output. A batch
// passes over the group once per tile (4 to 16 times per 4 activation rows), so its first passes
// fetch the next group (`next`, null for the last) into L2 meanwhile, a share each, so that the
// groups come from memory while the tiles compute. TinyLlama, four sequences decoding together on
// two threads (`bench -p 0 -n 16 -r 2 -t 2 --parallel 4`, alternated): F16 24.7-31.2 t/s without
// it, 49.3-62.0 with it (the file layout's tiles 30.6-39.2); BF16 25.7-35.5 and 47.5-50.4
// (40.5-43.7). Decode does better without it (F16:2048:5632 --cold, one thread: 94-96 % of a plain
// read against 61-66 % fetching the next group).
template <class E>
SPITE_FLOAT_X16 void group_times(const std::byte* group, const std::byte* next, std::int64_t chunks, const float* xs, std::int64_t ldx,
                                 std::int64_t n_tokens, std::int64_t out, float* y16) {
  alignas(64) float sums[16];
  const auto put = [&](std::int64_t t, int r0, int rows, int k_count) {
    for (int k = 0; k < k_count; ++k) std::memcpy(y16 + (t + k) * out + r0, sums + k * rows, sizeof(float) * static_cast<std::size_t>(rows));
  };
  if (n_tokens == 1) {  // decode: one pass, the hardware prefetchers alone (docs/performance-log.md)
    if constexpr (E::loads_in_order) {
      tile_in_order<E, 16, 1>(group, 0, chunks, xs, ldx, sums);
    } else {
      tile<E, 16, 1>(group, 0, chunks, xs, ldx, sums);
    }
    put(0, 0, 16, 1);
    return;
  }
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) {
    for (int r0 = 0; r0 < 16; r0 += 4) {
      tile<E, 4, 4>(group, r0, chunks, xs + t * ldx, ldx, sums, t == 0 ? next : nullptr, r0 / 4, 4);
      put(t, r0, 4, 4);
    }
  }
  const std::byte* fetch = t == 0 ? next : nullptr;  // the rows left are the whole batch
  switch (n_tokens - t) {
    case 3:
      for (int r0 = 0; r0 < 16; r0 += 4) {
        tile<E, 4, 3>(group, r0, chunks, xs + t * ldx, ldx, sums, fetch, r0 / 4, 4);
        put(t, r0, 4, 3);
      }
      return;
    case 2:
      for (int r0 = 0; r0 < 16; r0 += 8) {
        tile<E, 8, 2>(group, r0, chunks, xs + t * ldx, ldx, sums, fetch, r0 / 8, 2);
        put(t, r0, 8, 2);
      }
      return;
    case 1:
      tile<E, 16, 1>(group, 0, chunks, xs + t * ldx, ldx, sums);
      put(t, 0, 16, 1);
      return;
    default:
      return;
  }
}

// Each group over the pool, contiguous shares: decode reads one stream per thread, a batch has
// each group's rows in L2 while all its activation rows pass.
template <class E>
void matmul_groups(const weight& w, const float* xs, std::int64_t ldx, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t chunks = w.in / E::elements;
  const std::size_t group_bytes = 16 * w.row_bytes;
  const std::int64_t groups = w.out / 16;
  pool.parallel_for(groups, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::byte* group = w.packed + static_cast<std::size_t>(g) * group_bytes;
      group_times<E>(group, g + 1 < groups ? group + group_bytes : nullptr, chunks, xs, ldx, n_tokens, w.out, y + 16 * g);
    }
  });
}

}  // namespace spite::dispatch::cpu::x86
#endif
