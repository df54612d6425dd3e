// IQ4_XS packed in 8-row groups for the 256-bit kernels (AVX2; AVX-VNNI), where the 16-row
// AVX-512 layout (simd_x86_iq4xs_x16.cpp) is not made. The same bits as the reference's IQ4_XS
// dot (dot_plain<iq4_xs> in iquant_dots.hpp): per row and super-block 8 int32 lanes (lane L:
// elements 4L..4L+3 of every 32-element sub-block, table values in [-127, 113], times the
// sub-block's scale - 32), one fma per lane and super-block with d_w * d_x, the 8 lanes added as
// reduce8_vec adds them.
//
// The file's layout goes through simd_x86_iquants.cpp's tile, 4 rows at a time and each row's
// lanes in its own vector: per row and super-block it decodes the 6-bit scales and shuffles the
// two sub-blocks of each pair into place, and one thread computed 18-20 GB/s of weights from
// the caches (TinyLlama's shape decoded at about 45 % of the bandwidth). Here, as in the 16-row
// layout, a 32-byte register is one 4-element chunk of 8 rows, so lane L of the 8 rows is one
// vector, the rows as its int32 lanes (the reference's lanes transposed, transposed back once
// per group by store_lane_rows), the scales decoded at load time. Per group of 8 rows and
// super-block (1104 bytes; the file's 8 x 136 = 1088 and 16 for the decoded scales):
//   d[8]            f16 at 2 r;
//   scales[8][8]    i8 at 16 + 8 s + r: row r's scale - 32 of sub-block s;
//   quants[8][4]    32-byte vectors at 80 + 128 s + 32 m: bytes 4r..4r+3 are row r's index bytes
//                   16 s + 4 m..+3 as in the file (lane m in the low nibbles, m + 4 in the high).
// A group is one stream; decode reads two of them per thread (by_group_pairs).
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cstring>

#include "../../gguf/src/quants/iq_tables.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x8_scales = 16, x8_quants = 80;
constexpr std::size_t x8_block = x8_quants + 8 * 128;
static_assert(x8_block == 8 * sizeof(gguf::block_iq4_xs) + 16);

// Sub-block s's share (an eighth) of the block four ahead: the stream continues into the next
// group, so a group's last blocks fetch the next one's first. (Four blocks, 4.3 KB, as packed
// Q8_0's decode fetches.)
inline void fetch_ahead(const std::byte* blk, int s) {
  const std::size_t begin = 4 * x8_block + static_cast<std::size_t>(s) * x8_block / 8;
  const std::size_t end = 4 * x8_block + static_cast<std::size_t>(s + 1) * x8_block / 8;
  for (std::size_t off = begin & ~std::size_t{63}; off < end; off += 64) prefetch_l1(blk + off);
}

namespace avx2 {
#define SPITE_IQ4XS_X8_TARGET SPITE_AVX2
SPITE_AVX2 inline __m256i scaled_add(__m256i lanes, __m256i pairs, __m256i scales) {
  return _mm256_add_epi32(lanes, _mm256_madd_epi16(pairs, scales));
}
#include "simd_x86_iq4xs_x8.inc"
#undef SPITE_IQ4XS_X8_TARGET
}  // namespace avx2

namespace vnni {
#define SPITE_IQ4XS_X8_TARGET SPITE_AVX_VNNI
SPITE_AVX_VNNI inline __m256i scaled_add(__m256i lanes, __m256i pairs, __m256i scales) {
  return _mm256_dpwssd_avx_epi32(lanes, pairs, scales);
}
#include "simd_x86_iq4xs_x8.inc"
#undef SPITE_IQ4XS_X8_TARGET
}  // namespace vnni

}  // namespace

std::size_t pack_iq4_xs_x8(weight& w) {
  if (w.out % 8 != 0) return 0;
  return pack_row_groups<gguf::block_iq4_xs>(w, x8_block, [](std::byte* dst, const gguf::block_iq4_xs& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::uint16_t scales_h;
    std::memcpy(&scales_h, &blk.scales_h, 2);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
      dst[x8_scales + 8 * static_cast<std::size_t>(s) + static_cast<std::size_t>(r)] = static_cast<std::byte>(static_cast<std::int8_t>(ls - 32));
      for (int m = 0; m < 4; ++m) {
        std::memcpy(dst + x8_quants + 128 * static_cast<std::size_t>(s) + 32 * static_cast<std::size_t>(m) + 4 * static_cast<std::size_t>(r),
                    blk.qs + 16 * s + 4 * m, 4);
      }
    }
  });
}

void matmul_iq4_xs_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  const std::size_t stride = static_cast<std::size_t>(nb) * x8_block;
  const bool vnni = has_avx_vnni_kernels();
  const auto rows = [&]<int S>(const std::byte* const* groups, std::int64_t t, bool fetch, float* const* ys) {
    if (vnni) return vnni::rows<S>(groups, nb, xq, t, fetch, ys);
    avx2::rows<S>(groups, nb, xq, t, fetch, ys);
  };
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g) * stride; };
  if (n_tokens == 1) {
    by_group_pairs<8>(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* both, std::int64_t, float* const* ys) { rows.template operator()<2>(both, 0, true, ys); },
        [&](const std::byte* group, std::int64_t, float* y8) { rows.template operator()<1>(&group, 0, true, &y8); });
    return;
  }
  // Batches: 4 activation rows at a time against a group, which stays in the caches after the
  // first; those left over one at a time.
  by_groups_and_token_blocks(w.out / 8, n_tokens, token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               const std::byte* group = group_at(g);
                               float* y8 = y + 8 * g;
                               std::int64_t t = t0;
                               for (; t + 4 <= t1; t += 4) {
                                 if (vnni) {
                                   vnni::tile4(group, nb, xq, t, w.out, t == t0, y8);
                                 } else {
                                   avx2::tile4(group, nb, xq, t, w.out, t == t0, y8);
                                 }
                               }
                               for (; t < t1; ++t) {
                                 float* yt = y8 + t * w.out;
                                 rows.template operator()<1>(&group, t, t == t0, &yt);
                               }
                             });
}

}  // namespace spite::dispatch::cpu::x86

#endif
