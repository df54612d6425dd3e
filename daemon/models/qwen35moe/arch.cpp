// qwen35moe: Qwen3.5 with softmax top-K experts and a sigmoid-gated shared expert in every
// layer (see blocks/qwen35.hpp).
#include "../blocks/qwen35.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) { return as_model(load_qwen35(f, true)); }

}  // namespace

const arch_entry& arch_qwen35moe() {
  static const arch_entry entry{"qwen35moe", load, "qwen"};
  return entry;
}

}  // namespace spite::models
