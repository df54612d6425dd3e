// gemma2: Gemma 2. Sandwich norms, embeddings scaled by sqrt(E), GeGLU, NEOX RoPE, sliding-window
// layers alternating with global ones, attention scores and final logits soft-capped, q scaled
// before attention, output tied to the embeddings.
#include "../blocks/gemma.hpp"

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
  c.attn_softcap = r.optional_float("attn_logit_softcapping", 50.0f);
  c.final_softcap = r.optional_float("final_logit_softcapping", 30.0f);
  gemma_common(d, 46);  // 27B: 46 layers
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_gemma2() {
  static const arch_entry entry{"gemma2", load, "gemma"};
  return entry;
}

}  // namespace spite::models
