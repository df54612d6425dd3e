#include "load_workers.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "spite/core/thread_pool.hpp"

namespace spite::dispatch::cpu {

namespace {

// One load at a time uses the threads (thread_pool::parallel_for takes one caller at a time);
// a second, concurrent one runs on its own thread.
std::mutex load_threads_busy;

thread_pool& load_threads() {
  // Not pinned: pinning would also tie the loading thread (thread 0) to one CPU for good.
  static thread_pool pool(thread_pool::default_threads(), false);
  return pool;
}

}  // namespace

void for_load_ranges(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  std::unique_lock lock(load_threads_busy, std::try_to_lock);
  if (n == 1 || !lock.owns_lock()) return fn(0, n);
  load_threads().parallel_for(n, [&](std::int64_t begin, std::int64_t end, int) { fn(begin, end); });
}

void copy_on_load_threads(std::byte* dst, const std::byte* src, std::size_t n) {
  constexpr std::size_t piece = std::size_t{2} << 20;
  const auto pieces = static_cast<std::int64_t>((n + piece - 1) / piece);
  for_load_ranges(pieces, [&](std::int64_t begin, std::int64_t end) {
    const std::size_t from = static_cast<std::size_t>(begin) * piece, to = std::min(n, static_cast<std::size_t>(end) * piece);
    std::memcpy(dst + from, src + from, to - from);
  });
}

}  // namespace spite::dispatch::cpu
