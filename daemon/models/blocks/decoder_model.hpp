// A model made of the shared decoder: what most architecture folders instantiate.
#pragma once

#include "decoder.hpp"

namespace spite::models {

struct bind_options {
  bool fused_qkv_allowed = true;     // accept attn_qkv instead of q/k/v
  bool fused_gate_up = false;        // ffn_up is {E, 2F} = [gate | up] and there is no ffn_gate
  bool qk_norm = false;              // attn_q_norm / attn_k_norm {D}
  bool shared_expert = false;        // ffn_*_shexp (+ ffn_gate_inp_shexp)
  bool experts_required = false;     // refuse a file without expert_count
};

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
};

inline result<std::unique_ptr<model>> as_model(result<std::unique_ptr<decoder_model>> m) {
  if (!m) return std::move(m).err();
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace spite::models
