// The compute thread pool: every index is visited once, chunks go to the threads that are free,
// and with pinning on each thread runs on a CPU of its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "spite/core/cpu_plan.hpp"
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

TEST_CASE("thread pool: every chunk of a job, on any thread, sees the job's own id; none outside a job") {
  spite::thread_pool pool(3);
  REQUIRE(spite::thread_pool::current_job() == 0);
  std::set<std::uint64_t> jobs;
  for (const std::int64_t n : {1, 2, 1000, 1000}) {
    std::mutex mu;
    std::set<std::uint64_t> seen;
    pool.parallel_for(n, [&](std::int64_t, std::int64_t, int) {
      const std::uint64_t id = spite::thread_pool::current_job();
      std::lock_guard lock(mu);
      seen.insert(id);
    });
    REQUIRE(seen.size() == 1);
    REQUIRE(*seen.begin() != 0);
    jobs.insert(*seen.begin());
    REQUIRE(spite::thread_pool::current_job() == 0);
  }
  CHECK(jobs.size() == 4);  // a new id for every job
}

TEST_CASE("thread pool: a thread held up in its first chunk leaves the rest of its share to the others") {
  spite::thread_pool pool(3);
  constexpr std::int64_t n = 1200;  // shares of 400; thread 1's first chunk is [400, 450)
  std::vector<std::atomic<int>> by_thread(3);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
  // The others start once thread 1 has begun (a late thread's share goes to the others, its
  // first chunk too): so thread 1's first chunk is the front eighth of its whole share.
  std::atomic<bool> one_started{false};
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int thread) {
    if (thread == 1 && begin == 400) {
      one_started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    while (!one_started) std::this_thread::yield();
    by_thread[static_cast<std::size_t>(thread)] += static_cast<int>(end - begin);
    for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
  });
  for (const auto& s : seen) REQUIRE(s.load() == 1);
  // Thread 1 ran its first chunk only; a static split would have given it 400.
  CHECK(by_thread[1].load() == 50);
  CHECK(by_thread[0].load() + by_thread[2].load() == n - 50);
}

TEST_CASE("thread pool: each thread streams through its own share, and one left without work takes the back half of another's") {
  spite::thread_pool pool(2);
  constexpr std::int64_t n = 4000;  // shares [0, 2000) and [2000, 4000)
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> by_thread[2];
  std::atomic<bool> one_started{false};
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int thread) {
    // Thread 1 is held up in its first chunk: thread 0, which waits until then, works through
    // the rest.
    if (thread == 1 && begin == 2000) {
      one_started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    while (!one_started) std::this_thread::yield();
    std::lock_guard lock(mu);
    by_thread[thread].emplace_back(begin, end);
  });
  // Thread 1: its first chunk, an eighth of its share.
  REQUIRE(by_thread[1].size() == 1);
  CHECK(by_thread[1][0] == std::pair<std::int64_t, std::int64_t>{2000, 2250});
  // Thread 0: its share front to back in chunks of an eighth of what is left of it, each
  // starting where the last one ended (one stream), shrinking down to one item.
  const auto& mine = by_thread[0];
  std::size_t i = 0;
  std::int64_t at = 0;
  for (; i < mine.size() && mine[i].first < 2000; ++i) {
    REQUIRE(mine[i].first == at);
    CHECK(mine[i].second - mine[i].first == std::max<std::int64_t>(1, (2000 - at) / 8));
    at = mine[i].second;
  }
  CHECK(at == 2000);
  // Then the back half of what thread 1 left, [3125, 4000), in order; then the back half of the
  // rest, [2687, 3125), and so on toward thread 1's first chunk.
  REQUIRE(i < mine.size());
  CHECK(mine[i].first == 3125);
  std::vector<std::pair<std::int64_t, std::int64_t>> all(mine.begin(), mine.end());
  all.insert(all.end(), by_thread[1].begin(), by_thread[1].end());
  std::sort(all.begin(), all.end());
  std::int64_t expected_begin = 0;
  for (const auto& [begin, end] : all) {
    REQUIRE(begin == expected_begin);  // every item exactly once
    expected_begin = end;
  }
  CHECK(expected_begin == n);
}

namespace {
// A worker made to stop between jobs, as when the system runs something else on its CPU: a
// signal whose handler blocks on a pipe until the test writes to it.
int held_pipe[2] = {-1, -1};
void hold_here(int) {
  char c;
  while (read(held_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
}
}  // namespace

TEST_CASE("thread pool: a worker that does not come to a job does not hold it up: the others do its share") {
  REQUIRE(pipe(held_pipe) == 0);
  struct sigaction action {}, previous{};
  action.sa_handler = hold_here;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  REQUIRE(sigaction(SIGUSR1, &action, &previous) == 0);
  {
    spite::thread_pool pool(2);
    // Learn the worker's thread id (the caller waits in its item until the worker is in its own).
    std::atomic<pid_t> worker_tid{0};
    pool.parallel_for(2, [&](std::int64_t, std::int64_t, int thread) {
      if (thread == 1) worker_tid = static_cast<pid_t>(syscall(SYS_gettid));
      while (worker_tid == 0) std::this_thread::yield();
    });
    // Let it leave that job and wait for the next, then stop it there.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(syscall(SYS_tgkill, getpid(), worker_tid.load(), SIGUSR1) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // The next job runs to its end on the caller alone, while the worker is stopped; a watchdog
    // lets the worker go after 10 s, so that a pool that waits for it fails instead of hanging.
    std::atomic<bool> finished{false}, released{false};
    std::vector<std::atomic<int>> seen(1000);
    std::atomic<int> by_worker{0};
    std::thread watchdog([&] {
      for (int i = 0; i < 1000 && !finished; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!finished) {
        released = true;
        const char go = 1;
        if (write(held_pipe[1], &go, 1) != 1) released = false;
      }
    });
    pool.parallel_for(1000, [&](std::int64_t begin, std::int64_t end, int thread) {
      if (thread != 0) by_worker += static_cast<int>(end - begin);
      for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
    });
    finished = true;
    watchdog.join();
    CHECK_FALSE(released);  // the job ended while the worker was still stopped
    CHECK(by_worker == 0);
    for (const auto& x : seen) REQUIRE(x.load() == 1);
    // Let the worker go (unless the watchdog did); the pool works on with both threads.
    if (!released) {
      const char go = 1;
      REQUIRE(write(held_pipe[1], &go, 1) == 1);
    }
    std::atomic<int> worker_items{0};
    std::atomic<int> entered{0};
    pool.parallel_for(2, [&](std::int64_t, std::int64_t, int thread) {
      entered++;
      while (entered < 2) std::this_thread::yield();
      if (thread == 1) worker_items++;
    });
    CHECK(worker_items == 1);
  }
  sigaction(SIGUSR1, &previous, nullptr);
  close(held_pipe[0]);
  close(held_pipe[1]);
}

TEST_CASE("thread pool: more threads than CPUs (all on one) still cover every index exactly once") {
  cpu_set_t one;
  CPU_ZERO(&one);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) {
      CPU_SET(c, &one);
      break;
    }
  }
  // A thread of its own on one CPU; the pool's threads inherit its mask, so they take turns and
  // come late to jobs all the time.
  std::atomic<int> failures{0};
  std::thread runner([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    spite::thread_pool pool(6);
    for (int round = 0; round < 300; ++round) {
      const std::int64_t n = 1 + round * 37 % 700;
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end, int thread) {
        if (thread < 0 || thread >= 6) failures++;
        for (std::int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
      });
      for (const auto& x : seen) failures += x.load() != 1;
    }
  });
  runner.join();
  CHECK(failures == 0);
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
    // Each thread waits in its item for the others, so none takes a late one's item.
    std::atomic<int> entered{0};
    pool.parallel_for(n_threads, [&](std::int64_t, std::int64_t, int) {
      entered++;
      while (entered < n_threads) std::this_thread::yield();
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
  std::atomic<int> entered{0};
  free_pool.parallel_for(2, [&](std::int64_t, std::int64_t, int thread) {
    entered++;
    while (entered < 2) std::this_thread::yield();
    if (thread == 0) return;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0) worker_cpus = CPU_COUNT(&mask);
  });
  CHECK(worker_cpus == n_cpus);
}

TEST_CASE("thread pool: by default one thread per core the process may use, not per CPU of the machine") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  // This machine's own topology and cgroup (cpu_plan_test checks the plan on trees of its own).
  const int planned = spite::make_cpu_plan(cpus).default_threads();
  CHECK(spite::thread_pool::default_threads() == planned);
  CHECK(planned >= 1);
  CHECK(planned <= CPU_COUNT(&allowed));
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &allowed)) first = c;
  }
  // A thread of its own restricted to one CPU, as a container's CPU set would.
  std::thread runner([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
    CHECK(spite::thread_pool::default_threads() == 1);
    spite::thread_pool pool(0);
    CHECK(pool.size() == 1);
  });
  runner.join();
}

TEST_CASE("thread pool: a pool made unpinned leaves its threads and its caller free while pinning is on") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  const int n_cpus = CPU_COUNT(&allowed);
  std::thread runner([&] {
    spite::thread_pool::set_pinning(true);
    spite::thread_pool pool(2, false);
    spite::thread_pool::set_pinning(false);
    std::mutex mu;
    std::vector<int> mask_sizes;
    for (int round = 0; round < 3; ++round) {
      pool.parallel_for(2, [&](std::int64_t, std::int64_t, int) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        const int rc = pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
        std::lock_guard lock(mu);
        mask_sizes.push_back(rc == 0 ? CPU_COUNT(&mine) : -1);
      });
    }
    REQUIRE_FALSE(mask_sizes.empty());
    for (int size : mask_sizes) CHECK(size == n_cpus);
  });
  runner.join();
}

TEST_CASE("thread pool: pin_as puts a thread of one's own where a pool's thread of that index runs") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  const int n_cpus = CPU_COUNT(&allowed);
  const auto mask_of_thread_pinned_as = [](int index) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    std::thread t([&] {
      spite::thread_pool::pin_as(index);
      pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
    });
    t.join();
    return mine;
  };
  // Pinning off: nothing changes.
  const cpu_set_t free_mask = mask_of_thread_pinned_as(1);
  CHECK(CPU_COUNT(&free_mask) == n_cpus);
  spite::thread_pool::set_pinning(true);
  const cpu_set_t first = mask_of_thread_pinned_as(0), second = mask_of_thread_pinned_as(1);
  spite::thread_pool::set_pinning(false);
  CHECK(CPU_COUNT(&first) == 1);
  CHECK(CPU_COUNT(&second) == 1);
  if (n_cpus > 1) CHECK(!CPU_EQUAL(&first, &second));  // two indexes, two CPUs
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &first) || CPU_ISSET(c, &second)) CHECK(CPU_ISSET(c, &allowed));
  }
}

TEST_CASE("thread pool: regions to prefetch between jobs, of any size or none, leave every job whole") {
  spite::thread_pool pool(3);
  std::vector<std::byte> next_matrix(3 << 20);
  struct region {
    const void* begin;
    std::size_t bytes;
    int streams;
  };
  const region regions[] = {
      {next_matrix.data(), next_matrix.size(), 1},  // the usual: each thread the front of its third
      {next_matrix.data(), next_matrix.size(), 2},  // read as two streams: sixths 0 and 3, 1 and 4, 2 and 5
      {next_matrix.data(), next_matrix.size(), 9},  // more streams than a thread keeps apart: as 4
      {next_matrix.data(), 2, 2},                   // fewer bytes than parts
      {nullptr, 0, 1},                              // none
      {nullptr, 4096, 0},                           // none, and no stream: as 1
      {reinterpret_cast<const void*>(std::uintptr_t{1} << 46), std::size_t{1} << 40, 2},  // never mapped: prefetches do not fault
  };
  for (int round = 0; round < 20; ++round) {
    for (const auto& [begin, bytes, streams] : regions) {
      pool.prefetch_while_waiting(begin, bytes, 256 << 10, streams);
      constexpr std::int64_t n = 777;
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t i = b; i < e; ++i) seen[static_cast<std::size_t>(i)]++;
      });
      for (const auto& s : seen) REQUIRE(s.load() == 1);
      // A gap between jobs, as a decode step's small operations leave: the workers prefetch.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}
