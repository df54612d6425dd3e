#include <algorithm>
#include <string>

#include "spite/models/model.hpp"

namespace spite::models {

result<std::unique_ptr<model>> load_model(const gguf::file& file, const load_options& options) {
  const auto arch = file.meta().get_string("general.architecture");
  if (!arch) return make_error(errc::malformed, file.part_path(0) + ": general.architecture is missing");
  for (const arch_entry* e : architectures()) {
    if (e->name == *arch) {
      auto m = e->load(file, options);
      if (!m) return std::move(m).err().with_context(file.part_path(0));
      return m;
    }
  }
  std::string supported;
  for (const arch_entry* e : architectures()) {
    if (!supported.empty()) supported += ", ";
    supported += e->name;
  }
  return make_error(errc::unsupported, file.part_path(0) + ": architecture '" + std::string(*arch) +
                                           "' is not supported (supported: " + supported + ")");
}

std::pair<std::string, std::string> kernel_identity_of(const gguf::file& file) {
  const auto arch = file.meta().get_string("general.architecture");
  if (arch) {
    for (const arch_entry* e : architectures()) {
      if (e->name != *arch) continue;
      std::string family(e->kernel_family.empty() ? e->name : e->kernel_family);
      return {std::move(family), e->kernel_model != nullptr ? e->kernel_model(file) : std::string(e->name)};
    }
  }
  return {"generic", "generic"};
}

}  // namespace spite::models
