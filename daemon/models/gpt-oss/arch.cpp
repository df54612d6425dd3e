// gpt-oss: OpenAI gpt-oss. Sliding-window layers alternating with full ones, per-head attention
// sinks, Q/K/V and output biases, NEOX RoPE with YaRN; every FFN is a mixture of experts routed
// by the softmax of the top-K logits (router and experts have biases) with gpt-oss's clamped
// SwiGLU. The FFN input norm is stored as post_attention_norm.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  const key_reader r(f.meta(), "gpt-oss");
  SPITE_TRY(r.required_int("expert_feed_forward_length", 1, std::int64_t{1} << 24));
  SPITE_TRY(r.required_int("attention.sliding_window", 1, std::int64_t{1} << 30));
  auto pattern = r.optional_int("attention.sliding_window_pattern", 2, 1, 1 << 16);
  if (!pattern) return std::move(pattern).err();
  auto m = decoder_model::load(f, rope_kind::neox, {.fused_qkv_allowed = false, .experts_required = true, .sinks = true,
                                                    .ffn_norm = "post_attention_norm"});
  if (!m) return std::move(m).err();
  decoder_model& d = **m;
  d.set_sliding_window(*pattern, d.hp().n_swa);
  decoder_config& c = d.config;
  c.gating = moe_gating::softmax_selected;
  c.moe_normalize = false;
  c.activation = ffn_activation::silu_oai;
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_gpt_oss() {
  static const arch_entry entry{"gpt-oss", load, "gpt-oss"};
  return entry;
}

}  // namespace spite::models
