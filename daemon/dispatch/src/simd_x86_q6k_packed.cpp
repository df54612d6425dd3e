// Q6_K packed at load time (matrices of a multiple of 8 rows): 8 rows side by side, so each row
// is a lane of the float work, with the reference's arithmetic (dot_row<q6_K> in
// ref_dot_kquants.cpp) unchanged: per row 8 int32 lanes per super-block, lane L summing
// elements 4L..4L+3 of every 32-element group g times scale[2g + L/4], minus 32 * (scale[2L] *
// bsum[2L] + scale[2L+1] * bsum[2L+1]); acc[L] = fma(d_x * d_w, lane, acc[L]); reduce8 at the
// end. Here lane L of the 8 rows is one vector, so the per-block float work is 8 vector fmas for
// 8 rows (the unpacked kernels need one per row), and the byte shuffles that spread the scales
// happen once per group instead of once per row.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <utility>

namespace spite::dispatch::cpu::x86 {
namespace {

// Per group of 8 rows and super-block (the layout is 32-byte aligned in an aligned buffer):
//   d[8] (f16);
//   scales: for each sub-block pair p (sub-blocks 2p, 2p + 1), 16 bytes: [2p: rows 0-3,
//     2p + 1: rows 0-3, 2p: rows 4-7, 2p + 1: rows 4-7], so that one sign extension and two
//     int16 unpacks give each sub-block's (scale, scale) pairs with rows as lanes;
//   16 bytes of padding;
//   quants, per 32-element group g, 192 bytes: chunk (g, L) holds bytes 4r..4r+3 = row r's
//     quants 32g + 4L .. 32g + 4L + 3; four 32-byte vectors N[p] with chunk (g, p) in the low
//     nibbles and (g, p + 4) in the high ones, then two H[u] with bits 2k..2k+1 the top two bits
//     of chunk (g, 4u + k).
constexpr std::size_t d_bytes = 16, scale_bytes = 128, quants_offset = d_bytes + scale_bytes + 16;
constexpr std::size_t packed_block = quants_offset + 8 * 192;  // 1696 = 53 x 32

// Row r's quants (0..63) of one super-block in element order: element 128c + 32k + l is the
// nibble of ql[64c + 32(k & 1) + l] (low for k < 2) with bits 2k..2k+1 of qh[32c + l] above it.
void quants_of(const gguf::block_q6_K& b, std::uint8_t* q) {
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t ql = b.ql[64 * c + 32 * (k & 1) + l];
        const int nib = k < 2 ? ql & 0x0F : ql >> 4;
        const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
        q[128 * c + 32 * k + l] = static_cast<std::uint8_t>(nib | hi << 4);
      }
    }
  }
}

std::size_t pack_q6_K_impl(weight& w) {
  const std::int64_t nb = w.in / qkk, groups = w.out / 8;
  const std::size_t bytes = static_cast<std::size_t>(groups * nb) * packed_block;
  auto buffer = make_aligned_bytes(bytes);
  std::memset(buffer.get(), 0, bytes);
  std::uint8_t q[8][qkk];
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t b = 0; b < nb; ++b) {
      std::byte* dst = buffer.get() + static_cast<std::size_t>(g * nb + b) * packed_block;
      auto* scales = reinterpret_cast<std::int8_t*>(dst + d_bytes);
      auto* quants = reinterpret_cast<std::uint8_t*>(dst + quants_offset);
      for (int r = 0; r < 8; ++r) {
        const auto& blk = reinterpret_cast<const gguf::block_q6_K*>(w.row(8 * g + r))[b];
        std::memcpy(dst + 2 * r, &blk.d, 2);
        for (int s = 0; s < 16; ++s) scales[16 * (s / 2) + (r < 4 ? 0 : 8) + 4 * (s % 2) + (r & 3)] = blk.scales[s];
        quants_of(blk, q[r]);
      }
      for (int grp = 0; grp < 8; ++grp) {
        std::uint8_t* n = quants + 192 * grp;
        std::uint8_t* h = n + 128;
        for (int L = 0; L < 8; ++L) {
          for (int r = 0; r < 8; ++r) {
            for (int i = 0; i < 4; ++i) {
              const std::uint8_t v = q[r][32 * grp + 4 * L + i];
              const int byte = 4 * r + i;
              n[32 * (L & 3) + byte] |= static_cast<std::uint8_t>(L < 4 ? v & 0x0F : (v & 0x0F) << 4);
              h[32 * (L >> 2) + byte] |= static_cast<std::uint8_t>((v >> 4) << (2 * (L & 3)));
            }
          }
        }
      }
    }
  }
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  return bytes;
}

// Chunk (g, L) of a packed group: its 32 quants (0..63), 8 rows x 4.
template <int L>
SPITE_AVX2 inline __m256i chunk(const std::uint8_t* group_quants) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i n = _mm256_load_si256(reinterpret_cast<const __m256i*>(group_quants + 32 * (L & 3)));
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(group_quants + 128 + 32 * (L >> 2)));
  const __m256i nib = L < 4 ? _mm256_and_si256(n, m4) : _mm256_and_si256(_mm256_srli_epi16(n, 4), m4);
  // Bits 2k..2k+1 of h (k = L & 3) to bits 4..5.
  const __m256i top = (L & 3) == 0 ? _mm256_slli_epi16(h, 4) : (L & 3) == 1 ? _mm256_slli_epi16(h, 2) : (L & 3) == 2 ? h : _mm256_srli_epi16(h, 2);
  return _mm256_or_si256(nib, _mm256_and_si256(top, m30));
}

// One lane L of 8 rows against K activation rows: the integer lanes of the super-block, then
// each activation row's fma.
template <int L, int K>
SPITE_AVX2 inline void lane(const std::uint8_t* quants, const __m256i* scale_pairs, const __m256i* offset_pairs,
                            const gguf::block_q8_K* const* x, const __m256* d, __m256* acc) {
  __m256i sum[K];
  for (int k = 0; k < K; ++k) sum[k] = _mm256_setzero_si256();
  const auto group = [&](int g) SPITE_AVX2 {
    const __m256i q = chunk<L>(quants + 192 * g);
    for (int k = 0; k < K; ++k) {
      const __m256i xv = _mm256_set1_epi32(load_u32(x[k]->qs + 32 * g + 4 * L));
      sum[k] = _mm256_add_epi32(sum[k], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), scale_pairs[2 * g + L / 4]));
    }
  };
  if constexpr (K == 1) {
    for (int g = 0; g < 8; ++g) group(g);
  } else {
    // Unrolled over the 8 lanes already; unrolling the groups too would not fit the op cache.
#pragma GCC unroll 1
    for (int g = 0; g < 8; ++g) group(g);
  }
  for (int k = 0; k < K; ++k) {
    std::int32_t bs;
    std::memcpy(&bs, x[k]->bsums + 2 * L, 4);
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(offset_pairs[L], _mm256_set1_epi32(bs)), 5);
    acc[K * L + k] = _mm256_fmadd_ps(d[k], _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[k], offset)), acc[K * L + k]);
  }
}

template <int K, int... L>
SPITE_AVX2 inline void lanes(std::integer_sequence<int, L...>, const std::uint8_t* quants, const __m256i* scale_pairs,
                             const __m256i* offset_pairs, const gguf::block_q8_K* const* x, const __m256* d, __m256* acc) {
  (lane<L, K>(quants, scale_pairs, offset_pairs, x, d, acc), ...);
}

// 8 rows (one packed group) x K activation rows from t0; y + (t0 + k) * out gets the 8 rows.
template <int K>
SPITE_AVX2 void q6_K_packed_tile(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                                 std::int64_t out, float* y) {
  __m256 acc[8 * K];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const next_group_prefetch ahead(group + static_cast<std::size_t>(nb) * packed_block, static_cast<std::size_t>(nb) * packed_block,
                                  nb);
  alignas(32) __m256i scale_pairs[16], offset_pairs[8];
  // Within each 128-bit lane: (2p: row j, 2p + 1: row j) for j = 0..3.
  const __m256i interleave = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,  //
                                              0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * packed_block;
    for (int p = 0; p < 8; ++p) {
      const __m256i v = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(blk + d_bytes + 16 * p)));
      scale_pairs[2 * p] = _mm256_unpacklo_epi16(v, v);
      scale_pairs[2 * p + 1] = _mm256_unpackhi_epi16(v, v);
      offset_pairs[p] = _mm256_shuffle_epi8(v, interleave);
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(blk)));
    const gguf::block_q8_K* x[K];
    __m256 d[K];
    for (int k = 0; k < K; ++k) {
      x[k] = &xq[(t0 + k) * nb + b];
      d[k] = _mm256_mul_ps(dw, _mm256_set1_ps(x[k]->d));
    }
    lanes<K>(std::make_integer_sequence<int, 8>{}, reinterpret_cast<const std::uint8_t*>(blk + quants_offset), scale_pairs,
             offset_pairs, x, d, acc);
  }
  // reduce8 over the lanes, rows side by side.
  for (int k = 0; k < K; ++k) {
    const __m256* a = acc + k;  // lane L at a[K * L]
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4 * K]), _mm256_add_ps(a[2 * K], a[6 * K])),
                                     _mm256_add_ps(_mm256_add_ps(a[K], a[5 * K]), _mm256_add_ps(a[3 * K], a[7 * K])));
    _mm256_storeu_ps(y + (t0 + k) * out, sum);
  }
}

}  // namespace

std::size_t pack_q6_K(weight& w) { return pack_q6_K_impl(w); }

void matmul_q6_K_packed(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  const std::int64_t block = token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K));
  by_groups_and_token_blocks(w.out / 8, n_tokens, block, pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = w.packed + static_cast<std::size_t>(g * nb) * packed_block;
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) q6_K_packed_tile<4>(group, nb, xq, t, w.out, y + 8 * g);
    for (; t < t1; ++t) q6_K_packed_tile<1>(group, nb, xq, t, w.out, y + 8 * g);
  });
}

}  // namespace spite::dispatch::cpu::x86

#endif
