#include "spite/dispatch/kernel_watcher.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "spite/core/log.hpp"

namespace spite::dispatch {
namespace fs = std::filesystem;

std::string kernel_change::summary() const {
  std::string s = "kernels generation " + std::to_string(generation) + ":";
  auto list = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    s += std::string(" ") + what + " ";
    for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    s += ";";
  };
  list("added", added);
  list("replaced", replaced);
  list("removed", removed);
  for (const auto& r : refused) s += " refused " + r.reason + ";";
  if (empty()) s += " no change";
  return s;
}

kernel_change diff_generations(const kernel_set* before, const kernel_set& after) {
  kernel_change c;
  c.generation = after.generation();
  auto name = [](const kernel_library& l) { return l.id() + " (" + l.path().string() + ")"; };
  for (const auto& lib : after.libraries()) {
    const kernel_library* old = nullptr;
    if (before != nullptr) {
      for (const auto& o : before->libraries()) {
        if (o->path() == lib->path()) old = o.get();
      }
    }
    if (old == nullptr) {
      c.added.push_back(name(*lib));
    } else if (old != lib.get()) {
      c.replaced.push_back(name(*lib));
    }
  }
  if (before != nullptr) {
    for (const auto& o : before->libraries()) {
      const bool still = std::any_of(after.libraries().begin(), after.libraries().end(),
                                     [&](const auto& l) { return l->path() == o->path(); });
      if (!still) c.removed.push_back(name(*o));
    }
  }
  for (const auto& r : after.rejected()) {
    const bool known = before != nullptr && std::any_of(before->rejected().begin(), before->rejected().end(), [&](const auto& o) {
                         return o.path == r.path && o.reason == r.reason;
                       });
    if (!known) c.refused.push_back(r);
  }
  return c;
}

struct kernel_watcher::impl {
  std::vector<fs::path> dirs;
  plugin_options options;
  on_change callback;
  std::chrono::milliseconds quiet{150};
  int inotify_fd = -1;
  int stop_fd = -1;
  std::map<int, fs::path> watches;
  mutable std::mutex mutex;
  std::shared_ptr<const kernel_set> current;
  std::thread thread;

  ~impl() {
    if (stop_fd >= 0) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto n = ::write(stop_fd, &one, sizeof one);
    }
    if (thread.joinable()) thread.join();
    if (inotify_fd >= 0) ::close(inotify_fd);
    if (stop_fd >= 0) ::close(stop_fd);
  }

  // Watches `dir` and every directory below it (kernel trees are three levels deep). A missing
  // search directory is watched through its nearest existing parent, so that creating it later
  // is noticed too.
  void watch_tree(const fs::path& dir) {
    constexpr std::uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB |
                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    std::error_code ec;
    fs::path target = dir;
    while (!fs::is_directory(target, ec) && target.has_parent_path() && target != target.parent_path()) {
      target = target.parent_path();
    }
    auto add = [&](const fs::path& d) {
      const int wd = ::inotify_add_watch(inotify_fd, d.c_str(), mask);
      if (wd >= 0) watches[wd] = d;
    };
    add(target);
    if (target != dir) return;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() > 3) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_directory(ec)) add(it->path());
    }
  }

  void rewatch() {
    for (const auto& [wd, path] : watches) ::inotify_rm_watch(inotify_fd, wd);
    watches.clear();
    for (const auto& d : dirs) watch_tree(d);
  }

  void rescan() {
    std::shared_ptr<const kernel_set> before;
    {
      std::lock_guard lock(mutex);
      before = current;
    }
    auto next = kernel_set::scan(dirs, options, before.get());
    const kernel_change change = diff_generations(before.get(), *next);
    if (change.empty()) return;
    {
      std::lock_guard lock(mutex);
      current = next;
    }
    log::info(change.summary());
    if (callback) callback(next, change);
  }

  void run() {
    std::vector<char> buf(64 * 1024);
    for (;;) {
      pollfd fds[2] = {{inotify_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        log::error("kernel watcher: poll failed: ", std::strerror(errno));
        return;
      }
      if (fds[1].revents != 0) return;
      // Drain, then wait until the directories have been quiet for a while, but never longer
      // than a few quiet periods: a directory that keeps changing still gets rescanned.
      bool changed = false;
      const auto deadline = std::chrono::steady_clock::now() + 4 * quiet;
      for (;;) {
        const ssize_t n = ::read(inotify_fd, buf.data(), buf.size());
        if (n > 0) changed = true;
        pollfd again[2] = {{inotify_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        const int r = ::poll(again, 2, static_cast<int>(quiet.count()));
        if (r > 0 && again[1].revents != 0) return;
        if (r == 0 || std::chrono::steady_clock::now() >= deadline) break;
      }
      if (!changed) continue;
      rewatch();  // new directories get watches; removed ones lose theirs
      rescan();
    }
  }
};

kernel_watcher::kernel_watcher(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
kernel_watcher::~kernel_watcher() = default;

result<std::unique_ptr<kernel_watcher>> kernel_watcher::start(std::vector<fs::path> dirs, plugin_options options,
                                                              on_change callback, std::chrono::milliseconds quiet) {
  auto p = std::make_unique<impl>();
  p->dirs = std::move(dirs);
  p->options = options;
  p->callback = std::move(callback);
  p->quiet = quiet;
  p->inotify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (p->inotify_fd < 0) return make_error(errc::io, std::string("inotify_init1: ") + std::strerror(errno));
  p->stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (p->stop_fd < 0) return make_error(errc::io, std::string("eventfd: ") + std::strerror(errno));
  // Watch before the first scan, so that nothing added in between is missed.
  p->rewatch();
  p->current = kernel_set::scan(p->dirs, p->options);
  impl* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<kernel_watcher>(new kernel_watcher(std::move(p)));
}

std::shared_ptr<const kernel_set> kernel_watcher::current() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->current;
}

}  // namespace spite::dispatch
