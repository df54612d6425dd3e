// How the x86 SIMD matmuls split their work over the thread pool: groups of rows by blocks of
// activation rows for batches, and for decode the two-stream orders (each thread reading two
// regions of a matrix in step). Plain code, no SIMD; internal to spite::dispatch.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "aligned_buffer.hpp"
#include "cpu_kernels.hpp"
#include "spite/core/thread_pool.hpp"

namespace spite::dispatch::cpu::x86 {

// Batches of a K-quant type whose rows are unpacked once per use (Row: one row's buffers):
// work items of 2 rows and a block of activation rows (`block`, sized to stay in L2 while the
// items of the block pass); each item unpacks its rows, then tile4(rows, o, t) for each 4
// activation rows from t and tile1(row, o, t) for the others (and for a last odd row).
template <class Row, class Unpack, class Tile4, class Tile1>
void by_unpacked_row_pairs(std::int64_t in, std::int64_t out, std::int64_t n_tokens, std::int64_t block, thread_pool& pool,
                           const Unpack& unpack, const Tile4& tile4, const Tile1& tile1) {
  const std::int64_t pairs = (out + 1) / 2, blocks = (n_tokens + block - 1) / block;
  pool.parallel_for(pairs * blocks, [&](std::int64_t begin, std::int64_t end, int) {
    Row rows[2] = {Row(in), Row(in)};
    const Row* both[2] = {&rows[0], &rows[1]};
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t o = 2 * (i % pairs), t0 = i / pairs * block, t1 = std::min(n_tokens, t0 + block);
      const bool pair = o + 1 < out;
      unpack(o, rows[0]);
      if (pair) unpack(o + 1, rows[1]);
      std::int64_t t = t0;
      if (pair) {
        for (; t + 4 <= t1; t += 4) tile4(both, o, t);
      }
      for (; t < t1; ++t) {
        tile1(rows[0], o, t);
        if (pair) tile1(rows[1], o + 1, t);
      }
    }
  });
}

// rows4(o) for each group of 4 output rows from o, rows1(o) for each row of a last partial
// group; the groups are split over the pool.
template <class Rows4, class Rows1>
void by_row_groups(std::int64_t out, thread_pool& pool, const Rows4& rows4, const Rows1& rows1) {
  pool.parallel_for((out + 3) / 4, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      if (4 * g + 4 <= out) {
        rows4(4 * g);
      } else {
        for (std::int64_t o = 4 * g; o < out; ++o) rows1(o);
      }
    }
  });
}

// by_row_groups with each group of 4 rows against the activation rows in tiles of K:
// tile_k(o, t) for rows o..o + 3 and activation rows t..t + K - 1, tile_1(o, t) for those left
// one at a time, row(o, t) for each row of a last partial group.
template <int K, class TileK, class Tile1, class Row>
void by_row_groups_and_token_tiles(std::int64_t out, std::int64_t n_tokens, thread_pool& pool, const TileK& tile_k,
                                   const Tile1& tile_1, const Row& row) {
  by_row_groups(
      out, pool,
      [&](std::int64_t o) {
        std::int64_t t = 0;
        for (; t + K <= n_tokens; t += K) tile_k(o, t);
        for (; t < n_tokens; ++t) tile_1(o, t);
      },
      [&](std::int64_t o) {
        for (std::int64_t t = 0; t < n_tokens; ++t) row(o, t);
      });
}

// fn(begin, end) over activation blocks [0, n) made ready once per matmul (permuted, their sums
// taken): on the calling thread below 256 blocks (decode and small batches, where a hand-off to
// the pool costs more than the work), else spread over the pool.
template <class Fn>
void for_activation_blocks(std::int64_t n, thread_pool& pool, const Fn& fn) {
  if (n < 256) return fn(std::int64_t{0}, n);
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int) { fn(begin, end); });
}

// fn(g, t0, t1) for every group g < groups and every block [t0, t1) of up to `block` activation
// rows, spread over the pool in block-major order: the threads work through the same activation
// rows at a time, which then stay in L2 (one thread's pass over a whole large batch would not),
// and each group's weights are read once per block.
template <class Fn>
void by_groups_and_token_blocks(std::int64_t groups, std::int64_t n_tokens, std::int64_t block, thread_pool& pool, const Fn& fn) {
  const std::int64_t blocks = (n_tokens + block - 1) / block;
  pool.parallel_for(groups * blocks, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t t0 = i / groups * block;
      fn(i % groups, t0, std::min(n_tokens, t0 + block));
    }
  });
}

// Decode over groups of Rows rows [0, groups), the group at g starting at group_at(g) and its
// outputs at y + Rows g: the matrix read as two streams in step, its first half beside its second.
// The threads share out the pairs, so each reads two contiguous runs (chunks of a thread's share
// continue both): pair(groups, t, ys) for activation row t against groups a and a + groups / 2,
// one(group, t, y) for the last group of an odd count. Measured on a Zen 3 core (AVX2), the
// packed decode sequence read 80-86 % of a plain read's bandwidth as one stream and 99-103 % as
// two (`spitectl bench --ceilings` times the one).
template <int Rows = 8, class GroupAt, class Pair, class One>
void by_group_pairs(std::int64_t groups, std::int64_t n_tokens, float* y, thread_pool& pool, const GroupAt& group_at,
                    const Pair& pair, const One& one) {
  const std::int64_t half = groups / 2;
  note_decode_streams(2);
  pool.parallel_for(half + groups % 2, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t a = begin; a < end; ++a) {
      if (a == half) {  // the odd one out
        for (std::int64_t t = 0; t < n_tokens; ++t) one(group_at(2 * half), t, y + Rows * (2 * half));
        continue;
      }
      const std::byte* both[2] = {group_at(a), group_at(a + half)};
      float* ys[2] = {y + Rows * a, y + Rows * (a + half)};
      for (std::int64_t t = 0; t < n_tokens; ++t) pair(both, t, ys);
    }
  });
}

// The same for the file's layout, rows [0, out) for activation rows [0, n_tokens), in pairs of
// rows: split(o, o2, t) for rows o, o + 1 in the first half beside o2, o2 + 1 in the second;
// pair(o, t) for the last pair of an odd count, row(o, t) for the last row of an odd count.
template <class Split, class Pair, class Row>
void by_row_pair_streams(std::int64_t out, std::int64_t n_tokens, thread_pool& pool, const Split& split, const Pair& pair,
                         const Row& row) {
  const std::int64_t pairs = out / 2, half = pairs / 2;
  note_decode_streams(2);
  pool.parallel_for(half + pairs % 2 + out % 2, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t a = begin; a < end; ++a) {
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        if (a < half) {
          split(2 * a, 2 * (a + half), t);
        } else if (a == half && pairs % 2 != 0) {
          pair(2 * (2 * half), t);
        } else {
          row(out - 1, t);
        }
      }
    }
  });
}

// Activation rows per block of by_groups_and_token_blocks, for activation rows of `row_bytes`
// (quantized): about `budget` bytes of them (by default 192 KiB, which stay in L2 beside a
// group's weights), a multiple of the tiles' `tile` rows. Smaller blocks would read the weights
// from memory more often.
inline std::int64_t token_block(std::size_t row_bytes, std::size_t budget = 192u << 10, std::int64_t tile = 4) {
  const auto rows = static_cast<std::int64_t>(budget / std::max<std::size_t>(row_bytes, 1));
  return std::clamp<std::int64_t>(rows / tile * tile, 4 * tile, 64 * tile);
}

// tile4(t) for each group of 4 activation rows from t, tile1(t) for each row left.
template <class Tile4, class Tile1>
void by_token_tiles(std::int64_t n_tokens, const Tile4& tile4, const Tile1& tile1) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) tile4(t);
  for (; t < n_tokens; ++t) tile1(t);
}

// A matmul's number, unique in the process, by which x8_unpacked knows the matmul a buffer was
// made for.
inline std::uint64_t next_matmul_id() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// A group's chunks unpacked once per matmul and block of activation rows on each thread, then
// read by each of its 4-row tiles (a prefill of the 8-row layouts, whose tiles otherwise
// unpacked every chunk again for each 4 rows): fill(buffer) writes the `count` elements where
// this thread's buffer was last made for another matmul or group. A buffer per element type and
// fill, so per layout and instruction set.
template <class T, class Fill>
const T* x8_unpacked(std::uint64_t matmul, const std::byte* group, std::size_t count, const Fill& fill) {
  thread_local struct {
    std::uint64_t matmul = 0;
    const std::byte* group = nullptr;
    aligned_vector<T> data;
  } u;
  if (u.matmul != matmul || u.group != group) {
    u.data.resize(count);
    fill(u.data.data());
    u.matmul = matmul;
    u.group = group;
  }
  return u.data.data();
}

// The 8-row super-block layouts of the 256-bit kernels (IQ4_XS, Q6_K, Q3_K), groups of `stride`
// bytes from `packed`: decode as two streams per thread (pair(groups, ys), one(group, 0, true,
// y8) for the odd one out), batches by tiles of 4 activation rows against a group
// (tile(group, t0, k, fetch, y8) for k = 2-4 rows from t0), which stays in the caches after
// the first, then one tile of the rows left where they are at least `smallest_tile` (2-4),
// else one(group, t, fetch, y8) for each; `fetch` for the first tile of each group and block
// of activation rows.
template <class Pair, class One, class Tile>
void x8_super_block_matmul(const std::byte* packed, std::size_t stride, std::int64_t groups, std::int64_t n_tokens,
                           std::size_t x_row_bytes, float* y, std::int64_t out, thread_pool& pool, std::int64_t smallest_tile,
                           const Pair& pair, const One& one, const Tile& tile) {
  const auto group_at = [&](std::int64_t g) { return packed + static_cast<std::size_t>(g) * stride; };
  if (n_tokens == 1) {
    by_group_pairs<8>(
        groups, 1, y, pool, group_at, [&](const std::byte* const* both, std::int64_t, float* const* ys) { pair(both, ys); },
        [&](const std::byte* group, std::int64_t, float* y8) { one(group, 0, true, y8); });
    return;
  }
  by_groups_and_token_blocks(groups, n_tokens, token_block(x_row_bytes), pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = group_at(g);
    float* y8 = y + 8 * g;
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) tile(group, t, 4, t == t0, y8);
    if (t1 - t >= smallest_tile) return tile(group, t, t1 - t, t == t0, y8);
    for (; t < t1; ++t) one(group, t, t == t0, y8 + t * out);
  });
}

}  // namespace spite::dispatch::cpu::x86
