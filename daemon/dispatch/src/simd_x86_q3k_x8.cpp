// Q3_K packed in 8-row groups for the 256-bit kernels (AVX2; AVX-VNNI), where the 16-row AVX-512
// layout (simd_x86_q3k_x16.cpp) is not made. The same bits as the reference's Q3_K dot
// (dot_row<q3_K> in ref_kquants.hpp): per row and super-block 8 int32 lanes (lane L: elements
// 4L..4L+3 of every 32-element group, quants in [-4, 3], times the group's 16-element scale), one
// fma per lane and super-block with d_x * d_w, the 8 lanes added as reduce8_vec adds them. The
// lanes are exact integers, so how they are summed is free: the quants are stored unsigned
// (q + 4, 0..7) for VPMADDUBSW, and each lane starts from -4 x (its scales times its activation
// sums), two groups at a time, added to the products' int16 sums before their scaled add.
//
// On the file's blocks (110 bytes: the quants split over a 2-bit and a 1-bit plane, the scales
// packed in 6 bits) a row-by-row tile unpacks each row: one thread read 40 % of a plain read's
// bandwidth from memory (Q3_K:2048:5632 with AVX-VNNI). Here, as in the 16-row layout, a 32-byte
// register is one 4-element chunk of 8 rows (rows as int32 lanes, transposed back once per group
// by store_lane_rows). Per group of 8 rows and super-block (912 bytes; the file's 8 x 110 = 880
// and the scales decoded):
//   d[8]               f16 at 2 r;
//   scales[4][2][8][2] i8 at 16 + 32 p + 16 h + 2 r + k: row r's scale 4p + 2k + h, i.e. of
//                      group 2p + k's lanes 4h..4h + 3;
//   then per pair of groups p (2p, 2p + 1) and half v, a unit of 96 bytes at 144 + 96 (2p + v):
//                      three 32-byte vectors whose bytes 4r + i hold the unsigned quants u(L) =
//                      q + 4 (0..7) of lane L = 0..7 of row r, slot i being element 4L + 2v + i % 2
//                      of group 2p + i / 2, as
//     + 0              u(0) | u(1) << 3 | (u(2) & 3) << 6,
//     + 32             u(3) | u(4) << 3 | (u(5) & 3) << 6,
//     + 64             u(6) | u(7) << 3 | (u(2) >> 2) << 6 | (u(5) >> 2) << 7:
//                      the file's 3 bits per quant, placed so that most lanes come out of one vector
//                      by one shift and one mask (chunk in simd_x86_q3k_x8.inc).
// So a chunk's int16 pair sums are group 2p's (low half of each row's int32) and 2p + 1's (high
// half): a lane's two chunks of a pair of groups are added in int16 to its -4 offsets of both (at
// most 4 x 7 x 127 + 4 x 4 x 128) and multiplied by both groups' scales in one VPMADDWD (the scale
// pairs as stored), where each group's chunk took its own VPMADDWD, its scale a shuffle into both
// halves and the offsets a VPMADDWD of their own: one row from the caches (Q3_K:5632:2048, one
// thread, AVX2, Zen 3, alternated) 0.292 -> 0.249 ms, 4 rows of 2048:5632 0.909 -> 0.770, 128 rows
// 28.8 -> 24.9. The activations are permuted to match, once per matmul (block_offsets).
#include "simd_x86.hpp"
#include "simd_x86_pairs.hpp"

#if defined(__x86_64__)
#include <cstring>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x8_scales = 16, x8_groups = 144, x8_group = 96;
constexpr std::size_t x8_block = x8_groups + 8 * x8_group;
static_assert(x8_block == 8 * sizeof(gguf::block_q3_K) + 32);

// Decode fetches the block two ahead (1.8 KB), as the 16-row layout does.
inline void fetch_ahead(const std::byte* blk, int g) { fetch_eighth_ahead<x8_block, 2>(blk, g); }

// Per activation super-block: dword L of v[p] holds -4 S(2p, L) (low half) and -4 S(2p + 1, L)
// (high half), S(g, L) the sum of the activations of lane L's elements in group g; |4 S| <= 4 x
// 4 x 128 fits an int16. And its quants in the units' order (interleave_group_pairs). Made once
// per matmul.
struct block_offsets {
  alignas(32) std::int32_t v[4][8];
  alignas(32) std::int8_t x[qkk];
};

SPITE_AVX2 void activation_offsets(const gguf::block_q8_K* x, std::size_t begin, std::size_t end, block_offsets* out) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (std::size_t i = begin; i < end; ++i) {
    for (int p = 0; p < 4; ++p) {
      __m256i m[2];
      for (int k = 0; k < 2; ++k) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 64 * p + 32 * k));
        const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xv), ones16);
        m[k] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 2));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(out[i].v[p]), _mm256_blend_epi16(m[0], _mm256_slli_epi32(m[1], 16), 0xAA));
    }
    interleave_group_pairs(x[i].qs, out[i].x);
  }
}

// The activations' offsets, and the matmul's number (x8_unpacked).
struct x8_extra {
  std::vector<block_offsets> offsets;
  std::uint64_t id = next_matmul_id();
  x8_extra(const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool) : offsets(static_cast<std::size_t>(nb * n_tokens)) {
    for_activation_blocks(nb * n_tokens, pool, [&](std::int64_t begin, std::int64_t end) {
      activation_offsets(xq, static_cast<std::size_t>(begin), static_cast<std::size_t>(end), offsets.data());
    });
  }
};

// Batches' last 1-2 activation rows a pass each, 3 as one tile: as a tile 2 rows took 0.74-0.97
// ms against 0.57-0.66 (Q3_K:2048:11264 from memory, two threads, AVX-VNNI), and since the
// layout's cheaper unpacking (AVX2, Zen 3, alternated) 0.610 against 0.578 from the caches,
// while 3 rows took 0.815 against 0.868 from memory on two threads (0.810 against 0.842 from
// the caches, one thread).
constexpr std::int64_t x8_smallest_tile = 3;

#define SPITE_X8_BODY "simd_x86_q3k_x8.inc"
#include "simd_x86_x8_isas.inc"
#undef SPITE_X8_BODY

}  // namespace

std::size_t pack_q3_K_x8(weight& w) {
  if (w.out % 8 != 0) return 0;
  return pack_row_groups<gguf::block_q3_K>(w, x8_block, [](std::byte* dst, const gguf::block_q3_K& blk, int r) {
    std::int8_t sc[16];
    q3_K_scales(blk.scales, sc);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    for (int s = 0; s < 16; ++s) {
      const int p = s / 4, k = (s / 2) % 2, h = s % 2;
      dst[x8_scales + 32 * static_cast<std::size_t>(p) + 16 * static_cast<std::size_t>(h) + 2 * static_cast<std::size_t>(r) + static_cast<std::size_t>(k)] =
          static_cast<std::byte>(sc[s]);
    }
    unsigned u[8][8][4];  // group, lane, element of the lane: q + 4
    for (int g = 0; g < 8; ++g) {
      std::uint32_t low[2], high;
      q3_K_group_planes(blk, g, low, high);
      for (int L = 0; L < 8; ++L) {
        for (int i = 0; i < 4; ++i) u[g][L][i] = ((low[L / 4] >> (8 * i + 2 * (L % 4))) & 3u) | (((high >> (8 * i + L)) & 1u) << 2);
      }
    }
    for (int unit = 0; unit < 8; ++unit) {
      const int p = unit / 2, v = unit % 2;
      std::byte* ud = dst + x8_groups + x8_group * static_cast<std::size_t>(unit);
      for (int i = 0; i < 4; ++i) {
        unsigned q[8];
        for (int L = 0; L < 8; ++L) q[L] = u[2 * p + i / 2][L][2 * v + i % 2];
        const std::size_t at = 4 * static_cast<std::size_t>(r) + static_cast<std::size_t>(i);
        ud[at] = static_cast<std::byte>(q[0] | q[1] << 3 | (q[2] & 3u) << 6);
        ud[32 + at] = static_cast<std::byte>(q[3] | q[4] << 3 | (q[5] & 3u) << 6);
        ud[64 + at] = static_cast<std::byte>(q[6] | q[7] << 3 | (q[2] >> 2) << 6 | (q[5] >> 2) << 7);
      }
    }
  });
}

void matmul_q3_K_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  x8_matmul(w, xq, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
