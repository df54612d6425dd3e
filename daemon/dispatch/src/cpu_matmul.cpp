// Generic CPU matmul for every weight type: each weight row is dequantized once and dotted with
// all activation rows. Activations are first converted the way the reference engine's dot
// product for that weight type sees them (rounded to f16 / bf16, or quantized to 8-bit blocks),
// so results agree with it to float rounding whatever the weight type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu_kernels.hpp"
#include "ref_math.hpp"
#include "ref_quant.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/types.hpp"

namespace spite::dispatch::cpu {
namespace {

using gguf::tensor_type;

// The activation format the reference dot product pairs with a weight type.
tensor_type activation_type(tensor_type w) {
  switch (w) {
    case tensor_type::f32: return tensor_type::f32;
    case tensor_type::f16: return tensor_type::f16;
    case tensor_type::bf16: return tensor_type::bf16;
    case tensor_type::q4_0: case tensor_type::q5_0: case tensor_type::q8_0:
    case tensor_type::iq4_nl: case tensor_type::mxfp4: return tensor_type::q8_0;
    case tensor_type::q4_1: case tensor_type::q5_1: return tensor_type::q8_1;
    default: return tensor_type::q8_K;  // K-quants, the other i-quants and ternary types
  }
}

// Dot products in the reference engine's reduction orders (16 lanes, lanes reduced halves
// first), because attention downstream rounds to f16 and amplifies 1-ulp differences.
// `exact_products`: f16/bf16 inputs, whose products are exact in float. `gemm`: the reference
// takes its GEMM path for this matrix when the length allows.
float dot(const float* a, const float* b, std::int64_t n, bool exact_products, bool gemm) {
  if (gemm && n % 16 == 0) {  // the GEMM path: one 16-lane accumulator, fused multiply-adds
    float lanes[16] = {};
    for (std::int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(a[i], b[i], lanes[i % 16]);
    return reduce16(lanes);
  }
  // The vector dot product: 64-element blocks into four lane groups, then the tail.
  const std::int64_t np = n & ~std::int64_t{63};
  float acc[4][16] = {};
  for (std::int64_t i = 0; i < np; ++i) {
    float& l = acc[(i / 16) % 4][i % 16];
    l = std::fma(a[i], b[i], l);
  }
  for (int l = 0; l < 16; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
    acc[0][l] += acc[1][l];
  }
  if (exact_products) {
    double sum = reduce16(acc[0]);
    for (std::int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
    return static_cast<float>(sum);
  }
  float sum = reduce16(acc[0]);
  for (std::int64_t i = np; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

// BF16 pairs as the AVX-512 BF16 dot instruction adds them: each lane takes the odd element of
// its pair, then the even one, each product exact and each addition rounded.
// (Products go through separate arrays: GCC 12 at -O3 mis-vectorizes the interleaved form.)
void bf16_pairs(const float* a, const float* b, float* lanes) {
  float odd[16], even[16];
  for (int l = 0; l < 16; ++l) odd[l] = a[2 * l + 1] * b[2 * l + 1];
  for (int l = 0; l < 16; ++l) even[l] = a[2 * l] * b[2 * l];
  for (int l = 0; l < 16; ++l) lanes[l] = (lanes[l] + odd[l]) + even[l];
}

float dot_bf16(const float* a, const float* b, std::int64_t n) {
  if (n % 32 == 0) {  // GEMM path: 32 values per step into 16 lanes
    float lanes[16] = {};
    for (std::int64_t i = 0; i < n; i += 32) bf16_pairs(a + i, b + i, lanes);
    return reduce16(lanes);
  }
  // Vector dot product: 64-value blocks into two accumulators, the tail in double.
  float c1[16] = {}, c2[16] = {};
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    bf16_pairs(a + i, b + i, c1);
    bf16_pairs(a + i + 32, b + i + 32, c2);
  }
  double sum = static_cast<double>(reduce16(c1)) + static_cast<double>(reduce16(c2));
  for (; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(sum);
}

// 8-bit block quantization of activations as the reference's vector code does it: the
// reciprocal scale is 127 / max (not 1 / d) and rounding goes to the nearest even.
void quantize_dequantize_q8(const float* x, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.f;
    const float dh = fp16_to_fp32(fp32_to_fp16(d));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) out[b + j] = dh * std::nearbyint(x[b + j] * id);
  }
}

}  // namespace

void convert_activations(tensor_type weight_type, const float* x, std::int64_t n, std::int64_t rows, float* out) {
  const tensor_type at = activation_type(weight_type);
  if (at == tensor_type::f32) {
    std::memcpy(out, x, static_cast<std::size_t>(n * rows) * sizeof(float));
    return;
  }
  if (at == tensor_type::f16) {
    for (std::int64_t i = 0; i < n * rows; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
    return;
  }
  if (at == tensor_type::bf16) {
    for (std::int64_t i = 0; i < n * rows; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
    return;
  }
  if (at == tensor_type::q8_0 || at == tensor_type::q8_1) {
    for (std::int64_t r = 0; r < rows; ++r) quantize_dequantize_q8(x + r * n, out + r * n, n);
    return;
  }
  const auto bytes = *gguf::row_bytes(at, n);
  std::vector<std::byte> q(bytes);
  for (std::int64_t r = 0; r < rows; ++r) {
    (void)gguf::quantize(at, x + r * n, q.data(), n);
    (void)gguf::dequantize(at, q.data(), out + r * n, n);
  }
}

void matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (const matmul_fn exact = find_exact_matmul(w.type)) {
    exact(w, x, n_tokens, y, pool);
  } else {
    generic_matmul(w, x, n_tokens, y, pool);
  }
  after_product(w, n_tokens, pool);
}

namespace {

// Whether the kernels multiply w from its packed layout alone. The 16-row Q4_K, Q5_K and Q6_K
// layouts serve the AVX-512 kernels only; after set_avx512(false) their matrices are read in the
// file's layout.
bool reads_packed_only(const weight& w) {
  return w.packed != nullptr && (w.packed_rows != 16 || has_avx512_kernels());
}

}  // namespace

void matmul_parts(std::span<const weight* const> parts, const float* x, std::int64_t n_tokens, float* const* ys,
                  thread_pool& pool) {
  for (std::size_t i = 0; i < parts.size();) {
    std::size_t j = i + 1;
    std::int64_t rows = parts[i]->out;
    if (reads_packed_only(*parts[i])) {
      while (j < parts.size() && packed_together(*parts[j - 1], *parts[j])) rows += parts[j++]->out;
    }
    if (j - i == 1) {
      matmul(*parts[i], x, n_tokens, ys[i], pool);
      i = j;
      continue;
    }
    // The run as one matrix: its packed layout is the stacked rows'. No part's file layout
    // covers them all, so `data` is left null (the packed kernels read only `packed`).
    weight run = *parts[i];
    run.data = nullptr;
    run.out = rows;
    run.packed_size = 0;
    for (std::size_t k = i; k < j; ++k) run.packed_size += parts[k]->packed_size;
    // One activation row whose parts' outputs lie one after the other (a decode step's q / k / v
    // or gate / up, as the layers allocate them) is the run's output row: written in place. At
    // two threads the copy read the half the other thread wrote, line by line across the cores.
    bool in_place = n_tokens == 1;
    for (std::size_t k = i + 1; k < j && in_place; ++k) in_place = ys[k] == ys[k - 1] + parts[k - 1]->out;
    if (in_place) {
      matmul(run, x, n_tokens, ys[i], pool);
      i = j;
      continue;
    }
    // Written in full by the matmul: no zeroing on the decode path.
    const auto y = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(rows * n_tokens));
    matmul(run, x, n_tokens, y.get(), pool);
    // Each token's row of the run into the parts' outputs: on every thread for a large batch
    // (a 512-token prefill's gate and up are 23 MB to move), on the caller's for decode.
    const auto split_rows = [&](std::int64_t t0, std::int64_t t1) {
      std::int64_t at = 0;
      for (std::size_t k = i; k < j; ++k) {
        const std::int64_t out = parts[k]->out;
        for (std::int64_t t = t0; t < t1; ++t) std::copy_n(y.get() + t * rows + at, out, ys[k] + t * out);
        at += out;
      }
    };
    if (rows * n_tokens >= (std::int64_t{1} << 18)) {  // from 1 MiB: more than a job's start costs
      pool.parallel_for(n_tokens, [&](std::int64_t t0, std::int64_t t1, int) { split_rows(t0, t1); });
    } else {
      split_rows(0, n_tokens);
    }
    i = j;
  }
}

void generic_matmul(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  const std::int64_t in = w.in, out = w.out;
  std::vector<float> xs(static_cast<std::size_t>(in * n_tokens));
  convert_activations(w.type, x, in, n_tokens, xs.data());
  const gguf::type_traits& tr = gguf::traits(w.type);
  const bool exact = w.type != tensor_type::f32;
  // The reference's GEMM (llamafile's tinyBLAS; float_gemm_path): dot checks the length.
  const bool gemm = !w.no_gemm && out % 4 == 0;
  std::vector<std::vector<float>> rows(static_cast<std::size_t>(pool.size()));
  pool.parallel_for(out, [&](std::int64_t begin, std::int64_t end, int thread) {
    std::vector<float>& row = rows[static_cast<std::size_t>(thread)];
    row.resize(static_cast<std::size_t>(in));
    for (std::int64_t o = begin; o < end; ++o) {
      tr.to_float(w.row(o), row.data(), in);
      if (w.type == tensor_type::bf16) {
        for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot_bf16(row.data(), xs.data() + t * in, in);
      } else {
        for (std::int64_t t = 0; t < n_tokens; ++t) y[t * out + o] = dot(row.data(), xs.data() + t * in, in, exact, gemm);
      }
    }
  });
}

}  // namespace spite::dispatch::cpu
