// Which CPUs compute threads should use, in the order to fill them, and how many by default.
//
// One per physical core first: SMT siblings share a core's vector units and caches, so a second
// thread on a core adds little to a compute-bound step and contends for what a memory-bound one
// needs (so the default thread count is the number of cores, and pinning fills each core once
// before it puts a second thread on any). And no more than the process's cgroup lets it run: a
// container limited to 2 CPUs' worth of time (`podman --cpus 2`, a unit's CPUQuota=) on a
// 64-CPU host should run 2 threads, not 64 that the kernel throttles in turn, each stall
// holding up the others at every hand-off.
#pragma once

#include <string>
#include <vector>

namespace spite {

struct cpu_plan {
  std::vector<int> order;  // the allowed CPUs: the first of each core (by CPU number), then the second, ...
  int cores = 0;           // distinct cores among them
  double quota = 0;        // CPUs' worth of time the cgroup allows (the tightest on its path up); 0: no limit

  // max(1, min(cores, quota rounded up)).
  int default_threads() const noexcept;
};

// Where the system describes the topology and the cgroups; tests point these at a tree of their own.
struct cpu_plan_sources {
  std::string sys = "/sys";                       // devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id}
  std::string proc_cgroup = "/proc/self/cgroup";  // which cgroup the process is in
  std::string cgroup_root = "/sys/fs/cgroup";     // v2: <root>/<path>/cpu.max; v1: <root>/cpu[,cpuacct]/<path>/cpu.cfs_*_us
};

// The CPUs the calling thread may run on (its affinity), in order; empty if it cannot be read.
std::vector<int> affinity_cpus();

// The plan for `allowed` (the CPUs of the process's affinity). A CPU whose topology cannot be
// read counts as a core of its own; a cgroup file that cannot be read or parsed, as no limit.
cpu_plan make_cpu_plan(const std::vector<int>& allowed, const cpu_plan_sources& from = {});

}  // namespace spite
