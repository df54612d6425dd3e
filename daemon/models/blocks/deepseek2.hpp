// The DeepSeek-2 family's loader, shared by the architectures that use its graph.
#pragma once

#include "decoder_model.hpp"

namespace spite::models {

struct deepseek2_options {
  int default_gating = 1;          // expert_gating_func when absent: 1 softmax, 2 sigmoid
  bool yarn_log_multiplier = true; // rope.scaling.yarn_log_multiplier enters the q.k scale
  // Adjusts the hyper-parameters before the weights are bound (wider KV rows, ...).
  std::function<result<void>(hparams&)> adjust;
};

// Reads the DeepSeek-2 keys of `f` (whatever its general.architecture) and binds its weights.
result<std::unique_ptr<decoder_model>> load_deepseek2(const gguf::file& f, const deepseek2_options& options = {});

}  // namespace spite::models
