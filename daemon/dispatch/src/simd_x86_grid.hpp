// The grid i-quants' AVX-512 VBMI kernels (simd_x86_iquant_grid_avx512.cpp), as the grid
// i-quant matmuls of simd_x86_iquant_grid.cpp take them. Internal to spite::dispatch; x86-64
// only.
#pragma once

#include "simd_x86.hpp"

#if defined(__x86_64__)
namespace spite::dispatch::cpu::x86 {

// simd_x86_iquant_grid_avx512.cpp: the matmul of the grid i-quants with AVX-512 VBMI (grid rows
// looked up in registers) against quantized activation rows (xq: n_tokens rows of w.in / 256
// blocks). Null without it, after set_avx512(false), and for other blocks.
using grid_matmul_fn = void (*)(const weight& w, const gguf::block_q8_K* xq, std::int64_t n_tokens, float* y, thread_pool& pool);
bool enabled_grid_kernels();
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq1_s*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xxs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_xs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq2_s*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_xxs*);
grid_matmul_fn avx512_grid_matmul(const gguf::block_iq3_s*);
template <class Block>
grid_matmul_fn avx512_grid_matmul(const Block*) {
  return nullptr;
}

}  // namespace spite::dispatch::cpu::x86
#endif
