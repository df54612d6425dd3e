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
// activations. Each type gives, per 32 elements, the grid bytes, the signs as bytes VPSIGNB takes
// (negative where an element is, never zero) and the int16 scales of its two halves.

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
// The same for indices that are the 8 bytes at `eight`: one load for them, the rows paired by
// unpacks (IQ3_XXS:2048:2048 from the caches 0.377 -> 0.367 ms; IQ3_S's computed indices
// measured slower paired).
SPITE_AVX2 inline __m256i grid32_bytes(const std::uint32_t* grid, const std::uint8_t* eight) {
  std::uint64_t w;
  std::memcpy(&w, eight, 8);
  const auto row = [&](int k) SPITE_AVX2 { return _mm_cvtsi32_si128(static_cast<int>(grid[(w >> (8 * k)) & 255])); };
  const __m128i r01 = _mm_unpacklo_epi32(row(0), row(1)), r23 = _mm_unpacklo_epi32(row(2), row(3));
  const __m128i r45 = _mm_unpacklo_epi32(row(4), row(5)), r67 = _mm_unpacklo_epi32(row(6), row(7));
  return _mm256_set_m128i(_mm_unpacklo_epi64(r45, r67), _mm_unpacklo_epi64(r01, r23));
}
SPITE_AVX2 inline __m256i halves(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<std::int16_t>(hi)), _mm_set1_epi16(static_cast<std::int16_t>(lo)));
}

// The signs and scales of a super-block are worked out for all 8 sub-blocks at once in vectors
// (a sign table looked up per 8 elements and a scale vector built per sub-block were about half
// of each sub-block's 45 instructions, scalar index arithmetic and lane inserts).

// A super-block's 32 sign bytes (sub-block ib's 4 at 4 ib; element j of its group g negative:
// bit j of byte g) rearranged once so that one in-lane shuffle spreads a sub-block's over its
// 32 elements: the low half holds groups 0 and 1 of every sub-block (2 ib, 2 ib + 1), the high
// half groups 2 and 3.
SPITE_AVX2 inline __m256i arrange_signs(__m256i natural) {
  const __m256i words = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10,
                                         11, 14, 15);
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(natural, words), _MM_SHUFFLE(3, 1, 2, 0));
}
// Sub-block ib's 4 group bytes each spread over its group's 8 elements; its signs as 32 bytes for
// VPSIGNB, negative where an element is: its group bytes spread, each byte's bit kept and 127 added (bit set: 128 or more, a negative byte; clear:
// 127), never zero.
SPITE_AVX2 inline __m256i spread_groups(__m256i arranged, int ib) {
  const auto g = static_cast<char>(2 * ib), h = static_cast<char>(2 * ib + 1);
  return _mm256_shuffle_epi8(arranged, _mm256_setr_epi8(g, g, g, g, g, g, g, g, h, h, h, h, h, h, h, h, g, g, g, g, g, g, g, g, h, h, h,
                                                        h, h, h, h, h));
}
SPITE_AVX2 inline __m256i expand_signs(__m256i arranged, int ib) {
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_add_epi8(_mm256_and_si256(spread_groups(arranged, ib), bit), _mm256_set1_epi8(127));
}

// 32 bytes of 7 sign bits each (ksigns_iq2xs's indices) with their 8th bit, which makes the
// count of negatives even: the parity of the low and the high nibble looked up and combined.
SPITE_AVX2 inline __m256i with_parity(__m256i seven) {
  const __m256i parity = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0, -128, -128, 0,
                                          -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(seven, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(seven, 4), nibble);
  return _mm256_or_si256(seven, _mm256_xor_si256(_mm256_shuffle_epi8(parity, lo), _mm256_shuffle_epi8(parity, hi)));
}

// The 7-bit sign indices at bits 0, 7, 14 and 21 of each of 8 words (IQ2_XXS's and IQ3_XXS's
// sub-block words) as the 4 bytes of each dword.
SPITE_AVX2 inline __m256i seven_bit_bytes(__m256i words) {
  const auto field = [&](int k) SPITE_AVX2 {
    return _mm256_and_si256(_mm256_slli_epi32(words, k), _mm256_set1_epi32(0x7F << (8 * k)));
  };
  return _mm256_or_si256(_mm256_or_si256(field(0), field(1)), _mm256_or_si256(field(2), field(3)));
}

// Sub-block ib's int16 scale vector (its first 16 elements' scale in the low half, the last
// 16's in the high half) from per_block: word ib of the low half the first, of the high half
// the second.
SPITE_AVX2 inline __m256i scale_of(__m256i per_block, int ib) {
  const auto b = static_cast<char>(2 * ib);
  const auto c = static_cast<char>(2 * ib + 1);
  return _mm256_shuffle_epi8(per_block, _mm256_setr_epi8(b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c,
                                                          b, c, b, c, b, c));
}
// 2 s + 1 for 8 words s in both halves of a vector (the odd scales of the XXS types).
SPITE_AVX2 inline __m256i odd_scales(__m128i s) {
  const __m128i odd = _mm_or_si128(_mm_add_epi16(s, s), _mm_set1_epi16(1));
  return _mm256_set_m128i(odd, odd);
}
// 2 (s & 15) + 1 in the low half, 2 (s >> 4) + 1 in the high half, for 8 scale bytes s.
SPITE_AVX2 inline __m256i nibble_scales(const std::uint8_t* eight) {
  const __m128i s = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(eight)));
  const __m128i lo = _mm_and_si128(s, _mm_set1_epi16(15)), hi = _mm_srli_epi16(s, 4);
  const __m128i one = _mm_set1_epi16(1);
  return _mm256_set_m128i(_mm_or_si128(_mm_add_epi16(hi, hi), one), _mm_or_si128(_mm_add_epi16(lo, lo), one));
}
// The scales of IQ2_XXS's and IQ3_XXS's sub-block words (the top 4 bits).
SPITE_AVX2 inline __m256i xxs_scales(__m256i words) {
  const __m256i s = _mm256_srli_epi32(words, 28);
  return odd_scales(_mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
}

struct sub_block {
  __m256i grid, signs, scales;
};

// Each decoder is made from a super-block (its signs and scales for all sub-blocks) and gives
// sub-block ib's grid bytes, signs as VPSIGNB takes them and int16 scales.
struct iq2_xxs_decoder {
  using block = gguf::block_iq2_xxs;
  static constexpr float post = 0.125f;
  const std::uint8_t* q;
  __m256i signs, scales;
  SPITE_AVX2 explicit iq2_xxs_decoder(const block& b) : q(reinterpret_cast<const std::uint8_t*>(b.qs)) {
    // Sub-block ib's 8 bytes: 4 grid indices, then its word; the words to dwords 0..7.
    const __m256 a = _mm256_loadu_ps(reinterpret_cast<const float*>(q)), c = _mm256_loadu_ps(reinterpret_cast<const float*>(q + 32));
    const __m256i words = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0));
    signs = arrange_signs(with_parity(seven_bit_bytes(words)));
    scales = xxs_scales(words);
  }
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint8_t* g = q + 8 * ib;
    return {grid64(gguf::quants::iq::iq2xxs_grid, g[0], g[1], g[2], g[3]), expand_signs(signs, ib), scale_of(scales, ib)};
  }
};

struct iq2_xs_decoder {
  using block = gguf::block_iq2_xs;
  static constexpr float post = 0.125f;
  const std::uint16_t* codes;
  __m256i signs, scales;
  SPITE_AVX2 explicit iq2_xs_decoder(const block& b) : codes(b.qs), scales(nibble_scales(b.scales)) {
    // Each code: a 9-bit grid index, the 7-bit sign index above it; 4 codes per sub-block.
    const __m256i a = _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), 9);
    const __m256i c = _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 16)), 9);
    const __m256i seven = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, c), _MM_SHUFFLE(3, 1, 2, 0));
    signs = arrange_signs(with_parity(seven));
  }
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint16_t* c = codes + 4 * ib;
    return {grid64(gguf::quants::iq::iq2xs_grid, c[0] & 511, c[1] & 511, c[2] & 511, c[3] & 511), expand_signs(signs, ib),
            scale_of(scales, ib)};
  }
};

struct iq2_s_decoder {
  using block = gguf::block_iq2_s;
  static constexpr float post = 0.125f;
  const block& b;
  __m256i signs, scales;
  SPITE_AVX2 explicit iq2_s_decoder(const block& blk)
      : b(blk), signs(arrange_signs(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + gguf::qk_k / 8)))),
        scales(nibble_scales(blk.scales)) {}
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint8_t* idx = b.qs + 4 * ib;
    const int qh = b.qh[ib];
    return {grid64(gguf::quants::iq::iq2s_grid, idx[0] | ((qh << 8) & 0x300), idx[1] | ((qh << 6) & 0x300),
                   idx[2] | ((qh << 4) & 0x300), idx[3] | ((qh << 2) & 0x300)),
            expand_signs(signs, ib), scale_of(scales, ib)};
  }
};

struct iq3_xxs_decoder {
  using block = gguf::block_iq3_xxs;
  static constexpr float post = 0.25f;
  const std::uint8_t* q;
  __m256i signs, scales;
  SPITE_AVX2 explicit iq3_xxs_decoder(const block& b) : q(b.qs) {
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + gguf::qk_k / 4));
    signs = arrange_signs(with_parity(seven_bit_bytes(words)));
    scales = xxs_scales(words);
  }
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint8_t* g = q + 8 * ib;
    return {grid32_bytes(gguf::quants::iq::iq3xxs_grid, g), expand_signs(signs, ib), scale_of(scales, ib)};
  }
};

struct iq3_s_decoder {
  using block = gguf::block_iq3_s;
  static constexpr float post = 1.0f;
  const block& b;
  __m256i signs, scales;
  SPITE_AVX2 explicit iq3_s_decoder(const block& blk)
      : b(blk), signs(arrange_signs(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.signs)))) {
    // Sub-block ib's scale: nibble ib % 2 of byte ib / 2.
    std::int32_t four;
    std::memcpy(&four, blk.scales, 4);
    const __m128i s = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(four));
    scales = odd_scales(_mm_unpacklo_epi16(_mm_and_si128(s, _mm_set1_epi16(15)), _mm_srli_epi16(s, 4)));
  }
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint8_t* q = b.qs + 8 * ib;
    const int qh = b.qh[ib];
    // The 9-bit indices as 8 words (the low bytes widened, bit k of qh to bit 8 of word k by a
    // multiply), taken out as two 64-bit words: a few vector operations for 8 x 4 scalar ones.
    const __m128i high = _mm_mullo_epi16(_mm_and_si128(_mm_set1_epi16(static_cast<std::int16_t>(qh)), _mm_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128)),
                                         _mm_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2));
    const __m128i index = _mm_or_si128(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))), high);
    const auto lo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(index)), hi = static_cast<std::uint64_t>(_mm_extract_epi64(index, 1));
    return {grid32(gguf::quants::iq::iq3s_grid, [&](int k) { return ((k < 4 ? lo : hi) >> (16 * (k % 4))) & 0xFFFF; }), expand_signs(signs, ib),
            scale_of(scales, ib)};
  }
};

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

// ---- IQ1_S and IQ1_M in registers: grid values -1, 0, 1 (signed bytes, so maddubs takes their
// magnitudes with their signs moved onto the activations), and the delta term.

SPITE_AVX2 inline __m256i signed_pairs(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// An IQ1_S super-block's grid indices, scales and delta terms, worked out for its 8 sub-blocks
// at once in vectors (per sub-block they were some 20 scalar operations).
struct iq1_s_decoder {
  __m128i scale_words;  // word ib: sub-block ib's scale
  __m256i delta;        // int16 pairs: the delta sign times the scale of sub-block j at 2j, 2j + 1
  alignas(32) std::uint16_t index[32];  // the 11-bit grid index of each 8 elements
  SPITE_AVX2 explicit iq1_s_decoder(const gguf::block_iq1_s& b) {
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m128i scale = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
    const __m128i negative = _mm_srai_epi16(qh, 15);
    const __m128i signed_scale = _mm_sub_epi16(_mm_xor_si128(scale, negative), negative);
    scale_words = scale;
    delta = _mm256_set_m128i(_mm_unpackhi_epi16(signed_scale, signed_scale), _mm_unpacklo_epi16(signed_scale, signed_scale));
    // Index 4 ib + k: qs[4 ib + k] and bits 3k..3k+2 of qh[ib] above it, each word's field
    // multiplied up to bits 12..14 and shifted down to 8..10.
    const __m256i both = _mm256_set_m128i(qh, qh);
    const __m256i up = _mm256_setr_epi16(4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8);
    for (int h = 0; h < 2; ++h) {
      const char w0 = static_cast<char>(8 * h), w1 = static_cast<char>(8 * h + 2), w2 = static_cast<char>(8 * h + 4),
                 w3 = static_cast<char>(8 * h + 6);
      const __m256i words = _mm256_shuffle_epi8(both, _mm256_setr_epi8(w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w1, w1 + 1, w1, w1 + 1,
                                                                        w1, w1 + 1, w1, w1 + 1, w2, w2 + 1, w2, w2 + 1, w2, w2 + 1, w2, w2 + 1,
                                                                        w3, w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w3 + 1));
      const __m256i high = _mm256_srli_epi16(_mm256_and_si256(_mm256_mullo_epi16(words, up), _mm256_set1_epi16(0x7000)), 4);
      const __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(index + 16 * h), _mm256_or_si256(low, high));
    }
  }
  SPITE_AVX2 __m256i grid(int ib) const {
    const std::uint16_t* i = index + 4 * ib;
    return grid64(gguf::quants::iq::iq1s_grid, i[0], i[1], i[2], i[3]);
  }
};

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

// An IQ1_M super-block's grid indices, delta signs and scales, worked out for its 8 sub-blocks
// at once in vectors.
struct iq1_m_decoder {
  __m256i deltas;       // the +1 / -1 of each 8 elements, as arrange_signs lays out sign bytes
  __m256i scale_bytes;  // scale of sub-block ib's first 16 elements at byte 2 ib, its last 16's at 2 ib + 1 (both halves)
  alignas(32) std::uint16_t index[32];  // the 11-bit grid index of each 8 elements
  SPITE_AVX2 explicit iq1_m_decoder(const gguf::block_iq1_m& b) {
    std::memcpy(&scale_words, b.scales, 8);
    // Group 4 ib + k: qs[4 ib + k], and nibble k % 2 of qh[2 ib + k / 2] (its bits 0-2 above the
    // index, bit 3 the delta's sign), each nibble multiplied up to bits 8-11.
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m256i up = _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16);
    __m256i negative[2];
    for (int h = 0; h < 2; ++h) {
      const __m128i bytes = h == 0 ? qh : _mm_srli_si128(qh, 8);
      const __m256i nibbles = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(bytes, bytes)), up);
      const __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(index + 16 * h), _mm256_or_si256(low, _mm256_and_si256(nibbles, _mm256_set1_epi16(0x700))));
      negative[h] = _mm256_or_si256(_mm256_srai_epi16(_mm256_slli_epi16(nibbles, 4), 15), _mm256_set1_epi16(1));
    }
    deltas = arrange_signs(_mm256_permute4x64_epi64(_mm256_packs_epi16(negative[0], negative[1]), _MM_SHUFFLE(3, 1, 2, 0)));
    // Scale v = 2 ib + half: bits 3 (v % 4) .. + 2 of the v / 4-th 16-bit word, moved up to 12-14.
    const __m256i words = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(scale_words)),
                                              _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
    const __m256i three = _mm256_srli_epi16(
        _mm256_and_si256(_mm256_mullo_epi16(words, _mm256_setr_epi16(4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8)),
                         _mm256_set1_epi16(0x7000)),
        12);
    const __m256i odd = _mm256_or_si256(_mm256_add_epi16(three, three), _mm256_set1_epi16(1));
    const __m128i packed = _mm_packus_epi16(_mm256_castsi256_si128(odd), _mm256_extracti128_si256(odd, 1));
    scale_bytes = _mm256_set_m128i(packed, packed);
  }
  std::uint64_t scale_words;  // the 4 16-bit words of scales: 3-bit scales, the fp16 scale's nibbles on top
  SPITE_AVX2 float d() const {
    const auto word = [&](int k) { return static_cast<std::uint32_t>(scale_words >> (16 * k)) & 0xFFFF; };
    return _cvtsh_ss(static_cast<std::uint16_t>((word(0) >> 12) | ((word(1) >> 8) & 0x00f0) | ((word(2) >> 4) & 0x0f00) | (word(3) & 0xf000)));
  }
  SPITE_AVX2 __m256i grid(int ib) const {
    const std::uint16_t* i = index + 4 * ib;
    return grid64(gguf::quants::iq::iq1s_grid, i[0], i[1], i[2], i[3]);
  }
  SPITE_AVX2 __m256i delta(int ib) const { return spread_groups(deltas, ib); }
  // int16 scales: the first 16 elements' in the low half, the last 16's in the high half.
  SPITE_AVX2 __m256i scales(int ib) const {
    const auto lo = static_cast<char>(2 * ib), hi = static_cast<char>(2 * ib + 1), z = static_cast<char>(0x80);
    return _mm256_shuffle_epi8(scale_bytes, _mm256_setr_epi8(lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, lo, z, hi, z, hi, z, hi, z,
                                                             hi, z, hi, z, hi, z, hi, z, hi, z));
  }
};

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
    aligned_vector<typename R::decoded> r(static_cast<std::size_t>(nb * R::rows));
    for (std::int64_t o = begin; o < end;) {
      const std::int64_t m = std::min<std::int64_t>(R::rows, end - o);
      for (std::int64_t j = 0; j < m; ++j) {
        const auto* row = reinterpret_cast<const typename R::block*>(w.row(o + j));
        for (std::int64_t i = 0; i < nb; ++i) R::decode(row[i], r[static_cast<std::size_t>(j * nb + i)]);
      }
      std::int64_t t = 0;
      if (m == 2) {
        if constexpr (R::rows == 2) {
          for (; t + R::tile <= n_tokens; t += R::tile) R::template dot<R::tile, 2>(r.data(), xq.data(), nb, t, w.out, o, y);
          for (; t < n_tokens; ++t) R::template dot<1, 2>(r.data(), xq.data(), nb, t, w.out, o, y);
        }
      } else {
        for (; t + R::tile <= n_tokens; t += R::tile) R::template dot<R::tile, 1>(r.data(), xq.data(), nb, t, w.out, o, y);
        for (; t < n_tokens; ++t) R::template dot<1, 1>(r.data(), xq.data(), nb, t, w.out, o, y);
      }
      o += m;
    }
  });
}

// The dot of decoded rows whose super-block is one set of 8 int32 lanes: R::lanes(r, c, x) adds
// sub-block c's products, R::adjust the super-block's other integer terms, R::post scales the
// result.
template <class R, int K, int Rows>
SPITE_AVX2 void lanes_dot(const typename R::decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                          std::int64_t out, std::int64_t o, float* y) {
  __m256 acc[Rows][K];
#pragma GCC unroll 2
  for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc[j][k] = _mm256_setzero_ps();
  }
  for (std::int64_t i = 0; i < nb; ++i) {
    __m256i lanes[Rows][K];
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
          lanes[j][k] = _mm256_add_epi32(lanes[j][k], R::lanes(r[j * nb + i], c, xv));
          if constexpr (K * Rows > 1) __asm__("" : "+x"(lanes[j][k]));  // the sums in order, not a spilled tree
        }
      }
    }
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

// Each row's grid bytes are stored with their signs (so no sign move per activation row) and
// multiplied with the activations + 128 as unsigned bytes: VPMADDUBSW's pairs stay below 2^15
// (2 x 255 x 62), and the lanes' excess, 128 x the row's own lanes, is worked out once per row
// and taken off per super-block. The same integers, with VPMADDUBSW and VPMADDWD alone on the
// multiply pipes.
template <class D>
struct grid_rows {
  using block = typename D::block;
  static constexpr int tile = 4, rows = 2;
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
      excess = _mm256_add_epi32(excess, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(0x80)), r.grid[ib]), sb.scales));
    }
    r.excess = excess;
    r.d = _cvtsh_ss(b.d);
  }
  SPITE_AVX2 static __m256i lanes(const decoded& r, int ib, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_xor_si256(x, _mm256_set1_epi8(static_cast<char>(0x80))), r.grid[ib]), r.scales[ib]);
  }
  SPITE_AVX2 static __m256i adjust(const decoded& r, const gguf::block_q8_K&, __m256i lanes) { return _mm256_sub_epi32(lanes, r.excess); }
  template <int K, int Rows>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    lanes_dot<grid_rows, K, Rows>(r, xq, nb, t0, out, o, y);
  }
};

// The IQ1 rows as the grid rows above: signed values multiplied with the activations + 128, the
// excess taken off per super-block, two rows per pass over the activation rows.
SPITE_AVX2 inline __m256i unsigned_activations(const gguf::block_q8_K& x, int ib) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * ib)), _mm256_set1_epi8(static_cast<char>(0x80)));
}
// The lanes of 128 x w (signed bytes) with int16 scales.
SPITE_AVX2 inline __m256i excess_lanes(__m256i w, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(0x80)), w), scales);
}

struct iq1_s_rows {
  using block = gguf::block_iq1_s;
  static constexpr int tile = 4, rows = 2;
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
  template <int K, int Rows>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    __m256 acc[Rows][K];
    float acc1[Rows][K];
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        acc[j][k] = _mm256_setzero_ps();
        acc1[j][k] = 0.0f;
      }
    }
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes[Rows][K];
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) lanes[j][k] = _mm256_setzero_si256();
      }
      for (int ib = 0; ib < 8; ++ib) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const __m256i xv = unsigned_activations(xq[(t0 + k) * nb + i], ib);
#pragma GCC unroll 2
          for (int j = 0; j < Rows; ++j) {
            const decoded& d = r[j * nb + i];
            lanes[j][k] = _mm256_add_epi32(lanes[j][k], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, d.grid[ib]), d.scales[ib]));
            if constexpr (K * Rows > 1) __asm__("" : "+x"(lanes[j][k]));
          }
        }
      }
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const gguf::block_q8_K& x = xq[(t0 + k) * nb + i];
          const decoded& dr = r[j * nb + i];
          const float d = x.d * dr.d;
          acc[j][k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes[j][k], dr.excess)), acc[j][k]);
          acc1[j][k] = std::fma(d, static_cast<float>(iq1_s_delta_sum(dr.delta, x)), acc1[j][k]);
        }
      }
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

struct iq1_m_rows {
  using block = gguf::block_iq1_m;
  static constexpr int tile = 2, rows = 2;
  struct decoded {
    __m256i grid[8], delta[8], scales[8];  // grid -1, 0, 1; delta +-1 per 8 elements; per-16 scales
    __m256i excess_grid, excess_delta;     // the lanes of 128 x each
    float d;
  };
  SPITE_AVX2 static void decode(const block& b, decoded& r) {
    const iq1_m_decoder decoder(b);
    __m256i excess_grid = _mm256_setzero_si256(), excess_delta = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      r.scales[ib] = decoder.scales(ib);
      r.grid[ib] = decoder.grid(ib);
      r.delta[ib] = decoder.delta(ib);
      excess_grid = _mm256_add_epi32(excess_grid, excess_lanes(r.grid[ib], r.scales[ib]));
      excess_delta = _mm256_add_epi32(excess_delta, excess_lanes(r.delta[ib], r.scales[ib]));
    }
    r.excess_grid = excess_grid;
    r.excess_delta = excess_delta;
    r.d = decoder.d();
  }
  template <int K, int Rows>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
    __m256 acc1[Rows][K], acc2[Rows][K];
#pragma GCC unroll 2
    for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) acc1[j][k] = acc2[j][k] = _mm256_setzero_ps();
    }
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256i lanes1[Rows][K], lanes2[Rows][K];
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) lanes1[j][k] = lanes2[j][k] = _mm256_setzero_si256();
      }
      for (int ib = 0; ib < 8; ++ib) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const __m256i xv = unsigned_activations(xq[(t0 + k) * nb + i], ib);
#pragma GCC unroll 2
          for (int j = 0; j < Rows; ++j) {
            const decoded& d = r[j * nb + i];
            lanes1[j][k] = _mm256_add_epi32(lanes1[j][k], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, d.grid[ib]), d.scales[ib]));
            lanes2[j][k] = _mm256_add_epi32(lanes2[j][k], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, d.delta[ib]), d.scales[ib]));
            if constexpr (K * Rows > 1) __asm__("" : "+x"(lanes1[j][k]), "+x"(lanes2[j][k]));
          }
        }
      }
#pragma GCC unroll 2
      for (int j = 0; j < Rows; ++j) {
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const decoded& dr = r[j * nb + i];
          const __m256 d = _mm256_set1_ps(xq[(t0 + k) * nb + i].d * dr.d);
          acc1[j][k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes1[j][k], dr.excess_grid)), acc1[j][k]);
          acc2[j][k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes2[j][k], dr.excess_delta)), acc2[j][k]);
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
  static constexpr int tile = 4, rows = 2;
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
  template <int K, int Rows>
  SPITE_AVX2 static void dot(const decoded* r, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0, std::int64_t out,
                             std::int64_t o, float* y) {
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
