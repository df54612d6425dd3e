// The AVX2 decoders of simd_x86_iquant_grid.cpp: a grid i-quant or ternary super-block's grid
// rows, signs, scales and digits as vectors, for its decode kernels and its batches. Internal to
// that file; x86-64 only.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>

#include "../../gguf/src/quants/iq_tables.hpp"

namespace spite::dispatch::cpu::x86::grid_avx2 {

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
  const __m256i words =
      _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(natural, words), _MM_SHUFFLE(3, 1, 2, 0));
}
// Sub-block ib's 4 group bytes (as arrange_signs lays them out), each spread over its group's 8
// elements.
SPITE_AVX2 inline __m256i spread_groups(__m256i arranged, int ib) {
  const auto g = static_cast<char>(2 * ib), h = static_cast<char>(2 * ib + 1);
  return _mm256_shuffle_epi8(
      arranged, _mm256_setr_epi8(g, g, g, g, g, g, g, g, h, h, h, h, h, h, h, h, g, g, g, g, g, g, g, g, h, h, h, h, h, h, h, h));
}
// Sub-block ib's signs as 32 bytes for VPSIGNB, negative where an element is: its group bytes
// spread, each byte's own bit kept and 127 added (set: 128 or more, a negative byte; clear: 127),
// never zero.
SPITE_AVX2 inline __m256i expand_signs(__m256i arranged, int ib) {
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_add_epi8(_mm256_and_si256(spread_groups(arranged, ib), bit), _mm256_set1_epi8(127));
}

// 32 bytes of 7 sign bits each (ksigns_iq2xs's indices) with their 8th bit, which makes the
// count of negatives even: the parity of the low and the high nibble looked up and combined
// (the bytes' top bits are clear, so the shuffle takes the low nibble without a mask).
SPITE_AVX2 inline __m256i with_parity(__m256i seven) {
  const __m256i parity = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0, -128, -128, 0, -128, 0,
                                          0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(seven, 4), _mm256_set1_epi8(0x0F));
  return _mm256_or_si256(seven, _mm256_xor_si256(_mm256_shuffle_epi8(parity, seven), _mm256_shuffle_epi8(parity, hi)));
}

// The 7-bit sign indices at bits 0, 7, 14 and 21 of each of 8 words (IQ2_XXS's and IQ3_XXS's
// sub-block words) as the 4 bytes of each dword.
SPITE_AVX2 inline __m256i seven_bit_bytes(__m256i words) {
  // Literal shift counts, as the sanitizer build's -O1 needs.
  const __m256i f0 = _mm256_and_si256(words, _mm256_set1_epi32(0x7F));
  const __m256i f1 = _mm256_and_si256(_mm256_slli_epi32(words, 1), _mm256_set1_epi32(0x7F << 8));
  const __m256i f2 = _mm256_and_si256(_mm256_slli_epi32(words, 2), _mm256_set1_epi32(0x7F << 16));
  const __m256i f3 = _mm256_and_si256(_mm256_slli_epi32(words, 3), _mm256_set1_epi32(0x7F << 24));
  return _mm256_or_si256(_mm256_or_si256(f0, f1), _mm256_or_si256(f2, f3));
}

// Sub-block ib's int16 scale vector (its first 16 elements' scale in the low half, the last
// 16's in the high half) from per_block: word ib of the low half the first, of the high half
// the second.
SPITE_AVX2 inline __m256i scale_of(__m256i per_block, int ib) {
  const auto b = static_cast<char>(2 * ib);
  const auto c = static_cast<char>(2 * ib + 1);
  return _mm256_shuffle_epi8(
      per_block, _mm256_setr_epi8(b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c, b, c));
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
    const __m256i words =
        _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0));
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
      : b(blk),
        signs(arrange_signs(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + gguf::qk_k / 8)))),
        scales(nibble_scales(blk.scales)) {}
  SPITE_AVX2 sub_block decode(int ib) const {
    const std::uint8_t* idx = b.qs + 4 * ib;
    const int qh = b.qh[ib];
    return {grid64(gguf::quants::iq::iq2s_grid, idx[0] | ((qh << 8) & 0x300), idx[1] | ((qh << 6) & 0x300), idx[2] | ((qh << 4) & 0x300),
                   idx[3] | ((qh << 2) & 0x300)),
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
    const __m128i high =
        _mm_mullo_epi16(_mm_and_si128(_mm_set1_epi16(static_cast<std::int16_t>(qh)), _mm_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128)),
                        _mm_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2));
    const __m128i index = _mm_or_si128(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))), high);
    const auto lo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(index)), hi = static_cast<std::uint64_t>(_mm_extract_epi64(index, 1));
    return {grid32(gguf::quants::iq::iq3s_grid, [&](int k) { return ((k < 4 ? lo : hi) >> (16 * (k % 4))) & 0xFFFF; }),
            expand_signs(signs, ib), scale_of(scales, ib)};
  }
};

// ---- IQ1_S and IQ1_M in registers: grid values -1, 0, 1 (signed bytes, so maddubs takes their
// magnitudes with their signs moved onto the activations), and the delta term.

SPITE_AVX2 inline __m256i signed_pairs(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// An IQ1_S super-block's grid indices, scales and delta terms, worked out for its 8 sub-blocks
// at once in vectors (per sub-block they were some 20 scalar operations).
struct iq1_s_decoder {
  __m128i scale_words;                  // word ib: sub-block ib's scale
  __m256i delta;                        // int16 pairs: the delta sign times the scale of sub-block j at 2j, 2j + 1
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
      const __m256i words = _mm256_shuffle_epi8(
          both, _mm256_setr_epi8(w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w2, w2 + 1,
                                 w2, w2 + 1, w2, w2 + 1, w2, w2 + 1, w3, w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w3 + 1));
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

// An IQ1_M super-block's grid indices, delta signs and scales, worked out for its 8 sub-blocks
// at once in vectors.
struct iq1_m_decoder {
  __m256i deltas;                       // the +1 / -1 of each 8 elements, as arrange_signs lays out sign bytes
  __m256i scale_bytes;                  // scale of sub-block ib's first 16 elements at byte 2 ib, its last 16's at 2 ib + 1 (both halves)
  alignas(32) std::uint16_t index[32];  // the 11-bit grid index of each 8 elements
  std::uint64_t scale_words;            // the 4 16-bit words of scales: 3-bit scales, the fp16 scale's nibbles on top
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
      _mm256_store_si256(reinterpret_cast<__m256i*>(index + 16 * h),
                         _mm256_or_si256(low, _mm256_and_si256(nibbles, _mm256_set1_epi16(0x700))));
      negative[h] = _mm256_or_si256(_mm256_srai_epi16(_mm256_slli_epi16(nibbles, 4), 15), _mm256_set1_epi16(1));
    }
    deltas = arrange_signs(_mm256_permute4x64_epi64(_mm256_packs_epi16(negative[0], negative[1]), _MM_SHUFFLE(3, 1, 2, 0)));
    // Scale v = 2 ib + half: bits 3 (v % 4) .. + 2 of the v / 4-th 16-bit word, moved up to 12-14.
    const __m256i words = _mm256_shuffle_epi8(
        _mm256_set1_epi64x(static_cast<long long>(scale_words)),
        _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
    const __m256i three = _mm256_srli_epi16(
        _mm256_and_si256(
            _mm256_mullo_epi16(words, _mm256_setr_epi16(4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8)),
            _mm256_set1_epi16(0x7000)),
        12);
    const __m256i odd = _mm256_or_si256(_mm256_add_epi16(three, three), _mm256_set1_epi16(1));
    const __m128i packed = _mm_packus_epi16(_mm256_castsi256_si128(odd), _mm256_extracti128_si256(odd, 1));
    scale_bytes = _mm256_set_m128i(packed, packed);
  }
  SPITE_AVX2 float d() const {
    const auto word = [&](int k) { return static_cast<std::uint32_t>(scale_words >> (16 * k)) & 0xFFFF; };
    return _cvtsh_ss(
        static_cast<std::uint16_t>((word(0) >> 12) | ((word(1) >> 8) & 0x00f0) | ((word(2) >> 4) & 0x0f00) | (word(3) & 0xf000)));
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

// ---- TQ1_0 and TQ2_0 in registers: the ternary digits (0..2) of 32 elements at a time, in the
// element order of the reference's digit buffers, then its lanes (digits . q minus the
// activation sums) and fma.

// Digit of byte b at power p of 3 (ternary_digit): ((b * p mod 256) * 3) >> 8, on the even and
// odd bytes of each 16-bit lane; p holds one power per 16-bit lane. A lane times p keeps the even
// byte's product in its low byte, the odd byte alone times p its product in the high byte; the
// high halves of 16-bit products by 768 and 3 are then each product times 3 over 256 (9
// operations where separate shifts took 12).
SPITE_AVX2 inline __m256i ternary_digits(__m256i v, __m256i p) {
  const __m256i low = _mm256_set1_epi16(0x00FF), high = _mm256_set1_epi16(static_cast<std::int16_t>(0xFF00));
  const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(v, p), low);
  const __m256i odd = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(v, high), p), high);
  const __m256i d_even = _mm256_mulhi_epu16(even, _mm256_set1_epi16(768));
  return _mm256_or_si256(d_even, _mm256_slli_epi16(_mm256_mulhi_epu16(odd, _mm256_set1_epi16(3)), 8));
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

}  // namespace spite::dispatch::cpu::x86::grid_avx2
#endif
