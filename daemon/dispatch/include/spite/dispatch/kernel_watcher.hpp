// Hot reload of kernel plug-ins: an inotify watch on the kernel directories. When libraries
// appear, are replaced or disappear, a new generation is scanned (unchanged libraries are
// reused, new ones validated), and the owner is told what changed; the owner swaps it in
// between two forward steps. The old generation lives on while anything still uses it.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/dispatch/plugin.hpp"

namespace spite::dispatch {

struct kernel_change {
  std::uint64_t generation = 0;
  std::vector<std::string> added, replaced, removed;  // "id (path)"
  std::vector<library_rejection> refused;             // new refusals in this generation
  bool empty() const noexcept { return added.empty() && replaced.empty() && removed.empty() && refused.empty(); }
  std::string summary() const;  // one log line
};

// What changed from `before` to `after`.
kernel_change diff_generations(const kernel_set* before, const kernel_set& after);

class kernel_watcher {
 public:
  using on_change = std::function<void(std::shared_ptr<const kernel_set> next, const kernel_change& change)>;

  // Scans once now, then watches. `quiet`: how long the directories must stay still before a
  // rescan (a copy in progress is not loaded half-written).
  static result<std::unique_ptr<kernel_watcher>> start(std::vector<std::filesystem::path> dirs, plugin_options options,
                                                       on_change callback,
                                                       std::chrono::milliseconds quiet = std::chrono::milliseconds(150));
  ~kernel_watcher();
  kernel_watcher(const kernel_watcher&) = delete;
  kernel_watcher& operator=(const kernel_watcher&) = delete;

  std::shared_ptr<const kernel_set> current() const;

 private:
  struct impl;
  explicit kernel_watcher(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace spite::dispatch
