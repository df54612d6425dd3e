// SIMD versions of the exact matmuls (ref_dot_*.cpp) for x86-64 processors with AVX2, FMA and
// F16C: Q8_0, Q4_0, Q4_K and Q6_K, the types of the common Q8_0 / Q4_0 / Q4_K_M files. Each
// computes the same exact integer block sums and then the same float operations in the same
// order as its reference, so results are bit-identical to it (tests/unit/dispatch/
// cpu_kernels_test.cpp checks that on odd shapes). What changes: 32 products per instruction,
// 8 output rows per float vector for the repacked types, weight blocks unpacked in registers
// and reused across the activation rows of a batch.
#include "simd_x86.hpp"
#include "simd_x86_q4_0_layout.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <memory>
#include <type_traits>

namespace spite::dispatch::cpu {
namespace {

using namespace x86;
using gguf::tensor_type;

// ---- Q8_0 and Q5_0 (references: dot_q8_0 and dot_q5_0 in ref_dot_legacy.cpp, 8 lanes of 4
// products per block against Q8_0 activations; Q5_0's quants are q5 - 16)

SPITE_AVX2 inline __m256i signed_quants(const gguf::block_q8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}
SPITE_AVX2 inline __m256i signed_quants(const gguf::block_q5_0& b) {
  return _mm256_sub_epi8(quants5(b), _mm256_set1_epi8(16));
}

// One block of R <= 4 rows against one activation row (decode). Q5_0's quants stay unsigned
// (q5 = q + 16) and each lane takes 16 x its activations' sum off: the reference's exact lane
// sums of q * x, without the signed quants' two sign flips per row.
template <class Block, int R>
SPITE_AVX2 inline void decode_step(const Block* const* rows, std::int64_t b, const std::int8_t* xq, float xd, __m256 (*acc)[1]) {
  static_assert(R <= 4);
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256 dx = _mm256_set1_ps(xd);
  [[maybe_unused]] __m256i x16;
  if constexpr (std::is_same_v<Block, gguf::block_q5_0>) x16 = dot_lanes(_mm256_set1_epi8(16), xv);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m256i lanes;
    if constexpr (std::is_same_v<Block, gguf::block_q5_0>) {
      lanes = _mm256_sub_epi32(dot_lanes(quants5(rows[r][b]), xv), x16);
    } else {
      const __m256i wv = signed_quants(rows[r][b]);
      lanes = dot_lanes(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
    }
    acc[r][0] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(rows[r][b].d)), dx), _mm256_cvtepi32_ps(lanes), acc[r][0]);
  }
}

// R rows times K activation rows: several rows in flight keep enough loads outstanding to stream
// from memory at full speed, several activation rows reuse each loaded weight block.
// With Split, rows o.. and o2.. (R / 2 of each): two regions read in step, which stream faster
// than one (by_row_pair_streams).
template <class Block, int R, int K, bool Split = false>
SPITE_AVX2 void q8_0_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y,
                          std::int64_t o2 = 0) {
  const tile_rows<R, Split> at(o, o2, [&](std::int64_t r) { return w.row(r); }, w.row_bytes, nb);
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(at.at[r]));
  __m256 acc[R][K];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) at.step(b);
    if constexpr (K == 1) {
      decode_step<Block, R>(rows, b, xb.qs(static_cast<std::size_t>(t0 * nb + b)), xb.d[static_cast<std::size_t>(t0 * nb + b)], acc);
      continue;
    }
    for (int r = 0; r < R; ++r) {
      const __m256i wv = signed_quants(rows[r][b]);
      const __m256i wabs = _mm256_sign_epi8(wv, wv);
      // The scales' product as one vector multiply (a scalar one plus a broadcast costs more).
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(rows[r][b].d));
      for (int k = 0; k < K; ++k) {
        const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
        const __m256i lanes = dot_lanes(wabs, _mm256_sign_epi8(xv, wv));
        acc[r][k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&xb.d[i])), _mm256_cvtepi32_ps(lanes), acc[r][k]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + at.at[r]] = reduce8_vec(acc[r][k]);
  }
}

// 2 rows times 4 activation rows with both rows in each vector: lanes 0-3 of the reference's 8
// for row 0 in the low half and for row 1 in the high half (elements 0-15 of each block), lanes
// 4-7 likewise in a second vector. Each activation half is one broadcast load, each scale pair
// one in-lane shuffle of the step's 8 scale products. Q8_0's halves load straight into place;
// Q5_0's are built (signed_quants) and swapped across the rows.
// With `ahead`, the rows 4 further on are fetched meanwhile (a few activation rows, as 4
// concurrent sequences decode, would otherwise wait on each group's rows).
template <class Block>
SPITE_AVX2 void q8_0_tile_2x4(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y,
                              bool ahead) {
  const auto* row0 = reinterpret_cast<const Block*>(w.row(o));
  const auto* row1 = reinterpret_cast<const Block*>(w.row(o + 1));
  __m256 lo[4], hi[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  const std::int8_t* x0 = xb.qs(static_cast<std::size_t>(t0 * nb));
  const std::size_t xs = static_cast<std::size_t>(nb) * qk0;
  const next_group_prefetch next(w.row(o + 4), 2 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (ahead) next.step(b);
    __m256i wl, wh;
    if constexpr (std::is_same_v<Block, gguf::block_q8_0>) {
      wl = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(row1[b].qs), reinterpret_cast<const __m128i*>(row0[b].qs));
      wh = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(row1[b].qs + 16), reinterpret_cast<const __m128i*>(row0[b].qs + 16));
    } else {
      const __m256i q0 = signed_quants(row0[b]), q1 = signed_quants(row1[b]);
      wl = _mm256_permute2x128_si256(q0, q1, 0x20);
      wh = _mm256_permute2x128_si256(q0, q1, 0x31);
    }
    const __m256i al = _mm256_sign_epi8(wl, wl), ah = _mm256_sign_epi8(wh, wh);
    const __m256 dw = row_pair_scales(row0[b].d, row1[b].d);
    const __m256 dx = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(&xb.d_by_block[static_cast<std::size_t>(b * xb.tokens + t0)]));
    const __m256 scale = _mm256_mul_ps(dw, dx);  // [row 0 x act k | row 1 x act k], k = 0..3
    const std::int8_t* xq = x0 + qk0 * b;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const auto* xk = reinterpret_cast<const __m128i*>(xq + k * xs);
      const __m256i xl = _mm256_broadcastsi128_si256(_mm_load_si128(xk));
      const __m256i xh = _mm256_broadcastsi128_si256(_mm_load_si128(xk + 1));
      const __m256 sk = lane_broadcast(scale, k);
      lo[k] = _mm256_fmadd_ps(sk, _mm256_cvtepi32_ps(dot_lanes(al, _mm256_sign_epi8(xl, wl))), lo[k]);
      hi[k] = _mm256_fmadd_ps(sk, _mm256_cvtepi32_ps(dot_lanes(ah, _mm256_sign_epi8(xh, wh))), hi[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    y[(t0 + k) * w.out + o] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x20));
    y[(t0 + k) * w.out + o + 1] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x31));
  }
}

// Rows o..o+R-1 against activation rows [t0, t1).
template <class Block, int R>
void q8_0_rows(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, std::int64_t t1, float* y) {
  std::int64_t t = t0;
  if (std::is_same_v<Block, gguf::block_q8_0> && R == 4 && t1 - t0 >= 4) {
    if (const q8_0_tiles* vnni = avx512_q8_0_tiles()) {
      for (; t + 8 <= t1; t += 8) vnni->eight(w, o, xb, nb, t, y);
      for (; t + 4 <= t1; t += 4) vnni->four(w, o, xb, nb, t, y);
    }
  }
  // 4 x 4 accumulators and the block in flight need more than AVX2's 16 registers: the tiles of
  // a batch take 2 rows at a time.
  constexpr int tile_rows = R > 2 ? 2 : R;
  by_token_tiles(
      t1 - t,
      [&](std::int64_t s) {
        for (int h = 0; h < R; h += tile_rows) {
          if constexpr (tile_rows == 2) {
            q8_0_tile_2x4<Block>(w, o + h, xb, nb, t + s, y, s == 0 && o + 4 + h + 2 <= w.out);
          } else {
            q8_0_tile<Block, tile_rows, 4>(w, o + h, xb, nb, t + s, y);
          }
        }
      },
      [&](std::int64_t s) { q8_0_tile<Block, R, 1>(w, o, xb, nb, t + s, y); });
}

template <class Block>
void matmul_q8_0_like(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  if constexpr (std::is_same_v<Block, gguf::block_q8_0>) {
    if (avx512_q8_0_tiles() == nullptr && matmul_q8_0_avx_vnni(w, xb, n_tokens, y, pool)) return;
  }
  if (n_tokens < 4) {
    return by_row_pair_streams(
        w.out, n_tokens, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t t) { q8_0_tile<Block, 4, 1, true>(w, o, xb, nb, t, y, o2); },
        [&](std::int64_t o, std::int64_t t) { q8_0_tile<Block, 2, 1>(w, o, xb, nb, t, y); },
        [&](std::int64_t o, std::int64_t t) { q8_0_tile<Block, 1, 1>(w, o, xb, nb, t, y); });
  }
  by_groups_and_token_blocks((w.out + 3) / 4, n_tokens, token_block(xb.row_bytes(nb)), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               if (4 * g + 4 <= w.out) return q8_0_rows<Block, 4>(w, 4 * g, xb, nb, t0, t1, y);
                               for (std::int64_t o = 4 * g; o < w.out; ++o) q8_0_rows<Block, 1>(w, o, xb, nb, t0, t1, y);
                             });
}

// ---- Q4_0 repacked (reference: dot32_repacked in ref_dot_repack.cpp, one lane per output and
// one fma per block). Eight rows at a time: unpacked once into a buffer that stays in L1, then
// dotted with every activation row of the batch.


SPITE_AVX2 void unpack_q4_0_rows8(const weight& w, std::int64_t o, rows8_buffer& u) {
  const std::int64_t nb = w.in / qk0;
  for (int r = 0; r < 8; ++r) {
    const auto* row = reinterpret_cast<const gguf::block_q4_0*>(w.row(o + r));
    std::uint8_t* q = u.q.data() + r * w.in;
    for (std::int64_t b = 0; b < nb; ++b) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qk0 * b), nibbles32(row[b].qs));
      u.d[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].d);
    }
  }
}

SPITE_AVX2 void q4_0_dot_rows8(const rows8_buffer& u, std::int64_t in, const q8_0_batch& xb, std::int64_t t, float* y8) {
  const std::int64_t nb = in / qk0;
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
    __m256i p[8];
    for (int r = 0; r < 8; ++r) {
      p[r] = dot_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u.q.data() + r * in + qk0 * b)), xv);
    }
    // sum((q - 8) * x) = sum(q * x) - 8 * sum(x)
    const __m256i isum = _mm256_sub_epi32(transpose_sum8(p), _mm256_set1_epi32(xb.sum8[i]));
    const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(u.d.data() + 8 * b), _mm256_set1_ps(xb.d[i]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
  }
  _mm256_storeu_ps(y8, acc);
}

// Decode: few activation rows, so each block is unpacked in registers right where it is used,
// 128 bits at a time (only the block total matters here, not the lane split).
SPITE_AVX2 void q4_0_fused_rows8(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t t, float* y8) {
  const std::int64_t nb = w.in / qk0;
  const std::byte* row0 = w.row(o);
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i ones = _mm_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + 8), 8 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t == 0) ahead.step(b);
    const std::size_t i = static_cast<std::size_t>(t * nb + b);
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs(i)));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs(i) + 16));
    __m128i p[8];
    __m128i h = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      const auto& blk = reinterpret_cast<const gguf::block_q4_0*>(row0 + r * w.row_bytes)[b];
      h = insert_half(h, blk.d, r);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
      const __m128i lo = _mm_maddubs_epi16(_mm_and_si128(v, m), x0);
      const __m128i hi = _mm_maddubs_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m), x1);
      p[r] = _mm_madd_epi16(_mm_add_epi16(lo, hi), ones);  // |pair sums| <= 2 * 2 * 15 * 127
    }
    const __m128i s0123 = _mm_hadd_epi32(_mm_hadd_epi32(p[0], p[1]), _mm_hadd_epi32(p[2], p[3]));
    const __m128i s4567 = _mm_hadd_epi32(_mm_hadd_epi32(p[4], p[5]), _mm_hadd_epi32(p[6], p[7]));
    const __m256i isum = _mm256_sub_epi32(_mm256_set_m128i(s4567, s0123), _mm256_set1_epi32(xb.sum8[i]));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(xb.d[i]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
  }
  _mm256_storeu_ps(y8, acc);
}

// ---- Q4_0 packed at load time (pack_weight; the layout is described in simd_x86.hpp).

// IQ4_NL blocks are laid out as Q4_0's (an f16 scale, 16 bytes of index nibbles) and packed alike.
template <class Block>
std::size_t pack_q4_0_like(weight& w) {
  static_assert(sizeof(Block) == sizeof(gguf::block_q4_0));
  return pack_row_groups<Block>(w, q4_0_packed_block, [](std::byte* dst, const Block& blk, int r) {
    std::memcpy(dst + 2 * r, &blk.d, 2);
    for (int j = 0; j < 4; ++j) std::memcpy(dst + 16 + 32 * j + 4 * r, blk.qs + 4 * j, 4);
  });
}

// Q4_0's tiles: G groups of 8 packed rows against K activation rows from t0. Each 32-byte chunk
// is unpacked once for the K rows, whose int16 pair sums (eight per block, at most 2 * 15 * 127
// each: no overflow before the widening) stay in registers; sum((q - 8) * x) = sum(q * x) - 8 *
// sum(x). Software-pipelined: block b's first two chunks, then block b - 1's widening and float
// tail, then b's last two chunks, so that the core has a block's independent integer work beside
// each tail's chain (madd, convert, fma). Against one loop over whole blocks (each group's block
// in turn, which GCC scheduled with all 8 activation broadcasts live across both groups, spilling
// sums to the stack), `--matmul Q4_0:2048:2048 -t 1` from cache, fastest of 1000 (Zen 3, AVX2):
// one row 78 -> 68-70 us, two 123 -> 104-110, three 177 -> 142-147, four 198-199 either way.
// From memory decode is bound by the read; there the two measure alike.
template <int K, int G>
SPITE_AVX2 void q4_0_tiles_avx2(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                                std::int64_t out, float* const* y) {
  q4_0_layout_pass<K, G> pass(groups, nb);
  const __m256i m = _mm256_set1_epi8(0x0F);
  const std::byte* blk[G];
  for (int g = 0; g < G; ++g) blk[g] = groups[g];
  const std::int8_t* xq[K];
  for (int k = 0; k < K; ++k) xq[k] = xb.qs(static_cast<std::size_t>((t0 + k) * nb));
  __m256i prev[G][K];
  const auto chunk = [&](int j, __m256i (&s16)[G][K]) SPITE_AVX2 {
    __m256i lo[G], hi[G];
    for (int g = 0; g < G; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[g] + 16 + 32 * j));
      lo[g] = _mm256_and_si256(v, m);
      hi[g] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    }
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m256i x_lo = _mm256_set1_epi32(load_u32(xq[k] + 4 * j)), x_hi = _mm256_set1_epi32(load_u32(xq[k] + 16 + 4 * j));
      for (int g = 0; g < G; ++g) {
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], x_lo), _mm256_maddubs_epi16(hi[g], x_hi));
        s16[g][k] = j == 0 ? p : _mm256_add_epi16(s16[g][k], p);
        __asm__("" : "+x"(s16[g][k]));  // each chunk's work here, not hoisted into a spilled tree
      }
    }
  };
  const auto tail = [&](std::int64_t b) SPITE_AVX2 {  // block b, whose sums are in prev, at blk - 1
    for (int g = 0; g < G; ++g) {
      __m256i sum[K];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        const __m256i xsum8 = _mm256_set1_epi32(xb.sum8[static_cast<std::size_t>((t0 + k) * nb + b)]);
        sum[k] = _mm256_sub_epi32(_mm256_madd_epi16(prev[g][k], _mm256_set1_epi16(1)), xsum8);
      }
      pass.add(g, blk[g] - q4_0_packed_block, xb, nb, t0, b, sum);
    }
  };
  for (std::int64_t b = 0; b < nb; ++b) {
    pass.fetch(b, t0);
    __m256i s16[G][K];
    chunk(0, s16);
    chunk(1, s16);
    if (b > 0) tail(b - 1);
    chunk(2, s16);
    chunk(3, s16);
    for (int g = 0; g < G; ++g) {
      for (int k = 0; k < K; ++k) prev[g][k] = s16[g][k];
      blk[g] += q4_0_packed_block;
    }
    for (int k = 0; k < K; ++k) xq[k] += qk0;
  }
  if (nb > 0) tail(nb - 1);
  pass.store(y, t0, out);
}

template <int K>
SPITE_AVX2 void q4_0_tile_avx2(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, std::int64_t out,
                               float* y) {
  q4_0_tiles_avx2<K, 1>(&group, nb, xb, t0, out, &y);
}

const q4_0_tiles avx2_q4_0_tiles{q4_0_tile_avx2<1>, q4_0_tile_avx2<4>, q4_0_tiles_avx2<1, 2>, q4_0_tiles_avx2<2, 2>,
                                 q4_0_tiles_avx2<3, 2>, q4_0_tile_avx2<2>, q4_0_tile_avx2<3>};

void matmul_q4_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_0)(w, x, n_tokens, y, pool);
  const q8_0_batch xb(x, w.in, n_tokens, pool);
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q4_0_x16(w, xb, n_tokens, false, y, pool)) return;
  } else if (w.packed != nullptr) {
    const q4_0_tiles* avx512 = avx512_q4_0_tiles();
    const q4_0_tiles* vnni = avx_vnni_q4_0_tiles();
    return matmul_q4_0_layout(w, xb, n_tokens, y, pool, avx512 != nullptr ? *avx512 : vnni != nullptr ? *vnni : avx2_q4_0_tiles);
  }
  if (n_tokens < 4) {
    pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) {
        for (std::int64_t t = 0; t < n_tokens; ++t) q4_0_fused_rows8(w, 8 * g, xb, t, y + t * w.out + 8 * g);
      }
    });
    return;
  }
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    rows8_buffer u;
    u.q.resize(static_cast<std::size_t>(8 * w.in));
    u.d.resize(static_cast<std::size_t>(w.in / qk0 * 8));
    for (std::int64_t g = begin; g < end; ++g) {
      unpack_q4_0_rows8(w, 8 * g, u);
      for (std::int64_t t = 0; t < n_tokens; ++t) q4_0_dot_rows8(u, w.in, xb, t, y + t * w.out + 8 * g);
    }
  });
}

void matmul_q8_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q8_0_x16(w, x, n_tokens, y, pool)) return;
  } else if (w.packed != nullptr) {
    return matmul_q8_0_packed(w, x, n_tokens, y, pool);
  }
  matmul_q8_0_like<gguf::block_q8_0>(w, x, n_tokens, y, pool);
}

void matmul_q5_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  // 16-row groups: their own kernels while the AVX-512 ones run, else the file's layout.
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q5_0_x16(w, x, n_tokens, y, pool)) return;
  } else if (w.packed != nullptr) {
    return matmul_q5_0_packed(w, x, n_tokens, y, pool);
  }
  matmul_q8_0_like<gguf::block_q5_0>(w, x, n_tokens, y, pool);
}

constexpr exact_matmul k_table[] = {
    {tensor_type::q8_0, matmul_q8_0},
    {tensor_type::q4_0, matmul_q4_0},
    {tensor_type::q4_K, matmul_q4_K},
    {tensor_type::q6_K, matmul_q6_K},
    {tensor_type::q3_K, matmul_q3_K},
    {tensor_type::q2_K, matmul_q2_K},
    {tensor_type::q5_K, matmul_q5_K},
    {tensor_type::q5_0, matmul_q5_0},
    {tensor_type::q4_1, matmul_q4_1},
    {tensor_type::q5_1, matmul_q5_1},
    {tensor_type::iq4_xs, matmul_iq4_xs},
    {tensor_type::iq4_nl, matmul_iq4_nl},
    {tensor_type::mxfp4, matmul_mxfp4},
    {tensor_type::f16, matmul_f16},
    {tensor_type::f32, matmul_f32},
    {tensor_type::bf16, matmul_bf16},
};

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

}  // namespace

std::span<const exact_matmul> fast_matmuls() {
  static const bool usable = has_avx2();
  if (!usable) return {};
  static const std::vector<exact_matmul> all = [] {
    std::vector<exact_matmul> t(std::begin(k_table), std::end(k_table));
    for (const exact_matmul& m : x86::grid_iquant_matmuls()) t.push_back(m);
    return t;
  }();
  return all;
}

namespace {

// Per type, the layout made at load time: the first that takes the matrix (the 16-row layouts
// only where the AVX-512 kernels run and the row count is a multiple of 16).
struct layout_choice {
  tensor_type type;
  std::size_t (*first)(weight&);
  std::size_t (*otherwise)(weight&);
};

// Q6_K where the 16-row groups do not apply: 4-row groups where the AVX-512 kernels run, else
// 8-row groups for the 256-bit ones.
std::size_t pack_q6_K_4_or_8(weight& w) {
  const std::size_t bytes = pack_q6_K(w);
  return bytes > 0 || has_avx512_kernels() ? bytes : pack_q6_K_x8(w);
}

constexpr layout_choice k_layouts[] = {
    {tensor_type::q8_0, pack_q8_0_x16, pack_q8_0},
    {tensor_type::q4_0, pack_q4_0_x16, pack_q4_0_like<gguf::block_q4_0>},
    {tensor_type::iq4_nl, pack_iq4_nl_x16, pack_q4_0_like<gguf::block_iq4_nl>},
    {tensor_type::q4_K, pack_q4_K_x16, pack_q4_K},
    {tensor_type::q2_K, pack_q2_K_x16, pack_q2_K},
    {tensor_type::q3_K, pack_q3_K_x16, pack_q3_K_x8},
    {tensor_type::iq4_xs, pack_iq4_xs_x16, pack_iq4_xs_x8},
    {tensor_type::mxfp4, pack_mxfp4_x16, pack_mxfp4_x8},
    {tensor_type::q5_0, pack_q5_0_x16, pack_q5_0},
    {tensor_type::q5_1, pack_q5_1_x16, pack_q5_1},
    {tensor_type::q4_1, pack_q4_1_x16, pack_q4_1},
    {tensor_type::q5_K, pack_q5_K_x16, pack_q5_K},
    {tensor_type::q6_K, pack_q6_K_x16, pack_q6_K_4_or_8},
    {tensor_type::f32, pack_f32_x16, nullptr},
    {tensor_type::f16, pack_f16_x16, nullptr},
    {tensor_type::bf16, pack_bf16_x16, nullptr},
};

std::size_t pack_layout(weight& w) {
  for (const layout_choice& c : k_layouts) {
    if (c.type != w.type) continue;
    const std::size_t bytes = c.first(w);
    return bytes > 0 || c.otherwise == nullptr ? bytes : c.otherwise(w);
  }
  return 0;
}

}  // namespace

std::size_t pack_weight(weight& w) {
  if (fast_matmuls().empty() || w.packed != nullptr || w.out % 8 != 0) return 0;
  const std::size_t bytes = pack_layout(w);
  if (w.packed != nullptr) w.packed_size = bytes;
  return bytes;
}

}  // namespace spite::dispatch::cpu

#elif !(defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD))  // neither: the reference kernels only

namespace spite::dispatch::cpu {
std::span<const exact_matmul> fast_matmuls() { return {}; }
std::size_t pack_weight(weight&) { return 0; }
}  // namespace spite::dispatch::cpu

#endif
