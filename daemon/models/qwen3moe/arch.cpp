// qwen3moe: Qwen3-30B-A3B / 235B-A22B. qwen3 attention (QK-norm); softmax top-K experts with
// renormalized weights, no shared expert.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  return as_model(decoder_model::load(f, rope_kind::neox, {.qk_norm = true, .experts_required = true}));
}

}  // namespace

const arch_entry& arch_qwen3moe() {
  static const arch_entry entry{"qwen3moe", load, "qwen"};
  return entry;
}

}  // namespace spite::models
