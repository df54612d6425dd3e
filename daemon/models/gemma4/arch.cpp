// gemma4: Gemma 4 text. Sandwich-normed layers whose head width, KV head count and RoPE differ
// between sliding-window layers (key_length_swa, rope.dimension_count_swa, rope.freq_base_swa) and
// full layers (proportional RoPE through rope_freqs); weighted QK norms, an unweighted V norm and
// q.k unscaled; the last shared_kv_layers layers attend over the KV of the last earlier layer of
// their kind; per-layer token embeddings mixed into every layer's output; GeGLU FFNs, on some
// layers next to GELU experts whose router sees a scaled RMS norm; a per-layer output scale;
// final logit soft-capping.
#include <cmath>

#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

struct gemma4_layer {
  ffn_layer moe;                              // router set: experts next to the dense FFN
  std::vector<float> post_ffw_1, post_ffw_2;  // [E] norms of the dense and the expert outputs
  std::vector<float> router_scale;            // [E]
  linear ple_gate, ple_proj;                  // {E, P}, {P, E}
  std::vector<float> ple_norm;                // [E]
  float output_scale = 1.0f;
};

class gemma4_model final : public decoder_model {
 public:
  std::vector<gemma4_layer> layers;
  const gguf::tensor_info* ple_embd = nullptr;  // {P L, V}
  linear ple_model_proj;                        // {E, P L}
  std::vector<float> ple_proj_norm;             // [P]
  std::int64_t P = 0;

  result<void> forward(forward_context& ctx) const override;
  static result<std::unique_ptr<model>> load(const gguf::file& f);

 private:
  void per_layer_inputs(forward_context& ctx, const float* x, float* pl) const;
};

// pl [P, L, n] = (RMSNorm(model_proj x / sqrt(E)) + ple_embd[token] sqrt(P)) / sqrt(2)
void gemma4_model::per_layer_inputs(forward_context& ctx, const float* x, float* pl) const {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t E = hp_.n_embd, PL = P * hp_.n_layer;
  ple_model_proj.apply(ctx, x, n, pl);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(E));
  for (std::int64_t i = 0; i < PL * n; ++i) pl[i] *= proj_scale;
  rms_norm_rows(ctx, pl, ple_proj_norm.data(), pl, P, hp_.n_layer * n, config.rms_eps);
  std::vector<float> row(static_cast<std::size_t>(PL));
  const float embd_scale = std::sqrt(static_cast<float>(P)), mix = 1.0f / std::sqrt(2.0f);
  for (std::int64_t t = 0; t < n; ++t) {
    embedding_row(weights.file, *ple_embd, ctx.batch.tokens[static_cast<std::size_t>(t)], PL, row.data());
    for (std::int64_t i = 0; i < PL; ++i) pl[t * PL + i] = (pl[t * PL + i] + row[static_cast<std::size_t>(i)] * embd_scale) * mix;
  }
}

result<void> gemma4_model::forward(forward_context& ctx) const {
  const decoder_weights& w = weights;
  const decoder_config& c = config;
  const std::int64_t E = hp_.n_embd, L = hp_.n_layer;
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  std::vector<float> x(static_cast<std::size_t>(E * n)), cur(x.size()), delta(x.size()), moe_out(x.size()), moe_in(x.size());
  embed_tokens(ctx, w, c, E, x.data());
  std::vector<float> pl;
  if (P > 0) {
    pl.resize(static_cast<std::size_t>(P * L * n));
    per_layer_inputs(ctx, x.data(), pl.data());
  }
  const float* freqs = w.rope_freqs.empty() ? nullptr : w.rope_freqs.data();
  const float router_scale = 1.0f / std::sqrt(static_cast<float>(E));
  for (int il = 0; il < static_cast<int>(L); ++il) {
    const attention_layer& a = w.attn[static_cast<std::size_t>(il)];
    const ffn_layer& f = w.ffn[static_cast<std::size_t>(il)];
    const gemma4_layer& g = layers[static_cast<std::size_t>(il)];
    rms_norm_rows(ctx, x.data(), a.norm.data(), cur.data(), E, n, c.rms_eps);
    attention_block(ctx, a, c, il, freqs, cur.data(), delta.data());
    rms_norm_rows(ctx, delta.data(), a.post_norm.data(), delta.data(), E, n, c.rms_eps);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += delta[i];

    rms_norm_rows(ctx, x.data(), f.norm.data(), cur.data(), E, n, c.rms_eps);
    ffn_block(ctx, f, c, cur.data(), delta.data());
    if (g.moe.is_moe()) {
      rms_norm_rows(ctx, delta.data(), g.post_ffw_1.data(), delta.data(), E, n, c.rms_eps);
      rms_norm_rows(ctx, x.data(), g.moe.norm.data(), moe_in.data(), E, n, c.rms_eps);
      // The router sees RMSNorm(x) / sqrt(E) * scale.
      rms_norm_rows(ctx, x.data(), nullptr, cur.data(), E, n, c.rms_eps);
      for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < E; ++j) cur[static_cast<std::size_t>(t * E + j)] = cur[static_cast<std::size_t>(t * E + j)] * router_scale * g.router_scale[static_cast<std::size_t>(j)];
      }
      ffn_block(ctx, g.moe, c, moe_in.data(), moe_out.data(), cur.data());
      rms_norm_rows(ctx, moe_out.data(), g.post_ffw_2.data(), moe_out.data(), E, n, c.rms_eps);
      for (std::size_t i = 0; i < delta.size(); ++i) delta[i] += moe_out[i];
    }
    rms_norm_rows(ctx, delta.data(), f.post_norm.data(), delta.data(), E, n, c.rms_eps);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += delta[i];

    if (P > 0) {
      // x += RMSNorm(proj (gelu(gate x) * pl[il]))
      std::vector<float> gx(static_cast<std::size_t>(P * n)), inp(gx.size()), h(gx.size());
      g.ple_gate.apply(ctx, x.data(), n, gx.data());
      for (std::int64_t t = 0; t < n; ++t) std::copy_n(pl.data() + (t * L + il) * P, P, inp.data() + t * P);
      ctx.ops.geglu(gx.data(), inp.data(), h.data(), P, n);
      g.ple_proj.apply(ctx, h.data(), n, delta.data());
      rms_norm_rows(ctx, delta.data(), g.ple_norm.data(), delta.data(), E, n, c.rms_eps);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
    }
    if (g.output_scale != 1.0f) {
      for (float& v : x) v *= g.output_scale;
    }
  }
  output_head(ctx, w, c, E, x.data());
  return ok();
}

result<std::unique_ptr<model>> gemma4_model::load(const gguf::file& f) {
  auto hpr = load_common_hparams(f.meta());
  if (!hpr) return std::move(hpr).err();
  hparams hp = std::move(*hpr);
  const key_reader r(f.meta(), hp.arch);
  const std::int64_t L = hp.n_layer, E = hp.n_embd, V = hp.n_vocab;
  SPITE_TRY(r.required_float("attention.layer_norm_rms_epsilon"));
  auto swa_len = r.required_int("attention.sliding_window", 1, std::int64_t{1} << 30);
  auto dk_swa = r.required_int("attention.key_length_swa", 1, 1 << 16);
  auto dv_swa = r.required_int("attention.value_length_swa", 1, 1 << 16);
  auto P = r.required_int("embedding_length_per_layer_input", 0, 1 << 16);
  auto shared = r.optional_int("attention.shared_kv_layers", 0, 0, L - 1);
  for (const auto* v : {&swa_len, &dk_swa, &dv_swa, &P, &shared}) {
    if (!*v) return v->err();
  }
  auto rope_swa = r.optional_int("rope.dimension_count_swa", *dk_swa, 0, *dk_swa);
  if (!rope_swa) return std::move(rope_swa).err();
  // Which layers slide: a per-layer flag array, or a period as in gemma3.
  std::vector<bool> swa(static_cast<std::size_t>(L));
  const gguf::value* pattern = f.meta().find(r.key("attention.sliding_window_pattern"));
  if (pattern == nullptr) return make_error(errc::malformed, hp.arch + " model: " + r.key("attention.sliding_window_pattern") + " is missing");
  if (pattern->as_array() != nullptr) {
    auto flags = r.per_layer("attention.sliding_window_pattern", L, std::nullopt, 0, 1);
    if (!flags) return std::move(flags).err();
    for (std::size_t il = 0; il < swa.size(); ++il) swa[il] = (*flags)[il] != 0;
  } else {
    auto period = r.required_int("attention.sliding_window_pattern", 1, 1 << 16);
    if (!period) return std::move(period).err();
    for (int il = 0; il < L; ++il) swa[static_cast<std::size_t>(il)] = is_swa_layer(il, *period);
  }
  const std::int64_t first_shared = L - *shared;
  hp.rope.kind = rope_kind::neox;
  const std::vector<std::int64_t> n_head_kv = hp.n_head_kv;
  hp.head_dim_k_layer.resize(static_cast<std::size_t>(L));
  hp.head_dim_v_layer.resize(static_cast<std::size_t>(L));
  for (std::size_t il = 0; il < swa.size(); ++il) {
    hp.head_dim_k_layer[il] = swa[il] ? *dk_swa : hp.head_dim_k;
    hp.head_dim_v_layer[il] = swa[il] ? *dv_swa : hp.head_dim_v;
    if (static_cast<std::int64_t>(il) >= first_shared) hp.n_head_kv[il] = 0;  // keeps no KV of its own
  }

  auto m = std::make_unique<gemma4_model>();
  m->P = *P;
  binder b(f, hp.arch);
  decoder_weights& w = m->weights;
  w.file = &f;
  w.token_embd = b.tensor("token_embd.weight", {E, V});
  w.output_norm = b.vec("output_norm.weight", E);
  w.output = b.output_head(w.token_embd, E, V);
  w.rope_freqs = b.vec("rope_freqs.weight", hp.rope.n_dims / 2);
  if (m->P > 0) {
    m->ple_embd = b.tensor("per_layer_token_embd.weight", {m->P * L, V});
    m->ple_model_proj = b.matrix("per_layer_model_proj", E, m->P * L);
    m->ple_proj_norm = b.vec("per_layer_proj_norm.weight", m->P);
  }
  w.attn.resize(static_cast<std::size_t>(L));
  w.ffn.resize(static_cast<std::size_t>(L));
  m->layers.resize(static_cast<std::size_t>(L));
  for (int il = 0; il < L; ++il) {
    const auto i = static_cast<std::size_t>(il);
    const std::int64_t D = hp.head_dim_k_layer[i], Dv = hp.head_dim_v_layer[i], H = hp.n_head[i];
    attention_layer& a = w.attn[i];
    a.n_head = H;
    a.head_dim = D;
    a.head_dim_v = Dv;
    if (il >= first_shared) {
      // The last earlier layer of the same kind (the pattern ends on a full layer).
      a.kv_layer = static_cast<int>(first_shared - (swa[i] ? 2 : 1));
      if (a.kv_layer < 0 || swa[static_cast<std::size_t>(a.kv_layer)] != swa[i]) {
        return make_error(errc::malformed, hp.arch + " model: layer " + std::to_string(il) + " has no earlier layer of its kind to share the KV of");
      }
    }
    a.n_head_kv = n_head_kv[a.kv_layer >= 0 ? static_cast<std::size_t>(a.kv_layer) : i];
    if (H <= 0 || a.n_head_kv <= 0 || H % a.n_head_kv != 0 || D != Dv) {
      return make_error(errc::malformed, hp.arch + " model: layer " + std::to_string(il) + " has " + std::to_string(H) +
                                             " heads, " + std::to_string(a.n_head_kv) + " KV heads, widths " +
                                             std::to_string(D) + " / " + std::to_string(Dv));
    }
    a.norm = b.vec(layer_tensor(il, "attn_norm.weight"), E);
    a.q = b.matrix(layer_tensor(il, "attn_q"), E, H * D);
    a.q_norm = b.vec(layer_tensor(il, "attn_q_norm.weight"), D);
    if (a.kv_layer < 0) {
      a.k = b.matrix(layer_tensor(il, "attn_k"), E, a.n_head_kv * D);
      a.v = b.matrix(layer_tensor(il, "attn_v"), E, a.n_head_kv * Dv, true);
      a.k_norm = b.vec(layer_tensor(il, "attn_k_norm.weight"), D);
    }
    a.v_norm = true;
    a.o = b.matrix(layer_tensor(il, "attn_output"), H * Dv, E);
    a.post_norm = b.vec(layer_tensor(il, "post_attention_norm.weight"), E);
    a.rope = hp.rope;
    if (swa[i]) {
      a.rope.n_dims = *rope_swa;
      a.rope.freq_base = hp.rope_freq_base_swa;
      a.rope_freqs = false;
      a.mask.swa_window = static_cast<std::int32_t>(*swa_len);
      hp.kv_window.resize(static_cast<std::size_t>(L), 0);
      hp.kv_window[i] = a.mask.swa_window;
    }

    w.ffn[i] = bind_ffn(b, f, hp, il, {.sandwich_norms = true, .moe_layer = [](int) { return false; }});
    gemma4_layer& g = m->layers[i];
    if (f.find_tensor(layer_tensor(il, "ffn_gate_inp.weight")) != nullptr) {
      if (hp.n_expert <= 0 || hp.n_expert_used <= 0) return make_error(errc::malformed, hp.arch + " model: experts without expert_count / expert_used_count");
      g.moe = bind_ffn(b, f, hp, il, {.ffn_norm = "pre_ffw_norm_2"});
      g.router_scale = b.vec(layer_tensor(il, "ffn_gate_inp.scale"), E);
      g.moe.down_exps_scale = b.vec(layer_tensor(il, "ffn_down_exps.scale"), hp.n_expert, true);
      g.post_ffw_1 = b.vec(layer_tensor(il, "post_ffw_norm_1.weight"), E);
      g.post_ffw_2 = b.vec(layer_tensor(il, "post_ffw_norm_2.weight"), E);
    }
    if (m->P > 0) {
      g.ple_gate = b.matrix(layer_tensor(il, "inp_gate"), E, m->P);
      g.ple_proj = b.matrix(layer_tensor(il, "proj"), m->P, E);
      g.ple_norm = b.vec(layer_tensor(il, "post_norm.weight"), E);
    }
    const std::vector<float> scale = b.vec(layer_tensor(il, "layer_output_scale.weight"), 1, true);
    if (!scale.empty()) g.output_scale = scale[0];
  }
  SPITE_TRY(b.status());

  decoder_config& c = m->config;
  c.rope = hp.rope;
  c.rms_eps = hp.rms_eps;
  c.head_dim = hp.head_dim_k;
  c.head_dim_v = hp.head_dim_v;
  c.kq_scale = 1.0f;
  c.activation = ffn_activation::gelu;
  c.embed_scale = std::sqrt(static_cast<float>(E));
  c.final_softcap = r.optional_float("final_logit_softcapping", 30.0f);
  c.n_expert_used = hp.n_expert_used;
  m->hp_ = std::move(hp);
  return std::unique_ptr<model>(std::move(m));
}

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) { return gemma4_model::load(f); }

}  // namespace

const arch_entry& arch_gemma4() {
  static const arch_entry entry{"gemma4", load, "gemma"};
  return entry;
}

}  // namespace spite::models
