#include <cmath>

#include "spite/models/model.hpp"

namespace spite::models {

const std::vector<lora_pair>* lora_set::find(const std::byte* base_weight) const {
  for (const auto& [w, pairs] : pairs_) {
    if (w == base_weight) return &pairs;
  }
  return nullptr;
}

result<void> lora_set::add(const gguf::file& adapter, const gguf::file& base, float scale) {
  const std::string name = adapter.part_path(0);
  const auto type = adapter.meta().get_string("general.type");
  const auto kind = adapter.meta().get_string("adapter.type");
  if (type != "adapter" || kind != "lora") {
    return make_error(errc::invalid_argument, name + ": not a LoRA adapter (general.type = adapter and adapter.type = lora expected)");
  }
  const float alpha = static_cast<float>(adapter.meta().get_float("adapter.lora.alpha").value_or(0.0));
  if (const auto arch = adapter.meta().get_string("general.architecture"),
      base_arch = base.meta().get_string("general.architecture");
      arch && base_arch && *arch != *base_arch) {
    return make_error(errc::invalid_argument, name + ": adapter for " + std::string(*arch) + ", model is " + std::string(*base_arch));
  }
  std::size_t added = 0;
  for (const gguf::tensor_info& a : adapter.tensors()) {
    if (!a.name.ends_with(".lora_a")) continue;
    const std::string target(a.name.substr(0, a.name.size() - 7));
    const gguf::tensor_info* b = adapter.find_tensor(target + ".lora_b");
    const gguf::tensor_info* w = base.find_tensor(target);
    if (b == nullptr) return make_error(errc::malformed, name + ": '" + std::string(a.name) + "' has no matching lora_b");
    if (w == nullptr) return make_error(errc::invalid_argument, name + ": the model has no tensor '" + target + "'");
    // A {in, r}, B {r, out} for W {in, out}.
    const std::int64_t rank = a.ne[1];
    if (a.n_dims != 2 || b->n_dims != 2 || a.ne[0] != w->ne[0] || b->ne[0] != rank || b->ne[1] != w->ne[1] || rank <= 0) {
      return make_error(errc::malformed, name + ": shapes of '" + target + "' lora_a/lora_b do not fit the weight");
    }
    lora_pair p;
    p.a = dispatch::weight_of(a);
    p.b = dispatch::weight_of(*b);
    p.scale = alpha != 0.0f ? scale * alpha / static_cast<float>(rank) : scale;
    const std::byte* key = w->data;
    auto it = std::find_if(pairs_.begin(), pairs_.end(), [&](const auto& e) { return e.first == key; });
    if (it == pairs_.end()) pairs_.push_back({key, {p}});
    else it->second.push_back(p);
    ++added;
  }
  if (added == 0) return make_error(errc::malformed, name + ": no lora_a / lora_b tensors");
  return ok();
}

}  // namespace spite::models
