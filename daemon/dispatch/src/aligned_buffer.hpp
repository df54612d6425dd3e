// Vectors whose storage starts on a cache line. SIMD kernels read their operands in 32- and
// 64-byte loads; a buffer from plain new / malloc starts 16 bytes into a line, so every other
// 32-byte load straddles two lines and costs two (measured: half the FMA rate of an f32 GEMM).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "spite/core/page_memory.hpp"

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

// A region that make_aligned_bytes carves its buffers from, one right after the other, while it
// is installed on the calling thread (dispatch::packing_together): the packed copies of matrices
// the kernels run as one (a layer's q, k and v) then lie together from the start instead of
// being copied together afterwards. A buffer that does not fit gets one of its own.
struct carving_region {
  std::shared_ptr<std::byte[]> region;
  std::size_t used = 0, size = 0;
};
inline thread_local carving_region* current_carving = nullptr;

// Once carving is done: the pages past what was handed out are given back. Under transparent
// huge pages the last 2 MiB page touched would otherwise be backed in full (up to 2 MiB per
// region). The range stays mapped (the region's owner unmaps it whole).
inline void release_uncarved(const carving_region& c) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t from = (c.used + page - 1) / page * page;
  if (c.size >= (std::size_t{2} << 20) && from < c.size) {
    (void)::madvise(c.region.get() + from, c.size - from, MADV_DONTNEED);
  }
}

// `n` zeroed bytes on a cache line, shared (the load-time packed copies of weights: their blocks
// are laid out so that the quants sit on 32-byte boundaries when the buffer does). From
// 2 MiB up they are a mapping of their own in huge pages where the system allows
// (spite/core/page_memory.hpp): a packed matrix then costs a few hundred page faults at load
// instead of one per 4 KiB, and decode, which streams it, far fewer TLB misses.
inline std::shared_ptr<std::byte[]> make_aligned_bytes(std::size_t n) {
  if (carving_region* c = current_carving; c != nullptr) {
    // On a cache line as any other buffer (the AVX-512 tiles load packed blocks aligned): parts
    // whose sizes are whole lines, as the packed layouts' usually are, still lie back to back.
    const std::size_t at = (c->used + cache_line - 1) / cache_line * cache_line;
    if (at <= c->size && n <= c->size - at) {
      std::byte* p = c->region.get() + at;  // never handed out before: still zero
      c->used = at + n;
      return {c->region, p};  // shares the region's ownership
    }
  }
  if (n >= (std::size_t{2} << 20)) return map_zeroed_pages(n);
  auto* p = static_cast<std::byte*>(::operator new(n, std::align_val_t{cache_line}));
  std::memset(p, 0, n);
  return {p, [](std::byte* q) { ::operator delete(q, std::align_val_t{cache_line}); }};
}

}  // namespace spite::dispatch::cpu
