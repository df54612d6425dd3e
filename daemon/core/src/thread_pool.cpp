#include "spite/core/thread_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

namespace spite {

namespace {

// How long a thread spins for the next hand-off before it sleeps: long enough to cover the gap
// between two operations of a forward pass, short enough not to burn a core between requests.
constexpr auto spin_budget = std::chrono::microseconds(200);

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `ready()` or the budget is spent; true when ready.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + spin_budget;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

std::atomic<bool> pinning_enabled{false};
std::mutex process_cpus_mu;
std::vector<int> process_cpus;  // read once, before any thread of ours is pinned

// The CPUs this thread may run on, in order.
std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Each thread's first chunk is 1 / (chunks_per_thread * threads) of the job, a long contiguous
// run for the prefetchers. The rest is claimed in chunks of 1 / (2 * threads) of what is left,
// so they shrink toward the end: a thread slowed down (the host's other load, a busier core)
// ends up with less, and the others wait for at most a small last chunk instead of a quarter of
// a thread's share.
constexpr std::int64_t chunks_per_thread = 4;

}  // namespace

void thread_pool::set_pinning(bool on) noexcept {
  if (on) {
    // Threads inherit their creator's mask, and a pinned caller would see one CPU: the
    // process's set is taken now, while nothing of ours is pinned.
    std::lock_guard lock(process_cpus_mu);
    if (process_cpus.empty()) process_cpus = allowed_cpus();
  }
  pinning_enabled = on;
}
bool thread_pool::pinning() noexcept { return pinning_enabled; }

thread_pool::thread_pool(int n_threads) {
  if (n_threads <= 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  if (pinning_enabled) {
    std::lock_guard lock(process_cpus_mu);
    cpus_ = process_cpus;
  }
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

void thread_pool::pin(int index) const {
  if (cpus_.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus_[static_cast<std::size_t>(index) % cpus_.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);  // best effort: a refusal leaves it floating
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, int)>& fn) {
  if (n <= 0) return;
  if (!cpus_.empty() && pinned_caller_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
    pin(0);
    pinned_caller_ = std::this_thread::get_id();
  }
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  n_ = n;
  chunk_ = std::max<std::int64_t>(1, n / (chunks_per_thread * size()));
  next_.store(std::min(n, size() * chunk_), std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex, so that a worker about to sleep sees either the new generation or the
    // notification.
    std::lock_guard lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_claimed(0);
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done)) {
    std::unique_lock lock(mu_);
    done_.wait(lock, all_done);
  }
  job_ = nullptr;
}

void thread_pool::run_claimed(int index) {
  const auto& fn = *job_;
  // Chunk `index` is this thread's own (with as many items as threads, one each); the rest go
  // to whichever thread asks first.
  const std::int64_t own = index * chunk_;
  if (own < n_) fn(own, std::min(n_, own + chunk_), index);
  const std::int64_t share = 2 * size();
  std::int64_t begin = next_.load(std::memory_order_relaxed);
  for (;;) {
    if (begin >= n_) return;
    const std::int64_t count = std::max<std::int64_t>(1, (n_ - begin) / share);
    if (next_.compare_exchange_weak(begin, begin + count, std::memory_order_relaxed)) {
      fn(begin, std::min(n_, begin + count), index);
      begin = next_.load(std::memory_order_relaxed);
    }
  }
}

void thread_pool::worker(int index) {
  pin(index);
  std::uint64_t seen = 0;
  auto has_work = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
  for (;;) {
    if (!spin_until(has_work)) {
      std::unique_lock lock(mu_);
      wake_.wait(lock, has_work);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_claimed(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);  // the caller may be between its check and its wait
      done_.notify_one();
    }
  }
}

}  // namespace spite
