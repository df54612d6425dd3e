// How much memory a model will take before it is loaded: the mapped weights, the KV memory with
// every sequence in use, and the scratch of one forward step. The daemon refuses a model whose
// estimate does not fit what the machine (or its cgroup) has available.
#pragma once

#include <cstdint>
#include <string>

#include "spite/executor/context.hpp"
#include "spite/gguf/file.hpp"

namespace spite::executor {

struct memory_estimate {
  std::uint64_t weights = 0;  // tensor data, mapped from the file
  std::uint64_t kv = 0;       // KV memory when every sequence is full
  std::uint64_t scratch = 0;  // activations and logits of the largest step
  std::uint64_t total() const noexcept { return weights + kv + scratch; }
  std::string describe() const;  // "1.2 GiB (weights 1.0 GiB + KV 128 MiB + scratch 40 MiB)"
};

// `n_batch`: the most tokens one step carries (prompt chunks of every sequence together).
result<memory_estimate> estimate_memory(const gguf::file& file, const models::model& m, const context_options& options,
                                        std::int32_t n_batch);

// The KV geometry a context gives `m`: the same numbers context::create uses.
kv_layout kv_layout_for(const models::model& m, const context_options& options);
// The KV memory kind a context of `m` uses: the one the options name, else the model's.
inline std::string_view kv_kind_for(const models::model& m, const context_options& options) {
  return options.kv_kind.empty() ? std::string_view(m.hp().memory_kind) : std::string_view(options.kv_kind);
}

}  // namespace spite::executor
