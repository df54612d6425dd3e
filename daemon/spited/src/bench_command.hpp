// spited's `bench` command: the benchmark of spite::bench on a loaded model, with the kernels
// the daemon dispatches for it.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "service.hpp"

namespace spite::daemon {

// {"cmd": "bench", "model": NAME, "n_prompt": 512, "n_gen": 128, "threads": 0, "reps": 3,
//  "parallel": 1, "probes": true}
result<nlohmann::json> bench_command(loaded_model& m, const nlohmann::json& request, int default_threads,
                                     std::shared_ptr<const dispatch::op_table> ops, std::function<bool()> cancelled);

}  // namespace spite::daemon
