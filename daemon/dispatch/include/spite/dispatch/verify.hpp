// Checking kernels against the reference ops: the self-test at load (a few small shapes) and
// `spitectl verify` (a sweep including odd sizes). Errors are normalised (max |got - ref| over
// max |ref|) and compared with a tolerance owned by the op; outputs are surrounded by guard
// values to catch writes out of bounds.
#pragma once

#include <string>
#include <vector>

#include "spite_kernel.h"

namespace spite::dispatch {

struct verify_case {
  std::string op, dtype, shape;
  double error = 0, tolerance = 0;
  bool passed = false;
  bool skipped = false;  // the kernel's probe refused this case (not a failure)
  std::string note;      // refusal reason or failure detail
};

struct verify_options {
  bool sweep = false;  // false: the small self-test set; true: odd sizes too
};

std::vector<verify_case> verify_kernel(const spite_kernel& kernel, const verify_options& options = {});

}  // namespace spite::dispatch
