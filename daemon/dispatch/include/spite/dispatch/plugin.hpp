// Kernel plug-ins, host side: loading and validating libraries that implement
// kernels/abi/spite_kernel.h, and the set of libraries found under the kernel search path.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spite/core/result.hpp"

#include "spite_kernel.h"

namespace spite::dispatch {

struct plugin_options {
  bool check_permissions = true;  // refuse files and directories writable by group or others
  bool self_test = true;          // run every kernel against the reference ops on small shapes
  bool check_location = true;     // the file must sit in <root>/<family>/<model>/<arch>/ = its id
  int cpu_threads = 1;            // offered to the library through the host API
  // Planning for a device that is not here (`spitectl dispatch --card`): libraries of other
  // device kinds are checked and probed but neither initialised nor run.
  bool plan_only = false;
  int plan_device = SPITE_DEVICE_CPU;
};

// A loaded, validated and initialized library. Unloading calls shutdown() and dlclose().
class kernel_library {
 public:
  // `root` is the search-path directory the library was found under; the path below it must be
  // <family>/<model>/<arch>/ and equal the descriptor's id.
  static result<std::shared_ptr<kernel_library>> load(const std::filesystem::path& file,
                                                      const std::filesystem::path& root,
                                                      const plugin_options& options = {});
  ~kernel_library();
  kernel_library(const kernel_library&) = delete;
  kernel_library& operator=(const kernel_library&) = delete;

  const spite_kernel_library& descriptor() const noexcept { return *desc_; }
  const std::string& id() const noexcept { return id_; }
  const std::string& family() const noexcept { return family_; }
  const std::string& model() const noexcept { return model_; }
  const std::string& arch() const noexcept { return arch_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  // The file as it was when loaded (device, inode, size, mtime): a rescan reuses this library
  // while the file is unchanged and loads a new one when it was replaced.
  const std::string& file_identity() const noexcept { return identity_; }
  std::span<const spite_kernel> kernels() const noexcept { return {desc_->kernels, desc_->n_kernels}; }
  // False for a library loaded only to plan (its kernels must not run).
  bool runnable() const noexcept { return initialized_; }

 private:
  kernel_library() = default;
  void* handle_ = nullptr;
  int image_fd_ = -1;  // the private copy dlopen mapped (see load())
  std::string identity_;
  const spite_kernel_library* desc_ = nullptr;
  bool initialized_ = false;
  std::string id_, family_, model_, arch_;
  std::filesystem::path path_;
};

struct library_rejection {
  std::filesystem::path path;
  std::string reason;
};

// The identity of a file now ("" when it cannot be read): device, inode, size, mtime.
std::string file_identity(const std::filesystem::path& file);

// One generation of plug-ins: everything found under the search directories at one moment.
// Immutable; a reload builds a new generation, and the old one lives on while steps use it.
class kernel_set {
 public:
  // `previous`: the generation before; its libraries whose files did not change are reused
  // (not loaded, initialised or self-tested again).
  static std::shared_ptr<const kernel_set> scan(const std::vector<std::filesystem::path>& dirs,
                                                const plugin_options& options = {},
                                                const kernel_set* previous = nullptr);
  std::span<const std::shared_ptr<kernel_library>> libraries() const noexcept { return libraries_; }
  std::span<const library_rejection> rejected() const noexcept { return rejected_; }
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::vector<std::shared_ptr<kernel_library>> libraries_;
  std::vector<library_rejection> rejected_;
  std::uint64_t generation_ = 0;
};

// The default search path: SPITE_KERNEL_PATH (colon-separated), then `kernels/` next to the
// configuration file when one is given, then `../kernels` beside the running program's bin/
// (a build tree or a relocated install), then the installation's kernels directory.
std::vector<std::filesystem::path> default_kernel_path(const std::filesystem::path& config_dir = {});

// "a:b::c" -> {a, b, c}
std::vector<std::filesystem::path> parse_path_list(std::string_view list);

// Checks one kernel against the reference ops on small shapes; the reason when it fails.
result<void> self_test_kernel(const spite_kernel& kernel);

}  // namespace spite::dispatch
