// The compute thread pool: every index is visited once, chunks go to the threads that are free,
// and with pinning on each thread runs on a CPU of its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "spite/core/thread_pool.hpp"

TEST_CASE("thread pool: parallel_for covers every index exactly once, many times over") {
  spite::thread_pool pool(3);
  REQUIRE(pool.size() == 3);
  for (const std::int64_t n : {1, 2, 3, 7, 1000}) {
    for (int round = 0; round < 50; ++round) {
      // Assertions are not thread-safe: the workers only record.
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
      std::atomic<int> bad_thread{0};
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int thread) {
        if (thread < 0 || thread >= 3) bad_thread++;
        for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
      });
      REQUIRE(bad_thread == 0);
      for (const auto& s : seen) REQUIRE(s.load() == 1);
    }
  }
}

TEST_CASE("thread pool: a thread held up in its first chunk leaves the other chunks to the others") {
  spite::thread_pool pool(3);
  constexpr std::int64_t n = 1200;  // 12 chunks of 100
  std::vector<std::atomic<int>> by_thread(3);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int thread) {
    if (thread == 1 && begin == 100) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    by_thread[static_cast<std::size_t>(thread)] += static_cast<int>(end - begin);
    for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
  });
  for (const auto& s : seen) REQUIRE(s.load() == 1);
  // Thread 1 ran its own chunk only; a static split would have given it 400.
  CHECK(by_thread[1].load() == 100);
  CHECK(by_thread[0].load() + by_thread[2].load() == n - 100);
}

TEST_CASE("thread pool: after the threads' first chunks the claimed chunks shrink toward the end, down to one item") {
  spite::thread_pool pool(2);
  constexpr std::int64_t n = 4000;  // first chunks of 500 each, then 750, 562, ... down to 1
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int) {
    std::lock_guard lock(mu);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  std::int64_t expected_begin = 0;
  for (const auto& [begin, end] : chunks) {
    REQUIRE(begin == expected_begin);  // every item exactly once, in contiguous chunks
    expected_begin = end;
  }
  CHECK(expected_begin == n);
  REQUIRE(chunks.size() >= 4);
  CHECK(chunks[0].second - chunks[0].first == 500);
  CHECK(chunks[1].second - chunks[1].first == 500);
  CHECK(chunks[2].second - chunks[2].first == 750);  // a quarter of the 3000 left
  for (std::size_t i = 3; i < chunks.size(); ++i) CHECK(chunks[i].second - chunks[i].first <= chunks[i - 1].second - chunks[i - 1].first);
  CHECK(chunks.back().second - chunks.back().first == 1);
}

TEST_CASE("thread pool: with pinning each thread, the caller included, runs on one CPU of its own") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  const int n_cpus = CPU_COUNT(&allowed);
  const int n_threads = std::min(n_cpus, 4);
  // A thread of its own, so that pinning the caller leaves the test runner alone.
  std::thread runner([&] {
    spite::thread_pool::set_pinning(true);
    {
      // A first pool pins this thread; pools made afterwards still spread over every CPU.
      spite::thread_pool first(1);
      first.parallel_for(2, [](std::int64_t, std::int64_t, int) {});
    }
    spite::thread_pool pool(n_threads);
    spite::thread_pool::set_pinning(false);
    std::mutex mu;
    std::set<int> cpus;
    std::vector<int> mask_sizes;
    pool.parallel_for(n_threads, [&](std::int64_t, std::int64_t, int) {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      const int rc = pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
      std::lock_guard lock(mu);
      mask_sizes.push_back(rc == 0 ? CPU_COUNT(&mine) : -1);
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &mine)) cpus.insert(c);
      }
    });
    CHECK(static_cast<int>(mask_sizes.size()) == n_threads);
    for (int size : mask_sizes) CHECK(size == 1);
    CHECK(static_cast<int>(cpus.size()) == n_threads);  // all different
    for (int c : cpus) CHECK(CPU_ISSET(c, &allowed));
  });
  runner.join();
  // Pools made with pinning off leave threads free.
  spite::thread_pool free_pool(2);
  std::atomic<int> worker_cpus{-1};
  free_pool.parallel_for(2, [&](std::int64_t, std::int64_t, int thread) {
    if (thread == 0) return;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0) worker_cpus = CPU_COUNT(&mask);
  });
  CHECK(worker_cpus == n_cpus);
}
