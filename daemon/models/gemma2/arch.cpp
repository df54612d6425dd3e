// gemma2: Gemma 2. Sandwich norms, embeddings scaled by sqrt(E), GeGLU, NEOX RoPE, sliding-window
// layers alternating with global ones, attention scores and final logits soft-capped, q scaled
// before attention, output tied to the embeddings.
#include <cmath>

#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto m = decoder_model::load(f, rope_kind::neox, {.fused_qkv_allowed = false, .sandwich_norms = true});
  if (!m) return std::move(m).err();
  decoder_model& d = **m;
  const hparams& hp = d.hp();
  const key_reader r(f.meta(), hp.arch);
  auto pattern = r.optional_int("attention.sliding_window_pattern", 2, 1, 1 << 16);
  if (!pattern) return std::move(pattern).err();
  d.set_sliding_window(*pattern, hp.n_swa > 0 ? hp.n_swa : 4096);
  decoder_config& c = d.config;
  c.activation = ffn_activation::gelu;
  c.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));
  c.attn_softcap = r.optional_float("attn_logit_softcapping", 50.0f);
  c.final_softcap = r.optional_float("final_logit_softcapping", 30.0f);
  // Gemma 2 27B (46 layers) scales q by the width per head instead of the head width.
  const std::int64_t width = hp.n_layer == 46 ? hp.n_embd / hp.n_head[0] : c.head_dim;
  c.q_prescale = 1.0f / std::sqrt(static_cast<float>(width));
  c.kq_scale = 1.0f;
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_gemma2() {
  static const arch_entry entry{"gemma2", load, "gemma"};
  return entry;
}

}  // namespace spite::models
