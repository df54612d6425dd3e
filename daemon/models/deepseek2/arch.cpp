// deepseek2: DeepSeek-V2 / V3 / R1, Kimi-K2 (graph and loader: blocks/deepseek2.cpp).
#include "../blocks/deepseek2.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) { return as_model(load_deepseek2(f)); }

}  // namespace

const arch_entry& arch_deepseek2() {
  static const arch_entry entry{"deepseek2", load, "deepseek"};
  return entry;
}

}  // namespace spite::models
