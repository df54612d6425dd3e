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

// Decode fetches the block four ahead (4.4 KB), about as far as packed Q8_0's decode.
inline void fetch_ahead(const std::byte* blk, int s) { fetch_eighth_ahead<x8_block, 4>(blk, s); }

// The matmul's activation super-blocks and its number (x8_unpacked).
struct x8_extra {
  std::size_t blocks;
  std::uint64_t id = next_matmul_id();
  x8_extra(const gguf::block_q8_K*, std::int64_t nb, std::int64_t n_tokens, thread_pool&) : blocks(static_cast<std::size_t>(nb * n_tokens)) {}
};

// Batches' last 2-3 activation rows as one tile, not a pass each: IQ4_XS:2048:11264 from
// memory, two threads, AVX-VNNI, alternated, 2 rows 0.55-0.69 -> 0.49-0.59 ms, 3 rows
// 0.83-0.97 -> 0.68-0.91; AVX2 2 rows 0.54-0.56 -> 0.45-0.53, 3 rows 0.78-0.83 -> 0.61-0.77.
constexpr std::int64_t x8_smallest_tile = 2;

#define SPITE_X8_BODY "simd_x86_iq4xs_x8.inc"
#include "simd_x86_x8_isas.inc"
#undef SPITE_X8_BODY

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
  x8_matmul(w, xq, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
