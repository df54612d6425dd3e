// The allocator policy of inference processes: freed working buffers of a few MiB stay in the
// process, so the next layer's buffers take no page faults.
#include <catch2/catch.hpp>

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "spite/core/working_memory.hpp"

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;  // the sanitizer's allocator ignores glibc's settings
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

}  // namespace

TEST_CASE("working memory: blocks of a few MiB come from the heap and stay there when freed") {
#if !defined(__GLIBC__)
  CHECK_FALSE(spite::keep_working_memory());  // the settings are glibc's
#else
  if (!spite::keep_working_memory()) {
    REQUIRE(sanitized);
    return;
  }
  constexpr std::size_t size = 8u << 20;  // above glibc's default mmap threshold of 128 KiB
  const std::size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(size);
  REQUIRE(block != nullptr);
  std::memset(block, 1, size);
  CHECK(mallinfo2().hblkhd == mapped_before);  // not a private mapping of its own
  const std::size_t heap_with_block = mallinfo2().arena;
  std::free(block);
  CHECK(mallinfo2().arena == heap_with_block);  // not trimmed back to the kernel
  CHECK(mallinfo2().fordblks >= size);          // free for the next allocation
#endif
}
