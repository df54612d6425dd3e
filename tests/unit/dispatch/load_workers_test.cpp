// Load-time work on the load threads: every item once, concurrent loads both done (the second on
// its own thread), copies exact at sizes around the 2 MiB pieces.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "load_workers.hpp"

namespace cpu = spite::dispatch::cpu;

TEST_CASE("load ranges cover every item exactly once") {
  for (const std::int64_t n : {0, 1, 2, 3, 17, 4096}) {
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
    cpu::for_load_ranges(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
    });
    for (const auto& s : seen) REQUIRE(s.load() == 1);
  }
}

TEST_CASE("two loads at once both finish, each item of each once") {
  constexpr std::int64_t n = 20000;
  std::vector<std::atomic<int>> a(n), b(n);
  auto run = [](std::vector<std::atomic<int>>& seen) {
    for (int round = 0; round < 20; ++round) {
      cpu::for_load_ranges(static_cast<std::int64_t>(seen.size()), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
      });
    }
  };
  std::thread other([&] { run(b); });
  run(a);
  other.join();
  for (const auto& s : a) REQUIRE(s.load() == 20);
  for (const auto& s : b) REQUIRE(s.load() == 20);
}

TEST_CASE("copies on the load threads are exact around the 2 MiB pieces") {
  constexpr std::size_t piece = std::size_t{2} << 20;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, piece - 1, piece, piece + 1, 3 * piece + 4097}) {
    std::vector<std::byte> src(n + 2), dst(n + 2, std::byte{0xEE});
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 131 + 7) & 0xFF);
    cpu::copy_on_load_threads(dst.data() + 1, src.data() + 1, n);
    REQUIRE(dst[0] == std::byte{0xEE});
    REQUIRE(dst[n + 1] == std::byte{0xEE});
    REQUIRE(std::memcmp(dst.data() + 1, src.data() + 1, n) == 0);
  }
}
