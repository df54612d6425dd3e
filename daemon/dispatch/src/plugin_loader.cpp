// Loading a kernel plug-in: dlopen, the entry symbol, the descriptor's version, size and id,
// file permissions, init(), and a self-test of every kernel. Any failure refuses the library
// with a reason; nothing a library returns is trusted before it is checked.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "spite/core/log.hpp"
#include "spite/dispatch/plugin.hpp"

namespace spite::dispatch {
namespace fs = std::filesystem;

namespace {

// Host callbacks offered to libraries.
void host_log(void*, std::int32_t level, const char* message) {
  if (message == nullptr) return;
  switch (level) {
    case SPITE_LOG_ERROR: log::error("kernel plug-in: ", message); break;
    case SPITE_LOG_WARNING: log::warn("kernel plug-in: ", message); break;
    case SPITE_LOG_DEBUG: log::debug("kernel plug-in: ", message); break;
    default: log::info("kernel plug-in: ", message); break;
  }
}
void* host_alloc(void*, std::size_t size, std::size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) alignment = 64;
  void* p = nullptr;
  return posix_memalign(&p, alignment, size == 0 ? 1 : size) == 0 ? p : nullptr;
}
void host_free(void*, void* p) { std::free(p); }
void* host_stream(void*, spite_device_kind, std::int32_t) { return nullptr; }

// Owner root or us, and not writable by group or others.
result<void> check_owner_and_mode(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return make_error(errc::io, p.string() + ": cannot stat");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return make_error(errc::invalid_argument, p.string() + " is owned by uid " + std::to_string(st.st_uid) +
                                                  ", neither root nor the daemon user");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return make_error(errc::invalid_argument, p.string() + " is writable by group or others");
  }
  return ok();
}

std::string bounded(const char* s, std::size_t max) {
  if (s == nullptr) return {};
  return std::string(s, strnlen(s, max));
}

}  // namespace

kernel_library::~kernel_library() {
  if (initialized_ && desc_ != nullptr && desc_->shutdown != nullptr) desc_->shutdown();
  if (handle_ != nullptr) ::dlclose(handle_);
  if (image_fd_ >= 0) ::close(image_fd_);
}

std::string file_identity(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

namespace {

// A private, sealed copy of the library in memory. dlopen() of a path returns the library
// already loaded under that name, so a replaced file would never be seen while the old
// generation lives; and a file rewritten in place under a mapping crashes the process. Loading
// from a copy avoids both, and what was checked is exactly what runs.
result<int> private_image(const fs::path& file, std::string& identity) {
  const int in = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return make_error(errc::io, file.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(in);
    return make_error(errc::invalid_argument, file.string() + ": not a regular file");
  }
  constexpr off_t k_max_library = off_t{1} << 31;  // 2 GiB: far above any kernel library
  if (st.st_size <= 0 || st.st_size > k_max_library) {
    ::close(in);
    return make_error(errc::invalid_argument, file.string() + ": implausible size " + std::to_string(st.st_size));
  }
  identity = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
             std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  const int out = ::memfd_create(("spite-kernel:" + file.filename().string()).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (out < 0) {
    ::close(in);
    return make_error(errc::io, std::string("memfd_create: ") + std::strerror(errno));
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0 || ::write(out, buf.data(), static_cast<std::size_t>(n)) != n) {
      ::close(in);
      ::close(out);
      return make_error(errc::io, file.string() + ": cannot copy the library");
    }
  }
  ::close(in);
  ::fcntl(out, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return out;
}

}  // namespace

result<std::shared_ptr<kernel_library>> kernel_library::load(const fs::path& file, const fs::path& root,
                                                            const plugin_options& options) {
  const std::string name = file.string();
  // The path below the root names the library: <family>/<model>/<arch>/lib*.so
  const fs::path rel = fs::relative(file.parent_path(), root);
  std::vector<std::string> parts;
  for (const auto& p : rel) parts.push_back(p.string());
  if (options.check_location && (parts.size() != 3 || parts[0] == "..")) {
    return make_error(errc::invalid_argument, name + ": not in a <family>/<model>/<arch>/ directory under " + root.string());
  }
  if (options.check_permissions) {
    SPITE_TRY(check_owner_and_mode(file));
    for (fs::path d = file.parent_path();; d = d.parent_path()) {
      SPITE_TRY(check_owner_and_mode(d));
      if (fs::equivalent(d, root) || d == d.parent_path()) break;
    }
  }

  std::shared_ptr<kernel_library> lib(new kernel_library());
  lib->path_ = file;
  auto image = private_image(file, lib->identity_);
  if (!image) return std::move(image).err();
  lib->image_fd_ = *image;
  const std::string image_path = "/proc/self/fd/" + std::to_string(lib->image_fd_);
  lib->handle_ = ::dlopen(image_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = ::dlerror();
    return make_error(errc::invalid_argument, name + ": cannot load: " + (why ? why : "dlopen failed"));
  }
  auto entry = reinterpret_cast<spite_kernel_entry_fn>(::dlsym(lib->handle_, SPITE_KERNEL_ENTRY_SYMBOL));
  if (entry == nullptr) {
    return make_error(errc::invalid_argument, name + ": no entry symbol " SPITE_KERNEL_ENTRY_SYMBOL);
  }
  const spite_kernel_library* d = entry();
  if (d == nullptr) return make_error(errc::invalid_argument, name + ": the entry symbol returned no descriptor");
  if (d->abi_major != SPITE_KERNEL_ABI_MAJOR) {
    return make_error(errc::invalid_argument, name + ": kernel ABI " + std::to_string(d->abi_major) + "." +
                                             std::to_string(d->abi_minor) + ", this host speaks " +
                                             std::to_string(SPITE_KERNEL_ABI_MAJOR) + ".x");
  }
  if (d->struct_size < sizeof(spite_kernel_library)) {
    return make_error(errc::invalid_argument, name + ": descriptor is " + std::to_string(d->struct_size) +
                                                  " bytes, v1 needs " + std::to_string(sizeof(spite_kernel_library)));
  }
  lib->desc_ = d;
  lib->id_ = bounded(d->id, 256);
  if (options.check_location) {
    const std::string expected_id = parts[0] + "/" + parts[1] + "/" + parts[2];
    if (lib->id_ != expected_id) {
      return make_error(errc::invalid_argument, name + ": its id '" + lib->id_ + "' does not match its directory '" +
                                                    expected_id + "'");
    }
  } else {
    parts.clear();
    for (std::size_t at = 0; at <= lib->id_.size();) {
      const std::size_t slash = std::min(lib->id_.find('/', at), lib->id_.size());
      parts.push_back(lib->id_.substr(at, slash - at));
      at = slash + 1;
    }
    if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
      return make_error(errc::invalid_argument, name + ": its id '" + lib->id_ + "' is not family/model/arch");
    }
  }
  lib->family_ = parts[0];
  lib->model_ = parts[1];
  lib->arch_ = parts[2];
  if (d->shutdown == nullptr) return make_error(errc::invalid_argument, name + ": shutdown() is mandatory");
  if (d->n_kernels > 1024 || (d->n_kernels > 0 && d->kernels == nullptr)) {
    return make_error(errc::invalid_argument, name + ": implausible kernel list (" + std::to_string(d->n_kernels) + ")");
  }
  for (std::uint32_t i = 0; i < d->n_kernels; ++i) {
    const spite_kernel& k = d->kernels[i];
    if (k.struct_size < sizeof(spite_kernel) || k.run == nullptr || k.probe == nullptr || k.n_dtypes > 64 ||
        (k.n_dtypes > 0 && k.dtypes == nullptr)) {
      return make_error(errc::invalid_argument, name + ": kernel " + std::to_string(i) + " is incomplete");
    }
  }

  static spite_host_api api{};
  static std::atomic<bool> api_ready{false};
  if (!api_ready.exchange(true)) {
    api.struct_size = sizeof(spite_host_api);
    api.abi_major = SPITE_KERNEL_ABI_MAJOR;
    api.abi_minor = SPITE_KERNEL_ABI_MINOR;
    api.log = host_log;
    api.alloc = host_alloc;
    api.free = host_free;
    api.device_stream = host_stream;
  }
  api.cpu_threads = options.cpu_threads;
  if (options.plan_only && d->device == options.plan_device && d->device != SPITE_DEVICE_CPU) {
    return lib;  // probed for a plan, never initialised or run
  }
  if (d->init != nullptr) {
    char reason[256] = {};
    const spite_status s = d->init(&api, reason, sizeof reason);
    if (s != SPITE_OK) {
      return make_error(errc::unsupported, name + ": init() refused (status " + std::to_string(s) + "): " +
                                               bounded(reason, sizeof reason));
    }
  }
  lib->initialized_ = true;
  if (options.self_test && d->device == SPITE_DEVICE_CPU) {
    for (const spite_kernel& k : lib->kernels()) {
      if (auto r = self_test_kernel(k); !r) {
        return make_error(errc::invalid_argument, name + ": self-test of kernel '" + bounded(k.name, 128) +
                                                      "' failed: " + r.err().message);
      }
    }
  }
  return lib;
}

std::shared_ptr<const kernel_set> kernel_set::scan(const std::vector<fs::path>& dirs, const plugin_options& options,
                                                   const kernel_set* previous) {
  static std::atomic<std::uint64_t> generations{0};
  auto set = std::make_shared<kernel_set>();
  set->generation_ = ++generations;
  std::vector<fs::path> seen;  // a directory named twice on the path is scanned once
  for (const fs::path& root : dirs) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    const fs::path canonical = fs::canonical(root, ec);
    if (ec || std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
    seen.push_back(canonical);
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() > 3) {
        it.disable_recursion_pending();
        continue;
      }
      const fs::path& p = it->path();
      if (!it->is_regular_file(ec) || p.extension() != ".so") continue;
      if (previous != nullptr) {
        const std::string identity = file_identity(p);
        bool reused = false;
        for (const auto& old : previous->libraries_) {
          if (old->path() == p && old->file_identity() == identity) {
            set->libraries_.push_back(old);
            reused = true;
            break;
          }
        }
        if (reused) continue;
      }
      auto lib = kernel_library::load(p, root, options);
      if (!lib) {
        // A library for a device that is not here is normal; anything else is worth a warning.
        if (lib.err().code == errc::unsupported) {
          log::info("kernel library not usable here: ", lib.err().message);
        } else {
          log::warn("kernel library refused: ", lib.err().message);
        }
        set->rejected_.push_back({p, lib.err().message});
        continue;
      }
      log::info("kernel library loaded: ", (*lib)->id(), " (", p.string(), ")");
      set->libraries_.push_back(std::move(*lib));
    }
  }
  return set;
}

std::vector<fs::path> parse_path_list(std::string_view list) {
  std::vector<fs::path> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t colon = list.find(':', at);
    const std::string_view part = list.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at);
    if (!part.empty()) out.emplace_back(part);
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  return out;
}

std::vector<fs::path> default_kernel_path(const fs::path& config_dir) {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("SPITE_KERNEL_PATH"); env != nullptr) out = parse_path_list(env);
  if (!config_dir.empty()) out.push_back(config_dir / "kernels");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.parent_path().filename() == "bin") out.push_back(exe.parent_path().parent_path() / "kernels");
  const fs::path installed(SPITE_INSTALL_KERNEL_DIR);
  if (std::find(out.begin(), out.end(), installed) == out.end()) out.push_back(installed);
  return out;
}

}  // namespace spite::dispatch
