// mistral3: Ministral 3 / Magistral Small (text). llama's block with YaRN RoPE and, when
// attention.temperature_scale (beta) is set, q scaled after RoPE by
// ln(floor(pos / original context) + 1) * beta + 1.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto m = decoder_model::load(f, rope_kind::norm, {});
  if (!m) return std::move(m).err();
  decoder_model& d = **m;
  const float beta = key_reader(f.meta(), d.hp().arch).optional_float("attention.temperature_scale", 0.0f);
  if (beta != 0.0f) {
    d.config.temperature_scale = beta;
    d.config.temperature_length = d.hp().rope.n_ctx_orig;
    for (attention_layer& a : d.weights.attn) a.temperature = true;
  }
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_mistral3() {
  static const arch_entry entry{"mistral3", load, "mistral"};
  return entry;
}

}  // namespace spite::models
