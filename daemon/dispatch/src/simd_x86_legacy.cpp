// AVX2 versions of the Q5_0, Q4_1 and Q5_1 matmuls (the contract of simd_x86_avx2.cpp: the
// reference's exact integer sums and float operations, so the same bits). References in
// ref_dot_legacy.cpp:
// * Q5_0 (dot_q5_0): Q8_0 activations, the signed quants (q5 - 16), 8 lanes of 4 products per
//   block, one fma per block with d_w * d_x.
// * Q4_1 / Q5_1 (dot_q4_1_q5_1): Q8_1 activations, the unsigned quants, the same 8 lanes, and
//   the min term m_w * s_x as a scalar chain of fmas added after the lane reduction.
// Both run R weight rows x K activation rows per tile, each block unpacked in registers once
// for the K activation rows.
#include "simd_x86.hpp"

#if defined(__x86_64__)
#include <cmath>
#include <type_traits>
#include <vector>

namespace spite::dispatch::cpu::x86 {
namespace {

// 0xFF in byte i where bit i of `bits` is set.
SPITE_AVX2 inline __m256i bytes_from_bits(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all but bit i % 8
  return _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1));
}

// The 32 unsigned quants of a block in element order (low nibbles, then high), with the fifth
// bit from qh for the 5-bit types.
template <class Block>
SPITE_AVX2 inline __m256i unsigned_quants(const Block& b) {
  const __m256i nib = nibbles32(b.qs);
  if constexpr (std::is_same_v<Block, gguf::block_q4_1>) {
    return nib;
  } else {
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    return _mm256_or_si256(nib, _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)));
  }
}

// ---- Q5_0

template <int R, int K>
SPITE_AVX2 void q5_0_tile(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const gguf::block_q5_0* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const gguf::block_q5_0*>(w.row(o + r));
  __m256 acc[R][K];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) acc[r][k] = _mm256_setzero_ps();
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    for (int r = 0; r < R; ++r) {
      const __m256i q = _mm256_sub_epi8(unsigned_quants(rows[r][b]), _mm256_set1_epi8(16));
      const __m256i qabs = _mm256_sign_epi8(q, q);
      const float dw = _cvtsh_ss(rows[r][b].d);
      for (int k = 0; k < K; ++k) {
        const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
        const __m256i lanes = dot_lanes(qabs, _mm256_sign_epi8(xv, q));
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d[i]), _mm256_cvtepi32_ps(lanes), acc[r][k]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8_vec(acc[r][k]);
  }
}

template <int R>
void q5_0_rows(const weight& w, std::int64_t o, const q8_0_batch& xb, std::int64_t nb, std::int64_t n_tokens, float* y) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) q5_0_tile<R, 4>(w, o, xb, nb, t, y);
  for (; t < n_tokens; ++t) q5_0_tile<R, 1>(w, o, xb, nb, t, y);
}

// ---- Q4_1 / Q5_1

struct q8_1_batch {
  std::vector<gguf::block_q8_1> q;
  std::vector<float> d, s;
  q8_1_batch(const float* x, std::int64_t in, std::int64_t n_tokens) {
    const std::int64_t nb = in / qk0;
    q.resize(static_cast<std::size_t>(nb * n_tokens));
    d.resize(q.size());
    s.resize(q.size());
    for (std::int64_t t = 0; t < n_tokens; ++t) quantize_act_q8_1(x + t * in, q.data() + t * nb, in);
    for (std::size_t i = 0; i < q.size(); ++i) {
      d[i] = fp16_to_fp32(q[i].d);
      s[i] = fp16_to_fp32(q[i].s);
    }
  }
};

template <class Block, int R, int K>
SPITE_AVX2 void q_1_tile(const weight& w, std::int64_t o, const q8_1_batch& xb, std::int64_t nb, std::int64_t t0, float* y) {
  const Block* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w.row(o + r));
  __m256 acc[R][K];
  float summs[R][K];
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) {
      acc[r][k] = _mm256_setzero_ps();
      summs[r][k] = 0.0f;
    }
  }
  const next_group_prefetch ahead(w.row(o + R), R * w.row_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    if (t0 == 0) ahead.step(b);
    for (int r = 0; r < R; ++r) {
      const __m256i q = unsigned_quants(rows[r][b]);
      const float dw = _cvtsh_ss(rows[r][b].d), mw = _cvtsh_ss(rows[r][b].m);
      for (int k = 0; k < K; ++k) {
        const std::size_t i = static_cast<std::size_t>((t0 + k) * nb + b);
        summs[r][k] = std::fma(mw, xb.s[i], summs[r][k]);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.q[i].qs));
        acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d[i]), _mm256_cvtepi32_ps(dot_lanes(q, xv)), acc[r][k]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = 0; k < K; ++k) y[(t0 + k) * w.out + o + r] = reduce8_vec(acc[r][k]) + summs[r][k];
  }
}

template <class Block, int R>
void q_1_rows(const weight& w, std::int64_t o, const q8_1_batch& xb, std::int64_t nb, std::int64_t n_tokens, float* y) {
  std::int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) q_1_tile<Block, R, 4>(w, o, xb, nb, t, y);
  for (; t < n_tokens; ++t) q_1_tile<Block, R, 1>(w, o, xb, nb, t, y);
}

// Rows in groups of 4 over the pool; the last partial group one row at a time.
template <class Rows4, class Rows1>
void by_row_groups(const weight& w, thread_pool& pool, const Rows4& rows4, const Rows1& rows1) {
  pool.parallel_for((w.out + 3) / 4, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t g = begin; g < end; ++g) {
      const std::int64_t o = 4 * g;
      if (o + 4 <= w.out) {
        rows4(o);
      } else {
        for (std::int64_t r = o; r < w.out; ++r) rows1(r);
      }
    }
  });
}

template <class Block>
void matmul_q_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_1_batch xb(x, w.in, n_tokens);
  by_row_groups(
      w, pool, [&](std::int64_t o) { q_1_rows<Block, 4>(w, o, xb, nb, n_tokens, y); },
      [&](std::int64_t o) { q_1_rows<Block, 1>(w, o, xb, nb, n_tokens, y); });
}

}  // namespace

void matmul_q5_0(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t nb = w.in / qk0;
  const q8_0_batch xb(x, w.in, n_tokens);
  by_row_groups(
      w, pool, [&](std::int64_t o) { q5_0_rows<4>(w, o, xb, nb, n_tokens, y); },
      [&](std::int64_t o) { q5_0_rows<1>(w, o, xb, nb, n_tokens, y); });
}
void matmul_q4_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_q_1<gguf::block_q4_1>(w, x, n_tokens, y, pool);
}
void matmul_q5_1(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  matmul_q_1<gguf::block_q5_1>(w, x, n_tokens, y, pool);
}

}  // namespace spite::dispatch::cpu::x86

#endif
