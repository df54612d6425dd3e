// Overflow-checked arithmetic for sizes read from untrusted input.
#pragma once

#include <cstdint>
#include <optional>

namespace spite {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds up to a multiple of `align` (> 0); nullopt on overflow.
inline std::optional<std::uint64_t> align_up(std::uint64_t v, std::uint64_t align) noexcept {
  const auto bumped = checked_add(v, align - 1);
  if (!bumped) return std::nullopt;
  return *bumped / align * align;
}

}  // namespace spite
