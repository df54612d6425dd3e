// qwen2: Qwen2 / Qwen2.5 dense. NEOX RoPE, Q/K/V biases, tied output on the small sizes.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  return as_model(decoder_model::load(f, rope_kind::neox, {}));
}

}  // namespace

const arch_entry& arch_qwen2() {
  static const arch_entry entry{"qwen2", load, "qwen"};
  return entry;
}

}  // namespace spite::models
