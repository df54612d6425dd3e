// Q6_K packed in 8-row groups for the 256-bit kernels (AVX2; AVX-VNNI), where the AVX-512 layouts
// (simd_x86_q6k_x16.cpp, simd_x86_q6k_avx512.cpp) are not made. The same bits as the reference's
// Q6_K dot (dot_row<q6_K> in ref_dot_kquants.cpp): per row and super-block 8 int32 lanes (lane L:
// elements 4L..4L+3 of every 32-element group, times the group's 16-element scale, less 32 x
// (sc[2L] bsum[2L] + sc[2L+1] bsum[2L+1])), one fma per lane and super-block with d_x * d_w, the
// 8 lanes added as reduce8_vec adds them.
//
// On the file's blocks (simd_x86_q6k_fused.inc) each row's 6-bit quants are put together from
// the low nibbles and the high bits with shuffles per row and group, and one thread computed
// 28-29 GB/s of weights from the caches, 24-27 from memory (Q6_K:2048:5632), where a plain read
// gets about 35. Here, as in the 16-row layout, a 32-byte register is one 4-element chunk of 8
// rows (lane L of the 8 rows is one vector, the rows its int32 lanes, transposed back once per
// group by store_lane_rows): VPMADDUBSW and VPMADDWD + VPADDD (or VPDPWSSD) per 32 products, no
// shuffles. Per group of 8 rows and super-block (1680 bytes, the file's 8 x 210):
//   d[8]              f16 at 2 r;
//   scales[8][8][2]   i8 at 16 + 16 p + 2 r + h: row r's sc[2p + h];
//   then per 32-element group g, 192 bytes at 144 + 192 g: six 32-byte vectors whose bytes
//                     4r + i hold row r's unsigned quants u(l) (0..63) of elements 32g + 4l + i,
//                     chunk l = 0..7, as
//     + 32 v          u(v) | (bits 2v..2v+1 of u(3)) << 6 for v = 0..2,
//     + 32 (3 + v)    u(4 + v) | (bits 2v..2v+1 of u(7)) << 6:
//                     the file's 6 bits per quant, placed so that 6 of the 8 chunks come out of
//                     one vector by one mask (chunk_of in simd_x86_q6k_x8.inc).
// A group is one stream; decode reads two of them per thread (by_group_pairs).
#include "simd_x86.hpp"
#include "simd_x86_pairs.hpp"

#if defined(__x86_64__)
#include <cstring>

#include "ref_kquants.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x8_scales = 16, x8_groups = 144, x8_group = 192;
constexpr std::size_t x8_block = x8_groups + 8 * x8_group;
static_assert(x8_block == 8 * sizeof(gguf::block_q6_K));

// Decode fetches the block two ahead (3.3 KB), as the 16-row layout measured best.
inline void fetch_ahead(const std::byte* blk, int g) { fetch_eighth_ahead<x8_block, 2>(blk, g); }

// The matmul's number (x8_unpacked) and, where its tiles read unpacked groups (buffered: 16
// activation rows or more), its activation quants interleaved as their units
// (interleave_group_pairs).
struct x8_extra {
  std::size_t blocks;
  std::uint64_t id = next_matmul_id();
  aligned_vector<std::int8_t> interleaved;
  bool buffered(std::int64_t nb) const { return blocks >= 16 * static_cast<std::size_t>(nb); }
  x8_extra(const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t n_tokens, thread_pool& pool)
      : blocks(static_cast<std::size_t>(nb * n_tokens)) {
    if (!buffered(nb)) return;
    const auto n = static_cast<std::size_t>(nb * n_tokens);
    interleaved.resize(n * qkk);
    for_activation_blocks(static_cast<std::int64_t>(n), pool, [&](std::int64_t begin, std::int64_t end) {
      for (auto i = static_cast<std::size_t>(begin); i < static_cast<std::size_t>(end); ++i) interleave_group_pairs(xq[i].qs, interleaved.data() + qkk * i);
    });
  }
};

// Batches' last 2-3 activation rows as one tile (each chunk unpacked once for them), not a pass
// each: Q6_K:2048:11264 from memory, two threads, AVX-VNNI, alternated, 2 rows 0.79-0.82 ->
// 0.58-0.60 ms, 3 rows 1.06-1.12 -> 0.70-0.91; AVX2 2 rows 0.68-0.76 -> 0.50, 3 rows 1.12 ->
// 0.64-0.74.
constexpr std::int64_t x8_smallest_tile = 2;

#define SPITE_X8_BODY "simd_x86_q6k_x8.inc"
#include "simd_x86_x8_isas.inc"
#undef SPITE_X8_BODY

}  // namespace

std::size_t pack_q6_K_x8(weight& w) {
  if (w.out % 8 != 0) return 0;
  return pack_row_groups<gguf::block_q6_K>(w, x8_block, [](std::byte* dst, const gguf::block_q6_K& blk, int r) {
    std::int8_t q[qkk], sc[16];
    kquants::unpack_q6_K(blk, q, sc);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    auto* bytes = reinterpret_cast<std::uint8_t*>(dst);
    for (int s = 0; s < 16; ++s) bytes[x8_scales + 16 * (s / 2) + 2 * static_cast<std::size_t>(r) + s % 2] = static_cast<std::uint8_t>(sc[s]);
    for (int g = 0; g < 8; ++g) {
      std::uint8_t* grp = bytes + x8_groups + x8_group * static_cast<std::size_t>(g) + 4 * static_cast<std::size_t>(r);
      for (int i = 0; i < 4; ++i) {
        unsigned u[8];
        for (int l = 0; l < 8; ++l) u[l] = static_cast<std::uint8_t>(q[32 * g + 4 * l + i]);
        for (int v = 0; v < 3; ++v) {
          grp[32 * v + i] = static_cast<std::uint8_t>(u[v] | ((u[3] >> (2 * v)) & 3u) << 6);
          grp[32 * (3 + v) + i] = static_cast<std::uint8_t>(u[4 + v] | ((u[7] >> (2 * v)) & 3u) << 6);
        }
      }
    }
  });
}

void matmul_q6_K_x8(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool) {
  x8_matmul(w, xq, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
