// Q4_K packed in 16-row groups for processors with AVX-512 VNNI (the contract of
// simd_x86_avx2.cpp: the reference's exact integer sums and float operations, so the same bits;
// the reference is its repacked kernels, ref_dot_repack.cpp: every output row a lane of its own,
// GEMV one fma per super-block, GEMM one per pair of sub-blocks, mins alike).
//
// The 8-row layout (simd_x86.hpp) fills a 512-bit register with two 4-byte chunks of 8 rows, so
// each VPDPBUSD needs the activation dwords of two chunks side by side: a VPERMD per product,
// as many permutes as products, and the GEMM tile of prefill spent about half its operations
// on them. With 16 rows a register is one chunk of every row, and the activation operand is a
// dword broadcast straight from memory ({1to16}): one VPDPBUSD per 64 products and nothing
// else. Per group of 16 rows and super-block (2304 bytes, the 16 blocks' own bytes):
//   d[16], dmin[16]  f16, row r's at 2 r (offsets 0 and 32);
//   scales[12][16]   u8, byte k of row r's 12 packed bytes of 6-bit scales and mins (as in the
//                    file) at 64 + 16 k + r, unpacked per super-block for all 16 rows at
//                    once (x16_scales_mins);
//   quants[4][8]     64-byte chunks at 256 + 512 j + 64 c: bytes 4r..4r+3 are row r's
//                    qs[32 j + 4 c .. 32 j + 4 c + 3] (sub-block 2j in the low nibbles, 2j + 1
//                    in the high ones), cache-line aligned.
// Until 2026-12-07 the scales and mins were stored unpacked (2368 bytes, 2.8 % more than the file,
// which a memory-bound decode read in full).
// Made only where the AVX-512 kernels run and the row count is a multiple of 16; after
// set_avx512(false) such a matrix goes through the AVX2 kernels on the file's layout.

#include "simd_x86_avx512.hpp"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

namespace spite::dispatch::cpu::x86 {
namespace {

constexpr std::size_t x16_dmin = 32, x16_packed_scales = 64, x16_quants = 256;
constexpr std::size_t x16_block = x16_quants + 4 * 8 * 64;
static_assert(x16_block % cache_line == 0 && x16_block == 16 * sizeof(gguf::block_q4_K));

// Sub-block pair j's activation sums as one int16 pair (sub-blocks 2j, 2j + 1), the reference's
// 16-bit additions (q4_K_terms lays them out alike).
struct pair_sums {
  alignas(32) std::int32_t v[8];
  SPITE_AVX2 explicit pair_sums(const gguf::block_q8_K& x) {
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), _mm256_hadd_epi16(bs, bs));
  }
  std::int32_t of(int j) const { return v[(j & 1) + 4 * (j >> 1)]; }
};

SPITE_AVX512 inline __m512 halves16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// Sub-block pair j's min terms of the 16 rows against one activation row.
SPITE_AVX512 inline __m512i pair_min(const x16_scales_mins& h, int j, std::int32_t sums) {
  const __m512i mins = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(h.mins[j])));
  return _mm512_madd_epi16(mins, _mm512_set1_epi32(sums));
}

// Pair j's share, a tenth of its lines, of the super-block `ahead` on (in this group or the next).
// Decode fetches decode_fetch.q4_k ahead, by default three (Zen 5, `bench --matmul Q4_K:2048:5632`,
// `5632:2048` and `2048:2048 --cold`, three rounds alternated, share of a plain read of the same
// bytes: one thread 87-92 % at two ahead, 93-95 % at three, 89-91 % at four, 77-85 % at one; two
// threads 94-97 % at two and three, 93-94 % at four); the batch tiles four: two left four sequences
// decoding together waiting on memory (TinyLlama Q4_K_M, `--parallel 4`, two threads, alternated in
// one binary: 215 / 240 -> 251 / 259 t/s in total), while one sequence measured the same either
// way. The batch tiles also fetch ten ahead (23 KB) into L2 (Fetch = prefetch_l2), as the 16-row
// Q8_0 tiles do: Zen 4, from memory, min of 3 rounds alternated, Q4_K:2048:11264 x 4 rows two
// threads 0.45-0.49 -> 0.38-0.41 ms (16 ahead 0.41-0.63), one thread 0.76-0.77 -> 0.71-0.72;
// Q4_K:5632:2048 x 4 rows 0.23-0.26 -> 0.20-0.22; 512 rows level.
template <void (*Fetch)(const void*) = prefetch_l1>
SPITE_AVX512 inline void fetch_ahead(const std::byte* blk, int j, std::size_t ahead) {
  constexpr int lines = static_cast<int>(x16_block / cache_line);
  for (int l = 10 * j; l < std::min(10 * j + 10, lines); ++l) Fetch(blk + ahead * x16_block + cache_line * l);
}
constexpr std::size_t batch_fetch_blocks = 4, batch_fetch_l2_blocks = 10;

// Pair j's sums of K activation rows: for each row and each of the 16 weight rows, the sum over
// both sub-blocks of scale x (q . x). Chunk c unpacked once: sub-block 2j's low nibbles, and
// sub-block 2j + 1's high nibbles masked in place (16 q, a byte staying unsigned up to 240), their
// products' sum shifted back once per pair, exactly, where shifting each chunk down cost 8
// operations more per pair (Q4_K:2048:2048 from the caches, one thread, 0.038 -> 0.036 ms). Each
// chunk is taken against every row before the next, so the 2K chains of VPDPBUSD advance side by
// side (row after row, two chains of 8 each, the later rows waited behind the first's chains for
// the scheduler's room). Zen 4, one thread, from the caches, min of three rounds alternated:
// Q4_K:2048:1024 x 4 rows 0.061 -> 0.058 ms, x 3 0.043 -> 0.040, x 128 1.85-1.89 -> 1.77-1.78;
// TinyLlama Q4_K_M prefill of 128 tokens 117-122 -> 125-128 t/s. About 99 cycles a pair of
// sub-blocks and 4 rows, where its VPDPBUSD, VPMULLD and VFMADD231PS alone need 76 of the one
// issue slot a cycle they share on 512-bit registers. One row (decode) measures the same this way
// as with the 8 chunks unpacked first.
template <int K>
SPITE_AVX512 inline void scaled_sums(const std::byte* blk, const x16_scales_mins& h, const gguf::block_q8_K* const* x, int j,
                                     __m512i* sums) {
  const __m512i m = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8(static_cast<char>(0xF0));
  __m512i a[K], b[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) a[k] = b[k] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m512i v = _mm512_load_si512(blk + x16_quants + 512 * j + 64 * c);
    const __m512i lo = _mm512_and_si512(v, m), hi = _mm512_and_si512(v, m_hi);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::int8_t* xs = x[k]->qs + 64 * j;
      a[k] = _mm512_dpbusd_epi32(a[k], lo, _mm512_set1_epi32(load_u32(xs + 4 * c)));
      b[k] = _mm512_dpbusd_epi32(b[k], hi, _mm512_set1_epi32(load_u32(xs + 32 + 4 * c)));
    }
  }
  const auto* sc = reinterpret_cast<const __m128i*>(h.scales[2 * j]);
  const __m512i s0 = _mm512_cvtepu8_epi32(_mm_load_si128(sc)), s1 = _mm512_cvtepu8_epi32(_mm_load_si128(sc + 1));
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) {
    const __m512i b16 = _mm512_srai_epi32(b[k], 4);  // b a multiple of 16, |b| < 2^20
    sums[k] = _mm512_add_epi32(_mm512_mullo_epi32(a[k], s0), _mm512_mullo_epi32(b16, s1));
  }
}

// One activation row with the GEMV's float order: a super-block's sums collected as integers,
// then one fma each for the quants and the mins. The super-block three ahead is prefetched, a
// tenth of its lines per pair: fetching the whole next group instead cost 10-40 % of the
// bandwidth (alternated in one process with a plain read of the same bytes: Q4_K:5632:2048, one
// thread, 87-90 % of it without, 59-61 % with), while two blocks ahead, three rounds
// interleaved, one thread read 39-42 GB/s against 30-37 without, two 54-70 against 58-63.
template <int S>
SPITE_AVX512 void gemv16(const std::byte* const* groups, std::int64_t nb, const gguf::block_q8_K* x, float* const* y16) {
  // S = 2: two groups in step, a super-block of each in turn (x16_decode_pairs), where this
  // core's table asks for two streams (decode_fetch.q4_k_pairs). On a Zen 4 core with the
  // hardware prefetchers alone one thread read 81-87 % of a plain read of the same bytes so,
  // against 53-77 % as one stream at any fetch distance (`bench --matmul Q4_K:2048:5632` and
  // `5632:2048 --cold`).
  __m512 acc[S], acc_min[S];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) acc[s] = acc_min[s] = _mm512_setzero_ps();
  const auto ahead = static_cast<std::size_t>(decode_fetch.q4_k);
  for (std::int64_t b = 0; b < nb; ++b) {
    const pair_sums ps(x[b]);
    const __m512 xd = _mm512_set1_ps(x[b].d);
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const std::byte* blk = groups[s] + static_cast<std::size_t>(b) * x16_block;
      __m512i is = _mm512_setzero_si512(), ms = _mm512_setzero_si512();
      x16_header_first<x16_quants>(blk);
      const x16_scales_mins h(blk + x16_packed_scales);
      for (int j = 0; j < 4; ++j) {
        if (ahead != 0) fetch_ahead(blk, j, ahead);
        const gguf::block_q8_K* row = &x[b];
        __m512i sum;
        scaled_sums<1>(blk, h, &row, j, &sum);
        is = _mm512_add_epi32(is, sum);
        ms = _mm512_add_epi32(ms, pair_min(h, j, ps.of(j)));
      }
      acc[s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(halves16(blk), xd), acc[s]);
      acc_min[s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(halves16(blk + x16_dmin), xd), acc_min[s]);
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s) _mm512_storeu_ps(y16[s], _mm512_sub_ps(acc[s], acc_min[s]));
}

SPITE_AVX512 void gemv16_one(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* x, std::int64_t, std::int64_t,
                             float* y16) {
  gemv16<1>(&group, nb, x, &y16);
}

// K activation rows (the batch's rows past its GEMM rows: 2 or 3) each in gemv16's order, each
// pair's chunks unpacked once for all of them. A pass per row unpacked the group K times:
// Q4_K:2048:11264 from memory, two threads, 2 rows 0.35-0.36 -> 0.23 ms, 3 rows 0.42-0.50 ->
// 0.23-0.26 (one row 0.20-0.22); TinyLlama Q4_K_M, two / three sequences decoding together
// (`bench --parallel`), 109-114 -> 136-152 and 126-128 -> 173-192 t/s in total.
template <int K>
SPITE_AVX512 void gemv16_rows(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0, std::int64_t out,
                             float* y) {
  __m512 acc[K], acc_min[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm512_setzero_ps();
  const auto ahead = static_cast<std::size_t>(decode_fetch.q4_k);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * x16_block;
    const gguf::block_q8_K* x[K];
    std::int32_t pair_sum[K][4];
    __m512i is[K], ms[K];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      x[k] = &xq[(t0 + k) * nb + b];
      const pair_sums ps(*x[k]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) pair_sum[k][j] = ps.of(j);
      is[k] = ms[k] = _mm512_setzero_si512();
    }
    const x16_scales_mins h(blk + x16_packed_scales);
    for (int j = 0; j < 4; ++j) {
      if (ahead != 0) fetch_ahead(blk, j, ahead);
      __m512i sums[K];
      scaled_sums<K>(blk, h, x, j, sums);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        is[k] = _mm512_add_epi32(is[k], sums[k]);
        ms[k] = _mm512_add_epi32(ms[k], pair_min(h, j, pair_sum[k][j]));
      }
    }
    const __m512 dw = halves16(blk), dmw = halves16(blk + x16_dmin);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m512 xd = _mm512_set1_ps(x[k]->d);
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[k]), _mm512_mul_ps(dw, xd), acc[k]);
      acc_min[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms[k]), _mm512_mul_ps(dmw, xd), acc_min[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(y + (t0 + k) * out, _mm512_sub_ps(acc[k], acc_min[k]));
}

// K activation rows from t0 with the GEMM's float order: a block's min terms first (one fma per
// pair), then each pair's sums (one fma per pair), each pair's chunks unpacked once for the K rows.
template <int K>
SPITE_AVX512 void gemm16(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0, std::int64_t out,
                         bool prefetch, float* y) {
  __m512 acc[K], acc_min[K];
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) acc[k] = acc_min[k] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = group + static_cast<std::size_t>(b) * x16_block;
    const gguf::block_q8_K* x[K];
    __m512 ds[K];
    const __m512 dw = halves16(blk), dmw = halves16(blk + x16_dmin);
    const x16_scales_mins h(blk + x16_packed_scales);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      x[k] = &xq[(t0 + k) * nb + b];
      const __m512 xd = _mm512_set1_ps(x[k]->d);
      ds[k] = _mm512_mul_ps(dw, xd);
      const __m512 dm = _mm512_mul_ps(dmw, xd);
      const pair_sums ps(*x[k]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc_min[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_min(h, j, ps.of(j))), dm, acc_min[k]);
    }
    for (int j = 0; j < 4; ++j) {
      if (prefetch) {
        fetch_ahead(blk, j, batch_fetch_blocks);
        fetch_ahead<prefetch_l2>(blk, j, batch_fetch_l2_blocks);
      }
      __m512i sums[K];
      scaled_sums<K>(blk, h, x, j, sums);
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[k]), ds[k], acc[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < K; ++k) _mm512_storeu_ps(y + (t0 + k) * out, _mm512_sub_ps(acc[k], acc_min[k]));
}

}  // namespace

std::size_t pack_q4_K_x16(weight& w) {
  if (avx512_q4_K_tiles() == nullptr || w.out % 16 != 0) return 0;
  const std::int64_t nb = w.in / qkk, groups = w.out / 16;
  const std::size_t bytes = static_cast<std::size_t>(groups * nb) * x16_block;
  auto buffer = make_aligned_bytes(bytes);  // zeroed
  for_load_ranges(groups, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      for (int r = 0; r < 16; ++r) {
        const auto* row = reinterpret_cast<const gguf::block_q4_K*>(w.row(16 * g + r));
        for (std::int64_t b = 0; b < nb; ++b) {
          std::byte* dst = buffer.get() + static_cast<std::size_t>(g * nb + b) * x16_block;
          const gguf::block_q4_K& blk = row[b];
          std::memcpy(dst + 2 * r, &blk.d, 2);
          std::memcpy(dst + x16_dmin + 2 * r, &blk.dmin, 2);
          for (int k = 0; k < 12; ++k) std::memcpy(dst + x16_packed_scales + 16 * k + r, blk.scales + k, 1);
          for (int j = 0; j < 4; ++j) {
            for (int c = 0; c < 8; ++c) std::memcpy(dst + x16_quants + 512 * j + 64 * c + 4 * r, blk.qs + 32 * j + 4 * c, 4);
          }
        }
      }
    }
  });
  w.packed = buffer.get();
  w.packed_owner = std::move(buffer);
  w.packed_rows = 16;
  return bytes;
}

bool matmul_q4_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                     thread_pool& pool) {
  if (avx512_q4_K_tiles() == nullptr) return false;
  const std::int64_t nb = w.in / qkk;
  if (n_tokens == 1 && pool.size() <= decode_fetch.q4_k_pairs) {
    x16_decode_pairs(xq, nb, x16_block, w, y, pool, gemv16<2>, gemv16_one);
    return true;
  }
  x16_for_groups_k(w, x16_block, n_tokens, pool, [&](const std::byte* group, std::int64_t t0, std::int64_t t1, std::int64_t o) {
    float* yg = y + o;
    // The first tile of each block of activation rows fetches four super-blocks ahead (the GEMV
    // two). (It fetched the whole next group, spread over its blocks, until 4 sequences
    // decoding together measured 151-171 tokens/s that way and 193-199 this way: TinyLlama
    // Q4_K_M, 2 threads, alternated; prefill of 512 tokens level.)
    std::int64_t t = t0;
    for (; t + 4 <= t1 && t + 4 <= ng; t += 4) gemm16<4>(group, nb, xq, t, w.out, t == t0, yg);
    for (; t < t1 && t < ng; ++t) gemm16<1>(group, nb, xq, t, w.out, t == t0, yg);
    for (; t + 3 <= t1; t += 3) gemv16_rows<3>(group, nb, xq, t, w.out, yg);
    if (t1 - t == 2) gemv16_rows<2>(group, nb, xq, t, w.out, yg);
    if (t1 - t == 1) gemv16_one(group, nb, xq + t * nb, nb, w.out, yg + t * w.out);
  });
  return true;
}

}  // namespace spite::dispatch::cpu::x86

#endif
