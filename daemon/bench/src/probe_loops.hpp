// The probe loops and helpers that machine_probe.cpp, sequence_probe.cpp and stream_probe.cpp share.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "spite/core/thread_pool.hpp"

namespace spite::bench::detail {

// 12 independent VPMADDUBSW chains for `iters` iterations (needs AVX2): the 8-bit multiply peak's
// loop. Returns the ops done, 2 per product.
double dot8_avx2(std::int64_t iters);

// The sum of n words with four independent AVX2 chains (needs AVX2): the plain streaming read.
std::uint64_t sum_avx2(const std::uint64_t* p, std::size_t n);
// The same with AVX2 where the processor has it, else plain 64-bit adds.
std::uint64_t sum_words(const std::uint64_t* p, std::size_t n);

// p[0, n) and q[0, n) read in step as two streams (AVX2 where the processor has it), added;
// p and q 32-byte aligned.
std::uint64_t sum_word_pairs(const std::uint64_t* p, const std::uint64_t* q, std::size_t n);

// Reads [p, p + bytes) through the pool as a decode product streams its weights: in chunks of
// 16 KiB, the first half's chunks beside the second half's, the threads sharing out the pairs
// (each thread two contiguous streams); adds the words into sink, the 32-byte aligned part only.
void read_through(thread_pool& pool, const std::byte* p, std::size_t bytes, std::atomic<std::uint64_t>& sink);

// Several ranges read as one job: every range's chunk pairs in order, each thread a contiguous
// share of them all, so no thread waits at a range's end as read_through op by op makes it
// wait at each.
struct byte_range {
  const std::byte* begin;
  std::size_t bytes;
};
void read_ranges_through(thread_pool& pool, std::span<const byte_range> ranges, std::atomic<std::uint64_t>& sink);

// A buffer of at least `bytes`, aligned to and advised into 2 MiB pages where the system allows
// them, as the weights the kernels stream are; null when the allocation fails.
using huge_buffer = std::unique_ptr<std::uint64_t, decltype(&std::free)>;
huge_buffer huge_buffer_of(std::size_t bytes);

// Runs fn(thread) on `threads` threads that start together; returns the wall seconds. With
// pinning on (`--pin`, [inference] pin_threads), thread t runs where a pool's thread t does:
// started by a pinned caller, the threads would otherwise all share its one CPU, and the
// bandwidth probe would read half the machine's bandwidth against a model run on all of it.
template <class Fn>
double run_together(int threads, Fn fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  thread_pool::pin_as(0);
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      thread_pool::pin_as(t);
      ready++;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(t);
    });
  }
  while (ready.load() < threads - 1) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  fn(0);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace spite::bench::detail
