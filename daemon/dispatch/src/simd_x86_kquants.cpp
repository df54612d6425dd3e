// AVX2 versions of the Q4_K and Q6_K matmuls (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits).
#include "simd_x86.hpp"
#include "simd_x86_x16.hpp"

#if defined(__x86_64__)
#include <memory>

namespace spite::dispatch::cpu::x86 {
namespace {

using gguf::tensor_type;

// ---- Q4_K repacked (reference: dot_q4_K_repacked, one lane per output; the GEMV rows one fma
// per super-block, the GEMM rows one per pair of 32-element sub-blocks; mins separately).

SPITE_AVX2 void unpack_q4_K_rows8(const weight& w, std::int64_t o, rows8_buffer& u) {
  const std::int64_t nb = w.in / qkk;
  const __m256i m = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < 8; ++r) {
    const auto* row = reinterpret_cast<const gguf::block_q4_K*>(w.row(o + r));
    std::uint8_t* q = u.q.data() + r * w.in;
    std::int16_t* sc = u.sc.data() + r * (w.in / 32);
    for (std::int64_t b = 0; b < nb; ++b) {
      std::uint32_t sm[4];
      scales_mins_k4(row[b].scales, sm);
      const auto* s8 = reinterpret_cast<const std::uint8_t*>(sm);
      const auto* m8 = s8 + 8;
      for (int g = 0; g < 8; ++g) {
        sc[8 * b + g] = s8[g];
        u.mins[static_cast<std::size_t>(64 * b + 8 * g + r)] = m8[g];
      }
      u.d[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].d);
      u.dmin[static_cast<std::size_t>(8 * b + r)] = _cvtsh_ss(row[b].dmin);
      for (int j = 0; j < 4; ++j) {  // element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: high
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs + 32 * j));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qkk * b + 64 * j), _mm256_and_si256(v, m));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + qkk * b + 64 * j + 32),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
      }
    }
  }
}

// Sub-blocks [g0, g0 + count) of super-block b of row r, each times its scale, as 8 lanes.
SPITE_AVX2 inline __m256i q4_K_lanes(const rows8_buffer& u, std::int64_t in, int r, std::int64_t b, int g0, int count,
                                     const std::int8_t* x) {
  const std::uint8_t* q = u.q.data() + r * in + qkk * b;
  const std::int16_t* sc = u.sc.data() + r * (in / 32) + 8 * b;
  __m256i tot = _mm256_setzero_si256();
  for (int g = g0; g < g0 + count; ++g) {
    tot = _mm256_add_epi32(tot, dot_lanes_scaled(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * g)),
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * g)),
                                                 _mm256_set1_epi16(sc[g])));
  }
  return tot;
}

SPITE_AVX2 void q4_K_dot_rows8(const rows8_buffer& u, std::int64_t in, const gguf::block_q8_K* x, bool pairs, float* y8) {
  const std::int64_t nb = in / qkk;
  __m256 a = _mm256_setzero_ps(), am = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const __m256 xd = _mm256_set1_ps(x[b].d);
    const __m256 ds = _mm256_mul_ps(_mm256_loadu_ps(u.d.data() + 8 * b), xd);
    const __m256 dm = _mm256_mul_ps(_mm256_loadu_ps(u.dmin.data() + 8 * b), xd);
    // Sub-block g's mins (rows as lanes) times its activation sum.
    auto min_sum = [&](int g) SPITE_AVX2 {
      const auto* mn = reinterpret_cast<const __m256i*>(u.mins.data() + 64 * b + 8 * g);
      return _mm256_mullo_epi32(_mm256_loadu_si256(mn), _mm256_set1_epi32(x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]));
    };
    __m256i tot[8];
    if (pairs) {  // GEMM rows: one fma per pair of sub-blocks
      for (int pr = 0; pr < 4; ++pr) {
        for (int r = 0; r < 8; ++r) tot[r] = q4_K_lanes(u, in, r, b, 2 * pr, 2, x[b].qs);
        a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), ds, a);
        am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(min_sum(2 * pr), min_sum(2 * pr + 1))), dm, am);
      }
    } else {
      for (int r = 0; r < 8; ++r) tot[r] = q4_K_lanes(u, in, r, b, 0, 8, x[b].qs);
      __m256i ms = min_sum(0);
      for (int g = 1; g < 8; ++g) ms = _mm256_add_epi32(ms, min_sum(g));
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), ds, a);
      am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), dm, am);
    }
  }
  _mm256_storeu_ps(y8, _mm256_sub_ps(a, am));
}

// Decode: each super-block unpacked in registers where it is used (GEMV semantics only, which
// is what batches below the GEMM split get).
SPITE_AVX2 void q4_K_fused_rows8(const weight& w, std::int64_t o, const gguf::block_q8_K* x, bool first, float* y8) {
  const std::int64_t nb = w.in / qkk;
  const std::byte* row0 = w.row(o);
  const __m256i m = _mm256_set1_epi8(0x0F);
  // Byte pairs (2g, 2g + 1) repeated: broadcasts int16 element g of a 128-bit lane.
  alignas(32) static constexpr std::uint8_t pick[8][32] = {
#define SPITE_PICK(g) {2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
                       2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, \
                       2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1, 2 * g, 2 * g + 1}
      SPITE_PICK(0), SPITE_PICK(1), SPITE_PICK(2), SPITE_PICK(3), SPITE_PICK(4), SPITE_PICK(5), SPITE_PICK(6), SPITE_PICK(7)};
#undef SPITE_PICK
  __m256 a = _mm256_setzero_ps(), am = _mm256_setzero_ps();
  const next_group_prefetch ahead(w.row(o + 8), 8 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (first) ahead.step(b);
    const gguf::block_q8_K& xb = x[b];
    alignas(16) std::int16_t pair_sums[8];
    for (int g = 0; g < 8; ++g) pair_sums[g] = static_cast<std::int16_t>(xb.bsums[2 * g] + xb.bsums[2 * g + 1]);
    const __m128i bp = _mm_load_si128(reinterpret_cast<const __m128i*>(pair_sums));
    __m256i tot[8];
    __m128i mins[8];
    __m128i dh = _mm_setzero_si128(), mh = _mm_setzero_si128();
    for (int r = 0; r < 8; ++r) {
      const auto& blk = reinterpret_cast<const gguf::block_q4_K*>(row0 + r * w.row_bytes)[b];
      dh = insert_half(dh, blk.d, r);
      mh = insert_half(mh, blk.dmin, r);
      std::uint32_t sm[4];
      scales_mins_k4(blk.scales, sm);
      const __m128i sm16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm));
      const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm16));
      mins[r] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm16, 8)), bp);
      __m256i t = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {  // element 64j + l: low nibble of qs[32j + l]; 64j + 32 + l: high
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * j));
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j + 32));
        const __m256i s0 = _mm256_shuffle_epi8(sc, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick[2 * j])));
        const __m256i s1 = _mm256_shuffle_epi8(sc, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick[2 * j + 1])));
        t = _mm256_add_epi32(t, dot_lanes_scaled(_mm256_and_si256(v, m), x0, s0));
        t = _mm256_add_epi32(t, dot_lanes_scaled(_mm256_and_si256(_mm256_srli_epi16(v, 4), m), x1, s1));
      }
      tot[r] = t;
    }
    const __m128i m0123 = _mm_hadd_epi32(_mm_hadd_epi32(mins[0], mins[1]), _mm_hadd_epi32(mins[2], mins[3]));
    const __m128i m4567 = _mm_hadd_epi32(_mm_hadd_epi32(mins[4], mins[5]), _mm_hadd_epi32(mins[6], mins[7]));
    const __m256 xd = _mm256_set1_ps(xb.d);
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sum8(tot)), _mm256_mul_ps(_mm256_cvtph_ps(dh), xd), a);
    am = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(m4567, m0123)), _mm256_mul_ps(_mm256_cvtph_ps(mh), xd), am);
  }
  _mm256_storeu_ps(y8, _mm256_sub_ps(a, am));
}

// ---- Q4_K packed at load time (pack_weight; the layout is described in simd_x86.hpp).

std::size_t pack_q4_K_impl(weight& w) {
  return pack_row_groups<gguf::block_q4_K>(w, q4_K_packed_block, [](std::byte* dst, const gguf::block_q4_K& blk, int r) {
    auto* sc = reinterpret_cast<std::uint8_t*>(dst + q4_K_packed_scales);
    auto* mn = reinterpret_cast<std::uint8_t*>(dst + q4_K_packed_mins);
    std::memcpy(dst + 2 * r, &blk.d, 2);
    std::memcpy(dst + 16 + 2 * r, &blk.dmin, 2);
    std::uint32_t sm[4];
    scales_mins_k4(blk.scales, sm);
    const auto* s8 = reinterpret_cast<const std::uint8_t*>(sm);
    for (int sb = 0; sb < 8; ++sb) {
      sc[8 * sb + r] = s8[sb];
      mn[16 * (sb / 2) + 2 * r + sb % 2] = s8[8 + sb];
    }
    for (int j = 0; j < 4; ++j) {
      for (int c = 0; c < 8; ++c) std::memcpy(dst + q4_K_packed_quants + 256 * j + 32 * c + 4 * r, blk.qs + 32 * j + 4 * c, 4);
    }
  });
}

// Sub-block pair j of G packed blocks (blk) against K activation rows (x: their blocks): each
// row's sum over the pair's two sub-blocks of scale x (q . x), rows as lanes. Each 32-byte chunk
// is unpacked once for the K rows; the K pairs of int16 sums (at most 8 * 2 * 15 * 128 each per
// sub-block: no overflow) stay in registers, which 8 unpacked chunks per row would not.
template <int K, int G>
SPITE_AVX2 inline void q4_K_pair_sums(const std::byte* const* blk, const gguf::block_q8_K* const* x, int j, __m256i (&pair)[G][K]) {
  __m256i a0[G][K], a1[G][K];
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) a0[g][k] = a1[g][k] = _mm256_setzero_si256();
  }
  // The 8 chunks unrolled: no loop's register moves around the barrier below (Q4_K:2048:2048 x
  // 128 rows, one thread, AVX2, alternated: 155-169 -> 175-177 GFLOP/s).
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    __m256i lo[G], hi[G];
    for (int g = 0; g < G; ++g) q4_K_packed_chunk(blk[g], j, c, lo[g], hi[g]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::int8_t* x0 = x[k]->qs + 64 * j + 4 * c;
      const __m256i x_lo = _mm256_set1_epi32(load_u32(x0)), x_hi = _mm256_set1_epi32(load_u32(x0 + 32));
      for (int g = 0; g < G; ++g) {
        a0[g][k] = _mm256_add_epi16(a0[g][k], _mm256_maddubs_epi16(lo[g], x_lo));
        a1[g][k] = _mm256_add_epi16(a1[g][k], _mm256_maddubs_epi16(hi[g], x_hi));
        // Keeps GCC from re-associating the sums into a tree of all 8 chunks' products, which
        // it then spills to the stack (several times slower for K = 4).
        __asm__("" : "+x"(a0[g][k]), "+x"(a1[g][k]));
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const row_scale_pairs s(reinterpret_cast<const std::uint8_t*>(blk[g] + q4_K_packed_scales) + 16 * j);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) pair[g][k] = _mm256_add_epi32(_mm256_madd_epi16(a0[g][k], s.lo), _mm256_madd_epi16(a1[g][k], s.hi));
  }
}

#define SPITE_Q4K_PACKED_TARGET SPITE_AVX2
#include "simd_x86_q4k_packed.inc"
#undef SPITE_Q4K_PACKED_TARGET

void matmul_q4_K_packed(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                        thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  const q4_K_tiles avx2{q4_K_packed_tile<1>, q4_K_packed_tile<4>, q4_K_packed_gemm4, q4_K_packed_tile_pair,
                        q4_K_packed_rows_pair<2>, q4_K_packed_rows_pair<3>, q4_K_packed_tile<2>, q4_K_packed_tile<3>};
  const q4_K_tiles* avx512 = avx512_q4_K_tiles();
  const q4_K_tiles* fast = avx512 != nullptr ? avx512 : avx_vnni_q4_K_tiles();
  const q4_K_tiles& tiles = fast != nullptr ? *fast : avx2;
  const auto group_at = [&](std::int64_t g) { return w.packed + static_cast<std::size_t>(g * nb) * q4_K_packed_block; };
  // Two or three activation rows in one pass over each pair of groups. A pass per row unpacked
  // the groups that many times: Q4_K:2048:11264 from memory, two threads, alternated, AVX-VNNI 2
  // rows 0.39-0.41 -> 0.29-0.34 ms, 3 rows 0.51-0.53 -> 0.49-0.53; AVX2 alone 0.45-0.47 ->
  // 0.29-0.32 and 0.52-0.62 -> 0.41-0.53 (SPITE_CPU_AVX512=0 [SPITE_CPU_AVXVNNI=0], Zen 5).
  const q4_K_pair_fn rows_pair = n_tokens == 2 ? tiles.pair2 : n_tokens == 3 ? tiles.pair3 : nullptr;
  if (rows_pair != nullptr) {
    return by_group_pairs(
        w.out / 8, 1, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t, float* const* ys) { rows_pair(groups, nb, xq, 0, ng, w.out, ys); },
        [&](const std::byte* group, std::int64_t, float* yg) {
          for (std::int64_t t = 0; t < n_tokens; ++t) tiles.one(group, nb, xq, t, ng, w.out, yg);
        });
  }
  if (tiles.pair != nullptr && n_tokens < 4) {
    return by_group_pairs(
        w.out / 8, n_tokens, y, pool, group_at,
        [&](const std::byte* const* groups, std::int64_t t, float* const* ys) { tiles.pair(groups, nb, xq, t, ng, w.out, ys); },
        [&](const std::byte* group, std::int64_t t, float* yg) { tiles.one(group, nb, xq, t, ng, w.out, yg); });
  }
  const std::int64_t block = token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K));
  by_groups_and_token_blocks(w.out / 8, n_tokens, block, pool, [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
    const std::byte* group = group_at(g);
    std::int64_t t = t0;
    for (; t + 4 <= t1; t += 4) {
      if (t + 4 <= ng) {
        tiles.gemm4(group, nb, xq, t, w.out, y + 8 * g);
      } else {
        tiles.four(group, nb, xq, t, ng, w.out, y + 8 * g);
      }
    }
    // The last 2 or 3 rows (5-7 sequences decoding together) unpack the group once more, not once
    // per row.
    const q4_K_tile_fn rest = t1 - t == 3 ? tiles.three : t1 - t == 2 ? tiles.two : nullptr;
    if (rest != nullptr) return rest(group, nb, xq, t, ng, w.out, y + 8 * g);
    for (; t < t1; ++t) tiles.one(group, nb, xq, t, ng, w.out, y + 8 * g);
  });
}

void matmul_q4_K_unpacked(const weight& w, const std::vector<gguf::block_q8_K>& xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                          thread_pool& pool);

void matmul_q4_K_impl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (w.out % 8 != 0) return find_reference_matmul(tensor_type::q4_K)(w, x, n_tokens, y, pool);
  std::vector<gguf::block_q8_K> xq;
  quantize_rows_q8_K(w, x, n_tokens, true, xq, pool);
  const std::int64_t ng = gemm_rows(n_tokens);
  if (w.packed != nullptr && w.packed_rows == 16) {
    if (matmul_q4_K_x16(w, xq.data(), n_tokens, ng, y, pool)) return;
    // The AVX-512 kernels stand aside: the unpacked kernels read the file's layout (`data`).
    return matmul_q4_K_unpacked(w, xq, n_tokens, ng, y, pool);
  }
  if (w.packed != nullptr) return matmul_q4_K_packed(w, xq.data(), n_tokens, ng, y, pool);
  matmul_q4_K_unpacked(w, xq, n_tokens, ng, y, pool);
}

void matmul_q4_K_unpacked(const weight& w, const std::vector<gguf::block_q8_K>& xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                          thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  if (ng == 0) {
    pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t g = begin; g < end; ++g) {
        for (std::int64_t t = 0; t < n_tokens; ++t) q4_K_fused_rows8(w, 8 * g, xq.data() + t * nb, t == 0, y + t * w.out + 8 * g);
      }
    });
    return;
  }
  pool.parallel_for(w.out / 8, [&](std::int64_t begin, std::int64_t end, int) {
    rows8_buffer u;
    u.q.resize(static_cast<std::size_t>(8 * w.in));
    u.d.resize(static_cast<std::size_t>(8 * nb));
    u.dmin.resize(u.d.size());
    u.sc.resize(static_cast<std::size_t>(8 * w.in / 32));
    u.mins.resize(static_cast<std::size_t>(64 * nb));
    for (std::int64_t g = begin; g < end; ++g) {
      unpack_q4_K_rows8(w, 8 * g, u);
      for (std::int64_t t = 0; t < n_tokens; ++t) q4_K_dot_rows8(u, w.in, xq.data() + t * nb, t < ng, y + t * w.out + 8 * g);
    }
  });
}

// ---- Q6_K (reference: dot_row<q6_K> in ref_dot_kquants.cpp: 8 lanes, unsigned quants times
// the 16-element scales, the -32 offset through the activation sums, one fma per super-block).

// Row blocks w[0], w[step], w[2 step], ... (q6_K_blocks).
SPITE_AVX2 void unpack_q6_K_row(const gguf::block_q6_K* first, std::int64_t step, std::int64_t nb, q6_K_row& r) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  std::uint8_t* q = r.q.data();
  for (std::int64_t b = 0; b < nb; ++b) {
    const gguf::block_q6_K* w = first + b * (step - 1);  // so that w[b] is block b of the row
    const std::int8_t* sc = w[b].scales;
    r.d[static_cast<std::size_t>(b)] = _cvtsh_ss(w[b].d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.offsets.data() + 16 * b),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))));
    for (int g = 0; g < 8; ++g) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(r.scales.data() + 16 * (8 * b + g)),
                          _mm256_set_m128i(_mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g])));
    }
    // Element 128c + 32k + l: nibble of ql[64c + 32(k & 1) + l] (low for k < 2) with bits
    // 2k..2k+1 of qh[32c + l] above it.
    for (int c = 0; c < 2; ++c) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * c));
      for (int k = 0; k < 4; ++k) {
        const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * c + 32 * (k & 1)));
        const __m256i nib = k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m2);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * qkk + 128 * c + 32 * k),
                            _mm256_or_si256(nib, _mm256_slli_epi16(hi, 4)));
      }
    }
  }
}

// R unpacked rows against K activation rows; each pair keeps its own 8 lanes.
template <int R, int K>
SPITE_AVX2 void q6_K_dot(const q6_K_row* const* rows, const gguf::block_q8_K* xq, std::int64_t nb, std::int64_t t0,
                         std::int64_t out, std::int64_t o, float* y) {
  __m256 acc[R][K];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i lanes[R * K];
    const gguf::block_q8_K* xs[K];
    const std::uint8_t* q[R];
    const std::int16_t* sc[R];
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) xs[k] = &xq[(t0 + k) * nb + b];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      q[r] = rows[r]->q.data() + b * qkk;
      sc[r] = rows[r]->scales.data() + 16 * 8 * b;
    }
    super_block_lanes<R, K>(q, sc, xs, lanes);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r]->offsets.data() + 16 * b));
      const float dw = rows[r]->d[static_cast<std::size_t>(b)];
#pragma GCC unroll 4
      for (int k = 0; k < K; ++k) {
        // lane L -= 32 * (sc[2L] * bsum[2L] + sc[2L+1] * bsum[2L+1])
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[k]->bsums));
        const __m256i l = _mm256_sub_epi32(lanes[r * K + k], _mm256_slli_epi32(_mm256_madd_epi16(offsets, bs), 5));
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(xs[k]->d * dw), _mm256_cvtepi32_ps(l), acc[r][k]);
      }
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) y[(t0 + k) * out + o + r] = reduce8_vec(acc[r][k]);
  }
}

// lanes + the scaled pair sums of a 32-element group (simd_x86_q6k_fused.inc).
SPITE_AVX2 inline __m256i q6_K_group_lanes(__m256i lanes, __m256i q, __m256i x, __m256i scales) {
  return _mm256_add_epi32(lanes, dot_lanes_scaled(q, x, scales));
}

#define SPITE_Q6K_FUSED_TARGET SPITE_AVX2
#include "simd_x86_q6k_fused.inc"
#undef SPITE_Q6K_FUSED_TARGET

void matmul_q6_K_impl(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qkk;
  std::vector<gguf::block_q8_K> xq;
  quantize_tokens_q8_K(x, w.in, n_tokens, xq, pool);
  const std::int64_t out = w.out;
  q6_K_tiles avx2{q6_K_fused<4, 1>, q6_K_fused<1, 1>, q6_K_fused<1, 4>, q6_K_dot<2, 4>, q6_K_dot<1, 1>};
  if (const q6_K_fused_tiles* vnni256 = avx_vnni_q6_K_tiles()) {
    avx2.fused41 = vnni256->fused41;
    avx2.fused11 = vnni256->fused11;
    avx2.fused14 = vnni256->fused14;
  }
  const q6_K_tiles* vnni = avx512_q6_K_tiles();
  const q6_K_tiles& tiles = vnni != nullptr ? *vnni : avx2;
  // 8-row groups: the 256-bit kernels; 16-row groups: their own while the AVX-512 ones run, else
  // the file's layout.
  if (w.packed != nullptr && w.packed_rows == 8) return matmul_q6_K_x8(w, xq.data(), n_tokens, y, pool);
  if (w.packed != nullptr && w.packed_rows == 16 && matmul_q6_K_x16(w, xq.data(), n_tokens, y, pool)) return;
  if (n_tokens < 4 && vnni == nullptr && !q6_K_blocks(w).interleaved) {
    return by_row_pair_streams(
        out, n_tokens, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t t) { q6_K_fused_rows<4, 1, true>(w, o, o2, xq.data(), nb, t, out, y); },
        [&](std::int64_t o, std::int64_t t) { q6_K_fused<2, 1>(w, o, xq.data(), nb, t, out, y); },
        [&](std::int64_t o, std::int64_t t) { q6_K_fused<1, 1>(w, o, xq.data(), nb, t, out, y); });
  }
  if (n_tokens < 4) {
    by_row_groups(
        out, pool,
        [&](std::int64_t o) {
          for (std::int64_t t = 0; t < n_tokens; ++t) tiles.fused41(w, o, xq.data(), nb, t, out, y);
        },
        [&](std::int64_t o) {
          for (std::int64_t t = 0; t < n_tokens; ++t) tiles.fused11(w, o, xq.data(), nb, t, out, y);
        });
    return;
  }
  if (n_tokens < 16) {
    pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t o = begin; o < end; ++o) {
        by_token_tiles(
            n_tokens, [&](std::int64_t t) { tiles.fused14(w, o, xq.data(), nb, t, out, y); },
            [&](std::int64_t t) { tiles.fused11(w, o, xq.data(), nb, t, out, y); });
      }
    });
    return;
  }
  const q6_K_blocks blocks(w);
  by_unpacked_row_pairs<q6_K_row>(
      w.in, out, n_tokens, token_block(static_cast<std::size_t>(nb) * sizeof(gguf::block_q8_K)), pool,
      [&](std::int64_t o, q6_K_row& r) { unpack_q6_K_row(blocks.first(o), blocks.step(), nb, r); },
      [&](const q6_K_row* const* rows, std::int64_t o, std::int64_t t) { tiles.dot24(rows, xq.data(), nb, t, out, o, y); },
      [&](const q6_K_row& row, std::int64_t o, std::int64_t t) {
        const q6_K_row* one = &row;
        tiles.dot11(&one, xq.data(), nb, t, out, o, y);
      });
}

}  // namespace

void matmul_q4_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_q4_K_impl(w, x, n_tokens, y, pool);
}
void matmul_q6_K(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_q6_K_impl(w, x, n_tokens, y, pool);
}
std::size_t pack_q4_K(weight& w) { return pack_q4_K_impl(w); }

}  // namespace spite::dispatch::cpu::x86

#endif
