// Reading GGUF files: memory-mapped, no copy of tensor data or strings. Every number read from
// the file is bounded before use; a malformed file yields an error naming the file, the byte
// offset and the problem. Split models (name-00001-of-0000N.gguf) are opened through their first
// part, which maps every part.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "spite/core/mapped_file.hpp"
#include "spite/core/result.hpp"
#include "spite/gguf/types.hpp"
#include "spite/gguf/value.hpp"

namespace spite::gguf {

inline constexpr std::uint32_t magic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr std::uint64_t default_alignment = 32;
inline constexpr int max_dims = 4;
inline constexpr int max_array_depth = 16;  // nested arrays deeper than this are refused
// Fixed caps where the in-memory form is much larger than the encoding (real files hold a few
// dozen keys and no large nested arrays; vocabularies are flat string arrays).
inline constexpr std::uint64_t max_metadata_entries = 1u << 20;
inline constexpr std::uint64_t max_nested_arrays = 1u << 20;

struct tensor_info {
  std::string_view name;
  tensor_type type = tensor_type::f32;
  int n_dims = 0;
  std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};  // ggml order: ne[0] is contiguous
  std::uint64_t offset = 0;       // from the start of its part's data section
  std::uint64_t file_offset = 0;  // absolute, in its part's file
  std::uint64_t size = 0;         // bytes
  std::uint32_t part = 0;         // split part that holds the data (0 for a single file)
  const std::byte* data = nullptr;

  std::int64_t n_elements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::span<const std::byte> bytes() const noexcept { return {data, size}; }
};

struct kv_entry {
  std::string_view key;
  value val;
};

class metadata {
 public:
  const value* find(std::string_view key) const;
  std::span<const kv_entry> entries() const noexcept { return entries_; }
  std::size_t size() const noexcept { return entries_.size(); }

  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<std::uint64_t> get_uint(std::string_view key) const;
  std::optional<std::int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const array_value* get_array(std::string_view key) const;

 private:
  friend class file_parser;
  std::vector<kv_entry> entries_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

struct open_options {
  bool open_split_parts = true;  // map the other parts of a split model
};

class file {
 public:
  static result<file> open(const std::string& path, const open_options& options = {});
  // Parses bytes owned by the caller (kept alive as long as the file); `name` is used in errors.
  // Split parts are not followed.
  static result<file> parse(std::span<const std::byte> bytes, std::string name);

  std::uint32_t version() const noexcept { return version_; }
  std::uint64_t alignment() const noexcept { return alignment_; }
  const metadata& meta() const noexcept { return meta_; }
  std::span<const tensor_info> tensors() const noexcept { return tensors_; }
  const tensor_info* find_tensor(std::string_view name) const;
  // Bytes [at, at + out.size()) of tensor t, copied out of the file without reading them through
  // its mapping (mapped_file::read: nothing mapped into the process); parse()d bytes are copied.
  result<void> read(const tensor_info& t, std::uint64_t at, std::span<std::byte> out) const;

  std::size_t n_parts() const noexcept { return parts_.size(); }
  const std::string& part_path(std::size_t i) const { return parts_[i].path; }
  std::uint64_t part_size(std::size_t i) const { return parts_[i].bytes.size(); }
  std::uint64_t data_offset(std::size_t i) const { return parts_[i].data_offset; }
  std::uint64_t total_bytes() const noexcept;

 private:
  friend class file_parser;
  struct part {
    std::string path;
    mapped_file map;  // empty for parse()
    std::span<const std::byte> bytes;
    std::uint64_t data_offset = 0;
  };
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = default_alignment;
  metadata meta_;
  std::vector<tensor_info> tensors_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
  std::vector<part> parts_;
};

// For `name-00001-of-00003.gguf` returns the paths of all parts; nullopt if `path` is not named
// like the first part of a split model.
std::optional<std::vector<std::string>> split_part_paths(const std::string& path, std::uint32_t count);

}  // namespace spite::gguf
