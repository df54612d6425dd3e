// gemma3: Gemma 3 text. gemma2's block without attention soft-capping, plus per-head Q/K RMS
// norms before RoPE; five sliding-window layers per global one, the sliding layers with their own
// RoPE base (rope.freq_base_swa, default 10000) and no linear scaling, which applies to the global
// layers only.
#include "../blocks/gemma.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto m = decoder_model::load(f, rope_kind::neox, {.fused_qkv_allowed = false, .qk_norm = true, .sandwich_norms = true});
  if (!m) return std::move(m).err();
  decoder_model& d = **m;
  const hparams& hp = d.hp();
  const key_reader r(f.meta(), hp.arch);
  auto pattern = r.optional_int("attention.sliding_window_pattern", 6, 1, 1 << 16);
  if (!pattern) return std::move(pattern).err();
  if (hp.n_swa > 0) {
    d.set_sliding_window(*pattern, hp.n_swa);
    for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
      if (!decoder_model::is_swa_layer(il, *pattern)) continue;
      rope_params& rope = d.weights.attn[static_cast<std::size_t>(il)].rope;
      rope.freq_base = r.optional_float("rope.freq_base_swa", 10000.0f);
      rope.freq_scale = 1.0f;
    }
  }
  decoder_config& c = d.config;
  c.final_softcap = r.optional_float("final_logit_softcapping", 0.0f);
  gemma_common(d, 62);  // 27B: 62 layers
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_gemma3() {
  static const arch_entry entry{"gemma3", load, "gemma"};
  return entry;
}

}  // namespace spite::models
