// The pre-norm decoder shared by the llama family (llama, Mistral, Mixtral, qwen2, qwen2moe,
// phi3, ...): x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)); logits = Out(RMSNorm(x)). An
// architecture binds its weights into these structs and sets the few switches it differs in.
#pragma once

#include <vector>

#include "weights.hpp"

namespace spite::models {

struct attention_layer {
  std::vector<float> norm;           // [E]
  linear q, k, v;                    // {E, H*D}, {E, Hkv*D}, {E, Hkv*Dv}
  linear qkv;                        // fused {E, (H + 2 Hkv) D} when q/k/v are absent
  linear o;                          // {H*Dv, E}
  std::vector<float> q_norm, k_norm; // [D] per-head norms (optional)
  std::int64_t n_head = 0, n_head_kv = 0;
};

struct ffn_layer {
  std::vector<float> norm;  // [E]
  linear gate, up, down;    // dense SwiGLU; when gate is empty, up is fused {E, 2F} = [gate | up]
  // Mixture of experts (router present): experts are 3-D {in, out, X}.
  linear router;                                   // {E, X}
  const gguf::tensor_info* gate_exps = nullptr;    // {E, Fe, X}
  const gguf::tensor_info* up_exps = nullptr;      // {E, Fe, X}
  const gguf::tensor_info* down_exps = nullptr;    // {Fe, E, X}
  linear shared_gate, shared_up, shared_down;      // shared expert (optional)
  linear shared_router;                            // {E, 1}: per-token gate of the shared expert

  bool is_moe() const noexcept { return !router.empty(); }
};

struct decoder_weights {
  const gguf::tensor_info* token_embd = nullptr;  // {E, V}
  std::vector<attention_layer> attn;
  std::vector<ffn_layer> ffn;
  std::vector<float> output_norm;                 // [E]
  linear output;                                  // {E, V}; tied to token_embd when absent
  std::vector<float> rope_freqs;                  // [R/2] frequency divisors (optional)
};

struct decoder_config {
  rope_params rope;
  float rms_eps = 1e-5f;
  float kq_scale = 1.0f;   // multiplies q.k
  float q_prescale = 1.0f; // multiplies q before attention (phi3 scales q instead of q.k)
  std::int64_t head_dim = 0, head_dim_v = 0;
  std::int64_t n_expert_used = 0;
  bool moe_normalize = true;          // renormalize the selected experts' weights
  bool shared_gate_silu_div = false;  // shared-expert gate computed as silu(g)/g (qwen2moe)
};

// The whole forward pass: embeddings, every layer, the output head for the wanted rows.
result<void> decoder_forward(forward_context& ctx, const decoder_weights& w, const decoder_config& c, const hparams& hp);

// Pieces, for architectures that assemble their own layer.
void attention_block(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer,
                     const float* rope_freqs, const float* in, float* out);
void ffn_block(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, float* out);

}  // namespace spite::models
