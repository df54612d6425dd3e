// AVX2 versions of the grid i-quant and ternary matmuls (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0): every block is decoded in registers (grid rows gathered into
// vectors, signs applied to the activations, ternary digits by multiply and shift); the 8
// integer lanes of each super-block come from maddubs over 32 elements at a time and the float
// lanes from one vector fma, which are the reference's exact integers and fmas
// (iquant_dots.hpp), so the same bits.
#include "simd_x86.hpp"
#include "simd_x86_grid.hpp"

#if defined(__x86_64__)
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "iquant_dots.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

// ---- IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S decoded in registers: their grid values are
// positive bytes, so a grid vector goes into maddubs as it is and the signs move onto the
// activations. Each type gives, per 32 elements, the grid bytes, the signs as +1 / -1 bytes and
// the int16 scales of its two halves.

// Eight sign bits (bit j set: element j negative) as eight bytes of +1 / -1.
constexpr std::uint64_t sign_bytes_of(unsigned bits) {
  std::uint64_t v = 0;
  for (int j = 0; j < 8; ++j) v |= static_cast<std::uint64_t>((bits >> j) & 1 ? 0xFF : 0x01) << (8 * j);
  return v;
}

// Every sign byte, and the 7-bit sign indices of ksigns_iq2xs (the 8th sign makes the count of
// negatives even), as constant tables.
constexpr auto raw_sign_table = [] {
  std::array<std::uint64_t, 256> t{};
  for (unsigned i = 0; i < t.size(); ++i) t[i] = sign_bytes_of(i);
  return t;
}();
constexpr auto parity_sign_table = [] {
  std::array<std::uint64_t, 128> t{};
  for (unsigned i = 0; i < t.size(); ++i) t[i] = sign_bytes_of(i | (static_cast<unsigned>(std::popcount(i) & 1) << 7));
  return t;
}();
inline const std::uint64_t* raw_sign_bytes() { return raw_sign_table.data(); }
inline const std::uint64_t* sign_bytes() { return parity_sign_table.data(); }

SPITE_AVX2 inline __m256i grid64(const std::uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_setr_epi64x(static_cast<long long>(grid[i0]), static_cast<long long>(grid[i1]), static_cast<long long>(grid[i2]),
                            static_cast<long long>(grid[i3]));
}
// Eight 4-byte grid rows, row k at index(k).
template <class Index>
SPITE_AVX2 inline __m256i grid32(const std::uint32_t* grid, const Index& index) {
  const auto row = [&](int k) { return static_cast<int>(grid[index(k)]); };
  return _mm256_setr_epi32(row(0), row(1), row(2), row(3), row(4), row(5), row(6), row(7));
}
SPITE_AVX2 inline __m256i signs64(const std::uint64_t* table, unsigned s0, unsigned s1, unsigned s2, unsigned s3) {
  return grid64(table, static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2), static_cast<int>(s3));
}
SPITE_AVX2 inline __m256i halves(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<std::int16_t>(hi)), _mm_set1_epi16(static_cast<std::int16_t>(lo)));
}

struct sub_block {
  __m256i grid, signs, scales;
};

struct iq2_xxs_decoder {
  using block = gguf::block_iq2_xxs;
  static constexpr float post = 0.125f;
  SPITE_AVX2 static sub_block decode(const block& b, int ib) {
    const auto* q = reinterpret_cast<const std::uint8_t*>(b.qs) + 8 * ib;
    std::uint32_t meta;
    std::memcpy(&meta, q + 4, 4);
    const int scale = 2 * static_cast<int>(meta >> 28) + 1;
    return {grid64(gguf::quants::iq::iq2xxs_grid, q[0], q[1], q[2], q[3]),
            signs64(sign_bytes(), meta & 127, (meta >> 7) & 127, (meta >> 14) & 127, (meta >> 21) & 127), halves(scale, scale)};
  }
};

struct iq2_xs_decoder {
  using block = gguf::block_iq2_xs;
  static constexpr float post = 0.125f;
  SPITE_AVX2 static sub_block decode(const block& b, int ib) {
    std::uint16_t code[4];
    std::memcpy(code, b.qs + 4 * ib, 8);
    return {grid64(gguf::quants::iq::iq2xs_grid, code[0] & 511, code[1] & 511, code[2] & 511, code[3] & 511),
            signs64(sign_bytes(), code[0] >> 9, code[1] >> 9, code[2] >> 9, code[3] >> 9),
            halves(2 * (b.scales[ib] & 0xf) + 1, 2 * (b.scales[ib] >> 4) + 1)};
  }
};

struct iq2_s_decoder {
  using block = gguf::block_iq2_s;
  static constexpr float post = 0.125f;
  SPITE_AVX2 static sub_block decode(const block& b, int ib) {
    const std::uint8_t* idx = b.qs + 4 * ib;
    const std::uint8_t* sg = b.qs + gguf::qk_k / 8 + 4 * ib;
    const int qh = b.qh[ib];
    return {grid64(gguf::quants::iq::iq2s_grid, idx[0] | ((qh << 8) & 0x300), idx[1] | ((qh << 6) & 0x300),
                   idx[2] | ((qh << 4) & 0x300), idx[3] | ((qh << 2) & 0x300)),
            signs64(raw_sign_bytes(), sg[0], sg[1], sg[2], sg[3]), halves(2 * (b.scales[ib] & 0xf) + 1, 2 * (b.scales[ib] >> 4) + 1)};
  }
};

struct iq3_xxs_decoder {
  using block = gguf::block_iq3_xxs;
  static constexpr float post = 0.25f;
  SPITE_AVX2 static sub_block decode(const block& b, int ib) {
    const std::uint8_t* g = b.qs + 8 * ib;
    std::uint32_t meta;
    std::memcpy(&meta, b.qs + gguf::qk_k / 4 + 4 * ib, 4);
    const int scale = 2 * static_cast<int>(meta >> 28) + 1;
    return {grid32(gguf::quants::iq::iq3xxs_grid, [&](int k) { return g[k]; }),
            signs64(sign_bytes(), meta & 127, (meta >> 7) & 127, (meta >> 14) & 127, (meta >> 21) & 127), halves(scale, scale)};
  }
};

struct iq3_s_decoder {
  using block = gguf::block_iq3_s;
  static constexpr float post = 1.0f;
  SPITE_AVX2 static sub_block decode(const block& b, int ib) {
    const std::uint8_t* q = b.qs + 8 * ib;
    const std::uint8_t* sg = b.signs + 4 * ib;
    const int qh = b.qh[ib];
    const int scale = 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
    return {grid32(gguf::quants::iq::iq3s_grid, [&](int k) { return q[k] | (((qh >> k) & 1) << 8); }),
            signs64(raw_sign_bytes(), sg[0], sg[1], sg[2], sg[3]), halves(scale, scale)};
  }
};

// The reference's dot_plain for these types: the same lanes (exact integers: pair sums of at
// most 2 * 62 * 127), the same fma per super-block, post * reduce8 at the end.
template <class D>
SPITE_AVX2 float dot_grid(const typename D::block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const sub_block sb = D::decode(x[i], ib);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      const __m256i pairs = _mm256_maddubs_epi16(sb.grid, _mm256_sign_epi8(xv, sb.signs));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(pairs, sb.scales));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), _mm256_cvtepi32_ps(lanes), acc);
  }
  return D::post * reduce8_vec(acc);
}

// ---- IQ1_S and IQ1_M in registers: grid values -1, 0, 1 (signed bytes, so maddubs takes their
// magnitudes with their signs moved onto the activations), and the delta term.

SPITE_AVX2 inline __m256i signed_pairs(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// The reference's dot_iq1_s: lanes of grid . q times the per-32 scale, one fma per super-block,
// the delta term from the activation sums in its own float chain.
SPITE_AVX2 float dot_iq1_s(const gguf::block_iq1_s* x, const gguf::block_q8_K* y, std::int64_t nb) {
  namespace iq = gguf::quants::iq;
  __m256 acc = _mm256_setzero_ps();
  float acc1 = 0.0f;
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes = _mm256_setzero_si256();
    int sumi1 = 0;
    for (int ib = 0; ib < 8; ++ib) {
      std::uint16_t qh;
      std::memcpy(&qh, &x[i].qh[ib], 2);
      const std::uint8_t* q = x[i].qs + 4 * ib;
      const int scale = 2 * ((qh >> 12) & 7) + 1;
      const __m256i grid = grid64(iq::iq1s_grid, q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700),
                                  q[2] | ((qh << 2) & 0x700), q[3] | ((qh >> 1) & 0x700));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(signed_pairs(grid, xv), _mm256_set1_epi16(static_cast<std::int16_t>(scale))));
      const int delta_sign = (qh & 0x8000) != 0 ? -1 : 1;
      sumi1 += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * delta_sign * scale;
    }
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
    std::uint16_t sc[4];
    std::memcpy(sc, x[i].scales, 8);
    __m256i lanes1 = _mm256_setzero_si256(), lanes2 = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int shift = 6 * (ib % 2);
      const __m256i scales = halves(2 * ((sc[ib / 2] >> shift) & 7) + 1, 2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
      const std::uint8_t* q = x[i].qs + 4 * ib;
      const int h0 = x[i].qh[2 * ib], h1 = x[i].qh[2 * ib + 1];
      const __m256i grid = grid64(iq::iq1s_grid, q[0] | ((h0 << 8) & 0x700), q[1] | ((h0 << 4) & 0x700),
                                  q[2] | ((h1 << 8) & 0x700), q[3] | ((h1 << 4) & 0x700));
      const auto delta = [](int nibble) { return static_cast<long long>((nibble & 8) != 0 ? 0xFFFFFFFFFFFFFFFFull : 0x0101010101010101ull); };
      const __m256i signs = _mm256_setr_epi64x(delta(h0), delta(h0 >> 4), delta(h1), delta(h1 >> 4));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * ib));
      lanes1 = _mm256_add_epi32(lanes1, _mm256_madd_epi16(signed_pairs(grid, xv), scales));
      lanes2 = _mm256_add_epi32(lanes2, _mm256_madd_epi16(_mm256_maddubs_epi16(plus, _mm256_sign_epi8(xv, signs)), scales));
    }
    const std::uint16_t scale_bits =
        static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const __m256 d = _mm256_set1_ps(y[i].d * _cvtsh_ss(scale_bits));
    acc1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes1), acc1);
    acc2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes2), acc2);
  }
  return std::fma(iq::iq1m_delta, reduce8_vec(acc2), reduce8_vec(acc1));
}

// ---- TQ1_0 and TQ2_0 in registers: the ternary digits (0..2) of 32 elements at a time, in the
// element order of the reference's digit buffers, then its lanes (digits . q minus the
// activation sums) and fma.

// Digit of byte b at power p of 3 (ternary_digit): ((b * p mod 256) * 3) >> 8, on the even and
// odd bytes of each 16-bit lane; p holds one power per 16-bit lane.
SPITE_AVX2 inline __m256i ternary_digits(__m256i v, __m256i p) {
  const __m256i low = _mm256_set1_epi16(0xFF);
  const __m256i three = _mm256_set1_epi16(3);
  const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(v, low), p), low);
  const __m256i odd = _mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), p), low);
  const __m256i de = _mm256_srli_epi16(_mm256_mullo_epi16(even, three), 8);
  const __m256i d_odd = _mm256_srli_epi16(_mm256_mullo_epi16(odd, three), 8);
  return _mm256_or_si256(de, _mm256_slli_epi16(d_odd, 8));
}
SPITE_AVX2 inline __m256i powers(int lo, int hi) { return halves(lo, hi); }

struct tq1_0_digits {
  using block = gguf::block_tq1_0;
  // Elements 0..159: qs[0..31] at powers 1..81; 160..239: qs[32..47] at powers 1..81, 16 at a
  // time; 240..255: qh[0..3] at powers 1..27, 4 at a time.
  SPITE_AVX2 static void digits(const block& b, __m256i* t) {
    const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    for (int k = 0; k < 5; ++k) t[k] = ternary_digits(head, _mm256_set1_epi16(static_cast<std::int16_t>(k_pow3(k))));
    const __m128i mid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32));
    const __m256i mid2 = _mm256_set_m128i(mid, mid);
    t[5] = ternary_digits(mid2, powers(1, 3));
    t[6] = ternary_digits(mid2, powers(9, 27));
    std::int32_t qh;
    std::memcpy(&qh, b.qh, 4);
    t[7] = ternary_digits(_mm256_set_m128i(_mm_set1_epi32(qh), mid),
                          _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27));
  }
  static constexpr int k_pow3(int k) { return k == 0 ? 1 : 3 * k_pow3(k - 1); }
};

struct tq2_0_digits {
  using block = gguf::block_tq2_0;
  // Element 128h + 32k + m: bits 2k..2k+1 of qs[32h + m].
  SPITE_AVX2 static void digits(const block& b, __m256i* t) {
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
      t[4 * h] = _mm256_and_si256(v, three);
      t[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), three);
      t[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), three);
      t[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), three);
    }
  }
};

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

// R::decoded holds a super-block decoded (vectors and its weight scale), R::dot<K> multiplies
// decoded rows by K activation rows; K is R::tile (4, or 2 for IQ1_M's 4 accumulators per row)
// or 1. Fewer than `decoded_from` activation rows take the decode kernel `Dot`: one row, and for
// TQ2_0, whose digits are two shifts and a mask, up to three. Two and three rows decoded once
// each (where each took the decode kernel until 2026-12-06), `--matmul T:2048:2048 -t 1` from the
// caches, Zen 3: IQ2_XXS 729 / 1058 -> 572 / 713 us, IQ2_S 965 / 1444 -> 748 / 853, IQ3_S 1524 /
// 2290 -> 926 / 1029, IQ1_M 1553 / 2338 -> 1041 / 1238, TQ1_0 528 / 791 -> 361 / 434; TQ2_0 200 /
// 234 against 198 / 269. Where the AVX-512 VBMI kernels run (simd_x86_iquant_grid_avx512.cpp),
// theirs take every product.
template <class R, float (*Dot)(const typename R::block*, const gguf::block_q8_K*, std::int64_t), std::int64_t decoded_from = 2>
void matmul_decoded(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / gguf::qk_k;
  const auto fast = avx512_grid_matmul(static_cast<const typename R::block*>(nullptr));
  if (fast == nullptr && n_tokens < decoded_from) return iquant::matmul_q8_K<typename R::block, Dot>(w, x, n_tokens, y, pool);
  std::vector<gguf::block_q8_K> xq;
  quantize_tokens_q8_K(x, w.in, n_tokens, xq, pool);
  if (fast != nullptr) return fast(w, xq.data(), n_tokens, y, pool);
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    aligned_vector<typename R::decoded> r(static_cast<std::size_t>(nb));
    for (std::int64_t o = begin; o < end; ++o) {
      const auto* row = reinterpret_cast<const typename R::block*>(w.row(o));
      for (std::int64_t i = 0; i < nb; ++i) R::decode(row[i], r[static_cast<std::size_t>(i)]);
      std::int64_t t = 0;
      for (; t + R::tile <= n_tokens; t += R::tile) R::template dot<R::tile>(r.data(), xq.data(), nb, t, w.out, o, y);
      for (; t < n_tokens; ++t) R::template dot<1>(r.data(), xq.data(), nb, t, w.out, o, y);
    }
  });
}

// The dot of decoded rows whose super-block is one set of 8 int32 lanes: R::lanes(r, c, x) adds
// sub-block c's products, R::adjust the super-block's other integer terms, R::post scales the
// result.
template <class R, int K>
SPITE_AVX2 void lanes_dot(const typename R::decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                          std::int64_t out, std::int64_t o, float* y) {
  __m256 acc[K];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes[K];
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) lanes[k] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + i].qs + 32 * c));
        lanes[k] = _mm256_add_epi32(lanes[k], R::lanes(r[i], c, xv));
        if constexpr (K > 1) __asm__("" : "+x"(lanes[k]));  // the sums in order, not a spilled tree
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const gguf::block_q8_K& x = xq[(t0 + k) * nb + i];
      acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(x.d * r[i].d), _mm256_cvtepi32_ps(R::adjust(x, lanes[k])), acc[k]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) y[(t0 + k) * out + o] = R::post * reduce8_vec(acc[k]);
}

template <class D>
struct grid_rows {
  using block = typename D::block;
  static constexpr int tile = 4;
  static constexpr float post = D::post;
  struct decoded {
    __m256i grid[8], signs[8], scales[8];
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    for (int ib = 0; ib < 8; ++ib) {
      const sub_block sb = D::decode(b, ib);
      r.grid[ib] = sb.grid;
      r.signs[ib] = sb.signs;
      r.scales[ib] = sb.scales;
    }
    r.d = _cvtsh_ss(b.d);
  }
  SPITE_AVX2 static __m256i lanes(const decoded& r, int ib, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(r.grid[ib], _mm256_sign_epi8(x, r.signs[ib])), r.scales[ib]);
  }
  SPITE_AVX2 static __m256i adjust(const gguf::block_q8_K&, __m256i lanes) { return lanes; }
  template <int K>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    lanes_dot<grid_rows, K>(r, xq, nb, t0, out, o, y);
  }
};

struct iq1_s_rows {
  using block = gguf::block_iq1_s;
  static constexpr int tile = 4;
  struct decoded {
    __m256i grid[8];  // -1, 0, 1 per element
    __m256i delta;    // int16 pairs: the delta sign times the scale of sub-block j at 2j, 2j + 1
    std::int16_t scale[8];
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    namespace iq = gguf::quants::iq;
    alignas(32) std::int16_t delta[16];
    for (int ib = 0; ib < 8; ++ib) {
      std::uint16_t qh;
      std::memcpy(&qh, &b.qh[ib], 2);
      const std::uint8_t* q = b.qs + 4 * ib;
      const int scale = 2 * ((qh >> 12) & 7) + 1;
      r.grid[ib] = grid64(iq::iq1s_grid, q[0] | ((qh << 8) & 0x700), q[1] | ((qh << 5) & 0x700), q[2] | ((qh << 2) & 0x700),
                          q[3] | ((qh >> 1) & 0x700));
      r.scale[ib] = static_cast<std::int16_t>(scale);
      delta[2 * ib] = delta[2 * ib + 1] = static_cast<std::int16_t>((qh & 0x8000) != 0 ? -scale : scale);
    }
    r.delta = _mm256_load_si256(reinterpret_cast<const __m256i*>(delta));
    r.d = _cvtsh_ss(b.d);
  }
  template <int K>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    __m256 acc[K];
    float acc1[K];
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      acc[k] = _mm256_setzero_ps();
      acc1[k] = 0.0f;
    }
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes[K];
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) lanes[k] = _mm256_setzero_si256();
      for (int ib = 0; ib < 8; ++ib) {
        const __m256i grid = r[i].grid[ib], magnitude = _mm256_sign_epi8(grid, grid);
        const __m256i scale = _mm256_set1_epi16(r[i].scale[ib]);
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + i].qs + 32 * ib));
          lanes[k] = _mm256_add_epi32(lanes[k], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xv, grid)), scale));
          if constexpr (K > 1) __asm__("" : "+x"(lanes[k]));
        }
      }
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const gguf::block_q8_K& x = xq[(t0 + k) * nb + i];
        const float d = x.d * r[i].d;
        acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes[k]), acc[k]);
        const int sumi1 = iq1_s_delta_sum(r[i].delta, x);
        acc1[k] = std::fma(d, static_cast<float>(sumi1), acc1[k]);
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) y[(t0 + k) * out + o] = std::fma(gguf::quants::iq::iq1s_delta, acc1[k], reduce8_vec(acc[k]));
  }
};

struct iq1_m_rows {
  using block = gguf::block_iq1_m;
  static constexpr int tile = 2;
  struct decoded {
    __m256i grid[8], delta[8], scales[8];  // grid -1, 0, 1; delta +-1 per 8 elements; per-16 scales
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    namespace iq = gguf::quants::iq;
    std::uint16_t sc[4];
    std::memcpy(sc, b.scales, 8);
    for (int ib = 0; ib < 8; ++ib) {
      const int shift = 6 * (ib % 2);
      r.scales[ib] = halves(2 * ((sc[ib / 2] >> shift) & 7) + 1, 2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
      const std::uint8_t* q = b.qs + 4 * ib;
      const int h0 = b.qh[2 * ib], h1 = b.qh[2 * ib + 1];
      r.grid[ib] = grid64(iq::iq1s_grid, q[0] | ((h0 << 8) & 0x700), q[1] | ((h0 << 4) & 0x700), q[2] | ((h1 << 8) & 0x700),
                          q[3] | ((h1 << 4) & 0x700));
      const auto delta = [](int nibble) { return static_cast<long long>((nibble & 8) != 0 ? 0xFFFFFFFFFFFFFFFFull : 0x0101010101010101ull); };
      r.delta[ib] = _mm256_setr_epi64x(delta(h0), delta(h0 >> 4), delta(h1), delta(h1 >> 4));
    }
    const std::uint16_t scale_bits =
        static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    r.d = _cvtsh_ss(scale_bits);
  }
  template <int K>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    const __m256i plus = _mm256_set1_epi8(1);
    __m256 acc1[K], acc2[K];
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc1[k] = acc2[k] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes1[K], lanes2[K];
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) lanes1[k] = lanes2[k] = _mm256_setzero_si256();
      for (int ib = 0; ib < 8; ++ib) {
        const __m256i grid = r[i].grid[ib], magnitude = _mm256_sign_epi8(grid, grid);
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[(t0 + k) * nb + i].qs + 32 * ib));
          lanes1[k] = _mm256_add_epi32(lanes1[k], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xv, grid)), r[i].scales[ib]));
          lanes2[k] = _mm256_add_epi32(lanes2[k], _mm256_madd_epi16(_mm256_maddubs_epi16(plus, _mm256_sign_epi8(xv, r[i].delta[ib])), r[i].scales[ib]));
          if constexpr (K > 1) __asm__("" : "+x"(lanes1[k]), "+x"(lanes2[k]));
        }
      }
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const __m256 d = _mm256_set1_ps(xq[(t0 + k) * nb + i].d * r[i].d);
        acc1[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes1[k]), acc1[k]);
        acc2[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes2[k]), acc2[k]);
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      y[(t0 + k) * out + o] = std::fma(gguf::quants::iq::iq1m_delta, reduce8_vec(acc2[k]), reduce8_vec(acc1[k]));
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
  SPITE_AVX2 static __m256i adjust(const gguf::block_q8_K& x, __m256i lanes) {
    return _mm256_sub_epi32(lanes, ternary_sub_block_sums(x));
  }
  template <int K>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    lanes_dot<ternary_rows, K>(r, xq, nb, t0, out, o, y);
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
