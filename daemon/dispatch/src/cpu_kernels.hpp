// The built-in CPU kernels (reference implementations).
#pragma once

#include "spite/dispatch/ops.hpp"

namespace spite::dispatch::cpu {

void matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// After a decode step's product with w: learns the order of the step's products and points the
// pool's waiting threads at the matrix that comes next (cpu_product_order.cpp).
void after_product(const weight& w, std::int64_t n_tokens, thread_pool& pool);
// A decode kernel that reads each thread's share of its product as several regions in step
// (two streams: the matrix's first half beside its second) says so, from the thread that runs
// the product, for after_product's next hint about that matrix (1 when none says).
void note_decode_streams(int streams) noexcept;
// The dequantize-and-dot reference for every type (matmul takes an exact or SIMD one first).
void generic_matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool);
// op_table::matmul_parts: each run of parts placed together (packed_together) as one matrix.
void matmul_parts(std::span<const weight* const> parts, const float* x, std::int64_t n_tokens, float* const* ys,
                  thread_pool& pool);
void rms_norm(const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows, float eps);
void attention(const attention_args& args, thread_pool& pool);
// op_table::attention_many: calls that all go query by query through flash attention (decode
// of several sequences) as one job; any other mix call by call.
void attention_many(std::span<const attention_args> calls, thread_pool& pool);
// Online-softmax attention (args.flash), as the reference's flash attention computes it.
void flash_attention(const attention_args& args, thread_pool& pool);
// Whether flash_attention takes a's queries one at a time (decode, short batches), and those
// of several such calls as one job of the pool.
bool flash_attention_by_query(const attention_args& a);
void flash_attention_by_query(std::span<const attention_args> calls, thread_pool& pool);
void rope(const rope_args& args);
void swiglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows);
void geglu(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows);
void swiglu_oai(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows, float alpha, float limit);

// Whether the reference's F16 / F32 dot products take its GEMM path (16 lanes of fused
// multiply-adds) for this matrix: row counts that are a multiple of 4, contiguous activations
// and a length in whole 16-lane steps; the rest go through its vector dot product.
inline bool float_gemm_path(const weight& w) { return !w.no_gemm && w.out % 4 == 0 && w.in % 16 == 0; }

// Activations as the dot product against `weight_type` sees them (see cpu_matmul.cpp).
void convert_activations(gguf::tensor_type weight_type, const float* x, std::int64_t n, std::int64_t rows, float* out);

}  // namespace spite::dispatch::cpu
