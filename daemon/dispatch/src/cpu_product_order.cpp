// Which weight matrix a decode step multiplies next, learned from the order of its products
// (a model's forward pass repeats it from token to token), so that the pool's threads can pull
// the front of their share of it toward their caches while they wait between operations.
// Between two products a decode step runs small operations (norms, rotary embedding, attention,
// the activations' quantization) and hand-offs at which one thread waits for the other: the
// memory bus idles through them unless something reads ahead.
#include <cstdlib>
#include <unordered_map>
#include <utility>

#include "cpu_kernels.hpp"

namespace spite::dispatch::cpu {
namespace {

// Activation rows up to which a product counts as a decode step's (one sequence or a few
// decoding together); longer batches take far longer than the gaps between them.
constexpr std::int64_t max_decode_rows = 8;

// Bytes of its share each thread reads ahead: well inside a core's L2 (1 MiB on recent x86
// cores, 512 KiB on older ones), where the lines must stay until the product reaches them.
std::size_t ahead_per_thread() {
  static const std::size_t bytes = [] {
    const char* v = std::getenv("SPITE_PREFETCH_AHEAD_KIB");
    return v != nullptr ? static_cast<std::size_t>(std::strtoul(v, nullptr, 10)) << 10 : std::size_t{256} << 10;
  }();
  return bytes;
}

struct region {
  const std::byte* begin = nullptr;
  std::size_t bytes = 0;
  int streams = 1;  // regions each thread's share is read as (note_decode_streams)
};

thread_local int decode_streams = 1;  // of the product running on this thread

// The bytes a product with w streams: the packed layout where there is one.
region read_by_product(const weight& w) {
  if (w.packed != nullptr) return {w.packed, w.packed_size};
  return {w.data, w.row_bytes * static_cast<std::size_t>(w.out)};
}

// Per calling thread: a forward pass runs its products from one thread. Pointers of unloaded
// models may linger until overwritten or cleared; they are only ever prefetched.
struct product_order {
  std::unordered_map<const std::byte*, region> next;
  const std::byte* last = nullptr;
};
thread_local product_order order;

constexpr std::size_t max_remembered = 1 << 14;  // products; past it the order is learned again

}  // namespace

void note_decode_streams(int streams) noexcept { decode_streams = streams; }

void after_product(const weight& w, std::int64_t n_tokens, thread_pool& pool) {
  const int streams = std::exchange(decode_streams, 1);
  if (n_tokens > max_decode_rows || pool.size() < 2) return;
  region r = read_by_product(w);
  if (r.begin == nullptr) return;
  r.streams = streams;
  if (order.last != nullptr && order.last != r.begin) {
    if (order.next.size() >= max_remembered) order.next.clear();
    order.next[order.last] = r;
  }
  order.last = r.begin;
  if (const auto it = order.next.find(r.begin); it != order.next.end()) {
    pool.prefetch_while_waiting(it->second.begin, it->second.bytes, ahead_per_thread(), it->second.streams);
  }
}

}  // namespace spite::dispatch::cpu
