// Machine probes: how fast memory streams and how many f32 FMAs and 8-bit products the cores
// retire. They run in the same command as the model benchmark because on a shared host all three
// change from minute to minute, and only a fraction measured together means anything.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "probe_loops.hpp"
#include "spite/bench/bench.hpp"

namespace spite::bench {
namespace detail {

__attribute__((target("avx2"))) double dot8_avx2(std::int64_t iters) {
  __m256i a0 = _mm256_set1_epi8(1), a1 = _mm256_set1_epi8(2), a2 = _mm256_set1_epi8(3), a3 = _mm256_set1_epi8(4);
  __m256i a4 = _mm256_set1_epi8(5), a5 = _mm256_set1_epi8(6), a6 = _mm256_set1_epi8(7), a7 = _mm256_set1_epi8(8);
  __m256i a8 = _mm256_set1_epi8(9), a9 = _mm256_set1_epi8(10), a10 = _mm256_set1_epi8(11), a11 = _mm256_set1_epi8(12);
  const __m256i b = _mm256_set1_epi8(-5);
  // In assembly: written with intrinsics, GCC kept some of the 12 chains on the stack and stored
  // them inside the loop, which halved the measured rate (the other probes compile cleanly).
  for (std::int64_t i = 0; i < iters; ++i) {
    __asm__(
        "vpmaddubsw %12, %0, %0\n\tvpmaddubsw %12, %1, %1\n\tvpmaddubsw %12, %2, %2\n\t"
        "vpmaddubsw %12, %3, %3\n\tvpmaddubsw %12, %4, %4\n\tvpmaddubsw %12, %5, %5\n\t"
        "vpmaddubsw %12, %6, %6\n\tvpmaddubsw %12, %7, %7\n\tvpmaddubsw %12, %8, %8\n\t"
        "vpmaddubsw %12, %9, %9\n\tvpmaddubsw %12, %10, %10\n\tvpmaddubsw %12, %11, %11"
        : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9),
          "+x"(a10), "+x"(a11)
        : "x"(b));
  }
  const __m256i s = _mm256_add_epi16(
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(a0, a1), _mm256_add_epi16(a2, a3)),
                       _mm256_add_epi16(_mm256_add_epi16(a4, a5), _mm256_add_epi16(a6, a7))),
      _mm256_add_epi16(_mm256_add_epi16(a8, a9), _mm256_add_epi16(a10, a11)));
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  volatile std::int32_t sink = lanes[0];
  (void)sink;
  return 12.0 * 32 * 2 * static_cast<double>(iters);
}

__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::uint64_t* p, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) std::uint64_t sum_pair_avx2(const std::uint64_t* p, const std::uint64_t* q, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, b0 = a0, b1 = a0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    b0 = _mm256_add_epi64(b0, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + i)));
    b1 = _mm256_add_epi64(b1, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + i + 4)));
  }
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(b0, b1)));
  std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i] + q[i];
  return s;
}

std::uint64_t sum_generic(const std::uint64_t* p, std::size_t n) {
  std::uint64_t s0 = 0, s1 = 0;
  std::size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    s0 += p[i];
    s1 += p[i + 1];
  }
  if (i < n) s0 += p[i];
  return s0 + s1;
}

std::uint64_t sum_words(const std::uint64_t* p, std::size_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? sum_avx2(p, n) : sum_generic(p, n);
}

std::uint64_t sum_word_pairs(const std::uint64_t* p, const std::uint64_t* q, std::size_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? sum_pair_avx2(p, q, n) : sum_generic(p, n) + sum_generic(q, n);
}

huge_buffer huge_buffer_of(std::size_t bytes) {
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  huge_buffer b{nullptr, &std::free};
  const std::size_t n_bytes = (bytes + huge_page - 1) & ~(huge_page - 1);
  b.reset(static_cast<std::uint64_t*>(std::aligned_alloc(huge_page, n_bytes)));
  if (b) (void)::madvise(b.get(), n_bytes, MADV_HUGEPAGE);  // advice: fine to be refused
  return b;
}

void read_ranges_through(thread_pool& pool, std::span<const byte_range> ranges, std::atomic<std::uint64_t>& sink) {
  constexpr std::size_t align = 32, chunk_words = (16u << 10) / sizeof(std::uint64_t);
  // Chunk c < half of a range is read beside chunk c + half, and an odd last chunk alone: the
  // job's items are those pairs, range after range. Found from the item's index rather than
  // listed (a list for a step's 600 MB, remade at every read, took 10-15 % of the read's time).
  struct paired_range {
    const std::uint64_t* words;
    std::size_t n, half;
    std::int64_t first_item;
  };
  std::vector<paired_range> parts;
  parts.reserve(ranges.size());
  std::int64_t items = 0;
  for (const byte_range& r : ranges) {
    const auto at = reinterpret_cast<std::uintptr_t>(r.begin);
    const std::uintptr_t begin = (at + align - 1) & ~std::uintptr_t{align - 1}, end = (at + r.bytes) & ~std::uintptr_t{align - 1};
    if (end <= begin) continue;
    const std::size_t n = (end - begin) / sizeof(std::uint64_t), chunks = (n + chunk_words - 1) / chunk_words;
    parts.push_back({reinterpret_cast<const std::uint64_t*>(begin), n, chunks / 2, items});
    items += static_cast<std::int64_t>(chunks / 2 + chunks % 2);
  }
  pool.parallel_for(items, [&](std::int64_t b, std::int64_t e, int) {
    auto part = std::upper_bound(parts.begin(), parts.end(), b, [](std::int64_t i, const paired_range& r) { return i < r.first_item; }) - 1;
    std::uint64_t sum = 0;
    for (std::int64_t i = b; i < e; ++i) {
      while (part + 1 != parts.end() && (part + 1)->first_item <= i) ++part;
      const auto c = static_cast<std::size_t>(i - part->first_item);
      const auto chunk_n = [&](std::size_t k) { return std::min(chunk_words, part->n - k * chunk_words); };
      if (c < part->half) {
        const std::size_t n0 = chunk_n(c), n1 = chunk_n(c + part->half), both = std::min(n0, n1);
        const std::uint64_t* first = part->words + c * chunk_words;
        const std::uint64_t* second = part->words + (c + part->half) * chunk_words;
        sum += sum_word_pairs(first, second, both) + sum_words(first + both, n0 - both) + sum_words(second + both, n1 - both);
      } else {
        const std::size_t last = 2 * part->half;  // the odd one out
        sum += sum_words(part->words + last * chunk_words, chunk_n(last));
      }
    }
    sink.fetch_add(sum, std::memory_order_relaxed);
  });
}

void read_through(thread_pool& pool, const std::byte* p, std::size_t bytes, std::atomic<std::uint64_t>& sink) {
  const byte_range one{p, bytes};
  read_ranges_through(pool, std::span(&one, 1), sink);
}

}  // namespace detail

namespace {

using detail::dot8_avx2;
using detail::run_together;
using detail::sum_avx2;

using clock_type = std::chrono::steady_clock;

int resolve_threads(int threads) {
  return threads > 0 ? threads : thread_pool::default_threads();  // as the model's pool
}


__attribute__((target("avx512f"))) double fma_avx512(std::int64_t iters) {
  __m512 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (std::int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  __m512 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return static_cast<double>(lanes[0]) * 0 + 12.0 * 16 * 2 * static_cast<double>(iters);
}

__attribute__((target("avx2,fma"))) double fma_avx2(std::int64_t iters) {
  __m256 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (std::int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  __m256 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return static_cast<double>(lanes[0]) * 0 + 12.0 * 8 * 2 * static_cast<double>(iters);
}

// The 8-bit multiply the quantized kernels are built on, u8 x s8 products summed into wider
// lanes, in 12 independent chains (each product counted as 2 ops, as a FLOP of an FMA). VNNI's
// VPDPBUSD does 64 products into int32 per instruction; AVX2's VPMADDUBSW 32 into int16 pairs
// (its output fed back as the next unsigned operand: a chain the compiler cannot fold).
__attribute__((target("avx512f,avx512vnni"))) double dot8_avx512_vnni(std::int64_t iters) {
  __m512i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  for (std::int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  }
  __m512i s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_epi32(s, acc[k]);
  alignas(64) std::int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  volatile std::int32_t sink = lanes[0];
  (void)sink;
  return 12.0 * 64 * 2 * static_cast<double>(iters);
}

double dot8_generic(std::int64_t iters) {
  std::uint32_t acc[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  for (std::int64_t i = 0; i < iters; ++i) {
    for (std::uint32_t& x : acc) x = x * 3u + (x & 0xFFu);
  }
  volatile std::uint32_t sink = acc[0];
  (void)sink;
  return 8.0 * 2 * static_cast<double>(iters);
}

// Runs kernel(iters) on every thread at once, three times: the best total rate, in G per s.
template <class Kernel>
double best_rate(int threads, Kernel kernel) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::atomic<double> ops{0};
    const double s = run_together(threads, [&](int) {
      const double f = kernel();
      double cur = ops.load();
      while (!ops.compare_exchange_weak(cur, cur + f)) {
      }
    });
    best = std::max(best, ops.load() / s / 1e9);
  }
  return best;
}

double fma_generic(std::int64_t iters) {
  float acc[8] = {0, 1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f, 6e-3f, 7e-3f};
  for (std::int64_t i = 0; i < iters; ++i) {
    for (float& x : acc) x = x * 0.999999f + 1e-7f;
  }
  volatile float sink = acc[0];
  (void)sink;
  return 8.0 * 2 * static_cast<double>(iters);
}

}  // namespace

double measure_bandwidth(int threads, std::size_t bytes) { return measure_bandwidth_ways(threads, bytes).best(); }

bandwidth_ways measure_bandwidth_ways(int threads, std::size_t bytes) {
  threads = resolve_threads(threads);
  const std::size_t n = bytes / sizeof(std::uint64_t);
  // In huge pages where the system allows them, as the weights the kernels stream are
  // (pack_for_cpu): on 4 KiB pages the same read loop ran 1-10 % slower here (TLB misses), and a
  // probe on them would flatter every fraction measured against it.
  const detail::huge_buffer buf = detail::huge_buffer_of(n * sizeof(std::uint64_t));
  if (!buf) return {};
  // Touch every page first (in parallel, so pages land near the threads that read them).
  const std::size_t slice = (n / static_cast<std::size_t>(threads)) & ~std::size_t{15};
  run_together(threads, [&](int t) {
    std::memset(buf.get() + slice * static_cast<std::size_t>(t), 1, slice * sizeof(std::uint64_t));
  });
  // Two ways of reading, in turns: each thread its slice as one stream, and as two in step (the
  // buffer's first half beside its second, as the decode kernels read a matrix). Two streams
  // keep more lines in flight where a core's prefetchers follow a few streams with a bounded
  // distance each: on a Zen 5 host they read 11-21 % faster, one thread or two. The faster
  // way's best pass is the bandwidth (best()); one stream alone would flatter every fraction.
  const std::size_t half = slice * static_cast<std::size_t>(threads) / 2, pair_slice = (half / static_cast<std::size_t>(threads)) & ~std::size_t{7};
  const double bytes_read = static_cast<double>(slice * static_cast<std::size_t>(threads) * sizeof(std::uint64_t));
  std::atomic<std::uint64_t> sink{0};
  bandwidth_ways ways;
  for (int pass = 0; pass < 5; ++pass) {
    double s = run_together(threads, [&](int t) {
      const std::uint64_t* p = buf.get() + slice * static_cast<std::size_t>(t);
      sink += detail::sum_words(p, slice);
    });
    ways.one_stream_gbs = std::max(ways.one_stream_gbs, bytes_read / s / 1e9);
    s = run_together(threads, [&](int t) {
      const std::uint64_t* p = buf.get() + pair_slice * static_cast<std::size_t>(t);
      sink += detail::sum_word_pairs(p, p + half, pair_slice);
    });
    ways.two_streams_gbs = std::max(ways.two_streams_gbs,
                                    static_cast<double>(2 * pair_slice * static_cast<std::size_t>(threads) * sizeof(std::uint64_t)) / s / 1e9);
  }
  return ways;
}

double measure_peak_gflops(int threads) {
  threads = resolve_threads(threads);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const std::int64_t iters = 4'000'000;
  return best_rate(threads, [&] { return avx512 ? fma_avx512(iters) : avx2 ? fma_avx2(iters) : fma_generic(iters / 8); });
}

double measure_peak_int8_gops(int threads) {
  threads = resolve_threads(threads);
  const bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  const bool avx2 = __builtin_cpu_supports("avx2");
  const std::int64_t iters = 4'000'000;
  return best_rate(threads, [&] { return vnni ? dot8_avx512_vnni(iters) : avx2 ? dot8_avx2(iters) : dot8_generic(iters / 8); });
}

}  // namespace spite::bench
