// Writing GGUF files (version 3 by default): metadata in insertion order, tensor infos, then the
// tensor data, each tensor aligned. Files are written to a temporary name and renamed into
// place, so a reader never sees a half-written model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/gguf/types.hpp"
#include "spite/gguf/value.hpp"

namespace spite::gguf {

class writer {
 public:
  void set_version(std::uint32_t version) { version_ = version; }  // 2 or 3
  // Also records general.alignment when it differs from the default 32.
  result<void> set_alignment(std::uint32_t alignment);
  // Adds a key, or replaces its value keeping its position.
  void set(std::string key, value v);
  bool remove(std::string_view key);

  // `data` must hold exactly the tensor's bytes; it is referenced, not copied, until written.
  result<void> add_tensor(std::string name, tensor_type type, std::span<const std::int64_t> shape,
                          std::span<const std::byte> data);
  // Same, with the bytes owned by the writer.
  result<void> add_tensor(std::string name, tensor_type type, std::span<const std::int64_t> shape,
                          std::vector<std::byte> data);

  std::size_t n_tensors() const noexcept { return tensors_.size(); }

  result<void> write_file(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;

 private:
  struct pending_tensor {
    std::string name;
    tensor_type type;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data;
    std::vector<std::byte> owned;
    std::uint64_t offset = 0;
  };
  using sink = std::function<bool(const void*, std::size_t)>;
  result<void> check_tensor(const std::string& name, tensor_type type, std::span<const std::int64_t> shape,
                            std::size_t bytes) const;
  bool serialize(const sink& out) const;

  std::uint32_t version_ = 3;
  std::uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, value>> kv_;
  std::vector<pending_tensor> tensors_;
};

}  // namespace spite::gguf
