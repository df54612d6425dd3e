// Software prefetch of the x86 kernels' weight streams (included by simd_x86.hpp): the fetch
// instruction itself, fixed-size spans, and the helpers that fetch the next group of rows at a
// tile's pace. Internal to spite::dispatch; x86-64 only.
#pragma once

#if defined(__x86_64__)
#include <cstddef>
#include <cstdint>

#include "aligned_buffer.hpp"

// Defined by simd_x86.hpp before it includes this header.
#ifndef SPITE_AVX2
#error "include simd_x86.hpp"
#endif

namespace spite::dispatch::cpu::x86 {

// Software prefetches as volatile asm, not _mm_prefetch: GCC 12 deletes a loop of
// __builtin_prefetch calls when it sees no other effect in it (a prefetch loop behind a runtime
// condition vanished from every tile that inlined it, at -O2 and -O3), and a deleted prefetch
// fails no test: decode just streams 30-50 % slower.
inline void prefetch_l1(const void* p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }
// Into L2 (and L3) only.
inline void prefetch_l2(const void* p) { asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }

// A 16-row super-block's header lines (scales, mins, d: the first `Bytes`; for Q6_K its first
// group's quants too), asked for as the decode starts on it. Its first reads are otherwise the
// quants' lines, and the header comes back after them: read out of address order so, the
// hardware prefetchers of a Zen 4 core fed the stream less well (`--matmul T:2048:11264` /
// `2048:5632 --cold`, one thread, alternated, share of a plain read of the same bytes: Q4_K
// 81-83 % -> 87-89 %; Q5_K, its fetch table at 0, 0.323-0.328 -> 0.290-0.305 ms; Q2_K
// 0.117-0.133 -> 0.118-0.122; Q3_K and IQ4_XS level). Only the lines about to be read: the next
// super-block's header fetched so cost Q4_K a third (51-53 %).
template <std::size_t Bytes>
inline void x16_header_first(const void* blk) {
  for (std::size_t l = 0; l < Bytes / cache_line; ++l) prefetch_l1(static_cast<const char*>(blk) + cache_line * l);
}

// Decode streams each weight once. A group of rows is a contiguous region and the next group
// follows it, so while one group is multiplied the next one is prefetched at the same pace:
// rows of a few KiB are too short for the hardware prefetchers to ramp up on by themselves.
// Decode of the AVX-512 layouts (packed Q4_0 and Q8_0, 16-row Q4_K, Q5_K, Q6_K) instead fetches a
// few KB ahead of where it reads, a block's share at a time, which measured better than both the
// next group and the hardware prefetchers alone (docs/performance.md); Q6_K in 4-row groups
// decodes without software prefetch.

// How far ahead of where they read the AVX-512 decode kernels fetch their weights, each in its
// own blocks; 0 leaves the stream to the hardware prefetchers. The best distance is the core's
// own: on Zen 5 guests these defaults read 89-95 % of a plain read of the same bytes where the
// hardware prefetchers alone read 67-88 %, while on a Zen 4 guest the same prefetches cost
// packed Q4_0 a fifth to a quarter of its pace (one thread 65-81 % of a plain read at 1-6 pairs
// ahead, none 88-93 %).
// The K-quant, IQ4_XS and MXFP4 tiles that take these serve their batches' one- and two-row
// passes too (on a Zen 4 core the Zen 4 table left prefill level: Q6_K, Q3_K and Q2_K x 128
// rows within 2 %, TinyLlama Q4_K_M pp256 118 -> 123 t/s). Chosen once per process for the
// processor (simd_x86_fetch_ahead.cpp); SPITE_CPU_FETCH overrides it.
struct decode_fetch_distances {
  int q4_0 = 6;     // packed Q4_0 and IQ4_NL, 16-row groups: pairs of blocks (576 bytes)
  int q8_0 = 3;     // packed Q8_0: 16-row pairs of blocks, or 8-row spans of 4 blocks (1088 bytes either way)
  int q4_k = 3;     // 16-row super-blocks from here on (Q4_K: 2304 bytes)
  int q5_k = 3;     // 2880 bytes
  int q3_k = 5;     // 1856 bytes
  int q6_k = 2;     // 3360 bytes
  int q2_k = 2;     // 1344 bytes
  int iq4_xs = 5;   // 2176 bytes
  int legacy = 16;  // Q5_0, Q4_1 and Q5_1 16-row blocks (352-384 bytes)
  int mxfp4 = 4;    // MXFP4 16-row spans
  // The most threads at which the 16-row Q4_K decode reads a matrix as two streams (a group of
  // its first half beside one of its second, a super-block of each in turn) instead of one (a
  // group after the other); 0: never.
  int q4_k_pairs = 0;
  int q6_k_pairs = 0;  // the same for the 16-row Q6_K decode
  int q5_k_pairs = 0;  // and Q5_K's
};
extern decode_fetch_distances decode_fetch;
// "default", "zen4", and "+SPITE_CPU_FETCH" after it when the environment changed any.
const char* decode_fetch_profile() noexcept;

// Every line of [p, p + Bytes) fetched by a fixed number of prefetches, one per 64 bytes and one
// at the last byte (where p is not on a line's start, that is the one more line it touches): no
// loop over the lines, whose count depends on where p lies. Such a loop's compare and branch per
// line cost a decode loop as much as its prefetches (Q6_K:2048:2048, one row from the caches, one
// thread, AVX2, Zen 3: 0.123 -> 0.114 ms; Q5_K:2048:256 0.0177 -> 0.0142).
template <std::size_t Bytes>
inline void prefetch_span(const void* p) {
  const char* c = static_cast<const char*>(p);
#pragma GCC unroll 16
  for (std::size_t off = 0; off < Bytes; off += 64) prefetch_l1(c + off);
  prefetch_l1(c + Bytes - 1);
}

// Part `part` (of 8) of the block `Ahead` blocks of `Block` bytes past blk: the 8-row layouts'
// decode fetches, spread over a block's 8 sub-blocks (their stream continues into the next group
// of rows, so a group's last blocks fetch the next one's first).
template <std::size_t Block, std::size_t Ahead>
inline void fetch_eighth_ahead(const std::byte* blk, int part) {
  prefetch_span<(Block + 7) / 8>(blk + Ahead * Block + static_cast<std::size_t>(part) * Block / 8);
}

struct next_group_prefetch {
  const char* next;
  std::size_t per_block;  // bytes of the next group to touch per block step
  next_group_prefetch(const std::byte* group_end, std::size_t group_bytes, std::int64_t nb)
      : next(reinterpret_cast<const char*>(group_end)), per_block((group_bytes + static_cast<std::size_t>(nb) - 1) / static_cast<std::size_t>(nb)) {}
  SPITE_AVX2 void step(std::int64_t b) const {
    const std::size_t begin = static_cast<std::size_t>(b) * per_block;
    for (std::size_t off = begin; off < begin + per_block; off += 64) prefetch_l1(next + off);
  }
  // The same where every block of the group is Block bytes (per_block), part `part` of Parts
  // of it, by prefetch_span.
  template <std::size_t Block, int Parts = 1>
  SPITE_AVX2 void step_fixed(std::int64_t b, int part = 0) const {
    prefetch_span<(Block + Parts - 1) / Parts>(next + static_cast<std::size_t>(b) * Block + static_cast<std::size_t>(part) * Block / Parts);
  }
  // Part `part` of `parts` of block b's share. A block's whole share issued at once (18 lines
  // for a packed Q4_K group) fills the core's miss buffers and stalls it on the prefetches;
  // spread over the block's work, the fetches overlap the multiplications.
  SPITE_AVX2 void step(std::int64_t b, int part, int parts) const {
    const std::size_t base = static_cast<std::size_t>(b) * per_block;
    const std::size_t begin = base + per_block * static_cast<std::size_t>(part) / static_cast<std::size_t>(parts);
    const std::size_t end = base + per_block * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(parts);
    for (std::size_t off = begin & ~std::size_t{63}; off < end; off += 64) prefetch_l1(next + off);
  }
};

// Small batches over a pair of groups (by_group_pairs) take several passes over the pair: the
// first streams it from memory, the later ones find it in the caches. Pass `pass` of `passes`
// fetches its share of the next pair (the groups that follow each of the two, `stride` bytes
// apart) at the pace of its nb blocks, so the memory is read through every pass instead of the
// first alone. Q8_0:2048:5632 x 4 rows from memory, AVX-512, Zen 5, three rounds alternated:
// two threads 0.33-0.34 -> 0.31 ms, one 0.49 -> 0.37 (into L2 alone, prefetcht1, the same);
// TinyLlama Q8_0, four sequences, two threads: 132 -> 153 t/s (3.1-3.25x -> 3.6-3.7x one).
struct next_pair_share {
  const char* next[2];
  std::size_t begin, per_block;
  next_pair_share(const std::byte* const* groups, std::size_t stride, std::int64_t nb, std::int64_t pass, std::int64_t passes)
      : next{reinterpret_cast<const char*>(groups[0] + stride), reinterpret_cast<const char*>(groups[1] + stride)},
        begin(stride * static_cast<std::size_t>(pass) / static_cast<std::size_t>(passes)),
        per_block((stride + static_cast<std::size_t>(passes * nb) - 1) / static_cast<std::size_t>(passes * nb)) {}
  SPITE_AVX2 void step(std::int64_t b) const {
    const std::size_t from = begin + static_cast<std::size_t>(b) * per_block, to = from + per_block;
    for (std::size_t off = from & ~std::size_t{63}; off < to; off += 64) {
      prefetch_l1(next[0] + off);
      prefetch_l1(next[1] + off);
    }
  }
};

}  // namespace spite::dispatch::cpu::x86

#endif
