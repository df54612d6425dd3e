// Load-time work over the processor's threads: packing weights into the kernels' layouts and
// copying matrices into huge pages. On one thread a model's load went at one core's pace of page
// faults (the kernel zeroes each fresh page on the faulting core) and copies: most of a
// TinyLlama load, and seconds for 8B models. The items of one call must be independent (each
// writes its own bytes), as the kernels' packing loops are, group by group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace spite::dispatch::cpu {

// fn(begin, end) over disjoint ranges covering [0, n), on the load threads (one per CPU the
// process may use, not pinned, made on first use) when no other load is using them; else, as for small
// n, on the calling thread alone. fn must not throw.
void for_load_ranges(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn);

// memcpy, in pieces of 2 MiB over the load threads.
void copy_on_load_threads(std::byte* dst, const std::byte* src, std::size_t n);

}  // namespace spite::dispatch::cpu
