// The operations a model's forward step asks the dispatcher for, as op signatures: what
// `spitectl dispatch` and spited's `dispatch` command resolve and print.
#pragma once

#include <string>
#include <vector>

#include "spite/dispatch/dispatcher.hpp"
#include "spite/gguf/file.hpp"
#include "spite/models/hparams.hpp"

namespace spite::models {

struct planned_op {
  std::string label;  // "rms_norm", "matmul q4_k", ...
  spite_op_signature signature;
};

std::vector<planned_op> plan_ops(const gguf::file& file, const hparams& hp, const dispatch::dispatch_target& target);

}  // namespace spite::models
