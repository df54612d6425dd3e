// The bench's op profile: an op the forward pass runs as blocks of rows on every thread (a
// prefill's rms_norm) counts one call per job, its wall time, however the pool split the rows.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "step_recorder.hpp"

namespace {

using namespace std::chrono_literals;
using spite::bench::detail::step_recorder;

// A table whose rms_norm takes 2 ms per block, whatever the rows.
std::shared_ptr<const spite::dispatch::op_table> slow_rms_norm(std::atomic<int>& blocks) {
  auto t = std::make_shared<spite::dispatch::op_table>();
  t->rms_norm = [&blocks](const float*, const float*, float*, std::int64_t, std::int64_t, float) {
    ++blocks;
    std::this_thread::sleep_for(2ms);
  };
  return t;
}

}  // namespace

TEST_CASE("bench profile: an op's blocks run side by side count as one call of its wall time") {
  std::atomic<int> blocks{0};
  step_recorder recorder(slow_rms_norm(blocks));
  const auto ops = recorder.ops();
  spite::thread_pool pool(3, false);
  recorder.time_ops(step_recorder::tally::prefill);
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int passes = 4;
  for (int pass = 0; pass < passes; ++pass) {
    pool.parallel_for(12, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t b = begin; b < end; ++b) ops->rms_norm(nullptr, nullptr, nullptr, 1, 1, 0);
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  recorder.time_ops(step_recorder::tally::none);

  REQUIRE(blocks == passes * 12);
  const auto profile = recorder.profile(step_recorder::tally::prefill);
  REQUIRE(profile.size() == 1);
  CHECK(profile[0].op == "rms_norm");
  CHECK(profile[0].calls == passes);
  CHECK(profile[0].seconds <= wall);
  // 12 blocks of 2 ms on 3 threads: at least 8 ms a pass.
  CHECK(profile[0].seconds >= passes * 0.008 * 0.99);
  CHECK(recorder.profile(step_recorder::tally::decode).empty());
}

TEST_CASE("bench profile: an op's blocks count one call per job even where they do not overlap") {
  std::atomic<int> blocks{0};
  auto base = std::make_shared<spite::dispatch::op_table>();
  base->rms_norm = [&blocks](const float*, const float*, float*, std::int64_t, std::int64_t, float) { ++blocks; };
  step_recorder recorder(base);
  const auto ops = recorder.ops();
  spite::thread_pool pool(2, false);
  recorder.time_ops(step_recorder::tally::prefill);
  constexpr int passes = 50;
  for (int pass = 0; pass < passes; ++pass) {
    pool.parallel_for(64, [&](std::int64_t begin, std::int64_t end, int) {
      for (std::int64_t b = begin; b < end; ++b) ops->rms_norm(nullptr, nullptr, nullptr, 1, 1, 0);
    });
  }
  recorder.time_ops(step_recorder::tally::none);
  REQUIRE(blocks == passes * 64);
  const auto profile = recorder.profile(step_recorder::tally::prefill);
  REQUIRE(profile.size() == 1);
  CHECK(profile[0].calls == passes);
}

TEST_CASE("bench profile: ops one after the other on one thread count each call") {
  std::atomic<int> blocks{0};
  step_recorder recorder(slow_rms_norm(blocks));
  const auto ops = recorder.ops();
  recorder.time_ops(step_recorder::tally::decode);
  for (int i = 0; i < 5; ++i) ops->rms_norm(nullptr, nullptr, nullptr, 1, 1, 0);
  recorder.time_ops(step_recorder::tally::none);
  ops->rms_norm(nullptr, nullptr, nullptr, 1, 1, 0);  // not timed
  const auto profile = recorder.profile(step_recorder::tally::decode);
  REQUIRE(profile.size() == 1);
  CHECK(profile[0].calls == 5);
  CHECK(profile[0].seconds >= 5 * 0.002 * 0.99);
}
