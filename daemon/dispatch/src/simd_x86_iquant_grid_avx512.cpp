// The grid i-quants' products (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S; IQ1_S and IQ1_M, whose
// 2048-row grid stays a scalar load per row) with AVX-512 VBMI: the grid rows come from lookups
// in registers instead of one scalar load each.
//
// Each grid row is a short code (2 bits per value for the IQ2 grids, whose values are 8, 25 and
// 43; 3 bits for the IQ3 grids' eight values), so a grid of 256 rows is 8 registers of 16-bit
// codes: VPERMI2W picks 64 of them by an index's low 6 bits and blends by its higher bits choose
// among the groups of 64 (one level per bit). VPMULTISHIFTQB then spreads a code's fields over
// bytes and VPERMB turns them into the grid values. Signs become a 64-bit mask per 64 elements
// (the 7-bit sign indices through ksigns by VPERMI2B) that negates the activations, scales a
// vector of int16 that VPDPWSSD multiplies in. A super-block's 16 int32 lanes hold two 32-element
// halves' 8 lanes each, the reference's lanes (iquant_dots.hpp) once added: exact integers, then
// the same fma per super-block and the same reduction, so the same bits as the AVX2 kernels.
#include "simd_x86_avx512.hpp"
#include "simd_x86_grid.hpp"
#include "ref_quant.hpp"

#if defined(__x86_64__)
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <type_traits>

namespace spite::dispatch::cpu::x86 {
namespace {

namespace iq = gguf::quants::iq;

// A grid as 16-bit codes: value k of row r is fields[r] bits [Bits k, Bits k + Bits), the index
// of the row's k-th byte among `values`. Valid only if every byte of the grid is one of them.
template <std::size_t Rows>
struct grid_codes {
  alignas(64) std::uint16_t code[Rows];
  bool valid = true;
};

template <std::size_t Rows, class Row>
grid_codes<Rows> make_codes(const Row* grid, std::span<const std::uint8_t> values, int bits) {
  grid_codes<Rows> g{};
  for (std::size_t r = 0; r < Rows; ++r) {
    unsigned code = 0;
    for (std::size_t k = 0; k < sizeof(Row); ++k) {
      const auto byte = static_cast<std::uint8_t>(grid[r] >> (8 * k));
      std::size_t v = 0;
      while (v < values.size() && values[v] != byte) ++v;
      if (v == values.size()) g.valid = false;
      code |= static_cast<unsigned>(v) << (bits * k);
    }
    g.code[r] = static_cast<std::uint16_t>(code);
  }
  return g;
}

constexpr std::array<std::uint8_t, 3> iq2_values{8, 25, 43};
constexpr std::array<std::uint8_t, 8> iq3xxs_values{4, 12, 20, 28, 36, 44, 52, 62};
constexpr std::array<std::uint8_t, 8> iq3s_values{1, 3, 5, 7, 9, 11, 13, 15};

// A grid's codes, made once: its values with `Bits` bits each.
template <const auto& Grid, const auto& Values, int Bits>
const auto& codes_of() {
  static const auto g = make_codes<std::size(Grid)>(Grid, Values, Bits);
  return g;
}
const auto& iq2xxs_codes() { return codes_of<iq::iq2xxs_grid, iq2_values, 2>(); }
const auto& iq2xs_codes() { return codes_of<iq::iq2xs_grid, iq2_values, 2>(); }
const auto& iq2s_codes() { return codes_of<iq::iq2s_grid, iq2_values, 2>(); }
const auto& iq3xxs_codes() { return codes_of<iq::iq3xxs_grid, iq3xxs_values, 3>(); }
const auto& iq3s_codes() { return codes_of<iq::iq3s_grid, iq3s_values, 3>(); }


// Byte i: the value of field i (VPERMB reads an index's low 6 bits; the bits above a field are
// other fields, so the table repeats; of three values, the fourth code never occurs).
template <std::size_t N>
constexpr vector_bytes value_table(const std::array<std::uint8_t, N>& values) {
  constexpr std::size_t period = N == 3 ? 4 : N;
  return bytes_of([&](int i) { return static_cast<std::size_t>(i) % period < N ? values[static_cast<std::size_t>(i) % period] : 0; });
}

// Halves the candidates `level` (N of them, group k's entries) by the index bit `bit`, until one
// is left.
template <int N>
SPITE_AVX512_VBMI inline void choose(__m512i* level, __m512i idx, int bit) {
  if constexpr (N > 1) {
    const __mmask32 high = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(static_cast<std::int16_t>(1 << bit)));
#pragma GCC unroll 8
    for (int k = 0; k < N / 2; ++k) level[k] = _mm512_mask_blend_epi16(high, level[2 * k], level[2 * k + 1]);
    choose<N / 2>(level, idx, bit + 1);
  }
}

// The code of grid row idx (each 16-bit lane), Regs registers of codes at t.
template <int Regs>
SPITE_AVX512_VBMI inline __m512i lookup(const __m512i* t, __m512i idx) {
  __m512i level[Regs / 2];
#pragma GCC unroll 16
  for (int k = 0; k < Regs / 2; ++k) level[k] = _mm512_permutex2var_epi16(t[2 * k], idx, t[2 * k + 1]);
  choose<Regs / 2>(level, idx, 6);
  return level[0];
}

template <std::size_t Rows>
struct code_registers {
  __m512i t[Rows / 32];
  SPITE_AVX512_VBMI explicit code_registers(const grid_codes<Rows>& g) {
#pragma GCC unroll 32
    for (std::size_t k = 0; k < Rows / 32; ++k) t[k] = _mm512_load_si512(g.code + 32 * k);
  }
};

// The 128 sign bytes of the 7-bit sign indices (the 8th sign makes the count of negatives even),
// half h of them.
SPITE_AVX512_VBMI inline __m512i load_ksigns(int h) { return _mm512_loadu_si512(iq::ksigns_iq2xs.data() + 64 * h); }

// 64 elements' products: grid values `g` (unsigned bytes), the activations negated where `neg`,
// int16 pairs times the int16 scales `s` into the lanes.
SPITE_AVX512_VBMI inline __m512i add_products(__m512i lanes, __m512i g, __mmask64 neg, const std::int8_t* q, __m512i s) {
  const __m512i x = _mm512_loadu_si512(q);
  const __m512i signed_x = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
  return _mm512_dpwssd_epi32(lanes, _mm512_maddubs_epi16(g, signed_x), s);
}

SPITE_AVX512_VBMI inline __mmask64 mask_at(const std::uint8_t* p) {
  std::uint64_t bits;
  std::memcpy(&bits, p, 8);
  return _cvtu64_mask64(bits);
}

// The super-block's fma of its 16 lanes (two halves of 8, added) into the reference's 8 float
// lanes.
SPITE_AVX512_VBMI inline __m256 add_super_block(__m256 acc, __m512i lanes, float d) {
  const __m256i lanes8 = _mm256_add_epi32(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64(lanes, 1));
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes8), acc);
}

// The grid rows' codes go into the lookup in an order that leaves chunk p's rows (64 elements)
// where VPMULTISHIFTQB reaches them without a shuffle: the field offsets pick the chunk.
//
// IQ2 grids: 8 elements per row, 2 bits each; chunk p is rows 8p .. 8p + 7 of the super-block.
// Word 4k + p of the codes holds row 8p + k, so qword k holds row 8p + k at bits 16p.
constexpr int iq2_row_of_word(int w) { return 8 * (w % 4) + w / 4; }
constexpr vector_bytes k_iq2_values = value_table(iq2_values);
struct iq2_expand {
  __m512i shifts[4], values;
  SPITE_AVX512_VBMI iq2_expand() {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) shifts[p] = _mm512_set1_epi64(static_cast<long long>(0x0E0C0A0806040200ull + 0x1010101010101010ull * static_cast<unsigned>(p)));
    values = load(k_iq2_values);
  }
  SPITE_AVX512_VBMI __m512i operator()(__m512i codes, int p) const {
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts[p], codes), values);
  }
};

// IQ3 grids: 4 elements per row, 3 bits each, 32 rows per register of codes; chunk p is rows
// 16p .. 16p + 15, in register p / 2. There word 4L + 2e + m holds row 16m + 2L + e (of the
// register's 32), so qword L holds rows 16m + 2L and 16m + 2L + 1 at bits 16m and 32 + 16m.
constexpr int iq3_row_of_word(int w) { return 16 * (w % 2) + 2 * (w / 4) + (w % 4) / 2; }
constexpr vector_bytes k_iq3xxs_values = value_table(iq3xxs_values), k_iq3s_values = value_table(iq3s_values);
// Register h's rows 32 h + iq3_row_of_word(w) at word w: row j's index byte (byte j of 64) onto
// the low byte of its word, and (IQ3_S) the offset j onto the high byte (its 9th bit, bit j of
// 64).
constexpr vector_bytes iq3_low_bytes(int h) { return bytes_of([h](int b) { return b % 2 == 0 ? 32 * h + iq3_row_of_word(b / 2) : 0; }); }
constexpr vector_bytes iq3_high_fields(int h) { return bytes_of([h](int b) { return b % 2 == 1 ? 32 * h + iq3_row_of_word(b / 2) : 0; }); }
constexpr vector_bytes k_iq3_low_bytes[2] = {iq3_low_bytes(0), iq3_low_bytes(1)};
constexpr vector_bytes k_iq3_high_fields[2] = {iq3_high_fields(0), iq3_high_fields(1)};
struct iq3_expand {
  __m512i shifts[2], values;
  SPITE_AVX512_VBMI explicit iq3_expand(const vector_bytes& v) {
#pragma GCC unroll 2
    for (int m = 0; m < 2; ++m) shifts[m] = _mm512_set1_epi64(static_cast<long long>(0x2926232009060300ull + 0x1010101010101010ull * static_cast<unsigned>(m)));
    values = load(v);
  }
  SPITE_AVX512_VBMI __m512i operator()(__m512i codes, int p) const {
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts[p % 2], codes), values);
  }
};

// Per-16 scales (IQ2_XS, IQ2_S): nibbles lo, hi of byte ib for the halves of sub-block ib, each
// 2 s + 1, as 16 words; chunk p's words from them.
// The low 8 bytes' nibbles as words lo 0, hi 0, lo 1, hi 1, ..., each 2 s + 1.
SPITE_AVX512_VBMI inline __m512i nibble_scale_words(__m128i bytes) {
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(bytes, nib), _mm_and_si128(_mm_srli_epi16(bytes, 4), nib));
  return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_or_si128(_mm_add_epi8(n, n), _mm_set1_epi8(1))));
}
constexpr vector_bytes half_pick(int p) { return words_of([p](int w) { return 4 * p + w / 8; }); }
struct half_scales {
  __m512i pick[4];
  static constexpr vector_bytes k_pick[4] = {half_pick(0), half_pick(1), half_pick(2), half_pick(3)};
  SPITE_AVX512_VBMI half_scales() {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) pick[p] = load(k_pick[p]);
  }
  SPITE_AVX512_VBMI static __m512i words(const std::uint8_t* scales) {
    return nibble_scale_words(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
  }
};

// Per-32 scales, one in every `stride` words: chunk p's words 0..15 from sub-block 2p's,
// 16..31 from 2p + 1's.
template <int Stride>
constexpr vector_bytes chunk_pick(int p) {
  return words_of([p](int w) { return Stride * (2 * p + w / 16); });
}
template <int Stride>
struct chunk_scales {
  __m512i pick[4];
  static constexpr vector_bytes k_pick[4] = {chunk_pick<Stride>(0), chunk_pick<Stride>(1), chunk_pick<Stride>(2), chunk_pick<Stride>(3)};
  SPITE_AVX512_VBMI chunk_scales() {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) pick[p] = load(k_pick[p]);
  }
};

// ---- per type, a decoder: its constants in registers, decode(b, s) the super-block's rows and
// scales, then for chunk p its grid values (grid), which activations to negate (negative) and
// its int16 scales (scales).

// The 7-bit sign indices' bytes, stored for the masks.
struct sign_bytes {
  alignas(32) std::uint8_t b[32];
  SPITE_AVX512_VBMI void store(__m512i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(b), _mm512_castsi512_si256(v)); }
};

struct iq2_xxs_decoder {
  SPITE_AVX512_VBMI iq2_xxs_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq2_xxs;
  static constexpr float post = 0.125f;
  // Per 8-byte group ib: 4 grid indices, then a dword of four 7-bit sign indices and the scale.
  static constexpr vector_bytes k_index_bytes = bytes_of([](int b) { return 8 * (iq2_row_of_word(b / 2) / 4) + iq2_row_of_word(b / 2) % 4; });
  static constexpr vector_bytes k_compact = bytes_of([](int b) { return 8 * (b / 4) + b % 4; });
  code_registers<256> codes{iq2xxs_codes()};
  iq2_expand expand;
  chunk_scales<4> scale;
  __m512i ks_lo = load_ksigns(0), ks_hi = load_ksigns(1), index_bytes = load(k_index_bytes), compact = load(k_compact);
  struct super {
    __m512i rows, scales;
    sign_bytes signs;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    const __m512i q = _mm512_loadu_si512(b.qs);
    s.rows = lookup<8>(codes.t, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, index_bytes, q));
    const __m512i sign_fields = _mm512_set1_epi64(0x00000000'352E2720ll);
    s.signs.store(_mm512_permutexvar_epi8(compact, _mm512_permutex2var_epi8(ks_lo, _mm512_multishift_epi64_epi8(sign_fields, q), ks_hi)));
    s.scales = _mm512_or_si512(_mm512_srli_epi64(q, 59), _mm512_set1_epi64(1));  // 2 s + 1 per group
  }
  SPITE_AVX512_VBMI __m512i grid(const super& s, int p) const { return expand(s.rows, p); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super& s, const block&, int p) { return mask_at(s.signs.b + 8 * p); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(scale.pick[p], s.scales); }
};

struct iq2_xs_decoder {
  SPITE_AVX512_VBMI iq2_xs_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq2_xs;
  static constexpr float post = 0.125f;
  static constexpr vector_bytes k_order = words_of(iq2_row_of_word);
  code_registers<512> codes{iq2xs_codes()};
  iq2_expand expand;
  half_scales halves;
  __m512i ks_lo = load_ksigns(0), ks_hi = load_ksigns(1), order = load(k_order);
  struct super {
    __m512i rows, scales;
    sign_bytes signs;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    // 16-bit codes: the grid row in the low 9 bits, the sign index above.
    const __m512i q = _mm512_loadu_si512(b.qs);
    s.rows = lookup<16>(codes.t, _mm512_permutexvar_epi16(order, _mm512_and_si512(q, _mm512_set1_epi16(511))));
    const __m512i sign_index = _mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9)));
    s.signs.store(_mm512_permutex2var_epi8(ks_lo, sign_index, ks_hi));
    s.scales = half_scales::words(b.scales);
  }
  SPITE_AVX512_VBMI __m512i grid(const super& s, int p) const { return expand(s.rows, p); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super& s, const block&, int p) { return mask_at(s.signs.b + 8 * p); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(halves.pick[p], s.scales); }
};

struct iq2_s_decoder {
  SPITE_AVX512_VBMI iq2_s_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq2_s;
  static constexpr float post = 0.125f;
  // Row j's low 8 bits are byte j of qs, its bits 8-9 bits 2j, 2j + 1 of qh (as one 64-bit
  // word): onto the low and high byte of the row's word.
  static constexpr vector_bytes k_low_bytes = bytes_of([](int b) { return iq2_row_of_word(b / 2); });
  static constexpr vector_bytes k_high_fields = bytes_of([](int b) { return b % 2 == 1 ? 2 * iq2_row_of_word(b / 2) : 0; });
  const grid_codes<1024>& codes = iq2s_codes();  // 32 registers of codes: from memory
  iq2_expand expand;
  half_scales halves;
  __m512i low_bytes = load(k_low_bytes), high_fields = load(k_high_fields);
  struct super {
    __m512i rows, scales;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    std::uint64_t qh;
    std::memcpy(&qh, b.qh, 8);
    const __m512i low = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, low_bytes, _mm512_loadu_si512(b.qs));
    const __m512i high = _mm512_multishift_epi64_epi8(high_fields, _mm512_set1_epi64(static_cast<long long>(qh)));
    s.rows = lookup<32>(reinterpret_cast<const __m512i*>(codes.code), _mm512_ternarylogic_epi32(low, high, _mm512_set1_epi16(0x0300), a_or_b_and_c));
    s.scales = half_scales::words(b.scales);
  }
  SPITE_AVX512_VBMI __m512i grid(const super& s, int p) const { return expand(s.rows, p); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super&, const block& b, int p) { return mask_at(b.qs + 32 + 8 * p); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(halves.pick[p], s.scales); }
};

struct iq3_xxs_decoder {
  SPITE_AVX512_VBMI iq3_xxs_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq3_xxs;
  static constexpr float post = 0.25f;
  code_registers<256> codes{iq3xxs_codes()};
  iq3_expand expand{k_iq3xxs_values};
  chunk_scales<2> scale;
  __m512i ks_lo = load_ksigns(0), ks_hi = load_ksigns(1);
  __m512i low_bytes[2] = {load(k_iq3_low_bytes[0]), load(k_iq3_low_bytes[1])};
  struct super {
    __m512i rows[2], scales;
    sign_bytes signs;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    const __m512i index = _mm512_loadu_si512(b.qs);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) s.rows[h] = lookup<8>(codes.t, _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, low_bytes[h], index));
    // Per sub-block a dword of four 7-bit sign indices and the scale (after the 64 grid indices).
    const __m256i meta = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 64));
    const __m256i sign_fields = _mm256_set1_epi64x(0x35'2E'27'20'15'0E'07'00ll);
    const __m512i sign_index = _mm512_castsi256_si512(_mm256_multishift_epi64_epi8(sign_fields, meta));
    s.signs.store(_mm512_permutex2var_epi8(ks_lo, sign_index, ks_hi));
    s.scales = _mm512_castsi256_si512(_mm256_or_si256(_mm256_srli_epi32(meta, 27), _mm256_set1_epi32(1)));
  }
  SPITE_AVX512_VBMI __m512i grid(const super& s, int p) const { return expand(s.rows[p / 2], p); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super& s, const block&, int p) { return mask_at(s.signs.b + 8 * p); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(scale.pick[p], s.scales); }
};

struct iq3_s_decoder {
  SPITE_AVX512_VBMI iq3_s_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq3_s;
  static constexpr float post = 1.0f;
  code_registers<512> codes{iq3s_codes()};
  iq3_expand expand{k_iq3s_values};
  chunk_scales<1> scale;
  __m512i low_bytes[2] = {load(k_iq3_low_bytes[0]), load(k_iq3_low_bytes[1])};
  __m512i high_fields[2] = {load(k_iq3_high_fields[0]), load(k_iq3_high_fields[1])};
  struct super {
    __m512i rows[2], scales;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    std::uint64_t qh;
    std::memcpy(&qh, b.qh, 8);
    const __m512i index = _mm512_loadu_si512(b.qs), high = _mm512_set1_epi64(static_cast<long long>(qh));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      s.rows[h] = lookup<16>(codes.t, _mm512_ternarylogic_epi32(_mm512_maskz_permutexvar_epi8(0x5555555555555555ull, low_bytes[h], index),
                                                                _mm512_multishift_epi64_epi8(high_fields[h], high), _mm512_set1_epi16(0x0100),
                                                                a_or_b_and_c));
    }
    // Nibbles lo, hi of scale byte k for sub-blocks 2k, 2k + 1.
    std::uint32_t sc;
    std::memcpy(&sc, b.scales, 4);
    s.scales = nibble_scale_words(_mm_cvtsi32_si128(static_cast<int>(sc)));
  }
  SPITE_AVX512_VBMI __m512i grid(const super& s, int p) const { return expand(s.rows[p / 2], p); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super&, const block& b, int p) { return mask_at(b.signs + 8 * p); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(scale.pick[p], s.scales); }
};

// Eight rows of IQ1_S's and IQ1_M's grid (2048 rows, a scalar load each) by their indices
// index(0..7), loaded straight into vector registers (VMOVQ, VMOVHPD): read into general
// registers and moved over one by one (VMOVQ / VPINSRQ from them), a decode ran 5-10 % slower.
// (Making the 32 indices in one vector and storing them measured slower still: the scalar index
// arithmetic overlaps the loads.)
template <class Index>
SPITE_AVX512_VBMI inline __m512i iq1_grid_rows(const Index& index) {
  const auto row = [](unsigned i) { return reinterpret_cast<const double*>(iq::iq1s_grid + i); };
  const auto pair = [&](int r) {
    return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row(index(r))))), row(index(r + 1))));
  };
  const __m256i low = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(0)), pair(2), 1);
  const __m256i high = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(4)), pair(6), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

// IQ1_S: 2048 grid rows of -1, 0, 1 (too many for registers: a scalar load each, as in the AVX2
// kernel), magnitudes with the signs moved onto the activations; per 32 elements a scale and a
// delta sign, whose term (the activations' block sums times delta sign times scale) runs in its
// own float chain (dot_iq1_s of iquant_dots.hpp).
struct iq1_s_decoder {
  SPITE_AVX512_VBMI iq1_s_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq1_s;
  static constexpr float delta_scale = iq::iq1s_delta;
  chunk_scales<1> scale;
  struct super {
    __m512i rows[4], scales;
    __m256i delta;  // int16 pairs: sub-block j's delta sign times its scale at 2j, 2j + 1
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
    std::uint16_t qh[8];
    std::memcpy(qh, b.qh, sizeof qh);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      s.rows[p] = iq1_grid_rows([&](int r) {  // row 8p + r: sub-block 2p + r / 4, its k = r % 4
        const int ib = 2 * p + r / 4, k = r % 4, shift = 8 - 3 * k;  // bits 3k .. 3k + 2 of qh onto bits 8-10
        const unsigned high = shift >= 0 ? (qh[ib] << shift) & 0x700u : (qh[ib] >> -shift) & 0x700u;
        return b.qs[4 * ib + k] | high;
      });
    }
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m128i sc = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
    s.scales = _mm512_castsi128_si512(sc);
    const __m128i minus = _mm_srai_epi16(h, 15);  // the delta sign: bit 15
    const __m128i delta = _mm_sub_epi16(_mm_xor_si128(sc, minus), minus);
    s.delta = _mm256_set_m128i(_mm_unpackhi_epi16(delta, delta), _mm_unpacklo_epi16(delta, delta));
  }
  SPITE_AVX512_VBMI static __m512i grid(const super& s, int p) { return _mm512_abs_epi8(s.rows[p]); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super& s, const block&, int p) { return _mm512_movepi8_mask(s.rows[p]); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(scale.pick[p], s.scales); }
};

// IQ1_M's delta words of chunk pair q (chunks 2q + c, c = 0, 1; iq1_m_decoder::delta_words):
// word 2j + c belongs to lane j of chunk 2q + c, elements 4j..4j + 3: row 8(2q + c) + j / 2, whose
// nibble is qh byte 4(2q + c) + j / 4 (the low or the high one), and half 4(2q + c) + j / 4.
constexpr int iq1_m_half_of_word(int q, int w) { return 4 * (2 * q + w % 2) + w / 8; }
constexpr vector_bytes iq1_m_scale_pick(int q) { return words_of([q](int w) { return iq1_m_half_of_word(q, w); }); }
constexpr vector_bytes iq1_m_qh_pick(int q) { return bytes_of([q](int b) { return iq1_m_half_of_word(q, b / 2); }); }

// IQ1_M: IQ1_S's grid (a scalar load per row) without signs of its own, per-16 scales of 3 bits,
// and per 8 elements a delta sign (bit 3 of the row's qh nibble) whose term, the activations
// times +-1 times the scale, has 8 lanes and a float chain of its own (dot_iq1_m of
// iquant_dots.hpp); the super-block's fp16 scale is the top nibbles of the four scale words.
struct iq1_m_decoder {
  SPITE_AVX512_VBMI iq1_m_decoder() {}  // the members' initializers with the kernels' instructions
  using block = gguf::block_iq1_m;
  static constexpr float delta_lanes_scale = iq::iq1m_delta;
  // Scale word n = 4k + f (half f % 2 of sub-block 2k + f / 2): field f of scale word k.
  static constexpr vector_bytes k_scale_word = words_of([](int n) { return n < 16 ? n / 4 : 0; });
  static constexpr vector_bytes k_scale_shift = words_of([](int n) { return 3 * (n % 4); });
  static constexpr vector_bytes k_scale_pick[2] = {iq1_m_scale_pick(0), iq1_m_scale_pick(1)};
  static constexpr vector_bytes k_qh_pick[2] = {iq1_m_qh_pick(0), iq1_m_qh_pick(1)};
  // The delta bit of word w's row (w / 4 even: the low nibble's bit 3; odd: the high one's).
  static constexpr vector_bytes k_delta_bit = words_of([](int w) { return (w / 4) % 2 == 0 ? 0x08 : 0x80; });
  half_scales scale;
  __m512i scale_pick[2]{load(k_scale_pick[0]), load(k_scale_pick[1])}, qh_pick[2]{load(k_qh_pick[0]), load(k_qh_pick[1])};
  __m512i delta_bit = load(k_delta_bit);
  __m256i scale_word = _mm512_castsi512_si256(load(k_scale_word)), scale_shift = _mm512_castsi512_si256(load(k_scale_shift));
  struct super {
    __m512i rows[4], scales, qh;
    float d;
  };
  SPITE_AVX512_VBMI void decode(const block& b, super& s) const {
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      s.rows[p] = iq1_grid_rows([&](int r) {  // row 8p + r: its qs byte and the low 3 bits of qh nibble 8p + r
        const unsigned nibble = b.qh[4 * p + r / 2] >> (4 * (r % 2));
        return b.qs[8 * p + r] | ((nibble & 7u) << 8);
      });
    }
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m128i words = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i fields = _mm256_and_si256(_mm256_srlv_epi16(_mm256_permutexvar_epi16(scale_word, _mm256_castsi128_si256(words)), scale_shift),
                                            _mm256_set1_epi16(7));
    s.scales = _mm512_castsi256_si512(_mm256_or_si256(_mm256_add_epi16(fields, fields), _mm256_set1_epi16(1)));
    s.qh = _mm512_castsi128_si512(qh);
    std::uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    s.d = _cvtsh_ss(static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
  }
  SPITE_AVX512_VBMI static __m512i grid(const super& s, int p) { return _mm512_abs_epi8(s.rows[p]); }
  SPITE_AVX512_VBMI static __mmask64 negative(const super& s, const block&, int p) { return _mm512_movepi8_mask(s.rows[p]); }
  SPITE_AVX512_VBMI __m512i scales(const super& s, int p) const { return _mm512_permutexvar_epi16(scale.pick[p], s.scales); }
  // Chunk pair q's delta words: the delta sign of each lane's row times the lane's scale, to
  // multiply the activations' sums of four (four_sums) in.
  SPITE_AVX512_VBMI __m512i delta_words(const super& s, int q) const {
    const __m512i sc = _mm512_permutexvar_epi16(scale_pick[q], s.scales);
    const __mmask32 negative = _mm512_test_epi16_mask(_mm512_permutexvar_epi8(qh_pick[q], s.qh), delta_bit);
    return _mm512_mask_sub_epi16(sc, negative, _mm512_setzero_si512(), sc);
  }
};

// Whether a type has IQ1_S's delta term (its integer per super-block: iq1_s_delta_sum).
template <class D>
constexpr bool has_delta = requires { D::delta_scale; };
// Whether a type has IQ1_M's delta lanes (8 lanes and a float chain beside the grid's).
template <class D>
constexpr bool has_delta_lanes = requires { D::delta_lanes_scale; };

// The super-block's scale: the block's fp16 d, or what the decoder made of its bits (IQ1_M).
template <class D>
SPITE_AVX512_VBMI inline float block_scale(const typename D::block& b, const typename D::super& s) {
  if constexpr (requires { s.d; }) {
    return s.d;
  } else {
    return _cvtsh_ss(b.d);
  }
}

// A row's float chains against one activation row: the reference's 8 lanes, and the delta
// term's where a type has one (IQ1_S: one float; IQ1_M: 8 more lanes); finish() ends as the
// reference does.
template <class D>
struct row_sums {
  __m256 acc, delta_lanes;
  float delta;
  SPITE_AVX512_VBMI row_sums() : acc(_mm256_setzero_ps()), delta_lanes(_mm256_setzero_ps()), delta(0.0f) {}
  SPITE_AVX512_VBMI float finish() const {
    if constexpr (has_delta<D>) {
      return std::fma(D::delta_scale, delta, reduce8_vec(acc));
    } else if constexpr (has_delta_lanes<D>) {
      return std::fma(D::delta_lanes_scale, reduce8_vec(delta_lanes), reduce8_vec(acc));
    } else {
      return D::post * reduce8_vec(acc);
    }
  }
};

// IQ1_M's delta lanes are the activations' sums over each lane's four elements times +-1 times
// the scale: per activation row and super-block two vectors of such sums, made once per matmul,
// where word 2j + c of vector q is chunk 2q + c's lane j (|sum| <= 4 x 128); one VPDPWSSD with
// the weight row's delta words takes two chunks.
struct block_fours {
  __m512i q[2];
};
struct four_sums {
  aligned_vector<block_fours> v;  // activation row t's super-block i at t nb + i
  SPITE_AVX512_VBMI four_sums(const gguf::block_q8_K* xq, std::int64_t blocks) : v(static_cast<std::size_t>(blocks)) {
    const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
    const auto lanes = [&](const std::int8_t* q) SPITE_AVX512_VBMI {
      return _mm512_madd_epi16(_mm512_maddubs_epi16(ones8, _mm512_loadu_si512(q)), ones16);
    };
    for (std::int64_t i = 0; i < blocks; ++i) {
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {
        const std::int8_t* x = xq[i].qs + 128 * q;
        v[static_cast<std::size_t>(i)].q[q] = _mm512_mask_blend_epi16(0xAAAAAAAAu, lanes(x), _mm512_slli_epi32(lanes(x + 64), 16));
      }
    }
  }
};

// A super-block's delta lanes: its delta words times the activation row's sums of four.
SPITE_AVX512_VBMI inline __m512i delta_lanes_of(const __m512i* words, const block_fours& fours) {
  return _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), fours.q[0], words[0]), fours.q[1], words[1]);
}

// The reference's dot of one weight row with one activation row: per super-block the lanes, one
// fma (and the delta term's); the reduction. `fours`: the activation row's four_sums (IQ1_M).
template <class D>
SPITE_AVX512_VBMI float dot_grid(const D& dec, const typename D::block* x, const gguf::block_q8_K* y, std::int64_t nb,
                                 [[maybe_unused]] const block_fours* fours) {
  row_sums<D> sums;
  for (std::int64_t i = 0; i < nb; ++i) {
    typename D::super s;
    dec.decode(x[i], s);
    __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) lanes = add_products(lanes, dec.grid(s, p), D::negative(s, x[i], p), y[i].qs + 64 * p, dec.scales(s, p));
    const float d = block_scale<D>(x[i], s) * y[i].d;
    sums.acc = add_super_block(sums.acc, lanes, d);
    if constexpr (has_delta<D>) sums.delta = std::fma(d, static_cast<float>(iq1_s_delta_sum(s.delta, y[i])), sums.delta);
    if constexpr (has_delta_lanes<D>) {
      const __m512i words[2] = {dec.delta_words(s, 0), dec.delta_words(s, 1)};
      sums.delta_lanes = add_super_block(sums.delta_lanes, delta_lanes_of(words, fours[i]), d);
    }
  }
  return sums.finish();
}

// ---- batches: each weight row decoded once into signed grid bytes, and every activation row's
// quants shifted to unsigned (q + 128, once per matmul), so that VPMADDUBSW takes them as they
// are: per 64 elements and activation row one VPMADDUBSW and one VPDPWSSD. The shift adds
// 128 x (the scaled sums of the grid values) to each lane, a per weight row constant (taken off
// once per super-block): the lanes are again the reference's exact integers. Pair sums stay
// within int16: (127 + 128) x 62 x 2 < 32768.

// IQ1_M's delta words of a super-block (iq1_m_decoder::delta_words).
struct delta_lanes_block {
  __m512i words[2];
};
struct none {};

// A super-block of a weight row: chunk p's signed grid bytes and int16 scales, the lanes'
// excess from the shift, the block's scale.
template <class D>
struct batch_block {
  __m512i grid[4], scales[4], excess;
  [[no_unique_address]] std::conditional_t<has_delta_lanes<D>, delta_lanes_block, none> delta_lanes;
  __m256i delta;  // IQ1_S's (has_delta)
  float d;
};

template <class D>
SPITE_AVX512_VBMI void decode_batch_row(const D& dec, const typename D::block* x, std::int64_t nb, batch_block<D>* out) {
  const __m512i shift = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t i = 0; i < nb; ++i) {
    typename D::super s;
    dec.decode(x[i], s);
    __m512i excess = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512i g = dec.grid(s, p);
      const __m512i signed_g = _mm512_mask_sub_epi8(g, D::negative(s, x[i], p), _mm512_setzero_si512(), g);
      out[i].grid[p] = signed_g;
      out[i].scales[p] = dec.scales(s, p);
      excess = _mm512_dpwssd_epi32(excess, _mm512_maddubs_epi16(shift, signed_g), out[i].scales[p]);
    }
    out[i].excess = excess;
    if constexpr (has_delta_lanes<D>) {
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) out[i].delta_lanes.words[q] = dec.delta_words(s, q);
    }
    if constexpr (has_delta<D>) out[i].delta = s.delta;
    out[i].d = block_scale<D>(x[i], s);
  }
}

// A batch's activation rows from row t on: the shifted quants (`in` bytes a row), the Q8_K
// blocks and, for IQ1_M, the four_sums (nb a row).
struct batch_rows {
  const std::uint8_t* u;
  const gguf::block_q8_K* xq;
  const block_fours* fours;
  std::int64_t nb, in;
  batch_rows from(std::int64_t t) const { return {u + t * in, xq + t * nb, fours != nullptr ? fours + t * nb : nullptr, nb, in}; }
};

// R decoded weight rows (r[j], y[j]'s column) against K activation rows (y_stride between their
// outputs): the reference's fma per super-block, post times the reduction. Each activation load
// serves R rows: with one row the batch would stream every activation row from L2 per weight
// row.
template <class D, int R, int K>
SPITE_AVX512_VBMI void dot_batch(const batch_block<D>* const* r, const batch_rows& x, float* y, std::int64_t y_stride) {
  row_sums<D> sums[R][K];
  // IQ1_S's delta chains of 4 activation rows as the lanes of one register per weight row: its
  // integers for the 4 made together (iq1_s_delta_sums4), the same fma per lane. One at a time
  // they cost a third of the batch's time.
  constexpr bool delta4 = has_delta<D> && K == 4;
  [[maybe_unused]] __m128 delta_chains[R];
  if constexpr (delta4) {
#pragma GCC unroll 4
    for (int row = 0; row < R; ++row) delta_chains[row] = _mm_setzero_ps();
  }
  for (std::int64_t i = 0; i < x.nb; ++i) {
    __m512i lanes[R][K];
#pragma GCC unroll 16
    for (int j = 0; j < R * K; ++j) lanes[j / K][j % K] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m512i u[K];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) u[k] = _mm512_loadu_si512(x.u + k * x.in + i * gguf::qk_k + 64 * p);
#pragma GCC unroll 4
      for (int row = 0; row < R; ++row) {
        const __m512i g = r[row][i].grid[p], sc = r[row][i].scales[p];
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) lanes[row][k] = _mm512_dpwssd_epi32(lanes[row][k], _mm512_maddubs_epi16(u[k], g), sc);
      }
    }
#pragma GCC unroll 16
    for (int j = 0; j < R * K; ++j) {
      const int row = j / K, k = j % K;
      const gguf::block_q8_K& xb = x.xq[k * x.nb + i];
      const float d = r[row][i].d * xb.d;
      row_sums<D>& rs = sums[row][k];
      rs.acc = add_super_block(rs.acc, _mm512_sub_epi32(lanes[row][k], r[row][i].excess), d);
      if constexpr (has_delta<D> && !delta4) rs.delta = std::fma(d, static_cast<float>(iq1_s_delta_sum(r[row][i].delta, xb)), rs.delta);
      if constexpr (has_delta_lanes<D>) {
        rs.delta_lanes = add_super_block(rs.delta_lanes, delta_lanes_of(r[row][i].delta_lanes.words, x.fours[k * x.nb + i]), d);
      }
    }
    if constexpr (delta4) {
      __m256i bsums[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) bsums[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.xq[k * x.nb + i].bsums));
      const __m128 dx = _mm_setr_ps(x.xq[i].d, x.xq[x.nb + i].d, x.xq[2 * x.nb + i].d, x.xq[3 * x.nb + i].d);
#pragma GCC unroll 4
      for (int row = 0; row < R; ++row) {
        const __m128 d = _mm_mul_ps(_mm_set1_ps(r[row][i].d), dx);  // the reference's d_w * d_x
        delta_chains[row] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(iq1_s_delta_sums4(r[row][i].delta, bsums)), delta_chains[row]);
      }
    }
  }
  if constexpr (delta4) {
#pragma GCC unroll 4
    for (int row = 0; row < R; ++row) {
      alignas(16) float chains[4];
      _mm_store_ps(chains, delta_chains[row]);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) sums[row][k].delta = chains[k];
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < R * K; ++j) y[(j % K) * y_stride + j / K] = sums[j / K][j % K].finish();
}

// Rows r[0..R) against every activation row, 4 at a time.
template <class D, int R>
SPITE_AVX512_VBMI void dot_batch_rows(const batch_block<D>* const* r, const batch_rows& x, std::int64_t n_tokens, float* y, std::int64_t out) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) dot_batch<D, R, 4>(r, x.from(t), y + t * out, out);
  for (; t < n_tokens; ++t) dot_batch<D, R, 1>(r, x.from(t), y + t * out, out);
}

// IQ1_M's four_sums of the activation rows; nothing for the other types.
template <class D>
std::optional<four_sums> fours_for(const gguf::block_q8_K* xq, std::int64_t blocks) {
  if constexpr (has_delta_lanes<D>) {
    return std::optional<four_sums>(std::in_place, xq, blocks);
  } else {
    return std::nullopt;
  }
}

// One activation row (decode): the decoder's constants loaded once per thread, not per row.
template <class D>
void matmul_one(const weight& w, const gguf::block_q8_K* xq, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / gguf::qk_k;
  const auto fours = fours_for<D>(xq, nb);
  const block_fours* f = fours ? fours->v.data() : nullptr;
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    const D dec;
    for (std::int64_t o = begin; o < end; ++o) y[o] = dot_grid(dec, reinterpret_cast<const typename D::block*>(w.row(o)), xq, nb, f);
  });
}

template <class D>
void matmul_grid(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (n_tokens == 1) return matmul_one<D>(w, xq, y, pool);
  const std::int64_t nb = w.in / gguf::qk_k;
  aligned_vector<std::uint8_t> u(static_cast<std::size_t>(n_tokens * w.in));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t i = 0; i < nb; ++i) {
      const std::int8_t* q = xq[t * nb + i].qs;
      std::uint8_t* dst = u.data() + t * w.in + i * gguf::qk_k;
      for (int j = 0; j < gguf::qk_k; ++j) dst[j] = static_cast<std::uint8_t>(q[j] ^ 0x80);
    }
  }
  const auto fours = fours_for<D>(xq, n_tokens * nb);
  const batch_rows x{u.data(), xq, fours ? fours->v.data() : nullptr, nb, w.in};
  constexpr int group = 4;  // weight rows per pass: 4 x 4 lanes' accumulators fill half the registers
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    const D dec;
    aligned_vector<batch_block<D>> decoded(static_cast<std::size_t>(group * nb));
    const batch_block<D>* rows[group];
    for (int j = 0; j < group; ++j) rows[j] = decoded.data() + j * nb;
    std::int64_t o = begin;
    for (; o + group <= end; o += group) {
      for (int j = 0; j < group; ++j) decode_batch_row(dec, reinterpret_cast<const typename D::block*>(w.row(o + j)), nb, decoded.data() + j * nb);
      dot_batch_rows<D, group>(rows, x, n_tokens, y + o, w.out);
    }
    for (; o < end; ++o) {
      decode_batch_row(dec, reinterpret_cast<const typename D::block*>(w.row(o)), nb, decoded.data());
      dot_batch_rows<D, 1>(rows, x, n_tokens, y + o, w.out);
    }
  });
}

bool usable() {
  __builtin_cpu_init();
  const bool present = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                       __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                       __builtin_cpu_supports("f16c");
  return present && iq2xxs_codes().valid && iq2xs_codes().valid && iq2s_codes().valid && iq3xxs_codes().valid &&
         iq3s_codes().valid;
}

bool enabled() {
  static const bool present = usable();
  return present && avx512_allowed();
}

}  // namespace

bool enabled_grid_kernels() { return enabled(); }

grid_matmul_fn avx512_grid_matmul(const gguf::block_iq1_s*) { return enabled() ? matmul_grid<iq1_s_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq1_m*) { return enabled() ? matmul_grid<iq1_m_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xxs*) { return enabled() ? matmul_grid<iq2_xxs_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xs*) { return enabled() ? matmul_grid<iq2_xs_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_s*) { return enabled() ? matmul_grid<iq2_s_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_xxs*) { return enabled() ? matmul_grid<iq3_xxs_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_s*) { return enabled() ? matmul_grid<iq3_s_decoder> : nullptr; }

}  // namespace spite::dispatch::cpu::x86

namespace spite::dispatch::cpu {
bool has_avx512_grid_kernels() { return x86::enabled_grid_kernels(); }
}  // namespace spite::dispatch::cpu

#else

namespace spite::dispatch::cpu {
bool has_avx512_grid_kernels() { return false; }
}  // namespace spite::dispatch::cpu

#endif
