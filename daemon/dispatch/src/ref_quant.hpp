// Matmuls against quantized weights that reproduce the reference engine's results bit for bit:
// activations quantized as its vector code quantizes them, integer block sums in its lane
// layout, and its reduction order. Each group of weight types lives in its own file and
// registers full matmul functions here.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/blocks.hpp"

namespace spite::dispatch::cpu {

using matmul_fn = void (*)(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

struct exact_matmul {
  gguf::tensor_type type;
  matmul_fn fn;
};

// The groups (ref_dot_*.cpp); each returns the types it implements.
std::span<const exact_matmul> exact_matmuls_legacy();   // Q8_0, Q4_1, Q5_0, Q5_1
std::span<const exact_matmul> exact_matmuls_kquants();  // Q3_K, Q5_K, Q6_K
std::span<const exact_matmul> exact_matmuls_iquants();  // IQ1_S .. IQ4_XS, TQ1_0, TQ2_0
std::span<const exact_matmul> exact_matmuls_repack();   // Q4_0, IQ4_NL, Q4_K, Q2_K (repacked layouts)

// SIMD versions of some of them with bit-identical results, for the processor we run on (empty
// where it lacks the instructions): simd_x86_avx2.cpp.
std::span<const exact_matmul> fast_matmuls();
// Whether the AVX-512 VNNI variants are in use, and a switch for tests (both paths must give
// the reference's bits) and for comparing them: simd_x86_avx512.cpp.
bool has_avx512_kernels();
void set_avx512(bool allowed) noexcept;
// Whether the AVX-512 kernels that also need VBMI take their VBMI forms (IQ4_XS's 16-row
// decode), and a switch for tests: simd_x86_avx512.cpp.
bool has_avx512_vbmi_kernels();
void set_avx512_vbmi(bool allowed) noexcept;
// The fetch distances the AVX-512 decode kernels take here ("default", "zen4", ...:
// simd_x86_fetch_ahead.cpp); empty on other processors.
const char* avx512_decode_fetch() noexcept;
// Whether the grid i-quants' one-row dots run with AVX-512 VBMI (set_avx512 switches them too):
// simd_x86_iquant_grid_avx512.cpp.
bool has_avx512_grid_kernels();
// The same for the AVX-VNNI variants (256-bit VPDPBUSD, where AVX-512 is absent or set aside):
// simd_x86_avx_vnni.cpp.
bool has_avx_vnni_kernels();
void set_avx_vnni(bool allowed) noexcept;
// Repacks `w` for those kernels where they have a packed layout; the bytes allocated, or 0.
std::size_t pack_weight(weight& w);

// The exact matmul for a weight type, or null (the generic dequantize-and-dot path is used):
// the fast one where this processor has one, else the reference.
matmul_fn find_exact_matmul(gguf::tensor_type type);
// The reference (portable, scalar) implementation only; tests compare the fast ones with it.
matmul_fn find_reference_matmul(gguf::tensor_type type);

// ---- shared pieces

// Activations to Q8_0 blocks as the reference's AVX2 code does: scale 127 / amax, round to
// nearest even, d stored as f16.
void quantize_act_q8_0(const float* x, gguf::block_q8_0* out, std::int64_t n);
// Activations to Q8_1 blocks as the reference's AVX2 code does: Q8_0's quants, plus
// s = fp16(d * sum(qs)) with the unrounded float d.
void quantize_act_q8_1(const float* x, gguf::block_q8_1* out, std::int64_t n);
// Activations to Q8_K blocks (the reference's scalar quantizer: -127 / signed max).
void quantize_act_q8_K(const float* x, gguf::block_q8_K* out, std::int64_t n);
// Its 4-row GEMM quantizer (quantize_mat_q8_K_4x8), one row: the scale's sign is - when +amax
// occurs in the block, rounding to nearest even, quants clamped to [-128, 127].
void quantize_act_q8_K_4x8(const float* x, gguf::block_q8_K* out, std::int64_t n);
void quantize_act_q8_K_4x8_scalar(const float* x, gguf::block_q8_K* out, std::int64_t n);
// SIMD versions of the two (the same bytes); null where the processor lacks them.
using q8_K_quantizer = void (*)(const float* x, gguf::block_q8_K* out, std::int64_t n);
q8_K_quantizer simd_q8_K_quantizer(bool four_row_rule);

// The repacked types' split of a batch: the first gemm_rows(n) activation rows take the GEMM
// kernel (and, for Q8_K, the 4-row quantizer), the rest the GEMV kernel.
std::int64_t gemm_rows(std::int64_t n_tokens);
// fn(t) for every activation row t of a batch: across the pool for batches of 8 rows or more
// (each row's result does not depend on the thread that computes it), on the calling thread
// for fewer, where the hand-off would cost more than the rows.
template <class Fn>
void for_each_token(std::int64_t n_tokens, thread_pool& pool, const Fn& fn) {
  if (n_tokens < 8 || pool.size() < 2) {
    for (std::int64_t t = 0; t < n_tokens; ++t) fn(t);
    return;
  }
  pool.parallel_for(n_tokens, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t t = begin; t < end; ++t) fn(t);
  });
}
// Activations of a Q4_K / Q2_K matmul quantized as the repacked path (`repacked`) or the vector
// dot product quantizes them.
void quantize_rows_q8_K(const weight& w, const float* x, std::int64_t n_tokens, bool repacked,
                        std::vector<gguf::block_q8_K>& xq, thread_pool& pool);
// Activation rows of `in` elements quantized as the vector dot product quantizes them (Q8_K).
void quantize_tokens_q8_K(const float* x, std::int64_t in, std::int64_t n_tokens, std::vector<gguf::block_q8_K>& xq,
                          thread_pool& pool);

// The 16 signed 6-bit scales of a Q3_K super-block: low 4 bits in bytes 0..7 (two per byte),
// high 2 bits in bytes 8..11, minus 32.
inline void q3_K_scales(const std::uint8_t* packed, std::int8_t* sc) {
  std::uint32_t aux[3];
  std::memcpy(aux, packed, 12);
  constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  const std::uint32_t s[4] = {
      (aux[0] & kmask2) | (((aux[2] >> 0) & kmask1) << 4),
      (aux[1] & kmask2) | (((aux[2] >> 2) & kmask1) << 4),
      ((aux[0] >> 4) & kmask2) | (((aux[2] >> 4) & kmask1) << 4),
      ((aux[1] >> 4) & kmask2) | (((aux[2] >> 6) & kmask1) << 4),
  };
  for (int j = 0; j < 16; ++j) sc[j] = static_cast<std::int8_t>(static_cast<int>((s[j / 4] >> (8 * (j % 4))) & 0xff) - 32);
}

// Horizontal sums in the order of the AVX / AVX-512 reductions.
inline float reduce8(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// Runs `dot(row, token)` for every output row and token, rows split over the pool.
template <class Dot>
void for_each_output(std::int64_t out, std::int64_t n_tokens, float* y, thread_pool& pool, const Dot& dot) {
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int) {
    for (std::int64_t o = begin; o < end; ++o) {
      for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot(o, t);
    }
  });
}

}  // namespace spite::dispatch::cpu
