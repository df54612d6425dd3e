// AVX2 versions of the grid i-quant and ternary matmuls (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0): every block is decoded in registers (simd_x86_grid_avx2.hpp:
// grid rows gathered into vectors, a super-block's signs and scales worked out at once, ternary
// digits by multiply and shift); the 8 integer lanes of each super-block come from maddubs over
// 32 elements at a time and the float lanes from one vector fma, which are the reference's exact
// integers and fmas (iquant_dots.hpp), so the same bits. One activation row takes the signs onto
// its activations; batches store each row's values signed (below).
#include "simd_x86.hpp"
#include "simd_x86_grid.hpp"
#include "simd_x86_grid_avx2.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <cstring>

#include "iquant_dots.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

using namespace grid_avx2;

// The reference's dot_plain for these types: the same lanes (exact integers: pair sums of at
// most 2 * 62 * 127), the same fma per super-block, post * reduce8 at the end.
template <class D>
SPITE_AVX2 float dot_grid(const typename D::block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes = _mm256_setzero_si256();
    const D decoder(x[i]);
#pragma GCC unroll 8  // the shuffle patterns of each sub-block constants
    for (int ib = 0; ib < 8; ++ib) {
      const sub_block sb = decoder.decode(ib);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      const __m256i pairs = _mm256_maddubs_epi16(sb.grid, _mm256_sign_epi8(xv, sb.signs));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(pairs, sb.scales));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), _mm256_cvtepi32_ps(lanes), acc);
  }
  return D::post * reduce8_vec(acc);
}

// The reference's dot_iq1_s: lanes of grid . q times the per-32 scale, one fma per super-block,
// the delta term from the activation sums in its own float chain.
SPITE_AVX2 float dot_iq1_s(const gguf::block_iq1_s* x, const gguf::block_q8_K* y, std::int64_t nb) {
  namespace iq = gguf::quants::iq;
  __m256 acc = _mm256_setzero_ps();
  float acc1 = 0.0f;
  for (std::int64_t i = 0; i < nb; ++i) {
    const iq1_s_decoder decoder(x[i]);
    const __m256i scales = _mm256_set_m128i(decoder.scale_words, decoder.scale_words);
    __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(signed_pairs(decoder.grid(ib), xv), scale_of(scales, ib)));
    }
    const int sumi1 = iq1_s_delta_sum(decoder.delta, y[i]);
    const float d = y[i].d * _cvtsh_ss(x[i].d);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
    acc1 = std::fma(d, static_cast<float>(sumi1), acc1);
  }
  return std::fma(iq::iq1s_delta, acc1, reduce8_vec(acc));
}

// The reference's dot_iq1_m: grid lanes and delta lanes (+-1 per 8 elements), each with the
// per-16 scales and its own fma per super-block.
SPITE_AVX2 float dot_iq1_m(const gguf::block_iq1_m* x, const gguf::block_q8_K* y, std::int64_t nb) {
  namespace iq = gguf::quants::iq;
  const __m256i plus = _mm256_set1_epi8(1);
  __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    const iq1_m_decoder decoder(x[i]);
    __m256i lanes1 = _mm256_setzero_si256(), lanes2 = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i scales = decoder.scales(ib);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      lanes1 = _mm256_add_epi32(lanes1, _mm256_madd_epi16(signed_pairs(decoder.grid(ib), xv), scales));
      lanes2 = _mm256_add_epi32(lanes2, _mm256_madd_epi16(_mm256_maddubs_epi16(plus, _mm256_sign_epi8(xv, decoder.delta(ib))), scales));
    }
    const __m256 d = _mm256_set1_ps(y[i].d * decoder.d());
    acc1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes1), acc1);
    acc2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes2), acc2);
  }
  return std::fma(iq::iq1m_delta, reduce8_vec(acc2), reduce8_vec(acc1));
}

// The reference's dot_tq.
template <class D>
SPITE_AVX2 float dot_ternary(const typename D::block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i t[8];
    D::digits(x[i], t);
    __m256i lanes = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      lanes = _mm256_add_epi32(lanes, dot_lanes(t[c], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * c))));
    }
    lanes = _mm256_sub_epi32(lanes, ternary_sub_block_sums(y[i]));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * _cvtsh_ss(x[i].d)), _mm256_cvtepi32_ps(lanes), acc);
  }
  return reduce8_vec(acc);
}

// ---- batches: each row decoded once (grid, digit or sign bytes and scales as vectors: a few
// KiB per row, in L1) and dotted with every activation row, a few at a time, with the decode
// kernels' integers and fmas. Decoding per activation row (grid lookups and sign tables, scalar
// loads) cost more than the products themselves.

// What a batch's dots need of the activation rows besides their quants, made once per matmul:
// R::activations where R has it (IQ1_M's sums of four), else nothing.
struct no_activations {
  no_activations(const gguf::block_q8_K*, std::int64_t, std::int64_t) {}
};
template <class R>
struct activations_of {
  using type = no_activations;
};
template <class R>
  requires requires { typename R::activations; }
struct activations_of<R> {
  using type = typename R::activations;
};

// R::decoded holds a super-block decoded (vectors and its weight scale), R::dot<K, Rows>
// multiplies Rows decoded rows (two at a time, so that each activation load serves both, and a
// chunk's odd last row alone) by K activation rows; K is R::tile (4) or 1. Fewer than
// `decoded_from` activation rows take the decode kernel `Dot`: one row, and for TQ2_0, whose
// digits are two shifts and a mask, up to three. Two and three rows decoded once each (where
// each took the decode kernel until 2026-12-06), `--matmul T:2048:2048 -t 1` from the caches,
// Zen 3: IQ2_XXS 729 / 1058 -> 572 / 713 us, IQ2_S 965 / 1444 -> 748 / 853, IQ3_S 1524 / 2290 ->
// 926 / 1029, IQ1_M 1553 / 2338 -> 1041 / 1238, TQ1_0 528 / 791 -> 361 / 434; TQ2_0 200 / 234
// against 198 / 269. Where the AVX-512 VBMI kernels run (simd_x86_iquant_grid_avx512.cpp), theirs
// take every product.
template <class R, float (*Dot)(const typename R::block*, const gguf::block_q8_K*, std::int64_t), std::int64_t decoded_from = 2>
void matmul_decoded(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / gguf::qk_k;
  const auto fast = avx512_grid_matmul(static_cast<const typename R::block*>(nullptr));
  if (fast == nullptr && n_tokens < decoded_from) return iquant::matmul_q8_K<typename R::block, Dot>(w, x, n_tokens, y, pool);
  std::vector<gguf::block_q8_K> xq;
  quantize_tokens_q8_K(x, w.in, n_tokens, xq, pool);
  if (fast != nullptr) return fast(w, xq.data(), n_tokens, y, pool);
  const typename activations_of<R>::type acts(xq.data(), nb, n_tokens);
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    aligned_vector<typename R::decoded> r(static_cast<std::size_t>(2 * nb));
    for (std::int64_t o = begin; o < end;) {
      const std::int64_t m = std::min<std::int64_t>(2, end - o);
      for (std::int64_t j = 0; j < m; ++j) {
        const auto* row = reinterpret_cast<const typename R::block*>(w.row(o + j));
        for (std::int64_t i = 0; i < nb; ++i) R::decode(row[i], r[static_cast<std::size_t>(j * nb + i)]);
      }
      std::int64_t t = 0;
      if (m == 2) {
        for (; t + R::tile <= n_tokens; t += R::tile) R::template dot<R::tile, 2>(r.data(), xq.data(), nb, t, w.out, o, y, acts);
        for (; t < n_tokens; ++t) R::template dot<1, 2>(r.data(), xq.data(), nb, t, w.out, o, y, acts);
      } else {
        for (; t + R::tile <= n_tokens; t += R::tile) R::template dot<R::tile, 1>(r.data(), xq.data(), nb, t, w.out, o, y, acts);
        for (; t < n_tokens; ++t) R::template dot<1, 1>(r.data(), xq.data(), nb, t, w.out, o, y, acts);
      }
      o += m;
    }
  });
}

// The integer lanes of super-block i of Rows decoded rows (r[j nb + i]) against K activation
// rows from t0: lanes(row, sub-block, activation quants) per sub-block, added in order.
template <int Rows, int K, class Decoded, class Lanes>
SPITE_AVX2 inline void super_block_lanes(const Decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t i,
                                         __m256i (&lanes)[Rows][K], const Lanes& sub_block_lanes) {
#pragma GCC unroll 2
  for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) lanes[j][k] = _mm256_setzero_si256();
  }
  for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + i].qs + 32 * c));
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
        lanes[j][k] = _mm256_add_epi32(lanes[j][k], sub_block_lanes(r[j * nb + i], c, xv));
        if constexpr (K * Rows > 1) __asm__("" : "+x"(lanes[j][k]));  // the sums in order, not a spilled tree
      }
    }
  }
}

// The lanes of a sub-block of signed values (d.grid[ib]) with int16 scales (d.scales[ib]): the
// activations + 128 as unsigned bytes times the values, before the excess comes off.
template <class Decoded>
SPITE_AVX2 inline __m256i signed_lanes(const Decoded& d, int ib, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_xor_si256(x, _mm256_set1_epi8(static_cast<char>(0x80))), d.grid[ib]), d.scales[ib]);
}

// The dot of decoded rows whose super-block is one set of 8 int32 lanes: R::lanes(r, c, x) adds
// sub-block c's products, R::adjust the super-block's other integer terms, R::post scales the
// result.
template <class R, int K, int Rows>
SPITE_AVX2 void lanes_dot(const typename R::decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                          std::int64_t o, float* y) {
  __m256 acc[Rows][K];
#pragma GCC unroll 2
  for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc[j][k] = _mm256_setzero_ps();
  }
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes[Rows][K];
    super_block_lanes<Rows, K>(r, xq, nb, t0, i, lanes, R::lanes);
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_K& x = xq[(t0 + k) * nb + i];
        const typename R::decoded& d = r[j * nb + i];
        acc[j][k] = _mm256_fmadd_ps(_mm256_set1_ps(x.d * d.d), _mm256_cvtepi32_ps(R::adjust(d, x, lanes[j][k])), acc[j][k]);
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) y[(t0 + k) * out + o + j] = R::post * reduce8_vec(acc[j][k]);
  }
}

// The lanes of 128 x w (signed bytes) with int16 scales.
SPITE_AVX2 inline __m256i excess_lanes(__m256i w, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(0x80)), w), scales);
}

// Each row's grid bytes are stored with their signs (so no sign move per activation row) and
// multiplied with the activations + 128 as unsigned bytes: VPMADDUBSW's pairs stay below 2^15
// (2 x 255 x 62), and the lanes' excess, 128 x the row's own lanes, is worked out once per row
// and taken off per super-block. The same integers, with VPMADDUBSW and VPMADDWD alone on the
// multiply pipes.
template <class D>
struct grid_rows {
  using block = typename D::block;
  static constexpr int tile = 4;
  static constexpr float post = D::post;
  struct decoded {
    __m256i grid[8], scales[8];  // signed grid bytes, int16 scales
    __m256i excess;              // the lanes of 128 x the row
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    const D decoder(b);
    __m256i excess = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const sub_block sb = decoder.decode(ib);
      r.grid[ib] = _mm256_sign_epi8(sb.grid, sb.signs);
      r.scales[ib] = sb.scales;
      excess = _mm256_add_epi32(excess, excess_lanes(r.grid[ib], sb.scales));
    }
    r.excess = excess;
    r.d = _cvtsh_ss(b.d);
  }
  SPITE_AVX2 static __m256i lanes(const decoded& r, int ib, __m256i x) { return signed_lanes(r, ib, x); }
  SPITE_AVX2 static __m256i adjust(const decoded& r, const gguf::block_q8_K&, __m256i lanes) { return _mm256_sub_epi32(lanes, r.excess); }
  template <int K, int Rows, class Activations>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y, [[maybe_unused]] const Activations& acts) {
    lanes_dot<grid_rows, K, Rows>(r, xq, nb, t0, out, o, y);
  }
};

// The IQ1 rows as the grid rows: signed values multiplied with the activations + 128, the excess
// taken off per super-block, two rows per pass over the activation rows.
struct iq1_s_rows {
  using block = gguf::block_iq1_s;
  static constexpr int tile = 4;
  struct decoded {
    __m256i grid[8], scales[8];  // -1, 0, 1 per element; int16 scales
    __m256i excess;              // the lanes of 128 x the grid values
    __m256i delta;               // int16 pairs: the delta sign times the scale of sub-block j at 2j, 2j + 1
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    const iq1_s_decoder decoder(b);
    const __m256i scales = _mm256_set_m128i(decoder.scale_words, decoder.scale_words);
    __m256i excess = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      r.grid[ib] = decoder.grid(ib);
      r.scales[ib] = scale_of(scales, ib);
      excess = _mm256_add_epi32(excess, excess_lanes(r.grid[ib], r.scales[ib]));
    }
    r.excess = excess;
    r.delta = decoder.delta;
    r.d = _cvtsh_ss(b.d);
  }
  template <int K, int Rows, class Activations>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y, [[maybe_unused]] const Activations& acts) {
    __m256 acc[Rows][K];
    // The delta chains of 4 activation rows as one register's lanes per weight row, their
    // integers made together (iq1_s_delta_sums4), as the AVX-512 batches do; else one by one.
    constexpr bool delta4 = K == 4;
    alignas(16) float acc1[Rows][K];
    __m128 delta_chains[Rows];
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
      delta_chains[j] = _mm_setzero_ps();
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        acc[j][k] = _mm256_setzero_ps();
        acc1[j][k] = 0.0f;
      }
    }
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes[Rows][K];
      super_block_lanes<Rows, K>(r, xq, nb, t0, i, lanes, signed_lanes<decoded>);
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const gguf::block_q8_K& x = xq[(t0 + k) * nb + i];
          const decoded& dr = r[j * nb + i];
          const float d = x.d * dr.d;
          acc[j][k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes[j][k], dr.excess)), acc[j][k]);
          if constexpr (!delta4) acc1[j][k] = std::fma(d, static_cast<float>(iq1_s_delta_sum(dr.delta, x)), acc1[j][k]);
        }
      }
      if constexpr (delta4) {
        __m256i bsums[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) bsums[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + i].bsums));
        const __m128 dx = _mm_setr_ps(xq[t0 * nb + i].d, xq[(t0 + 1) * nb + i].d, xq[(t0 + 2) * nb + i].d, xq[(t0 + 3) * nb + i].d);
#pragma GCC unroll 2
        for (int j = 0; j < Rows; ++j) {
          const decoded& dr = r[j * nb + i];
          const __m128 d = _mm_mul_ps(dx, _mm_set1_ps(dr.d));
          delta_chains[j] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(iq1_s_delta_sums4(dr.delta, bsums)), delta_chains[j]);
        }
      }
    }
    if constexpr (delta4) {
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) _mm_store_ps(acc1[j], delta_chains[j]);
    }
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        y[(t0 + k) * out + o + j] = std::fma(gguf::quants::iq::iq1s_delta, acc1[j][k], reduce8_vec(acc[j][k]));
      }
    }
  }
};

// IQ1_M's delta lanes need no products per activation row: a delta is one sign per 8 elements,
// so lane L of sub-block ib takes c(ib, L) = its scale times its delta sign, times S(ib, L), the
// sum of the lane's 4 activation quants. The S are made once per matmul (`activations`), as
// int16 pairs of sub-blocks 2q and 2q + 1 per lane, so one VPMADDWD against the row's c pairs
// gives two sub-blocks' delta lanes: 4 per super-block where there were 8 VPMADDUBSW and 8
// VPMADDWD.
struct iq1_m_rows {
  using block = gguf::block_iq1_m;
  static constexpr int tile = 4;
  struct activations {
    struct lane_pairs {
      __m256i v;
    };
    aligned_vector<lane_pairs> pairs;  // activation super-block n's pair q at 4 n + q
    SPITE_AVX2 activations(const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t n_tokens)
        : pairs(static_cast<std::size_t>(4 * nb * n_tokens)) {
      const __m256i ones = _mm256_set1_epi8(1);
      for (std::int64_t n = 0; n < nb * n_tokens; ++n) {
        for (int q = 0; q < 4; ++q) {
          const auto sums = [&](int ib) SPITE_AVX2 {
            return dot_lanes(ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[n].qs + 32 * ib)));
          };
          pairs[static_cast<std::size_t>(4 * n + q)].v = low_high_words(sums(2 * q), sums(2 * q + 1));
        }
      }
    }
  };
  struct decoded {
    __m256i grid[8], scales[8];  // grid -1, 0, 1; per-16 scales
    __m256i delta_pairs[4];      // c(2q, L), c(2q + 1, L) as int16 pairs per lane
    __m256i excess_grid;         // the lanes of 128 x the grid values
    float d;
  };
  // Dword L: the low 16 bits of a's, then of b's.
  SPITE_AVX2 static __m256i low_high_words(__m256i a, __m256i b) { return _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA); }
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    const iq1_m_decoder decoder(b);
    // Byte 4L of each lane (its group's delta) against the lane's first scale word.
    const __m256i first_of_four = _mm256_set1_epi32(1);
    __m256i excess_grid = _mm256_setzero_si256(), c[8];
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      r.scales[ib] = decoder.scales(ib);
      r.grid[ib] = decoder.grid(ib);
      excess_grid = _mm256_add_epi32(excess_grid, excess_lanes(r.grid[ib], r.scales[ib]));
      c[ib] = _mm256_madd_epi16(_mm256_maddubs_epi16(first_of_four, decoder.delta(ib)), r.scales[ib]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) r.delta_pairs[q] = low_high_words(c[2 * q], c[2 * q + 1]);
    r.excess_grid = excess_grid;
    r.d = decoder.d();
  }
  template <int K, int Rows>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y, const activations& acts) {
    __m256 acc1[Rows][K], acc2[Rows][K];
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) acc1[j][k] = acc2[j][k] = _mm256_setzero_ps();
    }
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes[Rows][K];
      super_block_lanes<Rows, K>(r, xq, nb, t0, i, lanes, signed_lanes<decoded>);
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const decoded& dr = r[j * nb + i];
          const auto* pairs = acts.pairs.data() + 4 * ((t0 + k) * nb + i);
          __m256i delta = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) delta = _mm256_add_epi32(delta, _mm256_madd_epi16(pairs[q].v, dr.delta_pairs[q]));
          const __m256 d = _mm256_set1_ps(xq[(t0 + k) * nb + i].d * dr.d);
          acc1[j][k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes[j][k], dr.excess_grid)), acc1[j][k]);
          acc2[j][k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(delta), acc2[j][k]);
        }
      }
    }
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        y[(t0 + k) * out + o + j] = std::fma(gguf::quants::iq::iq1m_delta, reduce8_vec(acc2[j][k]), reduce8_vec(acc1[j][k]));
      }
    }
  }
};

template <class Digits>
struct ternary_rows {
  using block = typename Digits::block;
  static constexpr int tile = 4;
  static constexpr float post = 1.0f;
  struct decoded {
    __m256i digits[8];  // 0..2 per element
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    Digits::digits(b, r.digits);
    r.d = _cvtsh_ss(b.d);
  }
  SPITE_AVX2 static __m256i lanes(const decoded& r, int c, __m256i x) { return dot_lanes(r.digits[c], x); }
  // Digits 0..2 are the ternary values plus one: the activation sums come off.
  SPITE_AVX2 static __m256i adjust(const decoded&, const gguf::block_q8_K& x, __m256i lanes) {
    return _mm256_sub_epi32(lanes, ternary_sub_block_sums(x));
  }
  template <int K, int Rows, class Activations>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y, [[maybe_unused]] const Activations& acts) {
    lanes_dot<ternary_rows, K, Rows>(r, xq, nb, t0, out, o, y);
  }
};

template <class D>
constexpr exact_matmul grid_matmul(gguf::tensor_type type) {
  return {type, matmul_decoded<grid_rows<D>, dot_grid<D>>};
}

}  // namespace

std::span<const exact_matmul> grid_iquant_matmuls() {
  // IQ4_XS has a faster kernel of its own (simd_x86_iquants.cpp).
  static const exact_matmul table[] = {
      grid_matmul<iq2_xxs_decoder>(gguf::tensor_type::iq2_xxs),
      grid_matmul<iq2_xs_decoder>(gguf::tensor_type::iq2_xs),
      grid_matmul<iq2_s_decoder>(gguf::tensor_type::iq2_s),
      grid_matmul<iq3_xxs_decoder>(gguf::tensor_type::iq3_xxs),
      grid_matmul<iq3_s_decoder>(gguf::tensor_type::iq3_s),
      {gguf::tensor_type::iq1_s, matmul_decoded<iq1_s_rows, dot_iq1_s>},
      {gguf::tensor_type::iq1_m, matmul_decoded<iq1_m_rows, dot_iq1_m>},
      {gguf::tensor_type::tq1_0, matmul_decoded<ternary_rows<tq1_0_digits>, dot_ternary<tq1_0_digits>>},
      {gguf::tensor_type::tq2_0, matmul_decoded<ternary_rows<tq2_0_digits>, dot_ternary<tq2_0_digits>, 4>},
  };
  return table;
}

}  // namespace spite::dispatch::cpu::x86

#endif
