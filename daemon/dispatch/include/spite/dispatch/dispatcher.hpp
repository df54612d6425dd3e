// Choosing a kernel per operation for one model x device from a generation of plug-ins.
//
// Resolution order (DESIGN section 3): family/model/arch > family/generic/arch >
// generic/generic/arch > the same for each lesser CPU ISA variant > the built-in reference.
// Within one tier the highest probe score wins. Decisions are cached per op signature (the
// token count only matters as decode (1) versus prefill (> 1)).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "spite/dispatch/ops.hpp"
#include "spite/dispatch/plugin.hpp"

namespace spite::dispatch {

// What the kernels run on: the device kind and its architecture names, best first
// (CPU: {"x86_64_v4", "x86_64_v3", "x86_64_v2", "x86_64"}; CUDA: {"sm_89"}).
struct dispatch_target {
  spite_device_kind device = SPITE_DEVICE_CPU;
  std::int32_t device_index = 0;
  std::vector<std::string> archs;
};

// The model side of a query: `family/model` of kernels/<family>/<model>/<arch>/.
struct kernel_identity {
  std::string family, model;
};

struct dispatch_candidate {
  std::string source;  // library id, or "builtin"
  std::string kernel;  // kernel name
  std::int32_t score = 0;  // > 0 accepted
  std::string reason;      // why it was refused, or why it lost
  int tier = 0;            // lower is preferred
};

struct dispatch_choice {
  const spite_kernel* kernel = nullptr;  // null: the built-in reference
  std::shared_ptr<kernel_library> library;
  std::string source = "builtin";
  std::string kernel_name = "reference";
  std::vector<dispatch_candidate> candidates;  // every candidate considered, winner first
};

class dispatcher : public std::enable_shared_from_this<dispatcher> {
 public:
  static std::shared_ptr<dispatcher> create(std::shared_ptr<const kernel_set> set, kernel_identity who,
                                            dispatch_target target);

  // The decision for one signature (cached).
  const dispatch_choice& resolve(const spite_op_signature& signature);

  // An op table whose entries run the chosen kernels and fall back to `fallback` where the
  // built-in wins or a plug-in returns an error. The table keeps this dispatcher (and with it
  // the libraries of its generation) alive.
  std::shared_ptr<const op_table> ops(const op_table& fallback = cpu_reference_ops());

  // What a choice depends on (the op, its weights' type, decode or prefill, the shape).
  using choice_key = std::array<std::int64_t, 9>;

  const kernel_set& kernels() const noexcept { return *set_; }
  const kernel_identity& identity() const noexcept { return who_; }
  const dispatch_target& target() const noexcept { return target_; }

 private:
  dispatcher() = default;
  dispatch_choice decide(const spite_op_signature& signature) const;
  // Tier of a library for this query, or -1 when it cannot serve it (with the reason).
  int tier_of(const kernel_library& lib, std::string& reason) const;

  std::shared_ptr<const kernel_set> set_;
  kernel_identity who_;
  dispatch_target target_;
  std::mutex mutex_;
  std::map<choice_key, std::unique_ptr<dispatch_choice>> cache_;
};

// The arch directories whose code runs on a GPU of `arch`, best first: a CUDA sm_89 card runs
// sm_89, sm_87, sm_86, sm_80, sm_75 code (arch-specific sm_90a runs only on sm_90); an AMD
// gfx1100 runs gfx1100 code, then its family's (rdna3).
std::vector<std::string> gpu_arch_candidates(std::string_view arch);

// A signature with the fields every op shares filled in.
spite_op_signature make_signature(spite_op op, const dispatch_target& target);

// "rms_norm", "matmul", ...; "op 42" for an id this host does not know.
std::string op_name(spite_op op);

}  // namespace spite::dispatch
