// Vectors whose storage starts on a cache line. SIMD kernels read their operands in 32- and
// 64-byte loads; a buffer from plain new / malloc starts 16 bytes into a line, so every other
// 32-byte load straddles two lines and costs two (measured: half the FMA rate of an f32 GEMM).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace spite::dispatch::cpu {

inline constexpr std::size_t cache_line = 64;

template <class T>
struct cache_aligned_allocator {
  using value_type = T;
  cache_aligned_allocator() noexcept = default;
  template <class U>
  cache_aligned_allocator(const cache_aligned_allocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{cache_line})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{cache_line}); }
  template <class U>
  bool operator==(const cache_aligned_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using aligned_vector = std::vector<T, cache_aligned_allocator<T>>;

// `n` bytes on a cache line, shared (the load-time packed copies of weights: their blocks are
// laid out so that the quants sit on 32-byte boundaries when the buffer does).
inline std::shared_ptr<std::byte[]> make_aligned_bytes(std::size_t n) {
  auto* p = static_cast<std::byte*>(::operator new(n, std::align_val_t{cache_line}));
  return {p, [](std::byte* q) { ::operator delete(q, std::align_val_t{cache_line}); }};
}

}  // namespace spite::dispatch::cpu
