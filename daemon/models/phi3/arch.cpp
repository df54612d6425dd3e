// phi3: Phi-3 / Phi-3.5 / Phi-4-mini. Fused QKV and fused gate|up, NEOX RoPE (partial when the
// rotary width is below the head width) with LongRoPE factors, q scaled before attention.
#include <cmath>

#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

// LongRoPE keeps two factor sets; the long one is used when the context exceeds the original.
struct phi3_model : decoder_model {
  std::vector<float> factors_long, factors_short;
};

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options& options) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  SPITE_TRY(key_reader(f.meta(), hp->arch).required_float("attention.layer_norm_rms_epsilon"));
  hp->rope.kind = rope_kind::neox;
  const std::int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : hp->n_ctx_train;
  const std::int64_t n_ctx_orig = hp->rope.n_ctx_orig;
  auto m = decoder_model::bind(f, std::move(*hp), {.fused_gate_up = true});
  if (!m) return std::move(m).err();
  binder b(f, "phi3");
  const std::int64_t half = (*m)->hp().rope.n_dims / 2;
  std::vector<float> longf = b.vec("rope_factors_long.weight", half, true);
  std::vector<float> shortf = b.vec("rope_factors_short.weight", half, true);
  SPITE_TRY(b.status());
  if (!shortf.empty() || !longf.empty()) (*m)->weights.rope_freqs = n_ctx > n_ctx_orig && !longf.empty() ? longf : shortf;
  decoder_config& c = (*m)->config;
  c.q_prescale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.kq_scale = 1.0f;
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace

const arch_entry& arch_phi3() {
  static const arch_entry entry{"phi3", load, "phi"};
  return entry;
}

}  // namespace spite::models
