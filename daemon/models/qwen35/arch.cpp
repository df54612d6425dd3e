// qwen35: Qwen3.5 dense, gated DeltaNet layers with gated attention every few layers (see
// blocks/qwen35.hpp); runs on the hybrid KV memory.
#include "../blocks/qwen35.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) { return as_model(load_qwen35(f, false)); }

}  // namespace

const arch_entry& arch_qwen35() {
  static const arch_entry entry{"qwen35", load, "qwen"};
  return entry;
}

}  // namespace spite::models
