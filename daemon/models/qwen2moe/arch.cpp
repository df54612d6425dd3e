// qwen2moe: Qwen1.5-MoE / Qwen2-57B-A14B. qwen2 attention; softmax top-K experts whose weights
// are NOT renormalized, plus a shared expert scaled by a sigmoid gate.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto m = decoder_model::load(f, rope_kind::neox, {.shared_expert = true, .experts_required = true});
  if (m) {
    (*m)->config.moe_normalize = false;
    (*m)->config.shared_gate_silu_div = true;  // the reference's sigmoid: silu(g) / g
  }
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_qwen2moe() {
  static const arch_entry entry{"qwen2moe", load, "qwen"};
  return entry;
}

}  // namespace spite::models
