#include "commands.hpp"

namespace spite::ctl {

std::span<const command> all_commands() {
  static constexpr command table[] = {
      {"inspect", "print a GGUF file's format, metadata, tensors and totals", run_inspect},
  };
  return table;
}

}  // namespace spite::ctl
