// The bench's plain reads: the step's weight ranges read as one job sum the same words as the
// ranges read one by one (each range's 32-byte aligned part), whatever the thread count; two
// streams read in step sum both.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "probe_loops.hpp"

namespace {

// The words of [p, p + bytes)'s 32-byte aligned part, added.
std::uint64_t aligned_sum(const std::byte* p, std::size_t bytes) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (at + 31) & ~std::uintptr_t{31}, end = (at + bytes) & ~std::uintptr_t{31};
  std::uint64_t sum = 0;
  for (std::uintptr_t a = begin; a + 8 <= end; a += 8) {
    std::uint64_t w;
    std::memcpy(&w, reinterpret_cast<const void*>(a), 8);
    sum += w;
  }
  return sum;
}

}  // namespace

TEST_CASE("bench: ranges read as one job sum the words that reading them one by one sums") {
  std::vector<std::uint64_t> words((std::size_t{3} << 20) / 8);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = i * 0x9E3779B97F4A7C15ull + 7;
  const auto* base = reinterpret_cast<const std::byte*>(words.data());
  // Ranges of every kind: unaligned ends, shorter than the alignment, across many 16 KiB chunks,
  // one after another and apart, out of order.
  const std::vector<spite::bench::detail::byte_range> ranges{
      {base + 5, 100'000}, {base + 200'003, 17}, {base + 300'000, 1'000'000}, {base + 64, 32}, {base + 2'000'011, 999'999}};
  std::uint64_t want = 0;
  for (const auto& r : ranges) want += aligned_sum(r.begin, r.bytes);
  for (const int threads : {1, 3}) {
    INFO("threads " << threads);
    spite::thread_pool pool(threads);
    std::atomic<std::uint64_t> one_by_one{0}, joined{0};
    for (const auto& r : ranges) spite::bench::detail::read_through(pool, r.begin, r.bytes, one_by_one);
    spite::bench::detail::read_ranges_through(pool, ranges, joined);
    CHECK(one_by_one.load() == want);
    CHECK(joined.load() == want);
  }
}

TEST_CASE("bench: two streams read in step sum every word of both, whatever the length") {
  std::vector<std::uint64_t> words(4096 + 64);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = i * 0x9E3779B97F4A7C15ull + 3;
  // Both 32-byte aligned, as the chunks of a read are.
  const auto at = reinterpret_cast<std::uintptr_t>(words.data());
  const std::uint64_t* p = words.data() + ((32 - at % 32) % 32) / 8;
  const std::uint64_t* q = p + 2048;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{2047}}) {
    INFO("words " << n);
    std::uint64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) want += p[i] + q[i];
    CHECK(spite::bench::detail::sum_word_pairs(p, q, n) == want);
  }
}
