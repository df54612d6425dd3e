// A read-only memory mapping of a whole file, and the file kept open for copies out of it.
// Move-only; unmaps and closes on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "spite/core/result.hpp"

namespace spite {

class mapped_file {
 public:
  mapped_file() = default;
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  // Maps `path` read-only and shared (pages come from the page cache: no copy, shared between
  // processes). An empty file maps to an empty span.
  static result<mapped_file> open(const std::string& path);

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

  // Copies out.size() bytes from `offset` without touching the mapping (pread): the pages are
  // not mapped into this process, so they add nothing to its resident set. Where a lookup reads
  // a few rows of a large table now and then, reading them through the mapping would map the
  // page cache's whole folios around them (up to 2 MiB each on current kernels).
  result<void> read(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
  std::string path_;
};

}  // namespace spite
