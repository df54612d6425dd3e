// Which cached keys a query may not see: later positions (causal), keys outside a sliding
// window or chunk, and keys a sparse-attention selection left out.
#pragma once

#include "spite/dispatch/ops.hpp"

namespace spite::dispatch::cpu {

inline bool key_masked(const attention_args& a, std::int64_t t, std::int64_t j) {
  const std::int32_t qp = a.q_pos[t], kp = a.kv_pos[j];
  if (kp > qp || (a.key_allowed != nullptr && a.key_allowed[t * a.n_kv + j] == 0)) return true;
  if (a.mask.swa_window <= 0) return false;
  return a.mask.swa_chunked ? kp < (qp / a.mask.swa_window) * a.mask.swa_window : qp - kp >= a.mask.swa_window;
}

}  // namespace spite::dispatch::cpu
