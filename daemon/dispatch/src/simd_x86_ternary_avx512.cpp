// The ternary types' products (TQ1_0, TQ2_0) with AVX-512 VNNI and VBMI. The reference
// (ternary_dot in iquant_dots.hpp, dot_ternary in simd_x86_iquant_grid.cpp) takes the digits
// 0..2 (weight + 1) and per super-block 8 int32 lanes: lane j sums the digit x activation
// products of elements 4j..4j + 3 of every 32-element chunk, less the activations' sum over
// sub-block j (32 elements); then one fma per lane with d_w * d_x, and reduce8.
//
// Here 64 digits (two chunks) are one register in element order, so one VPDPBUSD (digits
// unsigned, activations signed) adds 64 products into 16 lanes, chunk 2q's lanes in the low
// half and 2q + 1's in the high one; the halves added are the reference's lanes, exact
// integers, so the bits are the same. The AVX2 kernels took a VPMADDUBSW, a VPMADDWD and a
// VPADDD per 32 products, and TQ1_0's digit arithmetic on 16-bit lanes.
//
// TQ1_0 packs 5 digits per byte as b = ceil(sum_k t_k 3^(4-k) x 256 / 243): digit k is
// ((b x 3^k mod 256) x 3) >> 8, which is [v >= 86] + [v >= 171] for v = b x 3^k mod 256. A
// register of 64 elements gathers its source bytes with VPERMB and multiplies each by its own
// power on the even and odd bytes' 16-bit lanes.
#include "simd_x86_avx512.hpp"
#include "simd_x86_grid.hpp"

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {
namespace {

// TQ1_0 element e: its source byte (qs[0..47], then qh[0..3] at 48..51) and that byte's power
// of 3. Elements 0..159: qs[e % 32] at 3^(e / 32); 160..239: qs[32 + e % 16] at 3^((e - 160) /
// 16); 240..255: qh[e % 4] at 3^((e - 240) / 4).
struct tq1_0_source {
  int byte, power;
};
constexpr tq1_0_source tq1_0_source_of(int e) {
  constexpr int pow3[5] = {1, 3, 9, 27, 81};
  if (e < 160) return {e % 32, pow3[e / 32]};
  if (e < 240) return {32 + (e - 160) % 16, pow3[(e - 160) / 16]};
  return {48 + (e - 240) % 4, pow3[(e - 240) / 4]};
}
constexpr vector_bytes tq1_0_pick(int q) { return bytes_of([q](int i) { return tq1_0_source_of(64 * q + i).byte; }); }
constexpr vector_bytes tq1_0_powers(int q) { return bytes_of([q](int i) { return tq1_0_source_of(64 * q + i).power; }); }
// Elements 2i and 2i + 1 share a power (runs of 32, 16 and 4), so one 16-bit lane of powers
// serves a lane's even and odd byte.
constexpr bool pairs_share_powers() {
  for (int e = 0; e < 256; e += 2) {
    if (tq1_0_source_of(e).power != tq1_0_source_of(e + 1).power) return false;
  }
  return true;
}
static_assert(pairs_share_powers());

struct tq1_0_decoder {
  using block = gguf::block_tq1_0;
  static constexpr vector_bytes k_pick[4] = {tq1_0_pick(0), tq1_0_pick(1), tq1_0_pick(2), tq1_0_pick(3)};
  static constexpr vector_bytes k_powers[4] = {tq1_0_powers(0), tq1_0_powers(1), tq1_0_powers(2), tq1_0_powers(3)};
  __m512i pick[4], powers[4];
  SPITE_AVX512_VBMI tq1_0_decoder() {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      pick[q] = load(k_pick[q]);
      powers[q] = load(k_powers[q]);
    }
  }
  // Elements 64q..64q + 63's digits.
  SPITE_AVX512_VBMI void digits(const block& b, __m512i* t) const {
    // The 52 bytes of qs and qh; the masked load reads nothing past them.
    const __m512i bytes = _mm512_maskz_loadu_epi8(0x000FFFFFFFFFFFFFull, b.qs);
    const __m512i ones = _mm512_set1_epi8(1);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i src = _mm512_permutexvar_epi8(pick[q], bytes);
      // Byte times its power mod 256: the low byte of a 16-bit product, even and odd bytes apart.
      const __m512i even = _mm512_mullo_epi16(src, powers[q]);
      const __m512i odd = _mm512_slli_epi16(_mm512_mullo_epi16(_mm512_srli_epi16(src, 8), powers[q]), 8);
      const __m512i v = _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, even, odd);
      const __m512i one = _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(v, _mm512_set1_epi8(86)), ones);
      t[q] = _mm512_mask_add_epi8(one, _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8(static_cast<char>(171))), one, ones);
    }
  }
};

// TQ2_0 element 128h + 32k + m: bits 2k..2k + 1 of qs[32h + m].
struct tq2_0_decoder {
  using block = gguf::block_tq2_0;
  SPITE_AVX512_VBMI tq2_0_decoder() {}
  SPITE_AVX512_VBMI void digits(const block& b, __m512i* t) const {
    const __m512i three = _mm512_set1_epi8(3);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (q / 2))));
      const int k = 2 * (q % 2);
      // Words of the low half shift by 2k, of the high half by 2k + 2.
      const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * k)), _mm256_set1_epi16(static_cast<short>(2 * k + 2)), 1);
      t[q] = _mm512_and_si512(_mm512_srlv_epi16(v, shift), three);
    }
  }
};

// A super-block's 16 lanes folded to the reference's 8, less the activations' sub-block sums;
// its fma with d = d_x * d_w.
SPITE_AVX512_VBMI inline __m256 add_super_block(__m256 acc, __m512i lanes, __m256i sums, float d) {
  const __m256i lanes8 = _mm256_add_epi32(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64(lanes, 1));
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(lanes8, sums)), acc);
}

// One weight row against one activation row.
template <class D>
SPITE_AVX512_VBMI float dot_ternary(const D& dec, const typename D::block* x, const gguf::block_q8_K* y, std::int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m512i t[4];
    dec.digits(x[i], t);
    __m512i lanes = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) lanes = _mm512_dpbusd_epi32(lanes, t[q], _mm512_loadu_si512(y[i].qs + 64 * q));
    acc = add_super_block(acc, lanes, ternary_sub_block_sums(y[i]), y[i].d * _cvtsh_ss(x[i].d));
  }
  return reduce8_vec(acc);
}

// A weight row's super-block decoded once for a batch.
struct decoded_block {
  __m512i digits[4];
  float d;
};

// R decoded weight rows against K activation rows (xq: the first one's blocks, nb a row; y_stride
// between their outputs). Each activation load serves the R rows.
template <int R, int K>
SPITE_AVX512_VBMI void dot_batch(const decoded_block* const* r, const gguf::block_q8_K* xq, std::int64_t nb, float* y, std::int64_t y_stride) {
  __m256 acc[R][K];
#pragma GCC unroll 16
  for (int j = 0; j < R * K; ++j) acc[j / K][j % K] = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < nb; ++i) {
    __m512i lanes[R][K];
#pragma GCC unroll 16
    for (int j = 0; j < R * K; ++j) lanes[j / K][j % K] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      __m512i x[K];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) x[k] = _mm512_loadu_si512(xq[k * nb + i].qs + 64 * q);
#pragma GCC unroll 4
      for (int row = 0; row < R; ++row) {
        const __m512i t = r[row][i].digits[q];
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) lanes[row][k] = _mm512_dpbusd_epi32(lanes[row][k], t, x[k]);
      }
    }
    __m256i sums[K];  // shared by the R rows
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) sums[k] = ternary_sub_block_sums(xq[k * nb + i]);
#pragma GCC unroll 16
    for (int j = 0; j < R * K; ++j) {
      const int row = j / K, k = j % K;
      acc[row][k] = add_super_block(acc[row][k], lanes[row][k], sums[k], xq[k * nb + i].d * r[row][i].d);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < R * K; ++j) y[(j % K) * y_stride + j / K] = reduce8_vec(acc[j / K][j % K]);
}

template <int R>
SPITE_AVX512_VBMI void dot_batch_rows(const decoded_block* const* r, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t nb,
                                      float* y, std::int64_t out) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) dot_batch<R, 4>(r, xq + t * nb, nb, y + t * out, out);
  for (; t < n_tokens; ++t) dot_batch<R, 1>(r, xq + t * nb, nb, y + t * out, out);
}

template <class D>
SPITE_AVX512_VBMI void decode_row(const D& dec, const typename D::block* x, std::int64_t nb, decoded_block* out) {
  for (std::int64_t i = 0; i < nb; ++i) {
    dec.digits(x[i], out[i].digits);
    out[i].d = _cvtsh_ss(x[i].d);
  }
}

// Decode: each row's digits made as its product goes; batches: 4 rows decoded once, then
// against the activation rows 4 at a time. The decoder's constants loaded once per thread.
template <class D>
void matmul_ternary(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / gguf::qk_k;
  if (n_tokens == 1) {
    return pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
      const D dec;
      for (std::int64_t o = begin; o < end; ++o) y[o] = dot_ternary(dec, reinterpret_cast<const typename D::block*>(w.row(o)), xq, nb);
    });
  }
  constexpr int group = 4;
  pool.parallel_for(w.out, [&](std::int64_t begin, std::int64_t end, int) {
    const D dec;
    aligned_vector<decoded_block> decoded(static_cast<std::size_t>(group * nb));
    const decoded_block* rows[group];
    for (int j = 0; j < group; ++j) rows[j] = decoded.data() + j * nb;
    std::int64_t o = begin;
    for (; o + group <= end; o += group) {
      for (int j = 0; j < group; ++j) decode_row(dec, reinterpret_cast<const typename D::block*>(w.row(o + j)), nb, decoded.data() + j * nb);
      dot_batch_rows<group>(rows, xq, n_tokens, nb, y + o, w.out);
    }
    for (; o < end; ++o) {
      decode_row(dec, reinterpret_cast<const typename D::block*>(w.row(o)), nb, decoded.data());
      dot_batch_rows<1>(rows, xq, n_tokens, nb, y + o, w.out);
    }
  });
}

}  // namespace

grid_matmul_fn avx512_grid_matmul(const gguf::block_tq1_0*) { return enabled_grid_kernels() ? matmul_ternary<tq1_0_decoder> : nullptr; }
grid_matmul_fn avx512_grid_matmul(const gguf::block_tq2_0*) { return enabled_grid_kernels() ? matmul_ternary<tq2_0_decoder> : nullptr; }

}  // namespace spite::dispatch::cpu::x86

#endif
