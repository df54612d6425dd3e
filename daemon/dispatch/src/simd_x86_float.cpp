// AVX2 / FMA / F16C versions of the F16- and F32-weight matmuls of cpu_matmul.cpp (the
// reference's GEMM path: 16 lanes of fused multiply-adds, reduced as reduce16; its vector dot
// product for matrices it does not take through the GEMM: 64-element blocks into four 16-lane
// groups, the tail added in double for f16's exact products, fused into the float sum for
// f32). F16 weights are widened 8 at a time with F16C, activations rounded to f16 the same way
// the reference rounds them; every lane sees the same operations in the same order, so the bits
// are the reference's.

// GCC 12's AVX-512 headers warn about their own _mm512_undefined values (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "simd_math.hpp"
#include "simd_x86_x16.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

SPITE_AVX2 inline __m256 widen8(const std::uint16_t* h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}
SPITE_AVX2 inline __m256 widen8(const float* f) { return _mm256_loadu_ps(f); }


// GEMM path; n % 16 == 0. T: the weights' element (f16 bits or float). A batch runs the
// reduction in chunks of gemm_chunk elements over blocks of gemm_groups_together groups of 4
// rows (gemm_groups); the 16 lane sums of each output live in `state` between chunks, so every
// lane still sees its products in the reference's order.
constexpr std::int64_t gemm_chunk = 512;
constexpr std::int64_t gemm_groups_together = 8;

// A batch's activation rows are `ldx` floats apart, a little more than a row: at a power-of-two
// length the same chunk of every row falls into the same cache sets and the rows evict each
// other (one of the reasons a 2048-wide F32 GEMM ran at a quarter of the FMA peak).
constexpr std::int64_t row_pad = 16;

// R rows x K activation rows from t0 over elements [i0, i1); the lanes of output (row r,
// activation row t0 + k) at state + (4k + r) * 16. Half: both halves of the 16 lanes (-1), or
// only lanes 0-7 (0) or 8-15 (1), which leaves room in the registers for twice the tile: each
// lane still sees its products in order. `ahead`: the next row group, one share per 16
// elements.
// Ahead: next_group_prefetch, or tile_rows for decode's two regions (its step fetches both).
template <class T, int R, int K, int Half = -1, class Ahead = next_group_prefetch>
SPITE_AVX2 void gemm_tile_chunk(const T* const* rows, const float* xs, std::int64_t ldx, std::int64_t i0, std::int64_t i1,
                                std::int64_t t0, float* state, const std::type_identity_t<Ahead>* ahead) {
  constexpr int h0 = Half < 0 ? 0 : Half, halves = Half < 0 ? 2 : 1;
  __m256 acc[halves][R][K];
  for (int h = 0; h < halves; ++h) {
    for (int r = 0; r < R; ++r) {
      for (int k = 0; k < K; ++k) acc[h][r][k] = _mm256_loadu_ps(state + (4 * k + r) * 16 + 8 * (h0 + h));
    }
  }
  // Each half of the 16 lanes in turn, every loaded vector used by all the FMAs that need it:
  // R + K loads per R x K FMAs (the L1 gives two 32-byte loads per cycle, the FMA units two
  // FMAs, so a load per FMA would halve the rate).
  for (std::int64_t i = i0; i < i1; i += 16) {
    if (ahead != nullptr) ahead->step(i / 16);
    for (int h = 0; h < halves; ++h) {
      const std::int64_t at = i + 8 * (h0 + h);
      __m256 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = widen8(rows[r] + at);
      for (int k = 0; k < K; ++k) {
        __m256 xv = _mm256_loadu_ps(xs + (t0 + k) * ldx + at);
        __asm__("" : "+x"(xv));  // one load: GCC would fold it into each FMA again
        for (int r = 0; r < R; ++r) acc[h][r][k] = _mm256_fmadd_ps(wv[r], xv, acc[h][r][k]);
      }
    }
  }
  for (int h = 0; h < halves; ++h) {
    for (int r = 0; r < R; ++r) {
      for (int k = 0; k < K; ++k) _mm256_storeu_ps(state + (4 * k + r) * 16 + 8 * (h0 + h), acc[h][r][k]);
    }
  }
}

// gemm_groups' tiles for f16 and f32 weights.
template <class T>
struct float_kernel {
  using element = T;
  template <int R, int K, int Half = -1>
  SPITE_AVX2 static void tile(const T* const* rows, const float* xs, std::int64_t ldx, std::int64_t i0, std::int64_t i1,
                              std::int64_t t0, float* state, const next_group_prefetch* ahead = nullptr) {
    gemm_tile_chunk<T, R, K, Half>(rows, xs, ldx, i0, i1, t0, state, ahead);
  }
};

// Row groups [g0, g1) (4 rows each, at most gemm_groups_together) against activation rows
// [t0, t1): 2 rows x 3 activation rows per tile (12 accumulators and the two weight vectors fit
// AVX2's 16 registers). For each 3 activation rows the reduction runs in chunks: a chunk of the
// 3 rows stays in L1 while the chunks of the block's rows pass through from L2, and the tiles'
// lane sums wait in L1 between chunks (each lane still sees its products in order). Going
// through a whole batch per group instead read every activation row from L3 again for each
// group; going through one group per 3 activation rows kept neither operand in L1.
template <class Kernel>
SPITE_AVX2 void gemm_groups(const weight& w, std::int64_t g0, std::int64_t g1, const float* xs, std::int64_t ldx,
                            std::int64_t t0, std::int64_t t1, float* y) {
  using T = typename Kernel::element;
  const std::int64_t n = w.in;
  constexpr int per_group = 4 * 4 * 16;  // lanes of (row r, activation row k) at (4k + r) * 16
  alignas(32) float state[gemm_groups_together * per_group];
  const auto rows_of = [&](std::int64_t g, const T** rows) {
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const T*>(w.row(4 * g + r));
  };
  std::int64_t t = t0;
  if (t1 - t0 < 8) {
    // A few activation rows (concurrent sequences decoding): each row against 4 of them at once,
    // the next group's row fetched meanwhile, so the weights are read once and streamed as in
    // decode (the 3-row tiles below left a fourth row for a second pass and fetched nothing
    // ahead: 4 sequences decoded only 2.1x as fast as one). The 4 rows of a group take the
    // reduction a chunk at a time, so the chunk of the 4 activation rows stays in L1 for all of
    // them: over whole rows, 4 activation rows of a 2048-wide matrix (32 KiB) came from L2 for
    // every weight row, 8 vector loads from L2 per 32 bytes of weights.
    for (; t + 4 <= t1; t += 4) {
      for (std::int64_t g = g0; g < g1; ++g) {
        const T* rows[4];
        rows_of(g, rows);
        std::fill_n(state, per_group, 0.0f);
        const bool fetch = g + 1 < w.out / 4;
        // Two rows by the four activation rows, one half of the lanes at a time: 6 loads per 8
        // FMAs (a row by the four over both halves took a load per FMA and ran at half the
        // FMA peak).
        const next_group_prefetch ahead[2] = {
            {w.row(4 * g + 4), 2 * w.row_bytes, std::max<std::int64_t>(n / 16, 1)},
            {w.row(4 * g + 6), 2 * w.row_bytes, std::max<std::int64_t>(n / 16, 1)}};
        for (std::int64_t i0 = 0; i0 < n; i0 += gemm_chunk) {  // 4 activation rows: 8 KiB a chunk
          const std::int64_t i1 = std::min(n, i0 + gemm_chunk);
          for (int r = 0; r < 4; r += 2) {
            Kernel::template tile<2, 4, 0>(rows + r, xs, ldx, i0, i1, t, state + r * 16, fetch ? &ahead[r / 2] : nullptr);
            Kernel::template tile<2, 4, 1>(rows + r, xs, ldx, i0, i1, t, state + r * 16, nullptr);
          }
        }
        for (int k = 0; k < 4; ++k) {
          for (int r = 0; r < 4; ++r) y[(t + k) * w.out + 4 * g + r] = reduce16(state + (4 * k + r) * 16);
        }
      }
    }
  }
  for (; t + 3 <= t1; t += 3) {
    std::fill_n(state, (g1 - g0) * per_group, 0.0f);
    for (std::int64_t i0 = 0; i0 < n; i0 += gemm_chunk) {
      const std::int64_t i1 = std::min(n, i0 + gemm_chunk);
      for (std::int64_t g = g0; g < g1; ++g) {
        const T* rows[4];
        rows_of(g, rows);
        float* lanes = state + (g - g0) * per_group;
        for (int h = 0; h < 4; h += 2) Kernel::template tile<2, 3>(rows + h, xs, ldx, i0, i1, t, lanes + h * 16);
      }
    }
    for (std::int64_t g = g0; g < g1; ++g) {
      for (int k = 0; k < 3; ++k) {
        for (int r = 0; r < 4; ++r) y[(t + k) * w.out + 4 * g + r] = reduce16(state + (g - g0) * per_group + (4 * k + r) * 16);
      }
    }
  }
  for (; t < t1; ++t) {  // the rest (and decode) one activation row at a time, over whole rows
    for (std::int64_t g = g0; g < g1; ++g) {
      const T* rows[4];
      rows_of(g, rows);
      std::fill_n(state, 4 * 16, 0.0f);
      // Rows of a few KiB are too short for the hardware prefetchers (see next_group_prefetch).
      const next_group_prefetch ahead(w.row(4 * g + 4), 4 * w.row_bytes, std::max<std::int64_t>(n / 16, 1));
      Kernel::template tile<4, 1>(rows, xs, ldx, 0, n, t, state, t == t0 ? &ahead : nullptr);
      for (int r = 0; r < 4; ++r) y[t * w.out + 4 * g + r] = reduce16(state + r * 16);
    }
  }
}

// The same with AVX-512: one register holds the 16 lanes.
#define SPITE_AVX512F __attribute__((target("avx2,fma,f16c,avx512f")))

SPITE_AVX512F inline __m512 widen16(const std::uint16_t* h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}
SPITE_AVX512F inline __m512 widen16(const float* f) { return _mm512_loadu_ps(f); }

// With `prefetch` (the first tile of a block of groups, which reads the rows from memory) the
// next group's rows are fetched at the tile's pace: four sequences decoding together (`bench
// --parallel 4`, TinyLlama F16, two threads) read the rows one after the other with the
// arithmetic, 44.6-47.1 t/s in total; with it 50.1-53.6 (F16:2048:11264, 4 activation rows,
// from memory: 48 % -> 57-60 % of a plain read).
template <class T, int R, int K>
SPITE_AVX512F void gemm_tile_512(const weight& w, std::int64_t o, const float* xs, std::int64_t ldx, std::int64_t t0, float* y,
                                 bool prefetch = false) {
  const std::int64_t n = w.in;
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, n / 16);
  const T* rows[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const T*>(w.row(o + r));
  // Every loop over the tile unrolled in full, the last one too: with any of them rolled, GCC
  // keeps the accumulators in registers but stores all 16 to the stack on every step as well
  // (as the BF16 tile did: half its speed).
  __m512 acc[R][K];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm512_setzero_ps();
  }
  for (std::int64_t i = 0; i < n; i += 16) {
    if (prefetch) ahead.step(i / 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = widen16(rows[r] + i);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[r][k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs + (t0 + k) * ldx + i), acc[r][k]);
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

// F16 decode with AVX-512: R rows against one activation row over the whole reduction, the
// reference's 16 lanes in one register (element i into lane i % 16, as gemm_tile_chunk's two
// halves have them): per 16 elements and row one widening and one fma, where the 256-bit tile
// takes two of each. `ahead` fetches the next rows of both regions (tile_rows).
template <class T, int R, class Ahead>
SPITE_AVX512F void decode_tile_512(const T* const* rows, const float* x, std::int64_t n, const Ahead* ahead, float* const* out) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < n; i += 16) {
    if (ahead != nullptr) ahead->step(i / 16);
    const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(widen16(rows[r] + i), xv, acc[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[r]);
    *out[r] = reduce16(lanes);
  }
}

// Vector dot product path (any n): 64-element blocks into four 16-lane groups, combined as
// (g0 + g2) + (g1 + g3), reduced; the tail's exact f16 products added in double, f32 ones
// fused into the float sum.
template <class T>
SPITE_AVX2 float vec_dot(const T* wrow, const float* x, std::int64_t n) {
  const std::int64_t np = n & ~std::int64_t{63};
  double sum = 0.0;
  if (np > 0) {
    __m256 acc[4][2];
    for (auto& g : acc) g[0] = g[1] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < np; i += 64) {
      for (int g = 0; g < 4; ++g) {
        const std::int64_t e = i + 16 * g;
        acc[g][0] = _mm256_fmadd_ps(widen8(wrow + e), _mm256_loadu_ps(x + e), acc[g][0]);
        acc[g][1] = _mm256_fmadd_ps(widen8(wrow + e + 8), _mm256_loadu_ps(x + e + 8), acc[g][1]);
      }
    }
    alignas(32) float lanes[16];
    for (int h = 0; h < 2; ++h) {
      const __m256 a02 = _mm256_add_ps(acc[0][h], acc[2][h]);
      const __m256 a13 = _mm256_add_ps(acc[1][h], acc[3][h]);
      _mm256_store_ps(lanes + 8 * h, _mm256_add_ps(a02, a13));
    }
    sum = reduce16(lanes);
  }
  if constexpr (std::is_same_v<T, float>) {
    auto f = static_cast<float>(sum);
    for (std::int64_t i = np; i < n; ++i) f = std::fma(wrow[i], x[i], f);
    return f;
  } else {
    for (std::int64_t i = np; i < n; ++i) sum += static_cast<double>(_cvtsh_ss(wrow[i]) * x[i]);
    return static_cast<float>(sum);
  }
}

template <class T>
void matmul_float_impl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.packed != nullptr && w.packed_rows == 16 && matmul_float_x16(w, x, n_tokens, y, pool)) return;
  if (!float_gemm_path(w)) {
    aligned_vector<float> rounded;
    const float* xs = x;
    if constexpr (!std::is_same_v<T, float>) {
      rounded.resize(static_cast<std::size_t>(w.in * n_tokens));
      fast_math()->round_f16(x, rounded.data(), w.in * n_tokens);  // present wherever this file's kernels are
      xs = rounded.data();
    }
    for_each_output(w.out, n_tokens, y, pool, [&](std::int64_t o, std::int64_t t) {
      return vec_dot(reinterpret_cast<const T*>(w.row(o)), xs + t * w.in, w.in);
    });
    return;
  }
  // One activation row needs no copy; a batch is copied (f16 weights: rounded) with padded rows.
  const std::int64_t ldx = n_tokens > 1 ? w.in + row_pad : w.in;
  aligned_vector<float> copy;
  const float* xs = x;
  if (n_tokens > 1 || !std::is_same_v<T, float>) {
    copy.resize(static_cast<std::size_t>(ldx * n_tokens));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      if constexpr (std::is_same_v<T, float>) {
        std::copy_n(x + t * w.in, w.in, copy.data() + t * ldx);
      } else {
        fast_math()->round_f16(x + t * w.in, copy.data() + t * ldx, w.in);  // present wherever this file's kernels are
      }
    }
    xs = copy.data();
  }
  if (n_tokens < 4) {
    // Decode: each output row over the whole reduction as in gemm_groups' last loop, rows read
    // as two regions in step (by_row_pair_streams), the next rows of both fetched meanwhile.
    const std::int64_t n = w.in, shares = std::max<std::int64_t>(n / 16, 1);
    const auto row_at = [&](std::int64_t o) { return reinterpret_cast<const T*>(w.row(o)); };
    // F16 with AVX-512 takes one widening and one fma per 16 elements and row (decode_tile_512):
    // F16:2048:11264 --cold, alternated with the 256-bit tile, 87-93 % of a plain read against
    // 84 % with one thread, 88 % against 84 % with two (from the caches 46-50 against 43-45
    // GB/s, the widening's pace); TinyLlama F16 decode, two threads, 93 % of a plain read of its
    // weights against 81-83 %. F32 measured no faster so (29-36 against 36-38 GB/s from the
    // caches, one thread).
    const bool avx512 = has_avx512_kernels();
    if (std::is_same_v<T, std::uint16_t> && !avx512 && n_tokens == 3) {
      // Three sequences decoding together: each weight vector widened once for the three, a row
      // of each region beside the other as one tile (12 accumulators), then the next two; from
      // the caches F16:2048:2048 x 3 rows 508-510 -> 410-411 us (one thread), TinyLlama F16,
      // three sequences on two threads 31.9 / 33.4 -> 35.9 / 37.5 t/s (alternated, Zen 3). Two
      // sequences, the same way, 2 x 2 tiles: 371 -> 310 us from the caches, but two threads
      // streaming from memory read their 4-row tiles faster (TinyLlama 27.0-28.8 against
      // 24.8-27.6 t/s): not taken.
      constexpr int K = 3;
      const auto tile = [&]<int R>(const T* const* rows, const tile_rows<4, true>* ahead, const std::int64_t* at) SPITE_AVX2 {
        alignas(32) float state[4 * K * 16] = {};  // (row r, activation row k) at (4k + r) * 16
        gemm_tile_chunk<T, R, K, -1, tile_rows<4, true>>(rows, xs, ldx, 0, n, 0, state, ahead);
        for (int k = 0; k < K; ++k) {
          for (int r = 0; r < R; ++r) y[k * w.out + at[r]] = reduce16(state + (4 * k + r) * 16);
        }
      };
      // Not reached (the GEMM path has a multiple of 4 rows, so every pair is a split one), but
      // right: the odd pair's rows, or the last row, one at a time.
      const auto rows_alone = [&](std::int64_t o, std::int64_t) {
        for (std::int64_t r = o; r < std::min(w.out, o + 2); ++r) {
          const T* row[1] = {row_at(r)};
          tile.template operator()<1>(row, nullptr, &r);
        }
      };
      return by_row_pair_streams(
          w.out, 1, pool,
          [&](std::int64_t o, std::int64_t o2, std::int64_t) {
            const tile_rows<4, true> at(o, o2, [&](std::int64_t r) { return w.row(r); }, w.row_bytes, shares);
            for (int p = 0; p < 2; ++p) {
              const T* rows[2] = {row_at(at.at[p]), row_at(at.at[2 + p])};
              const std::int64_t outs[2] = {at.at[p], at.at[2 + p]};
              tile.template operator()<2>(rows, p == 0 ? &at : nullptr, outs);
            }
          },
          rows_alone, rows_alone);
    }
    return by_row_pair_streams(
        w.out, n_tokens, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t t) {
          const tile_rows<4, true> at(o, o2, [&](std::int64_t r) { return w.row(r); }, w.row_bytes, shares);
          const T* rows[4] = {row_at(at.at[0]), row_at(at.at[1]), row_at(at.at[2]), row_at(at.at[3])};
          if (std::is_same_v<T, std::uint16_t> && avx512) {
            float* outs[4] = {y + t * w.out + at.at[0], y + t * w.out + at.at[1], y + t * w.out + at.at[2], y + t * w.out + at.at[3]};
            return decode_tile_512<T, 4>(rows, xs + t * ldx, n, t == 0 ? &at : nullptr, outs);
          }
          alignas(32) float state[4 * 16] = {};
          gemm_tile_chunk<T, 4, 1, -1, tile_rows<4, true>>(rows, xs, ldx, 0, n, t, state, t == 0 ? &at : nullptr);
          for (int r = 0; r < 4; ++r) y[t * w.out + at.at[r]] = reduce16(state + r * 16);
        },
        [&](std::int64_t o, std::int64_t t) {
          const T* rows[2] = {row_at(o), row_at(o + 1)};
          alignas(32) float state[4 * 16] = {};
          gemm_tile_chunk<T, 2, 1>(rows, xs, ldx, 0, n, t, state, nullptr);
          for (int r = 0; r < 2; ++r) y[t * w.out + o + r] = reduce16(state + r * 16);
        },
        [&](std::int64_t o, std::int64_t t) {  // not reached: the GEMM path has a multiple of 4 rows
          const T* rows[1] = {row_at(o)};
          alignas(32) float state[4 * 16] = {};
          gemm_tile_chunk<T, 1, 1>(rows, xs, ldx, 0, n, t, state, nullptr);
          y[t * w.out + o] = reduce16(state);
        });
  }
  const bool avx512 = has_avx512_kernels();
  const std::int64_t groups = w.out / 4;
  // Blocks of groups, whose rows stay in L2 while the batch passes 3 activation rows at a time
  // (decode takes one group at a time, for the split between threads).
  const std::int64_t together = n_tokens >= 4 ? gemm_groups_together : 1;
  pool.parallel_for((groups + together - 1) / together, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t s = begin; s < end; ++s) {
      const std::int64_t g0 = s * together, g1 = std::min(groups, g0 + together);
      std::int64_t t = 0;
      if (avx512) {  // 4 activation rows at a time stay in L1 / L2 while the block's rows pass
        for (; t + 4 <= n_tokens; t += 4) {
          for (std::int64_t g = g0; g < g1; ++g) gemm_tile_512<T, 4, 4>(w, 4 * g, xs, ldx, t, y, t == 0);
        }
      }
      gemm_groups<float_kernel<T>>(w, g0, g1, xs, ldx, t, n_tokens, y);
    }
  });
}

// ---- BF16 (reference: dot_bf16 in cpu_matmul.cpp, the AVX-512 BF16 dot instruction's order:
// 16 lanes, lane l taking pair l of every 32 values, odd element first, each product exact).
// A 32-bit lane holding a bf16 pair gives both as floats: the odd one is its top half, the
// even one its bottom half shifted up.

SPITE_AVX2 inline void bf16_pairs8(__m256i w, __m256i x, __m256& acc) {
  const __m256i top = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, top)), _mm256_castsi256_ps(_mm256_and_si256(x, top)), acc);
  acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)), acc);
}

// R rows x K activation rows; n % 32 == 0. With Split, rows o.. and o2.. (R / 2 of each): two
// regions read in step (by_row_pair_streams).
template <int R, int K, bool Split = false>
SPITE_AVX2 void bf16_tile(const weight& w, std::int64_t o, const std::uint16_t* xs, std::int64_t t0, float* y, bool first,
                          std::int64_t o2 = 0) {
  const std::int64_t n = w.in;
  const tile_rows<R, Split> at(o, o2, [&](std::int64_t r) { return w.row(r); }, w.row_bytes, n / 32);
  const std::uint16_t* rows[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const std::uint16_t*>(w.row(at.at[r]));
  // Loops over the tile unrolled in full (gemm_tile_512 says why).
  __m256 lo[R][K], hi[R][K];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) lo[r][k] = hi[r][k] = _mm256_setzero_ps();
  }
  for (std::int64_t i = 0; i < n; i += 32) {
    if (first) at.step(i / 32);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + i));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + i + 16));
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const std::uint16_t* x = xs + (t0 + k) * n + i;
        bf16_pairs8(w0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), lo[r][k]);
        bf16_pairs8(w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16)), hi[r][k]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, lo[r][k]);
      _mm256_store_ps(lanes + 8, hi[r][k]);
      y[(t0 + k) * w.out + at.at[r]] = reduce16(lanes);
    }
  }
}

template <int R>
void bf16_rows(const weight& w, std::int64_t o, const std::uint16_t* xs, std::int64_t n_tokens, float* y) {
  by_token_tiles(
      n_tokens, [&](std::int64_t t) { bf16_tile<R, 4>(w, o, xs, t, y, t == 0); },
      [&](std::int64_t t) { bf16_tile<R, 1>(w, o, xs, t, y, t == 0); });
}

// A batch for gemm_groups: the activations rounded to bf16 (exact as floats), each 32 values as
// 4 vectors of 8: the odd elements of pairs 0-7, their even elements, then pairs 8-15 the same
// way, so the tiles multiply them as they are.
void split_bf16_pairs(const float* x, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; i += 32) {
    for (int p = 0; p < 16; ++p) {
      float* half = out + i + 16 * (p / 8);
      half[p % 8] = bf16_to_fp32(fp32_to_bf16(x[i + 2 * p + 1]));
      half[8 + p % 8] = bf16_to_fp32(fp32_to_bf16(x[i + 2 * p]));
    }
  }
}

// gemm_groups' tile for bf16 weights over split activations: R rows x K activation rows from t0
// over values [i0, i1), the lanes of (row r, activation row t0 + k) at state + (4k + r) * 16.
// Each lane adds its pair's odd product, then its even one, as bf16_pairs8 does.
struct bf16_kernel {
  using element = std::uint16_t;
  template <int R, int K, int Half = -1>
  SPITE_AVX2 static void tile(const std::uint16_t* const* rows, const float* xs, std::int64_t ldx, std::int64_t i0,
                              std::int64_t i1, std::int64_t t0, float* state, const next_group_prefetch* = nullptr) {
    constexpr int h0 = Half < 0 ? 0 : Half, h1 = Half < 0 ? 2 : Half + 1;
    __m256 acc[2][R][K];
    for (int h = h0; h < h1; ++h) {
      for (int r = 0; r < R; ++r) {
        for (int k = 0; k < K; ++k) acc[h][r][k] = _mm256_loadu_ps(state + (4 * k + r) * 16 + 8 * h);
      }
    }
    const __m256i top = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (std::int64_t i = i0; i < i1; i += 32) {
      for (int h = h0; h < h1; ++h) {
        const __m256i* pairs[R];  // the rows' 8 bf16 pairs of this half
        for (int r = 0; r < R; ++r) pairs[r] = reinterpret_cast<const __m256i*>(rows[r] + i + 16 * h);
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(pairs[r]), top));
        for (int k = 0; k < K; ++k) {
          __m256 xv = _mm256_loadu_ps(xs + (t0 + k) * ldx + i + 16 * h);
          __asm__("" : "+x"(xv));  // one load: GCC would fold it into each FMA again
          for (int r = 0; r < R; ++r) acc[h][r][k] = _mm256_fmadd_ps(wv[r], xv, acc[h][r][k]);
        }
        for (int r = 0; r < R; ++r) wv[r] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(pairs[r]), 16));
        for (int k = 0; k < K; ++k) {
          __m256 xv = _mm256_loadu_ps(xs + (t0 + k) * ldx + i + 16 * h + 8);
          __asm__("" : "+x"(xv));
          for (int r = 0; r < R; ++r) acc[h][r][k] = _mm256_fmadd_ps(wv[r], xv, acc[h][r][k]);
        }
      }
    }
    for (int h = h0; h < h1; ++h) {
      for (int r = 0; r < R; ++r) {
        for (int k = 0; k < K; ++k) _mm256_storeu_ps(state + (4 * k + r) * 16 + 8 * h, acc[h][r][k]);
      }
    }
  }
};

void matmul_bf16_impl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.in % 32 != 0) {  // the reference's vector dot product with a tail: rare, kept generic
    generic_matmul(w, x, n_tokens, y, pool);
    return;
  }
  // bf16 activations for the decode tiles (in a batch, only rows past the last group of 4 use them)
  aligned_vector<std::uint16_t> xs(n_tokens < 4 || w.out % 4 != 0 ? static_cast<std::size_t>(w.in * n_tokens) : 0);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = fp32_to_bf16(x[i]);
  if (n_tokens == 2) {
    // Two sequences decoding together: each weight vector loaded and split once for both, a row
    // of each region beside the other as one tile, then the next two. BF16:2048:5632 from
    // memory, two threads, three rounds alternated: 751-754 -> 678-695 us. (Three rows so, 12
    // accumulators beside the split halves, measured no faster than a pass each: 478-485
    // against 467-475 us from the caches.)
    return by_row_pair_streams(
        w.out, 1, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t) {
          bf16_tile<2, 2, true>(w, o, xs.data(), 0, y, true, o2);
          bf16_tile<2, 2, true>(w, o + 1, xs.data(), 0, y, true, o2 + 1);
        },
        [&](std::int64_t o, std::int64_t) { bf16_tile<2, 2>(w, o, xs.data(), 0, y, true); },
        [&](std::int64_t o, std::int64_t) { bf16_tile<1, 2>(w, o, xs.data(), 0, y, true); });
  }
  if (n_tokens < 4) {  // decode: 4 rows at a time as two regions in step, the next ones prefetched
    return by_row_pair_streams(
        w.out, n_tokens, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t t) { bf16_tile<4, 1, true>(w, o, xs.data(), t, y, t == 0, o2); },
        [&](std::int64_t o, std::int64_t t) { bf16_tile<2, 1>(w, o, xs.data(), t, y, t == 0); },
        [&](std::int64_t o, std::int64_t t) { bf16_tile<1, 1>(w, o, xs.data(), t, y, t == 0); });
  }
  // A batch: blocks of row groups as for f16 / f32 weights; rows past the last group of 4 as
  // in decode.
  const std::int64_t ldx = w.in + row_pad;
  aligned_vector<float> split(static_cast<std::size_t>(ldx * n_tokens));
  for (std::int64_t t = 0; t < n_tokens; ++t) split_bf16_pairs(x + t * w.in, w.in, split.data() + t * ldx);
  const std::int64_t groups = w.out / 4, blocks = (groups + gemm_groups_together - 1) / gemm_groups_together;
  pool.parallel_for(blocks + 1, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t b = begin; b < end; ++b) {
      if (b == blocks) {
        for (std::int64_t o = 4 * groups; o < w.out; ++o) bf16_rows<1>(w, o, xs.data(), n_tokens, y);
        continue;
      }
      const std::int64_t g0 = b * gemm_groups_together;
      gemm_groups<bf16_kernel>(w, g0, std::min(groups, g0 + gemm_groups_together), split.data(), ldx, 0, n_tokens, y);
    }
  });
}

}  // namespace

void matmul_bf16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.packed != nullptr && w.packed_rows == 16 && matmul_float_x16(w, x, n_tokens, y, pool)) return;
  // One activation row goes the two-stream way below even with AVX-512 BF16, whose decode reads
  // one stream of 4-row groups: BF16:5632:2048 from memory, two rounds alternated, 81-82 % of a
  // plain read of the same bytes that way against 90-94 % (one thread) and 81-82 / 90-92 % (two).
  // From two activation rows on the VDPBF16PS tiles are ahead (2-3 rows: 69-75 % against 37-52 %).
  if (w.in > 0 && w.in % 32 == 0 && n_tokens > 1) {
    if (const matmul_fn avx512 = avx512_bf16_matmul()) return avx512(w, x, n_tokens, y, pool);
  }
  matmul_bf16_impl(w, x, n_tokens, y, pool);
}

float vec_dot_f16(const std::uint16_t* a, const float* x, std::int64_t n) { return vec_dot(a, x, n); }

void matmul_f16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_float_impl<std::uint16_t>(w, x, n_tokens, y, pool);
}

void matmul_f32(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_float_impl<float>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
