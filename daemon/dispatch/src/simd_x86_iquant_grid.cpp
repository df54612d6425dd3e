// AVX2 versions of the grid i-quant and ternary matmuls (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0): the blocks are decoded as in ref_dot_iquants.cpp (table
// lookups), the 8 integer lanes of each super-block come from maddubs over 32 elements at a
// time and the float lanes from one vector fma, which are the reference's exact integers and
// fmas (iquant_dots.hpp), so the same bits.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <array>

#include "iquant_dots.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

struct avx2_lanes {
  // lane k: sum over sub-blocks ib of scale(ib, k / 4) * (elements 4k..4k+3 of w . q). The
  // signed weights go through maddubs as |w| times q with w's sign (|w| <= 127, |q| <= 127:
  // the int16 pair sums cannot saturate).
  SPITE_AVX2 static void lanes(const iquant::decoded& b, const std::int8_t* q, int* lane) {
    __m256i acc = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.w + 32 * ib));
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * ib));
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
      const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(static_cast<std::int16_t>(b.scale16[2 * ib + 1])),
                                              _mm_set1_epi16(static_cast<std::int16_t>(b.scale16[2 * ib])));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lane), acc);
  }

  SPITE_AVX2 static void accumulate(float* acc, float d, const int* lane) {
    const __m256 l = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane)));
    _mm256_storeu_ps(acc, _mm256_fmadd_ps(_mm256_set1_ps(d), l, _mm256_loadu_ps(acc)));
  }

  // Unsigned digits 0..2 times activations, lane k over elements 4k..4k+3 of every 32, minus the
  // activation sums bsums[2k] + bsums[2k + 1].
  SPITE_AVX2 static void ternary(const std::uint8_t* t, const gguf::block_q8_K& y, int* lane) {
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      acc = _mm256_add_epi32(acc, dot_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + 32 * c)),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * c))));
    }
    const __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), _mm256_set1_epi16(1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lane), _mm256_sub_epi32(acc, sums));
  }
};

// ---- IQ2_XXS and IQ3_XXS decoded in registers: their grid values are positive bytes, so a
// grid vector goes into maddubs as it is and the signs move onto the activations.

// ksigns_iq2xs[i] as eight bytes of +1 / -1 (bit j set: element j negative).
const std::uint64_t* sign_bytes() {
  static const auto table = [] {
    std::array<std::uint64_t, 128> t{};
    for (std::size_t i = 0; i < t.size(); ++i) {
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t byte = (gguf::quants::iq::ksigns_iq2xs[i] >> j) & 1 ? 0xFF : 0x01;
        t[i] |= byte << (8 * j);
      }
    }
    return t;
  }();
  return table.data();
}

// The reference's dot_plain for these types: the same lanes (exact integers), the same fma per
// super-block, post * reduce8 at the end.
template <class Block, bool Iq3>
SPITE_AVX2 float dot_xxs(const Block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  namespace iq = gguf::quants::iq;
  const std::uint64_t* signs = sign_bytes();
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    const auto* q = reinterpret_cast<const std::uint8_t*>(x[i].qs);
    __m256i lanes = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      std::uint32_t meta;
      __m256i grid;
      if constexpr (Iq3) {
        std::memcpy(&meta, q + iquant::qk / 4 + 4 * ib, 4);
        const std::uint8_t* g = q + 8 * ib;
        grid = _mm256_setr_epi32(static_cast<int>(iq::iq3xxs_grid[g[0]]), static_cast<int>(iq::iq3xxs_grid[g[1]]),
                                 static_cast<int>(iq::iq3xxs_grid[g[2]]), static_cast<int>(iq::iq3xxs_grid[g[3]]),
                                 static_cast<int>(iq::iq3xxs_grid[g[4]]), static_cast<int>(iq::iq3xxs_grid[g[5]]),
                                 static_cast<int>(iq::iq3xxs_grid[g[6]]), static_cast<int>(iq::iq3xxs_grid[g[7]]));
      } else {
        std::memcpy(&meta, q + 8 * ib + 4, 4);
        const std::uint8_t* g = q + 8 * ib;
        grid = _mm256_setr_epi64x(static_cast<long long>(iq::iq2xxs_grid[g[0]]), static_cast<long long>(iq::iq2xxs_grid[g[1]]),
                                  static_cast<long long>(iq::iq2xxs_grid[g[2]]), static_cast<long long>(iq::iq2xxs_grid[g[3]]));
      }
      const __m256i s = _mm256_setr_epi64x(static_cast<long long>(signs[meta & 127]), static_cast<long long>(signs[(meta >> 7) & 127]),
                                           static_cast<long long>(signs[(meta >> 14) & 127]),
                                           static_cast<long long>(signs[(meta >> 21) & 127]));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      const __m256i pairs = _mm256_maddubs_epi16(grid, _mm256_sign_epi8(xv, s));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(pairs, _mm256_set1_epi16(static_cast<std::int16_t>(2 * (meta >> 28) + 1))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), _mm256_cvtepi32_ps(lanes), acc);
  }
  return (Iq3 ? 0.25f : 0.125f) * reduce8_vec(acc);
}

}  // namespace

std::span<const exact_matmul> grid_iquant_matmuls() {
  // IQ4_XS has a faster kernel of its own (simd_x86_iquants.cpp).
  static const auto table = [] {
    std::vector<exact_matmul> t;
    for (const exact_matmul& m : iquant::matmuls<avx2_lanes>) {
      if (m.type == gguf::tensor_type::iq2_xxs) {
        t.push_back({m.type, iquant::matmul_q8_K<gguf::block_iq2_xxs, dot_xxs<gguf::block_iq2_xxs, false>>});
      } else if (m.type == gguf::tensor_type::iq3_xxs) {
        t.push_back({m.type, iquant::matmul_q8_K<gguf::block_iq3_xxs, dot_xxs<gguf::block_iq3_xxs, true>>});
      } else if (m.type != gguf::tensor_type::iq4_xs) {
        t.push_back(m);
      }
    }
    return t;
  }();
  return table;
}

}  // namespace spite::dispatch::cpu::x86

#endif
