// The built-in CPU kernels (reference implementations).
#pragma once

#include "spite/dispatch/ops.hpp"

namespace spite::dispatch::cpu {

void matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// The dequantize-and-dot reference for every type (matmul takes an exact or SIMD one first).
void generic_matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
void rms_norm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows, float eps);
void attention(const attention_args& args, thread_pool& pool);
// Online-softmax attention (args.flash), as the reference's flash attention computes it.
void flash_attention(const attention_args& args, thread_pool& pool);
void rope(const rope_args& args);
void swiglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows);
void geglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows);
void swiglu_oai(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows, float alpha, float limit);

// Activations as the dot product against `weight_type` sees them (see cpu_matmul.cpp).
void convert_activations(gguf::tensor_type weight_type, const float* x, std::int64_t n, std::int64_t rows, float* out);

}  // namespace spite::dispatch::cpu
