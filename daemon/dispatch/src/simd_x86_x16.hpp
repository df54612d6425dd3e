// The 16-row layouts of the AVX-512 VNNI kernels (simd_x86_*_x16.cpp). Each pack_*_x16 lays a
// matrix out in groups of 16 rows (weight::packed_rows 16) where those kernels run and the row
// count is a multiple of 16, and returns 0, having done nothing, otherwise (the type's 8- or
// 4-row layout, if it has one, is made instead). Each matmul_*_x16 multiplies such a matrix
// from that layout alone and returns false, having done nothing, when the kernels stand aside
// (set_avx512(false)): the caller then takes the file's layout. Internal to spite::dispatch;
// x86-64 only.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {

// Against Q8_K activations (IQ4_XS: in the plain element order; Q4_K / Q2_K: `ng` GEMM rows
// first, as ref_dot_repack.cpp splits a batch).
std::size_t pack_q2_K_x16(weight& w);
std::size_t pack_q3_K_x16(weight& w);
std::size_t pack_q4_K_x16(weight& w);
std::size_t pack_q5_K_x16(weight& w);
std::size_t pack_q6_K_x16(weight& w);
std::size_t pack_iq4_xs_x16(weight& w);
bool matmul_q2_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                     thread_pool& pool);
bool matmul_q3_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
bool matmul_q4_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, std::int64_t ng, float* y,
                     thread_pool& pool);
bool matmul_q5_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
bool matmul_q6_K_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
bool matmul_iq4_xs_x16(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);

// MXFP4 (simd_x86_mxfp4_x16.cpp), against Q8_0 activations.
std::size_t pack_mxfp4_x16(weight& w);
bool matmul_mxfp4_x16(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, float* y, thread_pool& pool);

// Q4_0 and IQ4_NL (`nl`) share one layout and tile (simd_x86_q4_0_x16.cpp), against Q8_0
// activations.
std::size_t pack_q4_0_x16(weight& w);
std::size_t pack_iq4_nl_x16(weight& w);
bool matmul_q4_0_x16(const weight& w, const q8_0_batch& xb, std::int64_t n_tokens, bool nl, float* y, thread_pool& pool);

// Q8_0 (simd_x86_q8_0_x16.cpp), quantizing its activations as the reference does.
std::size_t pack_q8_0_x16(weight& w);
bool matmul_q8_0_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

// Q5_0, Q5_1 and Q4_1 (simd_x86_legacy_x16.cpp), quantizing their activations as the reference does.
std::size_t pack_q5_0_x16(weight& w);
std::size_t pack_q5_1_x16(weight& w);
std::size_t pack_q4_1_x16(weight& w);
bool matmul_q5_0_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
bool matmul_q5_1_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
bool matmul_q4_1_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

// F32, F16 and BF16 (simd_x86_float_x16.cpp), against the float activations.
std::size_t pack_f32_x16(weight& w);
std::size_t pack_f16_x16(weight& w);
std::size_t pack_bf16_x16(weight& w);
bool matmul_float_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// BF16 from that layout by VDPBF16PS (simd_x86_avx512_bf16.cpp), where avx512_bf16_matmul runs;
// false, having done nothing, elsewhere.
bool matmul_bf16_x16_dot(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);

}  // namespace spite::dispatch::cpu::x86
#endif
