// SHA-256 (FIPS 180-4), used to identify model files and in tests that compare against digests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace spite {

class sha256 {
 public:
  sha256() noexcept;
  void update(std::span<const std::byte> data) noexcept;
  void update(const void* data, std::size_t size) noexcept {
    update({static_cast<const std::byte*>(data), size});
  }
  std::array<std::uint8_t, 32> finish() noexcept;
  std::string finish_hex();

  static std::string hex(std::span<const std::byte> data);

 private:
  void compress(const std::uint8_t* block) noexcept;
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace spite
