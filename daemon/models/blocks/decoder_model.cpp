#include "decoder_model.hpp"

#include <cmath>

#include "spite/core/log.hpp"

namespace spite::models {
namespace {

std::shared_ptr<const mla_layer> bind_mla(binder& b, int il, std::int64_t E, std::int64_t H, const mla_dims& d) {
  auto m = std::make_shared<mla_layer>();
  m->kv_lora = d.kv_lora;
  m->rope_dim = d.rope_dim;
  m->nope_dim = d.key_dim - d.rope_dim;
  m->v_dim = d.v_dim;
  if (d.q_lora > 0) {
    m->q_a = b.matrix(layer_tensor(il, "attn_q_a"), E, d.q_lora);
    m->q_a_norm = b.vec(layer_tensor(il, "attn_q_a_norm.weight"), d.q_lora);
    m->q_b = b.matrix(layer_tensor(il, "attn_q_b"), d.q_lora, H * d.key_dim);
  } else {
    m->q = b.matrix(layer_tensor(il, "attn_q"), E, H * d.key_dim);
  }
  m->kv_a = b.matrix(layer_tensor(il, "attn_kv_a_mqa"), E, d.kv_lora + d.rope_dim);
  m->kv_a_norm = b.vec(layer_tensor(il, "attn_kv_a_norm.weight"), d.kv_lora);
  m->k_b = b.tensor(layer_tensor(il, "attn_k_b.weight"), {d.key_dim - d.rope_dim, d.kv_lora, H});
  m->v_b = b.tensor(layer_tensor(il, "attn_v_b.weight"), {d.kv_lora, d.v_dim, H});
  return m;
}

// The stacks' experts as matrices (ffn_layer::gate_x, up_x, down_x), packed once at load as the
// dense matrices are: the kernels then stream an expert at the speed of a dense matrix of its
// size instead of unpacking the file's blocks per token.
void bind_experts(binder& b, ffn_layer& f, int il, std::int64_t X) {
  if (f.up_exps == nullptr || f.down_exps == nullptr) return;  // binder already failed
  const auto count = static_cast<std::size_t>(X);
  f.up_x.reserve(count);
  if (f.gate_exps != nullptr) {
    f.gate_x.reserve(count);
    // Gate 0, up 0, gate 1, ... one after the other in one buffer: each pair in place to run
    // as one matrix (op_table::matmul_parts).
    const auto together = b.pack_together({layer_tensor(il, "ffn_gate_exps"), layer_tensor(il, "ffn_up_exps")});
    for (std::int64_t e = 0; e < X; ++e) {
      f.gate_x.push_back(b.expert(*f.gate_exps, e));
      f.up_x.push_back(b.expert(*f.up_exps, e));
    }
  } else {
    for (std::int64_t e = 0; e < X; ++e) f.up_x.push_back(b.expert(*f.up_exps, e));
  }
  for (std::size_t e = 0; e < f.gate_x.size(); ++e) b.place_together({&f.gate_x[e], &f.up_x[e]});
  const auto together = b.pack_together({layer_tensor(il, "ffn_down_exps")});
  f.down_x.reserve(count);
  for (std::int64_t e = 0; e < X; ++e) f.down_x.push_back(b.expert(*f.down_exps, e));
}

}  // namespace

ffn_layer bind_ffn(binder& b, const gguf::file& file, const hparams& hp, int il, const bind_options& o) {
  const std::int64_t E = hp.n_embd;
  ffn_layer f;
  f.norm = b.vec(layer_tensor(il, (std::string(o.ffn_norm) + ".weight").c_str()), E);
  if (o.sandwich_norms) f.post_norm = b.vec(layer_tensor(il, "post_ffw_norm.weight"), E);
  if (hp.n_expert > 0 && (!o.moe_layer || o.moe_layer(il))) {
    const std::int64_t X = hp.n_expert, Fe = hp.n_ff_exp > 0 ? hp.n_ff_exp : hp.n_ff[static_cast<std::size_t>(il)];
    f.router = b.matrix(layer_tensor(il, "ffn_gate_inp"), E, X);
    if (file.find_tensor(layer_tensor(il, "ffn_gate_up_exps.weight")) != nullptr) {
      f.up_exps = b.tensor(layer_tensor(il, "ffn_gate_up_exps.weight"), {E, 2 * Fe, X});
    } else {
      f.gate_exps = b.tensor(layer_tensor(il, "ffn_gate_exps.weight"), {E, Fe, X});
      f.up_exps = b.tensor(layer_tensor(il, "ffn_up_exps.weight"), {E, Fe, X});
    }
    f.down_exps = b.tensor(layer_tensor(il, "ffn_down_exps.weight"), {Fe, E, X});
    bind_experts(b, f, il, X);
    f.select_bias = b.vec(layer_tensor(il, "exp_probs_b.bias"), X, true);
    f.gate_exps_b = b.values(layer_tensor(il, "ffn_gate_exps.bias"), {Fe, X}, true);
    f.up_exps_b = b.values(layer_tensor(il, "ffn_up_exps.bias"), {Fe, X}, true);
    f.down_exps_b = b.values(layer_tensor(il, "ffn_down_exps.bias"), {E, X}, true);
    if (o.shared_expert) {
      const std::int64_t Fs = hp.n_ff_shexp > 0 ? hp.n_ff_shexp : Fe;
      f.shared_gate = b.matrix(layer_tensor(il, "ffn_gate_shexp"), E, Fs);
      f.shared_up = b.matrix(layer_tensor(il, "ffn_up_shexp"), E, Fs);
      f.shared_down = b.matrix(layer_tensor(il, "ffn_down_shexp"), Fs, E);
      if (const gguf::tensor_info* g = b.tensor(layer_tensor(il, "ffn_gate_inp_shexp.weight"), {E}, true)) {
        f.shared_router.w = dispatch::weight_of(*g);  // a vector: one output per token
        f.shared_router.w.out = 1;
      }
    }
  } else {
    const std::int64_t F = hp.n_ff[static_cast<std::size_t>(il)];
    if (o.fused_gate_up) {
      f.up = b.matrix(layer_tensor(il, "ffn_up"), E, 2 * F);
    } else {
      {
        const auto together = b.pack_together({layer_tensor(il, "ffn_gate"), layer_tensor(il, "ffn_up")});
        f.gate = b.matrix(layer_tensor(il, "ffn_gate"), E, F);
        f.up = b.matrix(layer_tensor(il, "ffn_up"), E, F);
      }
      b.place_together({&f.gate, &f.up});
    }
    f.down = b.matrix(layer_tensor(il, "ffn_down"), F, E);
  }
  return f;
}

result<std::unique_ptr<decoder_model>> decoder_model::bind(const gguf::file& file, hparams hp, const bind_options& o) {
  auto m = std::make_unique<decoder_model>();
  binder b(file, hp.arch);
  const std::int64_t E = hp.n_embd, V = hp.n_vocab, D = hp.head_dim_k, Dv = hp.head_dim_v;
  if (V <= 0) return make_error(errc::malformed, hp.arch + " model: no vocabulary size (tokenizer.ggml.tokens)");
  decoder_weights& w = m->weights;
  w.file = &file;
  w.token_embd = b.tensor("token_embd.weight", {E, V});
  w.output_norm = b.vec("output_norm.weight", E);
  w.output = b.output_head(w.token_embd, E, V);
  w.rope_freqs = b.vec("rope_freqs.weight", hp.rope.n_dims / 2, true);
  w.attn.resize(static_cast<std::size_t>(hp.n_layer));
  w.ffn.resize(static_cast<std::size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    attention_layer& a = w.attn[static_cast<std::size_t>(il)];
    a.norm = b.vec(layer_tensor(il, "attn_norm.weight"), E);
    w.ffn[static_cast<std::size_t>(il)] = bind_ffn(b, file, hp, il, o);
    if (o.recurrent_layer && o.recurrent_layer(il)) continue;  // the architecture binds its mixer
    const std::int64_t H = hp.n_head[static_cast<std::size_t>(il)], Hkv = hp.n_head_kv[static_cast<std::size_t>(il)];
    if (H <= 0 || Hkv <= 0 || H % Hkv != 0) {
      return make_error(errc::malformed, hp.arch + " model: layer " + std::to_string(il) + " has " + std::to_string(H) +
                                             " heads and " + std::to_string(Hkv) + " KV heads");
    }
    a.n_head = H;
    a.n_head_kv = Hkv;
    const bool fused = o.fused_qkv_allowed && file.find_tensor(layer_tensor(il, "attn_qkv.weight")) != nullptr;
    if (o.mla != nullptr) {
      a.mla = bind_mla(b, il, E, H, *o.mla);
      a.o = b.matrix(layer_tensor(il, "attn_output"), H * o.mla->v_dim, E);
    } else if (fused) {
      a.qkv = b.matrix(layer_tensor(il, "attn_qkv"), E, H * D + Hkv * D + Hkv * Dv);
    } else {
      a.q_gate = o.q_gate;
      {
        const auto together = b.pack_together({layer_tensor(il, "attn_q"), layer_tensor(il, "attn_k"), layer_tensor(il, "attn_v")});
        a.q = b.matrix(layer_tensor(il, "attn_q"), E, (o.q_gate ? 2 : 1) * H * D);
        a.k = b.matrix(layer_tensor(il, "attn_k"), E, Hkv * D);
        a.v = b.matrix(layer_tensor(il, "attn_v"), E, Hkv * Dv);
      }
      b.place_together({&a.q, &a.k, &a.v});
    }
    if (o.mla == nullptr) a.o = b.matrix(layer_tensor(il, "attn_output"), H * Dv, E);
    a.rope = hp.rope;
    if (o.sandwich_norms) a.post_norm = b.vec(layer_tensor(il, "post_attention_norm.weight"), E);
    if (o.sinks) a.sinks = b.vec(layer_tensor(il, "attn_sinks.weight"), H);
    if (o.qk_norm) {
      a.q_norm = b.vec(layer_tensor(il, "attn_q_norm.weight"), D);
      a.k_norm = b.vec(layer_tensor(il, "attn_k_norm.weight"), D);
    }
  }
  SPITE_TRY(b.status());
  if (b.packed_bytes() > 0) {
    log::info(hp.arch, " model: ", (b.packed_bytes() + (1u << 19)) >> 20, " MiB of weights (", b.packed_bytes(),
              " bytes) repacked for the CPU kernels");
  }

  decoder_config& c = m->config;
  c.rope = hp.rope;
  c.rms_eps = hp.rms_eps;
  c.head_dim = D;
  c.head_dim_v = Dv;
  c.kq_scale = hp.attention_scale.value_or(1.0f / std::sqrt(static_cast<float>(D)));
  c.n_expert_used = hp.n_expert_used;
  if (hp.n_expert > 0 && hp.n_expert_used <= 0) {
    return make_error(errc::malformed, hp.arch + " model: " + std::to_string(hp.n_expert) + " experts but no expert_used_count");
  }
  m->hp_ = std::move(hp);
  return m;
}

result<std::unique_ptr<decoder_model>> decoder_model::load(const gguf::file& file, rope_kind rope, const bind_options& o) {
  auto hp = load_common_hparams(file.meta());
  if (!hp) return std::move(hp).err();
  SPITE_TRY(key_reader(file.meta(), hp->arch).required_float("attention.layer_norm_rms_epsilon"));
  if (o.experts_required && hp->n_expert <= 0) return make_error(errc::malformed, hp->arch + " model: expert_count is missing");
  hp->rope.kind = rope;
  return bind(file, std::move(*hp), o);
}

}  // namespace spite::models

namespace spite::models {

void decoder_model::set_sliding_window(std::int64_t pattern, std::int32_t window, bool chunked) {
  for (int il = 0; il < static_cast<int>(weights.attn.size()); ++il) {
    if (!is_swa_layer(il, pattern)) continue;
    attention_layer& a = weights.attn[static_cast<std::size_t>(il)];
    a.mask.swa_window = window;
    a.mask.swa_chunked = chunked;
    a.rope.freq_base = hp_.rope_freq_base_swa;
    hp_.kv_window.resize(weights.attn.size(), 0);
    hp_.kv_window[static_cast<std::size_t>(il)] = window;
  }
}

}  // namespace spite::models
