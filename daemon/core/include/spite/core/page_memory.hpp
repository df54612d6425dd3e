// Large zeroed buffers as mappings of their own, on 2 MiB boundaries from 2 MiB up, with
// transparent huge pages asked for ("madvise" is a common system setting, where plain
// allocations never get them). Memory that a step streams or reads at a stride (packed
// weights, the KV cache) then takes a TLB miss per 2 MiB instead of per 4 KiB, and a fault
// per 2 MiB when first touched. Fresh anonymous pages are zero already: nothing is written.
#pragma once

#include <cstddef>
#include <memory>

namespace spite {

struct page_unmapper {
  std::size_t length = 0;
  void operator()(std::byte* p) const noexcept;
};

using page_memory = std::unique_ptr<std::byte[], page_unmapper>;

// Throws std::bad_alloc when the system refuses the mapping. Zero bytes give an empty pointer.
page_memory map_zeroed_pages(std::size_t bytes);

}  // namespace spite
