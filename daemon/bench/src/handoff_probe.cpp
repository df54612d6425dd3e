// What one hand-off between the compute threads costs here: a decode step runs about a hundred
// operations per token, each handed to the pool's threads and waited for, so the cost of an
// empty job, and of the cache line transfers it is made of, bounds how short an operation can
// be and still gain from a second thread. On a guest whose vCPUs sit on different core
// complexes a line's round trip takes hundreds of nanoseconds, on one die tens.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "spite/bench/bench.hpp"
#include "spite/core/cpu_plan.hpp"
#include "spite/core/thread_pool.hpp"

namespace spite::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// Best of `rounds` rounds of `jobs` empty parallel_for jobs of 64 items: seconds per job.
double empty_job_seconds(thread_pool& pool, int jobs, int rounds) {
  const auto nothing = [](std::int64_t, std::int64_t, int) {};
  for (int j = 0; j < jobs / 10; ++j) pool.parallel_for(64, nothing);  // the workers awake and spinning
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = clock_type::now();
    for (int j = 0; j < jobs; ++j) pool.parallel_for(64, nothing);
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count() / jobs);
  }
  return best;
}

inline void relax(int spins) {
  if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  } else {
    std::this_thread::yield();  // the other thread may share this CPU
  }
}

// Best of `rounds` rounds of `trips` round trips of a counter between two threads, each on a
// cache line of its own: seconds per round trip.
double line_round_trip_seconds(long trips, int rounds) {
  struct alignas(64) line {
    std::atomic<long> value{0};
  };
  line ping, pong;
  const long total = trips * rounds;
  std::thread echo([&] {
    for (long i = 1; i <= total; ++i) {
      for (int s = 0; ping.value.load(std::memory_order_acquire) != i; ++s) relax(s);
      pong.value.store(i, std::memory_order_release);
    }
  });
  double best = 1e30;
  long i = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = clock_type::now();
    for (long k = 0; k < trips; ++k) {
      ping.value.store(++i, std::memory_order_release);
      for (int s = 0; pong.value.load(std::memory_order_acquire) != i; ++s) relax(s);
    }
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count() / static_cast<double>(trips));
  }
  echo.join();
  return best;
}

}  // namespace

handoff_cost measure_handoff(int threads) {
  handoff_cost h;
  if (threads < 2 || affinity_cpus().size() < 2) return h;
  h.threads = threads;
  thread_pool pool(threads, false);
  h.empty_job_us = empty_job_seconds(pool, 20000, 5) * 1e6;
  h.line_round_trip_ns = line_round_trip_seconds(50000, 5) * 1e9;
  return h;
}

nlohmann::json handoff_cost::to_json() const {
  return {{"threads", threads}, {"empty_job_us", empty_job_us}, {"line_round_trip_ns", line_round_trip_ns}};
}

}  // namespace spite::bench
