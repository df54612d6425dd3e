// The pre-norm decoder shared by the llama family (llama, Mistral, Mixtral, qwen2/3, phi3, gemma,
// glm4, gpt-oss, ...): x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)); logits = Out(RMSNorm(x)). An
// architecture binds its weights into these structs and sets the few switches it differs in:
// per layer (RoPE, sliding window, sandwich norms, sinks) in the layer structs, the rest in
// decoder_config.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "batch_rows.hpp"
#include "work_buffer.hpp"
#include "weights.hpp"

namespace spite::models {

struct dsa_indexer;

// Multi-head latent attention (DeepSeek-2 style, with k_b / v_b absorbed): q from a low-rank
// projection, one compressed KV head [c | k_pe] of width kv_lora + R shared by all heads.
struct mla_layer {
  linear q_a, q_b;                         // {E, q_lora}, {q_lora, H*Dk}
  linear q;                                // {E, H*Dk} when there is no q_lora
  std::vector<float> q_a_norm;             // [q_lora]
  linear kv_a;                             // {E, kv_lora + R}
  std::vector<float> kv_a_norm;            // [kv_lora]
  const gguf::tensor_info* k_b = nullptr;  // {Dk - R, kv_lora, H}
  const gguf::tensor_info* v_b = nullptr;  // {kv_lora, Dv, H}
  std::int64_t kv_lora = 0, rope_dim = 0, nope_dim = 0, v_dim = 0;
  std::shared_ptr<const dsa_indexer> indexer;  // set: sparse attention chosen by this layer's indexer
  bool reuses_selection = false;  // sparse attention chosen by the last layer with an indexer
};

// DeepSeek sparse attention's lightning indexer (GLM-5): a few ReLU heads score every cached
// position, and each query attends only to the top_k best. Its keys are stored after the
// attention key in the same KV row.
struct dsa_indexer {
  linear q_b;                           // {q_lora, Hi*Di}, per head [pe(R) | nope]
  linear k;                             // {E, Di}, [pe(R) | nope]
  std::vector<float> k_norm, k_norm_b;  // [Di] LayerNorm of k (eps 0)
  linear proj;                          // {E, Hi} per-head weights of the scores
  std::vector<float> hadamard;          // [Di, Di] orthonormal Walsh-Hadamard rotation of q and k
  std::int64_t n_head = 0, head_dim = 0, top_k = 0;
};

// Gated DeltaNet (linear attention with a recurrent state, Qwen3.5): a short causal depthwise
// convolution over [q | k | v], then per value head the gated delta rule on a state of Sk x Sv.
// The memory keeps per sequence the conv inputs of the last K - 1 tokens, then the states.
struct delta_net_layer {
  linear qkv;                  // {E, conv_dim}, conv_dim = 2 Hk Sk + Hv Sv
  linear z;                    // {E, Hv Sv} output gate (attn_gate)
  linear beta, alpha;          // {E, Hv}
  std::vector<float> conv;     // [K, conv_dim] (the kernel of channel c is conv[c K .. c K + K))
  std::vector<float> dt_bias;  // [Hv]
  std::vector<float> a;        // [Hv] -exp(A_log)
  std::vector<float> norm;     // [Sv] gated RMS norm of each head's output
  linear out;                  // {Hv Sv, E}
  std::int64_t K = 0, Sk = 0, Sv = 0, Hk = 0, Hv = 0;

  std::int64_t conv_dim() const noexcept { return 2 * Hk * Sk + Hv * Sv; }
  std::int64_t state_floats() const noexcept { return (K - 1) * conv_dim() + Hv * Sk * Sv; }
};

struct attention_layer {
  std::vector<float> norm;           // [E]
  linear q, k, v;                    // {E, H*D}, {E, Hkv*D}, {E, Hkv*Dv}
  linear qkv;                        // fused {E, (H + 2 Hkv) D} when q/k/v are absent
  linear o;                          // {H*Dv, E}
  std::vector<float> q_norm, k_norm; // [D] per-head norms (optional)
  std::vector<float> post_norm;      // [E] norm of the block's output (sandwich norms; optional)
  std::vector<float> sinks;          // [H] per-head sink logits (optional)
  std::int64_t n_head = 0, n_head_kv = 0;
  rope_params rope;                  // this layer's RoPE; kind none: no positions (NoPE)
  dispatch::attention_mask mask;     // sliding window (0: full causal attention)
  bool temperature = false;          // scale q by decoder_config's position temperature
  std::shared_ptr<const mla_layer> mla;  // set: latent attention instead of q/k/v/qkv (o stays)
  bool q_gate = false;               // q is {E, 2 H D}, per head [q | gate]: out *= sigmoid(gate) before o
  std::int64_t head_dim = 0, head_dim_v = 0;  // this layer's head widths (0: decoder_config's)
  bool rope_freqs = true;            // the model's rope_freqs apply to this layer
  bool v_norm = false;               // unweighted per-head RMS norm of v (v is k's projection when v is empty)
  int kv_layer = -1;                 // >= 0: no k / v of its own, attends over that layer's KV memory
  std::shared_ptr<const delta_net_layer> delta_net;  // set: this layer's mixer is gated DeltaNet
};

struct ffn_layer {
  std::vector<float> norm;       // [E]
  std::vector<float> post_norm;  // [E] norm of the block's output (sandwich norms; optional)
  linear gate, up, down;         // dense gated FFN; when gate is empty, up is fused {E, 2F} = [gate | up]
  // Mixture of experts (router present): experts are 3-D {in, out, X}.
  linear router;                                   // {E, X}
  const gguf::tensor_info* gate_exps = nullptr;    // {E, Fe, X}; null: up_exps is fused [gate | up]
  const gguf::tensor_info* up_exps = nullptr;      // {E, Fe, X} or fused {E, 2 Fe, X}
  const gguf::tensor_info* down_exps = nullptr;    // {Fe, E, X}
  // The same stacks as matrices per expert, bound once (binder::expert): packed for the CPU
  // kernels where they have a layout, each expert's gate right before its up, so that the two
  // run as one matrix.
  std::vector<linear> gate_x, up_x, down_x;
  std::vector<float> select_bias;                  // [X] added to the probabilities for the choice only
  std::vector<float> gate_exps_b, up_exps_b, down_exps_b;  // [Fe * X], [Fe * X], [E * X] (optional)
  linear shared_gate, shared_up, shared_down;      // shared expert (optional)
  linear shared_router;                            // {E, 1}: per-token gate of the shared expert
  std::vector<float> down_exps_scale;              // [X] multiplies each expert's output (optional)
  // Hash routing (DeepSeek-V4's first layers): the experts of token id v are
  // fixed_experts[v K .. v K + K) instead of the router's top K; the router still weights them.
  std::vector<std::int32_t> fixed_experts;
  // > 0: SwiGLU inputs clamped (gate <= limit, |up| <= limit) in the routed / shared experts.
  float swiglu_limit = 0.0f, shared_swiglu_limit = 0.0f;

  bool is_moe() const noexcept { return !router.empty(); }
};

struct decoder_weights {
  const gguf::file* file = nullptr;               // the embedding rows are copied out of it
  const gguf::tensor_info* token_embd = nullptr;  // {E, V}
  std::vector<attention_layer> attn;
  std::vector<ffn_layer> ffn;
  std::vector<float> output_norm;                 // [E]
  linear output;                                  // {E, V}; tied to token_embd when absent
  std::vector<float> rope_freqs;                  // [R/2] frequency divisors (optional)
};

enum class ffn_activation { silu, gelu, silu_oai };  // gated: act(gate) * up
enum class moe_gating {
  softmax,          // weights = softmax over all experts, taken at the top K
  sigmoid,          // weights = sigmoid(logit) of the top K
  softmax_selected, // top K logits, weights = softmax over those K
  sqrt_softplus     // weights = sqrt(softplus(logit)) of the top K (DeepSeek-V4)
};

struct decoder_config {
  rope_params rope;
  float rms_eps = 1e-5f;
  float kq_scale = 1.0f;   // multiplies q.k
  float q_prescale = 1.0f; // multiplies q before attention (phi3 scales q instead of q.k)
  bool qk_rms_after_rope = false;  // unweighted per-head RMS norm of q and k after RoPE (llama4)
  // Position temperature of q on layers that ask for it: q *= ln(floor((pos + offset) / length)
  // + 1) * scale + 1 (llama4 NoPE layers, mistral3).
  float temperature_scale = 0.0f, temperature_offset = 0.0f;
  std::int64_t temperature_length = 0;
  float attn_softcap = 0.0f;   // > 0: attention scores soft-capped (gemma2)
  float final_softcap = 0.0f;  // > 0: logits soft-capped
  float embed_scale = 0.0f;    // > 0: token embeddings multiplied by it (gemma: sqrt(E))
  std::int64_t head_dim = 0, head_dim_v = 0;
  ffn_activation activation = ffn_activation::silu;
  float oai_alpha = 1.702f, oai_limit = 7.0f;  // silu_oai
  std::int64_t n_expert_used = 0;
  moe_gating gating = moe_gating::softmax;
  bool moe_normalize = true;          // renormalize the selected experts' weights
  bool moe_weight_before = false;     // scale each expert's input by its weight instead of its output (llama4)
  float expert_weights_scale = 0.0f;  // multiplies the routing weights when not 0 or 1
  // Group-limited routing: experts in n_expert_groups consecutive groups, a group scored by the
  // sum of its best two; only the best n_group_used groups compete (0: off).
  std::int64_t n_expert_groups = 0, n_group_used = 0;
  bool shared_gate_silu_div = false;  // shared-expert gate computed as silu(g)/g (qwen2moe)
};

// The whole forward pass: embeddings, every layer, the output head for the wanted rows.
result<void> decoder_forward(forward_context& ctx, const decoder_weights& w, const decoder_config& c, const hparams& hp);

// Pieces, for architectures that assemble their own layer.
void attention_block(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer,
                     const float* rope_freqs, const float* in, float* out);
void mla_attention_block(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer,
                         const float* rope_freqs, const float* in, float* out);
// RoPE of x [head_dim, n_head, n] in place; false (and x untouched) for a layer without RoPE.
bool apply_rope(forward_context& ctx, const rope_params& rope, const float* freqs, float* x, std::int64_t n, std::int64_t n_head,
                std::int64_t head_dim);
// q [width, n] *= the position temperature of each batch token (decoder_config)
void apply_temperature(forward_context& ctx, const decoder_config& c, float* q, std::int64_t width);
// Chooses which cached keys each query may attend (sparse attention): `allowed` [rows, view.n],
// 0 masks the key; left empty, the queries attend to everything the causal mask lets through.
using key_selector = std::function<void(std::int32_t seq, const std::vector<std::int64_t>& rows, const kv_view& view,
                                        std::vector<std::uint8_t>& allowed)>;
struct attend_extras {
  std::int64_t k_row = 0;  // width of a stored key row when it is more than Hkv * D (0: Hkv * D)
  key_selector select;
};
// Stores k [k_row, n] / v [Dv, Hkv, n] of the batch in the layer's KV memory, then attends the
// queries q [D, H, n] of each sequence over what it holds: out [Dv, H, n].
void attend(forward_context& ctx, const attention_layer& l, const decoder_config& c, int layer, float scale, const float* q,
            const float* k, const float* v, std::int64_t D, std::int64_t Dv, float* out, const attend_extras& extras = {});
// Gated DeltaNet mixer of `layer` (state in ctx.kv.state(layer, seq)): out [E, n].
void delta_net_block(forward_context& ctx, const delta_net_layer& l, float eps, int layer, const float* in, float* out);
// `router_in`: what the router sees when it is not `in` (gemma4).
void ffn_block(forward_context& ctx, const ffn_layer& l, const decoder_config& c, const float* in, float* out,
               const float* router_in = nullptr);
// softmax in place over n values, as the reference's soft_max op rounds it (sum in double)
void softmax(float* p, std::int64_t n);
// Row r of an embedding table {n, rows}, dequantized exactly into out [n]. With the file at hand
// the row is copied out of it (gguf::file::read) rather than read through the mapping, which
// would map the page cache's folios around it into the process: with random tokens a 151936-row
// table was all resident within a second, beside the kernels' packed copy of a tied head.
void embedding_row(const gguf::file* file, const gguf::tensor_info& table, std::int64_t r, std::int64_t n, float* out);
// Token embeddings of the batch, times decoder_config::embed_scale: x [E, n].
void embed_tokens(forward_context& ctx, const decoder_weights& w, const decoder_config& c, std::int64_t E, float* x);
// The final norm and the output head (logits of the wanted rows, soft-capped), and the
// final-normed states when ctx.hidden asks for them; x [E, n].
void output_head(forward_context& ctx, const decoder_weights& w, const decoder_config& c, std::int64_t E, const float* x);

}  // namespace spite::models
