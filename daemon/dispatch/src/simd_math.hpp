// SIMD twins of scalar pieces of the reference ops (cpu_attention.cpp, cpu_flash_attention.cpp,
// cpu_ops.cpp) that give the same bits: the 16-lane f16 dot product, f16 widening and rounding,
// the vector exp of a 16-key chunk, SwiGLU over 16 elements, f16 accumulators and the
// fused-multiply-add GEMM of flash attention's tiles: AVX2 / FMA / F16C in simd_x86_math.cpp
// (null where the processor lacks them), NEON in simd_arm_neon_math.cpp.
#pragma once

#include <cstdint>

namespace spite::dispatch::cpu {

// Entries of a `keys` list past `count` that the attention kernels may read (to fetch the rows
// of keys ahead; only fetched, never used): the caller pads the list.
inline constexpr std::int64_t key_lookahead = 32;

struct simd_math {
  // 16 lane sums of products (no fused multiply-add), reduced as reduce16; n % 16 == 0.
  float (*dot16)(const float* a, const float* b, std::int64_t n);
  // The same with `a` given as f16 (widened on the way).
  float (*dot16_h)(const std::uint16_t* a, const float* b, std::int64_t n);
  // acc[i] += p * v[i] (the product exact, as f16 values times an f16-rounded p are), v as f16.
  void (*axpy_h)(float* acc, const std::uint16_t* v, float p, std::int64_t n);
  void (*widen)(const std::uint16_t* h, float* out, std::int64_t n);      // f16 -> f32
  void (*round_f16)(const float* in, float* out, std::int64_t n);          // f32 -> f16 -> f32
  // chunk[l] = ref_expf(chunk[l] - max), l < 16; returns reduce16(chunk) of the results, in its
  // order, summed while they are still in registers.
  float (*exp16)(float* chunk, float max);
  // h[l] = g[l] / (1 + ref_expf(-g[l])) * u[l], l < 16 (ref_silu on a vector lane)
  void (*swiglu16)(const float* g, const float* u, float* h);

  // Flash attention's pieces (cpu_flash_attention.cpp):
  // The reference's f16 vector dot product: 64-element blocks summed in four groups of 16
  // lanes, the groups folded (0+2, 1+3, then the two) and reduced as reduce16, the rest added
  // in double. `a` f16, `b` f16-valued floats, so every product is exact.
  float (*dot_f16_blocks)(const std::uint16_t* a, const float* b, std::int64_t n);
  // out[i] = dot_f16_blocks(rows + keys[i] * stride, b, n) for i < count: the scores of a run
  // of cached keys, with the calls' bits.
  void (*dot_f16_rows)(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                       const float* b, std::int64_t n, float* out);
  // y[i] = expf(x[i]) as the C library computes it (glibc's algorithm: a 32-entry table of
  // 2^(i/32) and a cubic in double, rounded once to float), for x[i] <= 0 or -inf.
  void (*exp_nonpositive)(const float* x, float* y, std::int64_t n);
  // The f16 accumulator of the online softmax over n keys, out[d] its value widened: starting
  // from out[d] (0 for the first keys; an f16 value, as a previous call left it, to go on with
  // later keys), for each key i in order, acc = f16(acc * rescale[i]) when rescale[i] != 1,
  // then acc = f16(fma(v, weight[i], acc)) with v the f16 row at values + keys[i] * stride.
  // Returns the softmax denominator, sum = fma(sum, rescale[i], weight[i]) in key order from
  // the `sum` given.
  float (*accumulate_f16)(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                          const float* weight, const float* rescale, std::int64_t n, std::int64_t dv, float sum);
  // c[m x n] += a[m x k] b[k x n], row-major; each element one chain of fused multiply-adds
  // in k order, starting from its value in c.
  void (*gemm_acc)(float* c, const float* a, const float* b, std::int64_t m, std::int64_t k, std::int64_t n);
  // accumulate_f16 for `heads` heads over the same keys and values: head h's accumulator at
  // out + h * dv, its weights and rescales at weight / rescale + h * w_stride, its denominator
  // in and out of sums[h]. Null: call accumulate_f16 per head.
  void (*accumulate_f16_heads)(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                               const float* weight, const float* rescale, std::int64_t w_stride, std::int64_t n,
                               std::int64_t dv, float* sums, std::int64_t heads) = nullptr;
  // dot_f16_rows for `heads` queries (b + h * n) over the same keys: out[h * out_stride + i].
  // Null: call dot_f16_rows per head.
  void (*dot_f16_rows_heads)(const std::uint16_t* rows, std::int64_t stride, const std::int32_t* keys, std::int64_t count,
                             const float* b, std::int64_t n, float* out, std::int64_t out_stride, std::int64_t heads) = nullptr;
  // online_max_scalar's pass (below), with its bits. Null: the scalar one.
  float (*online_max)(float* weight, float* rescale, std::int64_t n, float scale, float max) = nullptr;
  // RoPE's rotation of n_head heads (head_dim apart from x) by one position: pair p of a head
  // (elements 2p, 2p + 1, or p, p + n_dims / 2 with neox) by c = cos_sin[2p], s = cos_sin[2p + 1]
  // as x0' = fma(x0, c, -(x1 s)), x1' = fma(x0, s, x1 c), the products rounded as written.
  // Null: cpu_ops.cpp's scalar loop.
  void (*rope_heads)(float* x, std::int64_t n_head, std::int64_t head_dim, const float* cos_sin, std::int64_t n_dims,
                     bool neox) = nullptr;
  // A flash-attention tile row of n scores (n % 16 == 0; cpu_flash_attention.cpp attend_tile):
  // s[j] *= scale, then -inf where `visible` is given and visible[j] == 0; returns the largest
  // (for scores that are not NaN the value largest_score gives: of +0 and -0 either). Null: the
  // scalar loops.
  float (*scale_mask_max)(float* s, std::int64_t n, float scale, const std::uint8_t* visible) = nullptr;
  // s[j] = ref_expf(s[j] - max), n % 16 == 0, returning the exp16 sums of its chunks added in
  // order in double. Null: exp16 per chunk.
  double (*exp_row)(float* s, std::int64_t n, float max) = nullptr;
  // swiglu16 over n elements (n % 16 == 0), chunk by chunk: the same bits. Null: swiglu16 per
  // chunk.
  void (*swiglu_row)(const float* g, const float* u, float* h, std::int64_t n) = nullptr;
  // RMS norm's sums of squares of 4 rows (`stride` floats apart) of n elements: sums[k] the
  // double sum of the float products x[i] * x[i], added in order i = 0, 1, ... as the reference
  // does. Null: cpu_ops.cpp's scalar loop.
  void (*sum_squares4)(const float* x, std::int64_t stride, std::int64_t n, double* sums) = nullptr;
};

// The online softmax's pass over a head's n raw scores (in weight), from the running maximum
// `max`: s = weight[i] * scale; where s exceeds the maximum so far, rescale[i] = expf(max - s)
// (the C library's), weight[i] = 0 and s is the new maximum; elsewhere rescale[i] = 1 and
// weight[i] = s - max. Returns the maximum after the last key (cpu_flash_attention.cpp).
float online_max_scalar(float* weight, float* rescale, std::int64_t n, float scale, float max);

const simd_math* fast_math();

// simd_math::accumulate_f16's scalar definition for the dimensions [d0, dv) (the SIMD ones
// finish their tails with it), returning the denominator (cpu_flash_attention.cpp).
float accumulate_f16_scalar(float* out, const std::uint16_t* values, std::int64_t stride, const std::int32_t* keys,
                            const float* weight, const float* rescale, std::int64_t n, std::int64_t d0, std::int64_t dv,
                            float sum);

}  // namespace spite::dispatch::cpu
