// The CPU plan: one CPU per core first, cores counted across SMT siblings, and the cgroup's CPU
// quota (v2 and v1), read from trees laid out as /sys and /sys/fs/cgroup lay them out.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spite/core/cpu_plan.hpp"

namespace fs = std::filesystem;

namespace {

struct tree {
  fs::path root;
  tree() {
    root = fs::temp_directory_path() / ("spite_cpu_plan_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~tree() { fs::remove_all(root); }
  tree(const tree&) = delete;
  tree& operator=(const tree&) = delete;
  static int& counter() {
    static int n = 0;
    return n;
  }
  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // CPU `cpu` on core `core` of package 0.
  void cpu(int cpu, int core) const {
    const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    write(dir + "physical_package_id", "0");
    write(dir + "die_id", "0");
    write(dir + "core_id", std::to_string(core));
  }
  spite::cpu_plan_sources sources() const {
    return {(root / "sys").string(), (root / "proc_cgroup").string(), (root / "cgroup").string()};
  }
};

}  // namespace

TEST_CASE("cpu plan: siblings numbered apart (cpu N and N + cores) count as one core and come after every core's first") {
  tree t;
  for (int c = 0; c < 8; ++c) t.cpu(c, c % 4);
  const spite::cpu_plan plan = spite::make_cpu_plan({0, 1, 2, 3, 4, 5, 6, 7}, t.sources());
  CHECK(plan.cores == 4);
  CHECK(plan.order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(plan.quota == 0);
  CHECK(plan.default_threads() == 4);
}

TEST_CASE("cpu plan: adjacent siblings are spread, one per core before any second one") {
  tree t;
  for (int c = 0; c < 8; ++c) t.cpu(c, c / 2);
  const spite::cpu_plan plan = spite::make_cpu_plan({7, 6, 5, 4, 3, 2, 1, 0}, t.sources());
  CHECK(plan.cores == 4);
  CHECK(plan.order == std::vector<int>{0, 2, 4, 6, 1, 3, 5, 7});
  CHECK(plan.default_threads() == 4);
  // Only some CPUs allowed (an affinity or a cpuset): cores among those only.
  const spite::cpu_plan some = spite::make_cpu_plan({1, 2, 3}, t.sources());
  CHECK(some.cores == 2);
  CHECK(some.order == std::vector<int>{1, 2, 3});
}

TEST_CASE("cpu plan: a CPU whose topology cannot be read is a core of its own") {
  tree t;
  t.cpu(0, 0);
  t.cpu(1, 0);
  t.write("sys/devices/system/cpu/cpu2/topology/core_id", "not a number");
  const spite::cpu_plan plan = spite::make_cpu_plan({0, 1, 2, 3}, t.sources());
  CHECK(plan.cores == 3);  // {0, 1}, {2}, {3}
  CHECK(plan.order == std::vector<int>{0, 2, 3, 1});
}

TEST_CASE("cpu plan: a cgroup v2 quota caps the default threads, the tightest on the way up") {
  tree t;
  for (int c = 0; c < 8; ++c) t.cpu(c, c);
  t.write("proc_cgroup", "0::/machine.slice/app.scope");
  t.write("cgroup/machine.slice/app.scope/cpu.max", "150000 100000");
  spite::cpu_plan plan = spite::make_cpu_plan({0, 1, 2, 3, 4, 5, 6, 7}, t.sources());
  CHECK(plan.quota == Approx(1.5));
  CHECK(plan.default_threads() == 2);  // 1.5 CPUs' worth: two threads, each busy part of the time
  t.write("cgroup/machine.slice/cpu.max", "100000 100000");
  plan = spite::make_cpu_plan({0, 1, 2, 3, 4, 5, 6, 7}, t.sources());
  CHECK(plan.quota == Approx(1.0));
  CHECK(plan.default_threads() == 1);
  // "max": no limit at that level.
  t.write("cgroup/machine.slice/cpu.max", "max 100000");
  t.write("cgroup/machine.slice/app.scope/cpu.max", "max 100000");
  plan = spite::make_cpu_plan({0, 1, 2, 3, 4, 5, 6, 7}, t.sources());
  CHECK(plan.quota == 0);
  CHECK(plan.default_threads() == 8);
  // A quota above the cores leaves the cores.
  t.write("cgroup/machine.slice/app.scope/cpu.max", "1600000 100000");
  CHECK(spite::make_cpu_plan({0, 1, 2, 3}, t.sources()).default_threads() == 4);
}

TEST_CASE("cpu plan: a cgroup v1 CFS quota caps the default threads; -1 is no limit") {
  tree t;
  for (int c = 0; c < 4; ++c) t.cpu(c, c);
  t.write("proc_cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/");
  t.write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000");
  t.write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1");
  t.write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  t.write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000");
  spite::cpu_plan plan = spite::make_cpu_plan({0, 1, 2, 3}, t.sources());
  CHECK(plan.quota == Approx(2.0));
  CHECK(plan.default_threads() == 2);
  t.write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");
  plan = spite::make_cpu_plan({0, 1, 2, 3}, t.sources());
  CHECK(plan.quota == 0);
  CHECK(plan.default_threads() == 4);
}

TEST_CASE("cpu plan: unreadable or malformed cgroup files mean no limit, never a crash") {
  tree t;
  for (int c = 0; c < 2; ++c) t.cpu(c, c);
  for (const char* bad : {"", "max", "garbage here", "-5 100000", "100000 0", "99999999999999999999999 100000", "100000"}) {
    t.write("proc_cgroup", "0::/a");
    t.write("cgroup/a/cpu.max", bad);
    const spite::cpu_plan plan = spite::make_cpu_plan({0, 1}, t.sources());
    INFO("cpu.max: '" << bad << "'");
    CHECK(plan.quota == 0);
    CHECK(plan.default_threads() == 2);
  }
  t.write("proc_cgroup", "0::/../../etc");  // a path that leaves the tree is not followed
  CHECK(spite::make_cpu_plan({0, 1}, t.sources()).quota == 0);
  // No proc file at all.
  spite::cpu_plan_sources none = t.sources();
  none.proc_cgroup = (t.root / "missing").string();
  CHECK(spite::make_cpu_plan({0, 1}, none).default_threads() == 2);
  // Nothing allowed (affinity unreadable): one thread.
  CHECK(spite::make_cpu_plan({}, t.sources()).default_threads() == 1);
}
