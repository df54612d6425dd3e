// AVX2 versions of the Q4_1 and Q5_1 matmuls (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). Reference:
// dot_q4_1_q5_1 in ref_dot_legacy.cpp: Q8_1 activations, the unsigned quants, 8 lanes of 4
// products per block with one fma each (d_w * d_x), and the min term m_w * s_x as a scalar chain
// of fmas added after the lane reduction. R weight rows x K activation rows per tile, each
// block unpacked in registers once for the K activation rows. (Q5_0 shares Q8_0's tiles in
// simd_x86_avx2.cpp.)
#include "simd_x86.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <cstring>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

// The 32 unsigned quants of a block in element order.
SPITE_AVX2 inline __m256i unsigned_quants(const gguf::block_q4_1& b) { return nibbles32(b.qs); }
SPITE_AVX2 inline __m256i unsigned_quants(const gguf::block_q5_1& b) { return quants5(b); }

// ---- Q4_1 / Q5_1

// The tile's min terms m_w * s_x, each the reference's scalar chain of fmas. With 4 activation
// rows, one lane per (weight row r, activation row k), lane 4 r + k, in one register: R x 4
// scalars would share the register file with the lane accumulators and spill them. With one
// (decode), lane r for weight row r.
template <int R, int K>
struct mins_terms;

template <int R>
struct mins_terms<R, 4> {
  static_assert(R <= 2);
  __m256 sum;  // zeroed by clear() (an initializer would be compiled without AVX)
  SPITE_AVX2 void clear() { sum = _mm256_setzero_ps(); }
  template <class Block>
  SPITE_AVX2 void add(const Block* const* rows, std::int64_t b, const float* s_of_tiles_rows) {
    const __m128 m0 = _mm_set1_ps(_cvtsh_ss(rows[0][b].m));
    const __m128 m1 = R > 1 ? _mm_set1_ps(_cvtsh_ss(rows[R - 1][b].m)) : _mm_setzero_ps();
    const __m256 s = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(s_of_tiles_rows));
    sum = _mm256_fmadd_ps(_mm256_set_m128(m1, m0), s, sum);
  }
  SPITE_AVX2 float of(int r, int k) const {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    return lanes[4 * r + k];
  }
};

template <int R>
struct mins_terms<R, 1> {
  static_assert(R <= 4);
  // Lane r for weight row r: scalars here were kept on the stack by GCC, so each block waited on
  // a store-to-load forward plus the fma (about 10 cycles a block for the 4 rows of decode).
  __m128 sum;
  SPITE_AVX2 void clear() { sum = _mm_setzero_ps(); }
  template <class Block>
  SPITE_AVX2 void add(const Block* const* rows, std::int64_t b, const float* s_of_tiles_rows) {
    __m128i m = _mm_setzero_si128();
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) m = insert_half(m, rows[r][b].m, r);
    sum = _mm_fmadd_ps(_mm_cvtph_ps(m), _mm_set1_ps(*s_of_tiles_rows), sum);
  }
  SPITE_AVX2 float of(int r, int) const {
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, sum);
    return lanes[r];
  }
};

template <class Block, int R, int K>
SPITE_AVX2 void q_1_tile(const weight& w, std::int64_t o, const q8_1_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  __m256 acc[R][K];
  mins_terms<R, K> summs;
  summs.clear();
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    summs.add(rows, b, xb.s_by_block.data() + b * xb.n_tokens + t0);
    for (int r = 0; r < R; ++r) {
      const __m256i q = unsigned_quants(rows[r][b]);
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(rows[r][b].d));  // the scales' product as a vector multiply
      for (int k = 0; k < K; ++k) {
        const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
        acc[r][k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&xb.d[i])), _mm256_cvtepi32_ps(dot_lanes(q, xv)), acc[r][k]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8_vec(acc[r][k]) + summs.of(r, k);
  }
}

template <class Block, int R>
void q_1_rows(const weight& w, std::int64_t o, const q8_1_batch& xb, std::int64_t nb, std::int64_t n_tokens, float* y) {
  constexpr int tile_rows = R > 2 ? 2 : R;  // 4 x 4 accumulators would spill AVX2's 16 registers
  by_token_tiles(
      n_tokens,
      [&](std::int64_t t) {
        for (int h = 0; h < R; h += tile_rows) q_1_tile<Block, tile_rows, 4>(w, o + h, xb, nb, t, y);
      },
      [&](std::int64_t t) { q_1_tile<Block, R, 1>(w, o, xb, nb, t, y); });
}

template <class Block>
void matmul_q_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_1_batch xb(x, w.in, n_tokens);
  by_row_groups(
      w.out, pool, [&](std::int64_t o) { q_1_rows<Block, 4>(w, o, xb, nb, n_tokens, y); },
      [&](std::int64_t o) { q_1_rows<Block, 1>(w, o, xb, nb, n_tokens, y); });
}

}  // namespace

void matmul_q4_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q4_1_x16(w, x, n_tokens, y, pool)) return;
  } else if (w.packed != nullptr) {
    return matmul_q4_1_packed(w, x, n_tokens, y, pool);
  }
  matmul_q_1<gguf::block_q4_1>(w, x, n_tokens, y, pool);
}
void matmul_q5_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q5_1_x16(w, x, n_tokens, y, pool)) return;
  } else if (w.packed != nullptr) {
    return matmul_q5_1_packed(w, x, n_tokens, y, pool);
  }
  matmul_q_1<gguf::block_q5_1>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
