#include "spite/core/page_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

namespace spite {

void page_unmapper::operator()(std::byte* p) const noexcept {
  if (p != nullptr) ::munmap(p, length);
}

page_memory map_zeroed_pages(std::size_t bytes) {
  if (bytes == 0) return {};
  constexpr std::size_t huge = std::size_t{2} << 20;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - huge - page) throw std::bad_alloc();
  const std::size_t len = (bytes + page - 1) / page * page;
  // Room to slide the start onto a 2 MiB boundary; the slack on either side is unmapped.
  const std::size_t slack = len >= huge ? huge : 0;
  void* region = ::mmap(nullptr, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(region);
  std::uintptr_t start = base;
  if (slack > 0) {
    start = (base + huge - 1) / huge * huge;
    const std::uintptr_t end = start + len, mapped_end = base + len + slack;
    if (start > base) ::munmap(region, start - base);
    if (mapped_end > end) ::munmap(reinterpret_cast<void*>(end), mapped_end - end);
    (void)::madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);  // advice: fine to be refused
  }
  return page_memory(reinterpret_cast<std::byte*>(start), page_unmapper{len});
}

}  // namespace spite
