// The operations a forward pass needs, as a table of kernels. The dispatcher fills the table
// per model x device; today it holds the built-in CPU kernels, which are also the reference
// every plug-in kernel is checked against. Shapes are written in ggml order: [ne0, ne1].
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/tensor.hpp"

namespace spite::dispatch {

// How the scores of one query against the keys are masked.
struct attention_mask {
  std::int32_t swa_window = 0;  // > 0: keys with q_pos - k_pos >= window are masked
  bool swa_chunked = false;     // chunked windows: keys before floor(q_pos / window) * window are masked
};

struct attention_args {
  // q: [D, H, n_tokens]; out: [Dv, H, n_tokens]
  const float* q;
  float* out;
  std::int64_t n_tokens, n_head, n_head_kv, head_dim, head_dim_v;
  const std::int32_t* q_pos;  // position of each query token
  // Keys and values of the token's sequence, F16: k [D, Hkv, n_kv], v [Dv, Hkv, n_kv]; key i has
  // position kv_pos[i]. Keys after a query's own position are masked (causal).
  const std::uint16_t* k;
  const std::uint16_t* v;
  // Elements from one position's values to the next; 0: n_head_kv * head_dim_v (values stored
  // apart). Latent attention reads its values inside the key rows (a key row's stride).
  std::int64_t v_stride = 0;
  // Elements from one position's keys to the next; 0: n_head_kv * head_dim (rows may carry more,
  // such as a sparse-attention indexer's key after the attention key).
  std::int64_t k_stride = 0;
  const std::int32_t* kv_pos;
  std::int64_t n_kv;
  float scale;            // applied to q.k
  float softcap = 0.0f;   // > 0: scores become softcap * tanh(score * (1 / softcap)) before scaling
  const float* sinks = nullptr;  // [H] extra logit per head, in the softmax denominator only
  attention_mask mask;
  // [n_tokens, n_kv] or null: 0 masks key i for query t as well (sparse attention's selection).
  const std::uint8_t* key_allowed = nullptr;
  // Flash attention: an online softmax over tiles of keys, never the whole row of scores, with
  // the reference's flash-attention arithmetic (f16 accumulator for short batches, f32 tiles
  // for batches of 64 queries and more); off: the reference's attention without it.
  bool flash = false;
};

struct rope_args {
  float* x;  // [head_dim, n_head, n_tokens], rotated in place
  std::int64_t n_tokens, n_head, head_dim;
  std::int64_t n_dims;          // rotated dimensions (<= head_dim; the rest pass through)
  const std::int32_t* pos;      // [n_tokens]
  bool neox;                    // pairs (i, i + n_dims/2) instead of (2i, 2i+1)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;      // 1 / linear scaling factor
  float ext_factor = 0.0f;      // YaRN extrapolation mix (0: off)
  float attn_factor = 1.0f;     // magnitude applied to cos / sin
  float beta_fast = 32.0f, beta_slow = 1.0f;
  std::int32_t n_ctx_orig = 0;
  const float* freq_factors = nullptr;  // [n_dims / 2] divisors of the frequencies, or null
};

// Entries are std::function so that the dispatcher can bind a plug-in kernel (with its library
// kept alive) in place of a built-in one; the call costs nothing next to the op itself.
struct op_table {
  // y [out, n_tokens] = W x; x [in, n_tokens]. Activations are converted the way the weight
  // type's dot product expects (f16 / bf16 rounding, 8-bit block quantization).
  std::function<void(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool)> matmul;
  // y = x / sqrt(mean(x^2) + eps) * w (w may be null), per row of n
  std::function<void(const float* x, const float* w, float* y, std::int64_t n, std::int64_t rows, float eps)> rms_norm;
  std::function<void(const attention_args& args, thread_pool& pool)> attention;
  std::function<void(const rope_args& args)> rope;
  // h = silu(g) * u, rows of n elements
  std::function<void(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows)> swiglu;
  // h = gelu(g) * u with the tanh approximation, rows of n elements
  std::function<void(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows)> geglu;
  // gpt-oss's clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit, limit),
  // h = g' * sigmoid(alpha * g') * (u' + 1)
  std::function<void(const float* g, const float* u, float* h, std::int64_t n, std::int64_t rows, float alpha, float limit)>
      swiglu_oai;
  // ys[i] [parts[i]->out, n_tokens] = parts[i] x for matrices that take the same x. Parts that
  // place_packed_together joined run as one matrix; the result is the same as one matmul per
  // part. May be empty: callers then take matmul per part.
  std::function<void(std::span<const weight* const> parts, const float* x, std::int64_t n_tokens, float* const* ys,
                     thread_pool& pool)>
      matmul_parts;
  // attention(calls[i]) for each i, for calls that share nothing they write (the sequences of
  // a batch, each over its own cache): the built-in kernels take the query heads of all of them
  // as one job for the pool. May be empty: callers then take attention per call.
  std::function<void(std::span<const attention_args> calls, thread_pool& pool)> attention_many;
  // The ops may run on several threads at once, each call with a pool of its own (the built-in
  // CPU kernels, and CPU plug-in kernels, which the host already calls from its threads): a
  // decode step's experts then run side by side.
  bool concurrent = false;
};

// The built-in CPU kernels.
const op_table& cpu_reference_ops();

}  // namespace spite::dispatch
