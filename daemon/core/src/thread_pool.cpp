#include "spite/core/thread_pool.hpp"

#include "spite/core/cpu_plan.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

namespace spite {

namespace {

// How long a thread spins for the next hand-off before it sleeps: long enough to cover the gap
// between two operations of a forward pass, short enough not to burn a core between requests.
constexpr auto spin_budget = std::chrono::microseconds(200);
// Waits past this are rarely a gap between two operations (those take a few microseconds) and
// mostly a thread of ours that is not running: from then on the spinner yields.
constexpr auto yield_after = std::chrono::microseconds(20);

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `ready()` or the budget is spent; true when ready. Each turn does a little of
// `idle()` (prefetching) or, when it has nothing left to do, pauses; past the first
// `yield_after` it yields the CPU at each turn instead, so that a thread of ours that the system
// took off its CPU (another program wants the cores too) runs again here rather than waiting
// for the budget to run out: yielding returns at once where nothing else wants the CPU.
template <class Ready, class Idle>
bool spin_until(const Ready& ready, const Idle& idle) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + spin_budget, polite = start + yield_after;
  bool yielding = false;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (!idle()) {
      if (yielding) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
    }
    if (yielding || (i & 63) == 63) {
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline) return ready();
      yielding = now > polite;
    }
  }
}

// For the short waits of the hand-off itself: pause, and after a while give the CPU to whatever
// else wants it (the thread waited for may be the one not running).
inline void relax_or_yield(int i) {
  if (i < 1024) {
    cpu_relax();
  } else {
    std::this_thread::yield();
  }
}

std::atomic<bool> pinning_enabled{false};
std::mutex process_cpus_mu;
std::vector<int> process_cpus;  // read once, before any thread of ours is pinned


// Pins the calling thread to cpus[index % size]; best effort: a refusal leaves it floating.
void pin_to(const std::vector<int>& cpus, int index) {
  if (cpus.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<std::size_t>(index) % cpus.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

// A range of items as one word, so that its owner (taking from the front) and a thread that
// steals (taking from the back) agree by compare-and-swap: front in the low half, back in the high.
constexpr std::uint64_t pack_range(std::uint64_t front, std::uint64_t back) { return back << 32 | front; }
constexpr std::int64_t front_of(std::uint64_t r) { return static_cast<std::int64_t>(r & 0xffffffffu); }
constexpr std::int64_t back_of(std::uint64_t r) { return static_cast<std::int64_t>(r >> 32); }

// The owner of a range takes 1 / owner_chunks of what is left of it at a time: chunks shrink
// toward the end, so a thread that steals finds something to take until shortly before the end.
constexpr std::int64_t owner_chunks = 8;

// Items per parallel_for job: a range's ends must fit the halves of a word.
constexpr std::int64_t max_job = std::int64_t{1} << 31;

std::atomic<std::uint64_t> last_job_id{0};
thread_local std::uint64_t running_job = 0;

// Marks the calling thread as running job `id` for as long as it lives.
class job_scope {
 public:
  explicit job_scope(std::uint64_t id) noexcept : outer_(running_job) { running_job = id; }
  ~job_scope() { running_job = outer_; }
  job_scope(const job_scope&) = delete;
  job_scope& operator=(const job_scope&) = delete;

 private:
  std::uint64_t outer_;
};

}  // namespace

void thread_pool::set_pinning(bool on) noexcept {
  if (on) {
    // Threads inherit their creator's mask, and a pinned caller would see one CPU: the
    // process's set is taken now, while nothing of ours is pinned.
    std::lock_guard lock(process_cpus_mu);
    if (process_cpus.empty()) process_cpus = make_cpu_plan(affinity_cpus()).order;  // each core once before any twice
  }
  pinning_enabled = on;
}
bool thread_pool::pinning() noexcept { return pinning_enabled; }

void thread_pool::pin_as(int index) noexcept {
  if (!pinning_enabled) return;
  std::vector<int> cpus;
  {
    std::lock_guard lock(process_cpus_mu);
    cpus = process_cpus;
  }
  pin_to(cpus, index);
}

int thread_pool::default_threads() noexcept {
  const std::vector<int> allowed = affinity_cpus();
  if (allowed.empty()) return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    return make_cpu_plan(allowed).default_threads();
  } catch (...) {  // allocation: fall back to the CPUs themselves
    return static_cast<int>(allowed.size());
  }
}

thread_pool::thread_pool(int n_threads, bool pinned) {
  if (n_threads <= 0) n_threads = default_threads();
  if (pinned && pinning_enabled) {
    std::lock_guard lock(process_cpus_mu);
    cpus_ = process_cpus;
  }
  ranges_ = std::vector<range>(static_cast<std::size_t>(n_threads));
  prefetch_cursors_ = std::vector<prefetch_cursor>(static_cast<std::size_t>(n_threads));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

void thread_pool::pin(int index) const { pin_to(cpus_, index); }

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
    const job_scope scope(last_job_id.fetch_add(1, std::memory_order_relaxed) + 1);
    fn(0, n, 0);
    return;
  }
  if (n > max_job) {
    for (std::int64_t at = 0; at < n; at += max_job) {
      const std::int64_t part = std::min(max_job, n - at);
      parallel_for(part, [&](std::int64_t b, std::int64_t e, int t) { fn(at + b, at + e, t); });
    }
    return;
  }
  // No worker may still be inside the last job (one that came late scans for work left) while
  // its ranges are rewritten: announce, then wait for those inside to leave. A worker announces
  // itself before it looks (seq_cst on both sides: one of the two sees the other). The
  // announcement is a read-modify-write, not a store: a store-release followed by a
  // load-acquire is ordered on ARM itself, but an emulator that runs ARM code on x86 (qemu, as
  // the NEON tests run) let the load pass the store, a worker entered the last job while its
  // ranges were rewritten, and the job's count of items never reached zero (a hang).
  publishing_.exchange(true, std::memory_order_seq_cst);
  for (int i = 0; active_.load(std::memory_order_seq_cst) != 0; ++i) relax_or_yield(i);
  job_ = &fn;
  n_ = n;
  job_id_ = last_job_id.fetch_add(1, std::memory_order_relaxed) + 1;
  for (int i = 0; i < size(); ++i) {
    const share sh = share_of(i);
    ranges_[static_cast<std::size_t>(i)].items.store(
        pack_range(static_cast<std::uint64_t>(sh.begin), static_cast<std::uint64_t>(sh.end)), std::memory_order_relaxed);
  }
  remaining_.store(n, std::memory_order_relaxed);
  {
    // Under the mutex, so that a worker about to sleep sees either the new generation or the
    // notification.
    std::lock_guard lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  publishing_.store(false, std::memory_order_release);
  wake_.notify_all();
  run_job(0);
  // Done when every item is: a worker that has not come to this job by then (the system ran
  // something else on its CPU) is not waited for.
  auto all_done = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done, [this] { return prefetch_some(0); })) {
    std::unique_lock lock(mu_);
    done_.wait(lock, all_done);
  }
}

thread_pool::share thread_pool::share_of(int index) const {
  const auto threads = static_cast<std::int64_t>(size());
  return {n_ * index / threads, n_ * (index + 1) / threads};
}

void thread_pool::count_done(std::int64_t items, int index) {
  if (items > 0 && remaining_.fetch_sub(items, std::memory_order_acq_rel) == items && index != 0) {
    std::lock_guard lock(mu_);  // the caller may be between its check and its wait
    done_.notify_one();
  }
}

std::uint64_t thread_pool::current_job() noexcept { return running_job; }

void thread_pool::run_job(int index) {
  const job_scope scope(job_id_);
  const std::size_t threads = ranges_.size();
  std::atomic<std::uint64_t>& own = ranges_[static_cast<std::size_t>(index)].items;
  for (;;) {
    // Our range from the front, in one pass over contiguous memory where the items are laid
    // out in order (a weight's rows): one stream for the hardware prefetchers.
    // The items done are counted once the range is empty, not per chunk: a job's chunks are
    // many (an eighth of what is left each time), and sixteen threads counting each on one
    // cache line cost more than the job's last chunk waits for the count.
    std::uint64_t r = own.load(std::memory_order_relaxed);
    std::int64_t done = 0;
    while (front_of(r) < back_of(r)) {
      const std::int64_t front = front_of(r), take = std::max<std::int64_t>(1, (back_of(r) - front) / owner_chunks);
      if (own.compare_exchange_weak(r, pack_range(static_cast<std::uint64_t>(front + take), static_cast<std::uint64_t>(back_of(r))),
                                    std::memory_order_relaxed)) {
        (*job_)(front, front + take, index);
        done += take;
        r = own.load(std::memory_order_relaxed);
      }
    }
    count_done(done, index);
    // Then half of what is left of the fullest other range, from its back; it becomes ours (and
    // others may steal from it in turn). A thread that has not come yet loses its whole range
    // this way, the front last.
    bool stole = false;
    while (!stole) {
      std::size_t victim = threads;
      std::int64_t most = 0;
      for (std::size_t i = 0; i < threads; ++i) {
        const std::uint64_t v = ranges_[i].items.load(std::memory_order_relaxed);
        if (back_of(v) - front_of(v) > most) {
          most = back_of(v) - front_of(v);
          victim = i;
        }
      }
      if (victim == threads) return;  // nothing left to claim: the job ends when the last chunks do
      std::atomic<std::uint64_t>& theirs = ranges_[victim].items;
      std::uint64_t v = theirs.load(std::memory_order_relaxed);
      const std::int64_t left = back_of(v) - front_of(v);
      if (left <= 0) continue;
      const std::int64_t from = back_of(v) - (left + 1) / 2;
      if (theirs.compare_exchange_strong(v, pack_range(static_cast<std::uint64_t>(front_of(v)), static_cast<std::uint64_t>(from)),
                                         std::memory_order_relaxed)) {
        own.store(pack_range(static_cast<std::uint64_t>(from), static_cast<std::uint64_t>(back_of(v))), std::memory_order_relaxed);
        stole = true;
      }
    }
  }
}

void thread_pool::prefetch_while_waiting(const void* begin, std::size_t bytes, std::size_t per_thread, int streams) noexcept {
  prefetch_begin_.store(static_cast<const char*>(begin), std::memory_order_relaxed);
  prefetch_bytes_.store(bytes, std::memory_order_relaxed);
  prefetch_per_thread_.store(per_thread, std::memory_order_relaxed);
  prefetch_streams_.store(std::clamp(streams, 1, max_prefetch_streams), std::memory_order_relaxed);
  prefetch_generation_.fetch_add(1, std::memory_order_release);
}

thread_pool::prefetch_region thread_pool::prefetch_target() const noexcept {
  return {prefetch_begin_.load(std::memory_order_relaxed), prefetch_bytes_.load(std::memory_order_relaxed),
          prefetch_streams_.load(std::memory_order_relaxed)};
}

// Points c at the front of its thread's part c.at: part index + c.at x size() of the region.
void thread_pool::start_part(prefetch_cursor& c, int index) const noexcept {
  c.next = c.end = c.begin;
  if (c.begin == nullptr || c.at >= c.parts) return;
  const auto all = static_cast<std::size_t>(size()) * static_cast<std::size_t>(c.parts);
  const std::size_t j = static_cast<std::size_t>(index) + static_cast<std::size_t>(c.at) * static_cast<std::size_t>(size());
  // floor(bytes x j / all) without overflow
  const auto at = [&](std::size_t k) { return c.bytes / all * k + c.bytes % all * k / all; };
  c.next = c.begin + at(j);
  c.end = c.next + std::min(at(j + 1) - at(j), c.each);
}

bool thread_pool::prefetch_some(int index) noexcept {
  constexpr std::size_t line = 64;
  constexpr int lines_per_turn = 8;  // a turn about as long as a pause; the fill buffers pace it
  prefetch_cursor& c = prefetch_cursors_[static_cast<std::size_t>(index)];
  if (const std::uint64_t g = prefetch_generation_.load(std::memory_order_acquire); g != c.seen) {
    // The fields may already be a later call's (then its generation follows): a hint either way.
    c.seen = g;
    c.begin = prefetch_begin_.load(std::memory_order_relaxed);
    c.bytes = prefetch_bytes_.load(std::memory_order_relaxed);
    c.parts = prefetch_streams_.load(std::memory_order_relaxed);
    c.each = prefetch_per_thread_.load(std::memory_order_relaxed) / static_cast<std::size_t>(c.parts);
    c.at = 0;
    start_part(c, index);
  }
  while (c.next >= c.end) {
    if (c.at + 1 >= c.parts) return false;
    ++c.at;
    start_part(c, index);
  }
  for (int k = 0; k < lines_per_turn && c.next < c.end; ++k, c.next += line) __builtin_prefetch(c.next, 0, 2);
  return true;
}

void thread_pool::worker(int index) {
  pin(index);
  std::uint64_t seen = 0;
  auto has_work = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
  for (;;) {
    if (!spin_until(has_work, [this, index] { return prefetch_some(index); })) {
      std::unique_lock lock(mu_);
      wake_.wait(lock, has_work);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    // Announce, then make sure the caller is not rewriting the job (see parallel_for).
    active_.fetch_add(1, std::memory_order_seq_cst);
    if (publishing_.load(std::memory_order_seq_cst)) {
      active_.fetch_sub(1, std::memory_order_release);
      for (int i = 0; publishing_.load(std::memory_order_acquire); ++i) relax_or_yield(i);
      continue;
    }
    // The job published last; it may be over already (then there is nothing left to claim).
    seen = generation_.load(std::memory_order_acquire);
    run_job(index);
    active_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace spite
