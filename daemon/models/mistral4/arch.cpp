// mistral4: Mistral Small 4 / Large 3 (text): the DeepSeek-2 graph (blocks/deepseek2.cpp), usually
// with fused gate|up experts and a position temperature of q.
#include "../blocks/deepseek2.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) { return as_model(load_deepseek2(f)); }

}  // namespace

const arch_entry& arch_mistral4() {
  static const arch_entry entry{"mistral4", load, "mistral"};
  return entry;
}

}  // namespace spite::models
