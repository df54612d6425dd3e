#include "spite/core/thread_pool.hpp"

#include <algorithm>

namespace spite {

thread_pool::thread_pool(int n_threads) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
void run_chunk(const std::function<void(std::int64_t, std::int64_t, int)>& fn, std::int64_t n, int index, int count) {
  const std::int64_t chunk = (n + count - 1) / count;
  const std::int64_t begin = std::min<std::int64_t>(n, chunk * index);
  const std::int64_t end = std::min<std::int64_t>(n, begin + chunk);
  if (begin < end) fn(begin, end, index);
}
}  // namespace

void thread_pool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    n_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_chunk(fn, n, 0, size());
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void thread_pool::worker(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(std::int64_t, std::int64_t, int)>* job;
    std::int64_t n;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
    }
    run_chunk(*job, n, index, size());
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace spite
