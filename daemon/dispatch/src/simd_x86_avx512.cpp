// AVX-512 VNNI versions of kernels in simd_x86_kquants.cpp, for processors that have it (Intel
// since Ice Lake, AMD since Zen 4). VPDPBUSD adds four u8 x s8 products into each int32 lane
// without the int16 step, and a 512-bit register holds two 32-byte chunks of a packed group, so
// the integer work takes about half the instructions. The integer sums are exact either way and
// the float operations are those of the AVX2 kernel, so the bits are the same.

#include "simd_x86_avx512.hpp"
#include "simd_x86_q4_0_layout.hpp"

#if defined(__x86_64__)
#include <atomic>
#include <cstdlib>
#include <string_view>


namespace spite::dispatch::cpu {
namespace {

using namespace x86;

// SPITE_CPU_AVX512=0 keeps the AVX2 kernels on a processor that has AVX-512, so the two can be
// timed against each other on one machine (the results are the same bits either way).
bool avx512_wanted() {
  const char* env = std::getenv("SPITE_CPU_AVX512");
  return env == nullptr || std::string_view(env) != "0";
}

std::atomic<bool> g_allowed{avx512_wanted()};
std::atomic<bool> g_vbmi_allowed{true};

// Sub-block pair j of a packed Q4_K block: its 8 chunks unpacked two per register (chunks 2c
// and 2c + 1 in register c) and the 8 rows' scales of its two sub-blocks.
struct q4_K_pair {
  __m512i lo[4], hi[4];
  __m256i s_lo, s_hi;
  SPITE_AVX512 q4_K_pair(const std::byte* blk, int j) {
    const __m512i m = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(blk + q4_K_packed_quants + 256 * j + 64 * c);
      lo[c] = _mm512_and_si512(v, m);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    }
    const auto* sc = reinterpret_cast<const std::uint8_t*>(blk + q4_K_packed_scales) + 16 * j;
    std::int64_t s_lo64, s_hi64;
    std::memcpy(&s_lo64, sc, 8);
    std::memcpy(&s_hi64, sc + 8, 8);
    s_lo = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(s_lo64));
    s_hi = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(s_hi64));
  }
  // One activation row's sums of the pair, each sub-block's times its scale (rows as lanes).
  // pick[c]: lanes 0..7 take activation dword 2c, lanes 8..15 dword 2c + 1.
  SPITE_AVX512 __m256i scaled_sums(const gguf::block_q8_K& x, int j, const __m512i* pick) const {
    const __m512i x0 = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * j)));
    const __m512i x1 = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * j + 32)));
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      a0 = _mm512_dpbusd_epi32(a0, lo[c], _mm512_permutexvar_epi32(pick[c], x0));
      a1 = _mm512_dpbusd_epi32(a1, hi[c], _mm512_permutexvar_epi32(pick[c], x1));
    }
    // Each row's two halves (even and odd chunks) added: the sub-block sums of 2j and 2j + 1.
    const __m256i sum0 = _mm256_add_epi32(_mm512_castsi512_si256(a0), _mm512_extracti64x4_epi64(a0, 1));
    const __m256i sum1 = _mm256_add_epi32(_mm512_castsi512_si256(a1), _mm512_extracti64x4_epi64(a1, 1));
    return _mm256_add_epi32(_mm256_mullo_epi32(sum0, s_lo), _mm256_mullo_epi32(sum1, s_hi));
  }
};

SPITE_AVX512 inline void dword_pair_picks(__m512i* pick) {
  for (int c = 0; c < 4; ++c) {
    pick[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * c)), _mm256_set1_epi32(2 * c + 1), 1);
  }
}

template <int K>
SPITE_AVX512 void q4_K_tile(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                            std::int64_t ng, std::int64_t out, float* y) {
  __m512i pick[4];
  dword_pair_picks(pick);
  q4_K_row_acc a[K];
  for (auto& r : a) r = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * q4_K_packed_block;
  const next_group_prefetch ahead(group + group_bytes, group_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * q4_K_packed_block;
    const auto* mn = reinterpret_cast<const std::uint8_t*>(blk + q4_K_packed_mins);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
    q4_K_x_terms terms[K];
    for (int k = 0; k < K; ++k) q4_K_terms(xq[(t0 + k) * nb + b], dw, dmw, terms[k]);
    for (int j = 0; j < 4; ++j) {
      const q4_K_pair p(blk, j);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mn + 16 * j)));
      for (int k = 0; k < K; ++k) {
        q4_K_add_pair(a[k], t0 + k < ng, p.scaled_sums(xq[(t0 + k) * nb + b], j, pick), mins, terms[k], j);
      }
    }
    for (int k = 0; k < K; ++k) q4_K_end_block(a[k], t0 + k < ng, terms[k]);
  }
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out, _mm256_sub_ps(a[k].acc, a[k].acc_min));
}

// Four activation rows that all take the GEMM's float order, as q4_K_packed_gemm4 in
// simd_x86_kquants.cpp: a block's min terms first, then each sub-block pair's sums straight
// into the accumulators, which stay in registers (the general tile above carries both orders'
// accumulators and keeps them on the stack: 18 % of its samples in decode of 4 sequences).
SPITE_AVX512 void q4_K_gemm4(const std::byte* group, std::int64_t nb, const gguf::block_q8_K* xq, std::int64_t t0,
                             std::int64_t out, float* y) {
  __m512i pick[4];
  dword_pair_picks(pick);
  __m256 acc[4], acc_min[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) acc[k] = acc_min[k] = _mm256_setzero_ps();
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * q4_K_packed_block;
  const next_group_prefetch ahead(group + group_bytes, group_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    const std::byte* blk = group + static_cast<std::size_t>(b) * q4_K_packed_block;
    const gguf::block_q8_K* x[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) x[k] = &xq[(t0 + k) * nb + b];
    const q4_K_gemm4_terms terms(blk, x);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) terms.add_min(blk, j, acc_min);
    for (int j = 0; j < 4; ++j) {
      const q4_K_pair p(blk, j);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p.scaled_sums(*x[k], j, pick)), terms.ds[k], acc[k]);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + (t0 + k) * out, _mm256_sub_ps(acc[k], acc_min[k]));
}

// Q4_0 packed (layout in simd_x86.hpp): chunk pairs (0, 1) and (2, 3) per register. With `Nl`,
// IQ4_NL in the same layout: each nibble looked up as its value + 128 (1..241, unsigned for
// VPDPBUSD), the offset 128 x sum(x) taken off as Q4_0's 8 x sum(x) is; the reference's
// repacked IQ4_NL does Q4_0's float work, so only the exact block sums differ in how they form.
template <int K, bool Nl = false>
SPITE_AVX512 void q4_0_tile(const std::byte* group, std::int64_t nb, const q8_0_batch& xb, std::int64_t t0,
                            std::int64_t out, float* y) {
  const __m512i m = _mm512_set1_epi8(0x0F);
  [[maybe_unused]] const __m512i table = Nl ? iq4_nl_values_plus_128() : _mm512_setzero_si512();
  // Low nibbles of chunks 2c, 2c + 1 pair with activation dwords 2c, 2c + 1; high nibbles with
  // dwords 4 + 2c, 4 + 2c + 1.
  __m512i pick_lo[2], pick_hi[2];
  for (int c = 0; c < 2; ++c) {
    pick_lo[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * c)), _mm256_set1_epi32(2 * c + 1), 1);
    pick_hi[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(4 + 2 * c)), _mm256_set1_epi32(5 + 2 * c), 1);
  }
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * q4_0_packed_block;
  const next_group_prefetch ahead(group + group_bytes, group_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0 && K > 1) ahead.step(b);
    if (t0 == 0 && K == 1) {
      // Decode: the bytes 32 blocks (4.5 KB) ahead, in this group or the next. Fetching the
      // next group at the same pace instead, Q4_0:5632:2048 from memory, three rounds
      // interleaved: two threads 36-42 GB/s against 48-50 (one thread 22-30 against 29-30).
      const std::size_t begin = static_cast<std::size_t>(b + 32) * q4_0_packed_block;
      for (std::size_t off = begin & ~std::size_t{63}; off < begin + q4_0_packed_block; off += 64) prefetch_l1(group + off);
    }
    const std::byte* blk = group + static_cast<std::size_t>(b) * q4_0_packed_block;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    __m512i lo[2], hi[2];
    for (int c = 0; c < 2; ++c) {
      const __m512i v = _mm512_loadu_si512(blk + 16 + 64 * c);
      lo[c] = _mm512_and_si512(v, m);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
      if constexpr (Nl) {
        lo[c] = _mm512_shuffle_epi8(table, lo[c]);
        hi[c] = _mm512_shuffle_epi8(table, hi[c]);
      }
    }
    for (int k = 0; k < K; ++k) {
      const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
      const __m512i x = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i))));
      __m512i a = _mm512_setzero_si512();
      for (int c = 0; c < 2; ++c) {
        a = _mm512_dpbusd_epi32(a, lo[c], _mm512_permutexvar_epi32(pick_lo[c], x));
        a = _mm512_dpbusd_epi32(a, hi[c], _mm512_permutexvar_epi32(pick_hi[c], x));
      }
      // sum((q - 8) * x) = sum(q * x) - 8 * sum(x); IQ4_NL: - 128 * sum(x)
      const __m256i isum = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1)),
                                            _mm256_set1_epi32(Nl ? 16 * xb.sum8[i] : xb.sum8[i]));
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d[i])), acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) _mm256_storeu_ps(y + (t0 + k) * out, acc[k]);
}

// Q8_0, 4 rows x 2P activation rows: two activation rows per register (one per 256-bit half),
// each weight block broadcast to both halves. VPDPBUSD takes one unsigned operand: the
// activations go in as x + 128 and the accumulator starts at -128 * (sum of the weights of each
// lane), so the int32 lanes are exactly the sums of x * w the reference forms.
template <int P>
SPITE_AVX512 void q8_0_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const gguf::block_q8_0* rows[4];
  for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const gguf::block_q8_0*>(w.row(o + r));
  __m512 acc[4][P];
  for (auto& row : acc) {
    for (auto& a : row) a = _mm512_setzero_ps();
  }
  const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t b = 0; b < nb; ++b) {
    __m512i x2[P];
    __m512 dx2[P];
    for (int p = 0; p < P; ++p) {
      const std::size_t i0 = static_cast<std::size_t>((t0 + 2 * p) * nb + b), i1 = i0 + static_cast<std::size_t>(nb);
      const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i0)))),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs(i1))), 1);
      x2[p] = _mm512_xor_si512(x, bias);  // x + 128 as unsigned bytes
      dx2[p] = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(xb.d[i0]))),
                                                   _mm256_castps_pd(_mm256_set1_ps(xb.d[i1])), 1));
    }
    for (int r = 0; r < 4; ++r) {
      const __m512i wv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r][b].qs)));
      const __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, wv));  // -128 * sum(w) per lane
      const __m512 dw = _mm512_set1_ps(_cvtsh_ss(rows[r][b].d));
      for (int p = 0; p < P; ++p) {
        const __m512i lanes = _mm512_dpbusd_epi32(start, x2[p], wv);
        acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx2[p]), _mm512_cvtepi32_ps(lanes), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < P; ++p) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][p]);
      y[(t0 + 2 * p) * w.out + o + r] = reduce8(lanes);
      y[(t0 + 2 * p + 1) * w.out + o + r] = reduce8(lanes + 8);
    }
  }
}

bool has_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

constexpr x86::q4_K_tiles k_q4_K{q4_K_tile<1>, q4_K_tile<4>, q4_K_gemm4};
constexpr x86::q4_0_tiles k_q4_0{q4_0_tile<1>, q4_0_tile<4>};
constexpr x86::q4_0_tiles k_iq4_nl{q4_0_tile<1, true>, q4_0_tile<4, true>};

}  // namespace

namespace x86 {
const q4_K_tiles* avx512_q4_K_tiles() {
  static const bool present = has_avx512_vnni();
  return present && g_allowed.load(std::memory_order_relaxed) ? &k_q4_K : nullptr;
}
const q4_0_tiles* avx512_q4_0_tiles() { return avx512_q4_K_tiles() != nullptr ? &k_q4_0 : nullptr; }
const q4_0_tiles* avx512_iq4_nl_tiles() { return avx512_q4_K_tiles() != nullptr ? &k_iq4_nl : nullptr; }
const q8_0_tiles* avx512_q8_0_tiles() {
  static constexpr q8_0_tiles tiles{q8_0_tile<4>, q8_0_tile<2>};
  return avx512_q4_K_tiles() != nullptr ? &tiles : nullptr;
}
bool avx512_allowed() { return g_allowed.load(std::memory_order_relaxed); }
bool avx512_vbmi_kernels() {
  static const bool present = has_avx512_vnni() && __builtin_cpu_supports("avx512vbmi");
  return present && g_vbmi_allowed.load(std::memory_order_relaxed) && avx512_q4_K_tiles() != nullptr;
}
}  // namespace x86

bool has_avx512_kernels() { return x86::avx512_q4_K_tiles() != nullptr; }
void set_avx512(bool allowed) noexcept { g_allowed = allowed; }
bool has_avx512_vbmi_kernels() { return x86::avx512_vbmi_kernels(); }
void set_avx512_vbmi(bool allowed) noexcept { g_vbmi_allowed = allowed; }
const char* avx512_decode_fetch() noexcept { return x86::decode_fetch_profile(); }

}  // namespace spite::dispatch::cpu

#else

namespace spite::dispatch::cpu {
bool has_avx512_kernels() { return false; }
void set_avx512(bool) noexcept {}
bool has_avx512_vbmi_kernels() { return false; }
void set_avx512_vbmi(bool) noexcept {}
const char* avx512_decode_fetch() noexcept { return ""; }
}  // namespace spite::dispatch::cpu

#endif
