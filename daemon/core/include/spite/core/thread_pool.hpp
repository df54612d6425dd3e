// One persistent pool of compute threads. parallel_for splits [0, n) into contiguous chunks, one
// per thread, and returns when all are done; no thread is created per operation.
//
// A forward pass calls parallel_for hundreds of times per token, a few microseconds apart, so
// hand-offs spin first: a worker that finished a job spins on the job counter for a short while
// before it sleeps on the condition variable, and the caller spins on the pending count before
// it sleeps. Between requests the threads sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spite {

class thread_pool {
 public:
  explicit thread_pool(int n_threads);  // n_threads <= 0: one per hardware thread
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end, thread_index) over disjoint ranges covering [0, n). The calling thread works
  // too. Calls must not be nested or made from two threads at once.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, int)>& fn);

 private:
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  // Written before generation_ is published (release) and read after it is seen (acquire).
  const std::function<void(std::int64_t, std::int64_t, int)>* job_ = nullptr;
  std::int64_t n_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace spite
