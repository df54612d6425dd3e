// The plain-code side of the x86 kernels' load-time packed layouts: packing a matrix 8 rows at a
// time, and the bit-field shuffles of the K-quant layouts that several packers share (a row's
// share of a packed block built four bytes at a time). No SIMD; internal to spite::dispatch.
#pragma once

#include <cstdint>
#include <cstring>

#include "aligned_buffer.hpp"
#include "load_workers.hpp"
#include "ref_quant.hpp"

namespace spite::dispatch::cpu::x86 {

// Packs w's rows 8 at a time: pack(dst, blk, r) writes row r's block `blk` into its group's
// packed block at dst (zeroed first, so packers may OR bit fields in). Sets w.packed; returns
// the bytes.
template <class Block, class Pack>
std::size_t pack_row_groups(weight& w, std::size_t packed_block, const Pack& pack) {
  const std::int64_t nb = w.in / static_cast<std::int64_t>(gguf::traits(w.type).block_size), groups = w.out / 8;
  const std::size_t bytes = static_cast<std::size_t>(groups * nb) * packed_block;
  auto buffer = make_aligned_bytes(bytes);  // zeroed
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      for (std::int64_t b = 0; b < nb; ++b) {
        std::byte* dst = buffer.get() + static_cast<std::size_t>(g * nb + b) * packed_block;
        for (int r = 0; r < 8; ++r) pack(dst, reinterpret_cast<const Block*>(w.row(8 * g + r))[b], r);
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 8;
  return bytes;
}

// Q3_K's 32-element group g = 4c + k of a block (elements 128c + 32k + l: low bits 2k..2k+1 of
// qs[32c + l], third bit bit 4c + k of hmask[l]) as its 8- and 16-row layouts store a row's
// share, four elements (a lane, l = 4L..4L+3) per dword, one byte each: low[m], bits 2j..2j+1
// of each byte, the low two bits of lane 4m + j; high, bit L, the third bits of lane L.
inline void q3_K_group_planes(const gguf::block_q3_K& blk, int g, std::uint32_t (&low)[2], std::uint32_t& high) {
  const auto word = [](const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  const int c = g / 4, k = g % 4;
  for (int m = 0; m < 2; ++m) {
    low[m] = 0;
    for (int j = 0; j < 4; ++j) low[m] |= ((word(blk.qs + 32 * c + 16 * m + 4 * j) >> (2 * k)) & 0x03030303u) << (2 * j);
  }
  high = 0;
  for (int L = 0; L < 8; ++L) high |= ((word(blk.hmask + 4 * L) >> (4 * c + k)) & 0x01010101u) << L;
}

// Row r's dwords of a Q6_K super-block in the 8- and 16-row layouts (vectors of `vec` bytes,
// row r's four bytes at `lane` = 4r of each; 32-element group g's six vectors at groups +
// stride g): per group of the unpacked 6-bit quants q, low vector m (0..3) holds elements 32g +
// 4m + i in its low nibbles and 32g + 16 + 4m + i in its high ones; top-bit vector h (4 + h)
// the top two bits of elements 32g + 16h + 4m + i at bits 2m. Four bytes at a time: element by
// element (two read-modify-writes at computed offsets each) the 8-row packing took most of a
// Q6_K model's load.
inline void pack_q6_K_dwords(const std::int8_t* q, std::uint8_t* groups, std::size_t stride, std::size_t vec, std::size_t lane) {
  for (int g = 0; g < 8; ++g) {
    std::uint8_t* group = groups + stride * static_cast<std::size_t>(g) + lane;
    std::uint32_t first[4], second[4];  // byte i: elements 32g + 4m + i and 32g + 16 + 4m + i
    std::memcpy(first, q + 32 * g, 16);
    std::memcpy(second, q + 32 * g + 16, 16);
    std::uint32_t top[2] = {0, 0};
    for (int m = 0; m < 4; ++m) {
      const std::uint32_t nibbles = (first[m] & 0x0F0F0F0FU) | (second[m] & 0x0F0F0F0FU) << 4;
      std::memcpy(group + vec * static_cast<std::size_t>(m), &nibbles, 4);
      top[0] |= (first[m] >> 4 & 0x03030303U) << (2 * m);
      top[1] |= (second[m] >> 4 & 0x03030303U) << (2 * m);
    }
    for (int h = 0; h < 2; ++h) std::memcpy(group + vec * static_cast<std::size_t>(4 + h), &top[h], 4);
  }
}

// Row r's dwords of a Q2_K super-block in the 8- and 16-row layouts: sub-block sb's vector (at
// quants + vec sb) holds in byte lane + i elements 16 sb + 4j + i at bits 2j, j = 0..3. Element
// e = 128h + 32k + l of a block is bits 2k..2k+1 of qs[32h + l]. Four bytes at a time, as above.
inline void pack_q2_K_dwords(const std::uint8_t* qs, std::uint8_t* quants, std::size_t vec, std::size_t lane) {
  for (int sb = 0; sb < 16; ++sb) {
    const std::uint8_t* src = qs + 32 * (sb / 8) + 16 * (sb % 2);
    const int shift = 2 * ((sb % 8) / 2);
    std::uint32_t packed = 0;
    for (int j = 0; j < 4; ++j) {
      std::uint32_t word;
      std::memcpy(&word, src + 4 * j, 4);
      packed |= (word >> shift & 0x03030303U) << (2 * j);
    }
    std::memcpy(quants + vec * static_cast<std::size_t>(sb) + lane, &packed, 4);
  }
}

}  // namespace spite::dispatch::cpu::x86
