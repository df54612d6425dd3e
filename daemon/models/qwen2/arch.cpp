// qwen2: Qwen2 / Qwen2.5 dense. NEOX RoPE, Q/K/V biases, tied output on the small sizes.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  SPITE_TRY(key_reader(f.meta(), hp->arch).required_float("attention.layer_norm_rms_epsilon"));
  hp->rope.kind = rope_kind::neox;
  auto m = decoder_model::bind(f, std::move(*hp), {});
  if (!m) return std::move(m).err();
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace

const arch_entry& arch_qwen2() {
  static const arch_entry entry{"qwen2", load, "qwen"};
  return entry;
}

}  // namespace spite::models
