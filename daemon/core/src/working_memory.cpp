#include "spite/core/working_memory.hpp"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spite {

bool keep_working_memory() {
#if defined(__GLIBC__)
  // Blocks up to 32 MiB (glibc's ceiling for this setting) come from the heaps, and freed
  // memory at the top of a heap is returned to the kernel only beyond 1 GiB.
  constexpr int mmap_threshold = 32 << 20;
  constexpr int trim_threshold = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 && mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1;
#else
  return false;
#endif
}

}  // namespace spite
