#include "kv_kinds.hpp"

namespace spite::executor {

std::span<const kv_kind> kv_kinds() {
  static constexpr kv_kind kinds[] = {
      {"contiguous_f16", make_contiguous_f16},
      {"hybrid_f16", make_hybrid_f16},
  };
  return kinds;
}

result<std::unique_ptr<kv_memory>> make_kv_memory(std::string_view kind, const kv_layout& layout) {
  if (layout.n_ctx <= 0 || layout.n_seq_max <= 0 || layout.n_layer <= 0) {
    return make_error(errc::invalid_argument, "KV memory needs a positive context, sequence count and layer count");
  }
  for (const kv_kind& k : kv_kinds()) {
    if (k.name == kind) return k.create(layout);
  }
  std::string names;
  for (const kv_kind& k : kv_kinds()) {
    if (!names.empty()) names += ", ";
    names += k.name;
  }
  return make_error(errc::unsupported, "unknown KV memory kind '" + std::string(kind) + "' (known: " + names + ")");
}

}  // namespace spite::executor
