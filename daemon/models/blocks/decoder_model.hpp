// A model made of the shared decoder: what most architecture folders instantiate.
#pragma once

#include <functional>

#include "decoder.hpp"

namespace spite::models {

// Sizes of multi-head latent attention (the GGUF's key_length / value_length describe the cache).
struct mla_dims {
  std::int64_t q_lora = 0;    // 0: a plain attn_q
  std::int64_t kv_lora = 0;   // width of the compressed KV (the cache's V, head of its K)
  std::int64_t key_dim = 0;   // per-head q / k width: nope + rope
  std::int64_t rope_dim = 0;  // rotated part of it
  std::int64_t v_dim = 0;     // per-head output width after v_b
};

struct bind_options {
  bool fused_qkv_allowed = true;     // accept attn_qkv instead of q/k/v
  bool fused_gate_up = false;        // ffn_up is {E, 2F} = [gate | up] and there is no ffn_gate
  bool qk_norm = false;              // attn_q_norm / attn_k_norm {D}
  bool shared_expert = false;        // ffn_*_shexp (+ ffn_gate_inp_shexp)
  bool experts_required = false;     // refuse a file without expert_count
  bool sandwich_norms = false;       // post_attention_norm / post_ffw_norm on the blocks' outputs
  bool sinks = false;                // attn_sinks {H}
  const char* ffn_norm = "ffn_norm"; // the FFN's input norm (gpt-oss: post_attention_norm)
  const mla_dims* mla = nullptr;     // latent attention instead of attn_q/k/v
  // Which layers have experts when the model has some (null: every layer).
  std::function<bool(int layer)> moe_layer;
  bool q_gate = false;               // attn_q {E, 2 H D}: per head [q | output gate] (attention_layer::q_gate)
  // Layers whose mixer is not attention (null: none): bind() leaves all but their attn_norm to
  // the architecture, which sets attention_layer::delta_net.
  std::function<bool(int layer)> recurrent_layer;
};

// The FFN of layer il (dense or experts, as the options say).
ffn_layer bind_ffn(binder& b, const gguf::file& file, const hparams& hp, int il, const bind_options& options);

class decoder_model : public model {
 public:
  decoder_weights weights;
  decoder_config config;

  result<void> forward(forward_context& ctx) const override { return decoder_forward(ctx, weights, config, hp_); }

  // Binds the standard llama-layout tensors of `file` and fills the config from hp.
  static result<std::unique_ptr<decoder_model>> bind(const gguf::file& file, hparams hp, const bind_options& options);

  // The usual path: the common hyper-parameters, attention.layer_norm_rms_epsilon (required),
  // the RoPE kind, then bind(). Architectures adjust the config of what it returns.
  static result<std::unique_ptr<decoder_model>> load(const gguf::file& file, rope_kind rope, const bind_options& options);

  // The reference's sliding-window pattern: layers with il % pattern < pattern - 1 attend
  // through a window of `window` tokens (chunks of it when `chunked`) and take RoPE base
  // rope.freq_base_swa; the others attend to everything. Returns whether layer il slides.
  static bool is_swa_layer(int il, std::int64_t pattern) { return pattern > 0 && il % pattern < pattern - 1; }
  void set_sliding_window(std::int64_t pattern, std::int32_t window, bool chunked = false);
};

inline result<std::unique_ptr<model>> as_model(result<std::unique_ptr<decoder_model>> m) {
  if (!m) return std::move(m).err();
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace spite::models
