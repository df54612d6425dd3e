// qwen2moe: Qwen1.5-MoE / Qwen2-57B-A14B. qwen2 attention; softmax top-K experts whose weights
// are NOT renormalized, plus a shared expert scaled by a sigmoid gate.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  SPITE_TRY(key_reader(f.meta(), hp->arch).required_float("attention.layer_norm_rms_epsilon"));
  if (hp->n_expert <= 0) return make_error(errc::malformed, "qwen2moe model: expert_count is missing");
  hp->rope.kind = rope_kind::neox;
  auto m = decoder_model::bind(f, std::move(*hp), {.shared_expert = true});
  if (!m) return std::move(m).err();
  (*m)->config.moe_normalize = false;
  (*m)->config.shared_gate_silu_div = true;  // the reference's sigmoid: silu(g) / g
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace

const arch_entry& arch_qwen2moe() {
  static const arch_entry entry{"qwen2moe", load, "qwen"};
  return entry;
}

}  // namespace spite::models
