// DeepSeek-V4: the pieces of its layer (arch.cpp: loader, hyper-connections, layer loop;
// attention.cpp: attention over a sliding window of raw keys plus compressed keys).
#pragma once

#include "../blocks/decoder.hpp"

namespace spite::models::dsv4 {

// One compressor: every `ratio` positions, the rows kv(x) of those positions (and, overlapped,
// of the previous block) are pooled per channel by softmax(gate(x) + ape[pos % ratio]), then
// RMS-normed and RoPE'd at the block's first position. Overlapped (ratio 4) rows are
// [previous-block half | current-block half], 2 dim wide.
struct compressor {
  linear kv, gate;          // {E, width}
  std::vector<float> ape;   // [ratio, width]
  std::vector<float> norm;  // [dim]
  std::int64_t ratio = 0, dim = 0;
  bool overlap = false;

  std::int64_t width() const noexcept { return overlap ? 2 * dim : dim; }
  std::int64_t ring_rows() const noexcept { return overlap ? 2 * ratio : ratio; }
};

// The lightning indexer of the ratio-4 layers: ReLU heads over its own compressed keys choose
// the top_k compressed blocks each query attends.
struct indexer {
  linear q_b;   // {q_lora, Hi Di}, per head [nope | pe]
  linear proj;  // {E, Hi}
  compressor keys;
  std::vector<float> hadamard;  // [Di, Di]
  std::int64_t n_head = 0, head_dim = 0, top_k = 0;
};

// Where a layer's compressor state lies in its per-sequence recurrent state (floats): the rings
// of the last ring_rows() projected rows (kv, then gate + ape) and the compressed keys made so
// far (f16-rounded, as the reference's cache holds them), for the attention and the indexer.
struct state_layout {
  std::int64_t ring_kv = 0, ring_score = 0, keys = 0;
  std::int64_t ix_ring_kv = 0, ix_ring_score = 0, ix_keys = 0;
  std::int64_t capacity = 0;  // compressed blocks each key store holds
  std::int64_t total = 0;
};

struct layer {
  std::vector<float> attn_norm, sinks;   // [E], [H]
  linear q_a, q_b, kv, o_b;              // {E, q_lora}, {q_lora, H D}, {E, D}, {G o_lora, E}
  std::vector<float> q_a_norm, kv_norm;  // [q_lora], [D]
  dispatch::weight o_a;                  // {H D / G, o_lora G}: group g's rows g o_lora ..
  rope_params rope;                      // compressed layers: compress_rope_freq_base and YaRN
  std::int64_t ratio = 0;                // 0: window only; 4: + indexed blocks; 128: + all blocks
  std::shared_ptr<const compressor> comp;
  std::shared_ptr<const indexer> index;
  state_layout state;
};

struct dims {
  std::int64_t n_head = 0, head_dim = 0, rope_dim = 0, groups = 0, o_rank = 0;
  std::int32_t window = 0;
  float rms_eps = 1e-6f;
};

// out [E, n] = attention of layer `il` over in [E, n] (the normed hyper-connection mix).
result<void> attention(forward_context& ctx, const layer& l, const dims& d, int il, const float* in, float* out);

}  // namespace spite::models::dsv4
