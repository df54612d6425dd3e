// qwen3: Qwen3 dense. qwen2 without biases plus per-head RMS norms of Q and K before NEOX RoPE;
// the head width (attention.key_length) need not be n_embd / n_head.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  return as_model(decoder_model::load(f, rope_kind::neox, {.qk_norm = true}));
}

}  // namespace

const arch_entry& arch_qwen3() {
  static const arch_entry entry{"qwen3", load, "qwen"};
  return entry;
}

}  // namespace spite::models
