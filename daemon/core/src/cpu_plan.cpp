#include "spite/core/cpu_plan.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

namespace spite {

namespace {

// The first line of a small file, or "" (files under /sys and /proc are a few bytes; the read
// is bounded anyway).
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::string line;
  line.reserve(128);
  char c;
  while (line.size() < 4096 && in.get(c) && c != '\n') line.push_back(c);
  return line;
}

// A non-negative integer, or -1.
long long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::strtoll(s.c_str(), nullptr, 10);
}

// CPUs' worth of time from a quota and period in microseconds; 0 where either is absent or not a limit.
double cpus_of(long long quota, long long period) { return quota > 0 && period > 0 ? static_cast<double>(quota) / static_cast<double>(period) : 0.0; }

// The tightest limit on the way from `dir` up to `root` (each level may cap its children).
template <class Read>
double tightest_up(std::string dir, const std::string& root, Read read) {
  double best = 0;
  for (int depth = 0; depth < 64; ++depth) {
    const double here = read(dir);
    if (here > 0 && (best == 0 || here < best)) best = here;
    if (dir.size() <= root.size()) break;
    const auto slash = dir.find_last_of('/');
    if (slash == std::string::npos || slash < root.size()) {
      dir = root;
    } else {
      dir.resize(slash);
    }
  }
  return best;
}

// The cgroup quota in CPUs, v2 or v1; 0: none found.
double cgroup_quota(const cpu_plan_sources& from) {
  std::ifstream in(from.proc_cgroup);
  std::string line, v2_path, v1_path;
  for (int lines = 0; lines < 64 && std::getline(in, line); ++lines) {
    // hierarchy-ID:controller-list:path
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.find("..") != std::string::npos) continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) v2_path = path;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == "cpu") v1_path = path;
    }
  }
  if (!v1_path.empty()) {
    for (const char* mount : {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"}) {
      const std::string root = from.cgroup_root + mount;
      if (first_line(root + "/cpu.cfs_period_us").empty()) continue;
      return tightest_up(root + (v1_path == "/" ? "" : v1_path), root, [](const std::string& dir) {
        const std::string quota = first_line(dir + "/cpu.cfs_quota_us");
        if (quota == "-1") return 0.0;
        return cpus_of(parse_count(quota), parse_count(first_line(dir + "/cpu.cfs_period_us")));
      });
    }
  }
  if (!v2_path.empty()) {
    const std::string& root = from.cgroup_root;
    return tightest_up(root + (v2_path == "/" ? "" : v2_path), root, [](const std::string& dir) {
      // "max 100000" or "200000 100000"
      const std::string max = first_line(dir + "/cpu.max");
      const auto space = max.find(' ');
      if (space == std::string::npos) return 0.0;
      return cpus_of(parse_count(max.substr(0, space)), parse_count(max.substr(space + 1)));
    });
  }
  return 0;
}

}  // namespace

std::vector<int> affinity_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

int cpu_plan::default_threads() const noexcept {
  int n = std::max(1, cores);
  if (quota > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(quota - 1e-9))));
  return n;
}

cpu_plan make_cpu_plan(const std::vector<int>& allowed, const cpu_plan_sources& from) {
  cpu_plan plan;
  // Group by (package, die, core), groups in the order of their first CPU.
  std::map<std::tuple<long long, long long, long long>, std::size_t> group_of;
  std::vector<std::vector<int>> groups;
  std::vector<int> sorted = allowed;
  std::sort(sorted.begin(), sorted.end());
  for (const int cpu : sorted) {
    const std::string dir = from.sys + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const long long package = parse_count(first_line(dir + "physical_package_id"));
    const long long die = parse_count(first_line(dir + "die_id"));
    const long long core = parse_count(first_line(dir + "core_id"));
    std::size_t g = groups.size();
    if (core >= 0) {
      const auto [it, added] = group_of.try_emplace({package, die, core}, groups.size());
      g = it->second;
      if (!added) {
        groups[g].push_back(cpu);
        continue;
      }
    }
    groups.push_back({cpu});  // a core of its own (also where the topology is unknown)
  }
  plan.cores = static_cast<int>(groups.size());
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& g : groups) {
      if (round < g.size()) {
        plan.order.push_back(g[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  plan.quota = cgroup_quota(from);
  return plan;
}

}  // namespace spite
