// The DeepSeek-2 decoder (DeepSeek-V2 / V3 / R1, Kimi-K2, Mistral 4). Multi-head latent
// attention (absorbed k_b / v_b, low-rank q), NORM RoPE on the rope part with YaRN, optional
// position temperature of q; leading dense layers, then experts routed by softmax or sigmoid
// (+ exp_probs_b for the choice), optionally limited to the best expert groups, renormalized and
// scaled, plus shared experts.
#include "deepseek2.hpp"

#include <cmath>

namespace spite::models {

result<std::unique_ptr<decoder_model>> load_deepseek2(const gguf::file& f, const deepseek2_options& options) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  const key_reader r(f.meta(), hp->arch);
  constexpr std::int64_t big = std::int64_t{1} << 24;
  SPITE_TRY(r.required_float("attention.layer_norm_rms_epsilon"));
  auto kv_lora = r.required_int("attention.kv_lora_rank", 1, big);
  auto q_lora = r.optional_int("attention.q_lora_rank", 0, 0, big);
  auto key_mla = r.optional_int("attention.key_length_mla", hp->head_dim_k, 1, big);
  auto value_mla = r.optional_int("attention.value_length_mla", hp->head_dim_v, 1, big);
  auto n_shared = r.required_int("expert_shared_count", 0, 4096);
  auto leading = r.optional_int("leading_dense_block_count", 0, 0, hp->n_layer);
  auto gating = r.optional_int("expert_gating_func", options.default_gating, 1, 2);
  auto groups = r.optional_int("expert_group_count", 0, 0, big);
  auto groups_used = r.optional_int("expert_group_used_count", 0, 0, big);
  for (const auto* v : {&kv_lora, &q_lora, &key_mla, &value_mla, &n_shared, &leading, &gating, &groups, &groups_used}) {
    if (!*v) return v->err();
  }
  SPITE_TRY(r.required_int("expert_feed_forward_length", 1, big));
  const mla_dims dims{.q_lora = *q_lora, .kv_lora = *kv_lora, .key_dim = *key_mla, .rope_dim = hp->rope.n_dims, .v_dim = *value_mla};
  if (dims.rope_dim <= 0 || dims.rope_dim >= dims.key_dim || hp->head_dim_k != dims.kv_lora + dims.rope_dim ||
      hp->head_dim_v != dims.kv_lora || (*groups > 0 && hp->n_expert % *groups != 0)) {
    return make_error(errc::malformed, hp->arch + " model: inconsistent latent attention or expert group sizes");
  }
  hp->rope.kind = rope_kind::norm;
  hp->kv_value_in_key = true;  // K = [c | k_pe], V = c
  hp->n_ff_shexp = hp->n_ff_exp * *n_shared;
  // The converter stores 0.1 * mscale_all_dim as the YaRN log multiplier.
  const float log_mul = options.yarn_log_multiplier ? hp->yarn_log_mul / 0.1f : 0.0f;
  if (hp->rope.ext_factor != 0.0f) {
    const float mscale = log_mul != 1.0f && options.yarn_log_multiplier ? log_mul : 1.0f;
    hp->rope.attn_factor =
        yarn_attn_factor(hp->rope.freq_scale, log_mul, mscale, r.optional_float("rope.scaling.attn_factor", 1.0f));
  }
  if (options.adjust) SPITE_TRY(options.adjust(*hp));
  const std::int64_t n_leading = *leading;
  auto m = decoder_model::bind(f, std::move(*hp), {.fused_qkv_allowed = false, .shared_expert = true, .mla = &dims,
                                                   .moe_layer = [n_leading](int il) { return il >= n_leading; }});
  if (!m) return std::move(m).err();
  decoder_config& c = (*m)->config;
  c.gating = *gating == 2 ? moe_gating::sigmoid : moe_gating::softmax;
  c.moe_normalize = f.meta().get_bool(r.key("expert_weights_norm")).value_or(false);
  c.expert_weights_scale = r.optional_float("expert_weights_scale", 0.0f);
  c.n_expert_groups = *groups;
  c.n_group_used = *groups_used;
  // q.k scale: the YaRN magnitude (undoing the RoPE kernel's part) squared over sqrt(Dk), as
  // the reference computes it (its compiler fuses the multiply-adds).
  const rope_params& rope = (*m)->hp().rope;
  float kq = 1.0f;
  if (rope.ext_factor != 0.0f) {
    const float ln = std::log(1.0f / rope.freq_scale);
    const float attn_factor = rope.attn_factor * std::fma(0.1f, ln, 1.0f);
    kq = attn_factor * std::fma(0.1f * log_mul, ln, 1.0f);
  }
  c.kq_scale = 1.0f * kq * kq / std::sqrt(static_cast<float>(dims.key_dim));
  // Optional position temperature of q (Mistral 4): ln(floor(pos / length) + 1) * scale + 1.
  c.temperature_scale = r.optional_float("attention.temperature_scale", 0.0f);
  auto length = r.optional_int("attention.temperature_length", 0, 0, std::int64_t{1} << 30);
  if (!length) return std::move(length).err();
  c.temperature_length = *length;
  if (c.temperature_scale != 0.0f && c.temperature_length > 0) {
    for (attention_layer& a : (*m)->weights.attn) a.temperature = true;
  }
  return m;
}


}  // namespace spite::models
