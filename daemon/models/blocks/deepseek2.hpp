// The DeepSeek-2 family's loader, shared by the architectures that use its graph.
#pragma once

#include "decoder_model.hpp"

namespace spite::models {

// Reads the DeepSeek-2 keys of `f` (whatever its general.architecture) and binds its weights.
result<std::unique_ptr<decoder_model>> load_deepseek2(const gguf::file& f);

}  // namespace spite::models
