#include "qwen35.hpp"

namespace spite::models {

result<std::unique_ptr<decoder_model>> load_qwen35(const gguf::file& f, bool moe) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  const key_reader r(f.meta(), hp->arch);
  constexpr std::int64_t big = std::int64_t{1} << 20;
  SPITE_TRY(r.required_float("attention.layer_norm_rms_epsilon"));
  if (f.meta().find(r.key("rope.dimension_sections")) == nullptr) {
    return make_error(errc::malformed, hp->arch + " model: " + r.key("rope.dimension_sections") + " is missing");
  }
  auto K = r.required_int("ssm.conv_kernel", 1, 64);
  auto inner = r.required_int("ssm.inner_size", 1, big);
  auto S = r.required_int("ssm.state_size", 1, 4096);
  auto Hv = r.required_int("ssm.time_step_rank", 1, 4096);
  auto Hk = r.required_int("ssm.group_count", 1, 4096);
  auto interval = r.optional_int("full_attention_interval", 4, 1, big);
  for (const auto* v : {&K, &inner, &S, &Hv, &Hk, &interval}) {
    if (!*v) return v->err();
  }
  if (*inner != *S * *Hv || *Hv % *Hk != 0 || hp->head_dim_k != hp->head_dim_v) {
    return make_error(errc::malformed, hp->arch + " model: inconsistent linear-attention sizes (inner_size " +
                                           std::to_string(*inner) + ", state_size " + std::to_string(*S) + ", " +
                                           std::to_string(*Hk) + " k heads, " + std::to_string(*Hv) + " v heads)");
  }
  // Which layers are recurrent: attention.recurrent_layers when given, else all but every
  // interval-th layer.
  std::vector<bool> recurrent(static_cast<std::size_t>(hp->n_layer));
  if (f.meta().find(r.key("attention.recurrent_layers")) != nullptr) {
    auto flags = r.per_layer("attention.recurrent_layers", hp->n_layer, std::nullopt, 0, 1);
    if (!flags) return std::move(flags).err();
    for (std::size_t il = 0; il < recurrent.size(); ++il) recurrent[il] = (*flags)[il] != 0;
  } else {
    for (std::size_t il = 0; il < recurrent.size(); ++il) recurrent[il] = (static_cast<std::int64_t>(il) + 1) % *interval != 0;
  }
  auto dn = std::make_shared<delta_net_layer>();  // sizes, shared by every recurrent layer
  dn->K = *K;
  dn->Sk = dn->Sv = *S;
  dn->Hk = *Hk;
  dn->Hv = *Hv;
  hp->rope.kind = rope_kind::neox;  // IMROPE with text positions (p, p, p, 0) is NEOX
  hp->memory_kind = "hybrid_f16";
  hp->n_state.assign(recurrent.size(), 0);
  for (std::size_t il = 0; il < recurrent.size(); ++il) {
    if (!recurrent[il]) continue;
    hp->n_state[il] = dn->state_floats();
    hp->n_head_kv[il] = 0;  // no KV in the attention memory
  }
  const std::int64_t E = hp->n_embd;
  auto m = decoder_model::bind(f, std::move(*hp), {.fused_qkv_allowed = false, .qk_norm = true, .shared_expert = moe,
                                                   .experts_required = moe, .ffn_norm = "post_attention_norm",
                                                   .q_gate = true,
                                                   .recurrent_layer = [recurrent](int il) { return recurrent[static_cast<std::size_t>(il)]; }});
  if (!m) return std::move(m).err();
  binder b(f, (*m)->hp().arch);
  const std::int64_t C = dn->conv_dim(), V = dn->Hv * dn->Sv;
  for (int il = 0; il < static_cast<int>(recurrent.size()); ++il) {
    if (!recurrent[static_cast<std::size_t>(il)]) continue;
    auto l = std::make_shared<delta_net_layer>(*dn);
    l->qkv = b.matrix(layer_tensor(il, "attn_qkv"), E, C);
    l->z = b.matrix(layer_tensor(il, "attn_gate"), E, V);
    l->beta = b.matrix(layer_tensor(il, "ssm_beta"), E, dn->Hv);
    l->alpha = b.matrix(layer_tensor(il, "ssm_alpha"), E, dn->Hv);
    l->conv = b.values(layer_tensor(il, "ssm_conv1d.weight"), {dn->K, C});
    l->dt_bias = b.vec(layer_tensor(il, "ssm_dt.bias"), dn->Hv);
    l->a = b.vec(layer_tensor(il, "ssm_a"), dn->Hv);
    l->norm = b.vec(layer_tensor(il, "ssm_norm.weight"), dn->Sv);
    l->out = b.matrix(layer_tensor(il, "ssm_out"), V, E);
    (*m)->weights.attn[static_cast<std::size_t>(il)].delta_net = std::move(l);
  }
  SPITE_TRY(b.status());
  return m;
}

}  // namespace spite::models
