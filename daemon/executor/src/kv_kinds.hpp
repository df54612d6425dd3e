// The KV memory kinds compiled in; the table in kv_registry.cpp lists them.
#pragma once

#include "spite/executor/kv_memory.hpp"

namespace spite::executor {

std::unique_ptr<kv_memory> make_contiguous_f16(const kv_layout& layout);
// contiguous_f16 for attention layers + a per-sequence recurrent state (kv_layout::state_width)
std::unique_ptr<kv_memory> make_hybrid_f16(const kv_layout& layout);

}  // namespace spite::executor
