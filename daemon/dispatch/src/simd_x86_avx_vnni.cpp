// AVX-VNNI kernels, for processors that have VPDPBUSD on 256-bit registers but no AVX-512
// (Intel's client cores from Alder Lake on): the packed 8-row Q4_0 / IQ4_NL and Q4_K layouts
// (simd_x86.hpp, q4_0_packed_block and q4_K_packed_block) and Q8_0 in the file's layout.
// VPDPBUSD takes four u8 x s8 products per int32 lane at once, where AVX2 needs VPMADDUBSW, an
// int16 addition and a VPMADDWD to widen (Q8_0: two sign flips too). The integer sums are exact
// either way (AVX2's int16 sums stay below 2^15), so the bits are the AVX2 tiles' and the
// reference's; the float epilogues are shared (q4_0_layout_pass, simd_x86_q4k_packed.inc).
// Q4_0's quants go in as q (0..15), IQ4_NL's as table value + 128, Q8_0's as q ^ 0x80; the
// chains start at -8 x sum(x), -128 x sum(x) or q8_0_lane_corrections'.
// Measured on a Zen 5 core with the AVX-512 kernels off (SPITE_CPU_AVX512=0; it has AVX-VNNI
// too), one thread: Q4_0:2048:5632 decode from cache 37 -> 47 GB/s, 64 activation rows
// 231 -> 254-260 GFLOP/s (`spitectl bench --matmul`). SPITE_CPU_AVXVNNI=0 keeps AVX2's.
#include "simd_x86.hpp"
#include "simd_x86_q4_0_layout.hpp"

#if defined(__x86_64__)
#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "../../gguf/src/quants/iq_tables.hpp"
#include "ref_quant.hpp"

namespace spite::dispatch::cpu {
namespace {

bool avx_vnni_wanted() {
  const char* env = std::getenv("SPITE_CPU_AVXVNNI");
  return env == nullptr || std::string_view(env) != "0";
}

std::atomic<bool> g_allowed{avx_vnni_wanted()};

bool has_avx_vnni() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
  return ((a >> 4) & 1U) != 0;  // CPUID.(EAX=7, ECX=1):EAX[4]
}

using namespace x86;

// Q4_0 / IQ4_NL sums of block `blk` for K activation rows from t0 (the AVX2 ones: q4_0_tiles_avx2, iq4_nl_sums).
template <int K, bool Nl>
SPITE_AVX_VNNI inline void block_sums(const std::byte* blk, __m256i table, const q8_0_batch& xb, std::int64_t nb,
                                      std::int64_t t0, std::int64_t b, __m256i* sum) {
  const __m256i m = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k) {
    const int sum8 = xb.sum8[static_cast<std::size_t>((t0 + k) * nb + b)];
    sum[k] = _mm256_set1_epi32(Nl ? -16 * sum8 : -sum8);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * j));
    __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    if constexpr (Nl) {
      lo = _mm256_shuffle_epi8(table, lo);
      hi = _mm256_shuffle_epi8(table, hi);
    }
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      const std::int8_t* xq = xb.qs(static_cast<std::size_t>((t0 + k) * nb + b));
      sum[k] = _mm256_dpbusd_avx_epi32(sum[k], lo, _mm256_set1_epi32(load_u32(xq + 4 * j)));
      sum[k] = _mm256_dpbusd_avx_epi32(sum[k], hi, _mm256_set1_epi32(load_u32(xq + 16 + 4 * j)));
    }
  }
}

// G groups against K activation rows from t0, as q4_0_layout_groups (a copy of its loop: block_sums,
// of the AVX-VNNI target, inlines only into a function of that target, not into the AVX2 one).
template <int K, int G, bool Nl>
SPITE_AVX_VNNI void q4_0_groups(const std::byte* const* groups, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                                std::int64_t out, float* const* y) {
  [[maybe_unused]] __m256i table = _mm256_setzero_si256();
  if constexpr (Nl) {
    alignas(16) std::uint8_t shifted[16];
    for (int i = 0; i < 16; ++i) shifted[i] = static_cast<std::uint8_t>(gguf::quants::iq::kvalues_iq4nl[i] + 128);
    const __m128i t = _mm_load_si128(reinterpret_cast<const __m128i*>(shifted));
    table = _mm256_set_m128i(t, t);
  }
  q4_0_layout_pass<K, G> pass(groups, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    pass.fetch(b, t0);
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {  // unrolled as q4_0_layout_groups' (untimed here: no AVX-VNNI host)
      const std::byte* blk = groups[g] + static_cast<std::size_t>(b) * q4_0_packed_block;
      __m256i sum[K];
      block_sums<K, Nl>(blk, table, xb, nb, t0, b, sum);
      pass.add(g, blk, xb, nb, t0, b, sum);
    }
  }
  pass.store(y, t0, out);
}

// Q4_K: sub-block pair j as q4_K_pair_sums of simd_x86_kquants.cpp, the sums in int32 lanes
// from the start (VPDPBUSD) and each sub-block's scale applied by one VPMULLD (the sums reach
// 8 x 4 x 15 x 128, times a 6-bit scale: within int32), where AVX2 widens int16 sums by
// VPMADDWD against scale pairs. The same integers, so the same bits.
template <int K, int G>
SPITE_AVX_VNNI inline void q4_K_pair_sums(const std::byte* const* blk, const gguf::block_q8_K* const* x, int j,
                                          __m256i (&pair)[G][K]) {
  __m256i a0[G][K], a1[G][K];
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) a0[g][k] = a1[g][k] = _mm256_setzero_si256();
  }
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    __m256i lo[G], hi[G];
    for (int g = 0; g < G; ++g) q4_K_packed_chunk(blk[g], j, c, lo[g], hi[g]);
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const std::int8_t* x0 = x[k]->qs + 64 * j + 4 * c;
      const __m256i x_lo = _mm256_set1_epi32(load_u32(x0)), x_hi = _mm256_set1_epi32(load_u32(x0 + 32));
      for (int g = 0; g < G; ++g) {
        a0[g][k] = _mm256_dpbusd_avx_epi32(a0[g][k], lo[g], x_lo);
        a1[g][k] = _mm256_dpbusd_avx_epi32(a1[g][k], hi[g], x_hi);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    // Row r's scales of sub-blocks 2j and 2j + 1: bytes r and 8 + r.
    const std::byte* sc = blk[g] + q4_K_packed_scales + 16 * j;
    const __m256i s_lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
    const __m256i s_hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8)));
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) pair[g][k] = _mm256_add_epi32(_mm256_mullo_epi32(a0[g][k], s_lo), _mm256_mullo_epi32(a1[g][k], s_hi));
  }
}

#define SPITE_Q4K_PACKED_TARGET SPITE_AVX_VNNI
#include "simd_x86_q4k_packed.inc"
#undef SPITE_Q4K_PACKED_TARGET

// ---- Q8_0 in the file's layout (simd_x86_avx2.cpp's tiles, their float order): each block's
// quants flipped to unsigned on the fly (q ^ 0x80 = q + 128) and each lane started at
// q8_0_lane_corrections', one VPDPBUSD per row and block where AVX2 takes two sign flips,
// VPMADDUBSW and VPMADDWD.

// R rows (with Split R / 2 from o beside R / 2 from o2) against activation row t (decode_step).
template <int R, bool Split>
SPITE_AVX_VNNI void q8_0_decode(const weight& w, std::int64_t o, std::int64_t o2, const q8_0_batch& xb, const std::int32_t* corr,
                                std::int64_t nb, std::int64_t t, float* y) {
  const tile_rows<R, Split> at(o, o2, [&](std::int64_t r) { return w.row(r); }, w.row_bytes, nb);
  const gguf::block_q8_0* rows[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const gguf::block_q8_0*>(w.row(at.at[r]));
    acc[r] = _mm256_setzero_ps();
  }
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t == 0) at.step(b);
    const auto i = static_cast<std::size_t>(t * nb + b);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i)));
    const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(corr + 8 * i));
    const __m256 dx = _mm256_set1_ps(xb.d[i]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i wv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r][b].qs)), flip);
      const __m256i lanes = _mm256_dpbusd_avx_epi32(c, wv, xv);
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(rows[r][b].d)), dx), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[t * w.out + at.at[r]] = reduce8_vec(acc[r]);
}

// Rows o, o + 1 against 4 activation rows from t0, both rows in each vector (q8_0_tile_2x4).
SPITE_AVX_VNNI void q8_0_tile_2x4(const weight& w, std::int64_t o, const q8_0_batch& xb, const std::int32_t* corr, std::int64_t nb,
                                  std::int64_t t0, float* y, bool ahead) {
  const auto* row0 = reinterpret_cast<const gguf::block_q8_0*>(w.row(o));
  const auto* row1 = reinterpret_cast<const gguf::block_q8_0*>(w.row(o + 1));
  __m256 lo[4], hi[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_setzero_ps();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const next_group_prefetch next(w.row(o + 4), 2 * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (ahead) next.step(b);
    const __m256i wl = _mm256_xor_si256(
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(row1[b].qs), reinterpret_cast<const __m128i*>(row0[b].qs)), flip);
    const __m256i wh = _mm256_xor_si256(
        _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(row1[b].qs + 16), reinterpret_cast<const __m128i*>(row0[b].qs + 16)),
        flip);
    const __m256 dw = row_pair_scales(row0[b].d, row1[b].d);
    const __m256 dx = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(&xb.d_by_block[static_cast<std::size_t>(b * xb.tokens + t0)]));
    const __m256 scale = _mm256_mul_ps(dw, dx);  // [row 0 x act k | row 1 x act k], k = 0..3
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const auto i = static_cast<std::size_t>((t0 + k) * nb + b);
      const auto* xk = reinterpret_cast<const __m128i*>(xb.qs(i));
      const auto* ck = reinterpret_cast<const __m128i*>(corr + 8 * i);
      const __m256i xl = _mm256_broadcastsi128_si256(_mm_load_si128(xk));
      const __m256i xh = _mm256_broadcastsi128_si256(_mm_load_si128(xk + 1));
      // Lanes 0-3 of both rows start at the activation block's corrections 0-3, lanes 4-7 at 4-7.
      const __m256i cl = _mm256_broadcastsi128_si256(_mm_load_si128(ck));
      const __m256i ch = _mm256_broadcastsi128_si256(_mm_load_si128(ck + 1));
      const __m256 sk = lane_broadcast(scale, k);
      lo[k] = _mm256_fmadd_ps(sk, _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(cl, wl, xl)), lo[k]);
      hi[k] = _mm256_fmadd_ps(sk, _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(ch, wh, xh)), hi[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    y[(t0 + k) * w.out + o] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x20));
    y[(t0 + k) * w.out + o + 1] = reduce8_vec(_mm256_permute2f128_ps(lo[k], hi[k], 0x31));
  }
}

// Q6_K on the stored blocks (simd_x86_q6k_fused.inc): each group's pair sums times their
// scales added by one VPDPWSSD where AVX2 takes VPMADDWD and VPADDD.
SPITE_AVX_VNNI inline __m256i q6_K_group_lanes(__m256i lanes, __m256i q, __m256i x, __m256i scales) {
  return _mm256_dpwssd_avx_epi32(lanes, _mm256_maddubs_epi16(q, x), scales);
}

#define SPITE_Q6K_FUSED_TARGET SPITE_AVX_VNNI
#include "simd_x86_q6k_fused.inc"
#undef SPITE_Q6K_FUSED_TARGET

template <int K, bool Nl>
void q4_0_tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0, std::int64_t out, float* y) {
  q4_0_groups<K, 1, Nl>(&group, nb, xb, t0, out, &y);
}

constexpr q4_0_tiles k_q4_0{q4_0_tile<1, false>, q4_0_tile<4, false>, q4_0_groups<1, 2, false>, q4_0_groups<2, 2, false>,
                            q4_0_groups<3, 2, false>};
constexpr q4_0_tiles k_iq4_nl{q4_0_tile<1, true>, q4_0_tile<4, true>, q4_0_groups<1, 2, true>, q4_0_groups<2, 2, true>,
                              q4_0_groups<3, 2, true>};
constexpr q4_K_tiles k_q4_K{q4_K_packed_tile<1>, q4_K_packed_tile<4>, q4_K_packed_gemm4, q4_K_packed_tile_pair,
                            q4_K_packed_rows_pair<2>, q4_K_packed_rows_pair<3>};
constexpr q6_K_fused_tiles k_q6_K{q6_K_fused<4, 1>, q6_K_fused<1, 1>, q6_K_fused<1, 4>};

bool avx_vnni_in_use() {
  static const bool present = has_avx_vnni();
  return present && g_allowed.load(std::memory_order_relaxed);
}

}  // namespace

namespace x86 {
const q4_0_tiles* avx_vnni_q4_0_tiles() { return avx_vnni_in_use() ? &k_q4_0 : nullptr; }
const q4_0_tiles* avx_vnni_iq4_nl_tiles() { return avx_vnni_in_use() ? &k_iq4_nl : nullptr; }
const q4_K_tiles* avx_vnni_q4_K_tiles() { return avx_vnni_in_use() ? &k_q4_K : nullptr; }
const q6_K_fused_tiles* avx_vnni_q6_K_tiles() { return avx_vnni_in_use() ? &k_q6_K : nullptr; }
}  // namespace x86

namespace x86 {
bool matmul_q8_0_avx_vnni(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (!avx_vnni_in_use()) return false;
  const std::int64_t nb = w.in / qk0;
  aligned_vector<std::int32_t> corr;
  q8_0_lane_corrections(xb, nb, n_tokens, pool, corr);
  const std::int32_t* c = corr.data();
  if (n_tokens < 4) {
    by_row_pair_streams(
        w.out, n_tokens, pool,
        [&](std::int64_t o, std::int64_t o2, std::int64_t t) { q8_0_decode<4, true>(w, o, o2, xb, c, nb, t, y); },
        [&](std::int64_t o, std::int64_t t) { q8_0_decode<2, false>(w, o, 0, xb, c, nb, t, y); },
        [&](std::int64_t o, std::int64_t t) { q8_0_decode<1, false>(w, o, 0, xb, c, nb, t, y); });
    return true;
  }
  // Groups of 4 rows (two 2 x 4 tiles per 4 activation rows; a last partial group row by row).
  const std::size_t x_row_bytes = xb.row_bytes(nb) + static_cast<std::size_t>(nb) * 8 * sizeof(std::int32_t);
  const auto rows_alone = [&](std::int64_t o, std::int64_t t) {
    for (std::int64_t r = o; r < w.out; ++r) q8_0_decode<1, false>(w, r, 0, xb, c, nb, t, y);
  };
  by_groups_and_token_blocks((w.out + 3) / 4, n_tokens, token_block(x_row_bytes), pool,
                             [&](std::int64_t g, std::int64_t t0, std::int64_t t1) {
                               const std::int64_t o = 4 * g;
                               const bool whole = o + 4 <= w.out;
                               const auto four = [&](std::int64_t s) {
                                 if (!whole) {
                                   for (std::int64_t k = 0; k < 4; ++k) rows_alone(o, t0 + s + k);
                                   return;
                                 }
                                 for (int h = 0; h < 4; h += 2) {
                                   q8_0_tile_2x4(w, o + h, xb, c, nb, t0 + s, y, s == 0 && o + 4 + h + 2 <= w.out);
                                 }
                               };
                               const auto one = [&](std::int64_t s) {
                                 if (whole) {
                                   q8_0_decode<4, false>(w, o, 0, xb, c, nb, t0 + s, y);
                                 } else {
                                   rows_alone(o, t0 + s);
                                 }
                               };
                               by_token_tiles(t1 - t0, four, one);
                             });
  return true;
}
}  // namespace x86

bool has_avx_vnni_kernels() { return avx_vnni_in_use(); }
void set_avx_vnni(bool allowed) noexcept { g_allowed = allowed; }

}  // namespace spite::dispatch::cpu

#else

namespace spite::dispatch::cpu {
bool has_avx_vnni_kernels() { return false; }
void set_avx_vnni(bool) noexcept {}
}  // namespace spite::dispatch::cpu

#endif
