// One persistent pool of compute threads. parallel_for gives each thread a contiguous share of
// [0, n), which it works through from the front in chunks that shrink toward its end; a thread
// done with its share takes the back half of what is left of the fullest other share, which
// becomes its own. So each thread streams through one region of memory (the hardware
// prefetchers lose their stream at every jump, and a decode step's matrices take 0.05-1 ms),
// while one slowed down by the host's other load ends up with less. Returns when every item is
// done, not when every thread has come: a thread the system has taken off its CPU (another
// program wants the cores, or more threads were asked for than there are CPUs) loses its whole
// share to the others instead of holding the job until it runs again. No thread is created per
// operation. Which thread runs a chunk depends on timing, so callers keep results independent
// of the split (every output element computed by one call).
//
// A forward pass calls parallel_for hundreds of times per token, a few microseconds apart, so
// hand-offs spin first: a worker that finished a job spins on the job counter for a short while
// before it sleeps on the condition variable, and the caller spins on the count of items left
// before it sleeps. Past the first microseconds a spinning thread yields the CPU at each turn,
// so that a thread of ours waiting for a CPU gets this one. Between requests the threads sleep.
//
// Optional pinning (set_pinning(true) before pools are made, e.g. from [inference] pin_threads):
// thread i of a pool runs only on the i-th CPU the process may use (each core's first CPU before
// any core's second), the calling thread counting as thread 0 (pinned when it first calls
// parallel_for), so caches stay warm and two compute threads never share a core while another
// one idles.
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
  // n_threads <= 0: default_threads(). With `pinned` false the pool ignores set_pinning
  // (threads of load-time work, which should not tie their caller to one CPU).
  explicit thread_pool(int n_threads, bool pinned = true);
  // One per core among the CPUs this process may run on (its affinity: a container's or a
  // unit's CPU set), not per CPU of the machine, where more threads would only take turns, and
  // no more than its cgroup's CPU quota allows (cpu_plan.hpp).
  static int default_threads() noexcept;
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  static void set_pinning(bool on) noexcept;
  static bool pinning() noexcept;
  // With pinning on, pins the calling thread to the CPU thread `index` of a pool runs on; a
  // no-op without. For threads of one's own that should sit where the compute threads do (the
  // bench's probes: threads started by a pinned caller inherit its single CPU).
  static void pin_as(int index) noexcept;

  // fn(begin, end, thread_index) over disjoint ranges covering [0, n), possibly several calls
  // per thread (thread_index names the thread, for per-thread scratch). The calling thread
  // works too. Calls must not be nested or made from two threads at once.
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t, int)>& fn);

  // The parallel_for job whose items the calling thread is running (an id unique in the
  // process), 0 outside one: tells the blocks of one job from those of the next (the bench's
  // profile counts an op a job runs in blocks as one call).
  static std::uint64_t current_job() noexcept;

  // Memory the threads pull toward their caches while they wait for a hand-off: a decode step's
  // next weight matrix, so that the bus keeps streaming while the small operations between two
  // products run and the threads wait on each other, and each thread starts its share of that
  // product from its cache. [begin, begin + bytes) is cut into size() x `streams` equal parts,
  // and thread i takes the front (up to per_thread / streams bytes) of parts i, i + size(), ...:
  // where parallel_for's split starts it on a product read as that many regions in step.
  // Replaces the region given before; only a hint (a prefetch never faults, whatever the
  // address). Called from the thread that calls parallel_for.
  void prefetch_while_waiting(const void* begin, std::size_t bytes, std::size_t per_thread, int streams = 1) noexcept;
  struct prefetch_region {
    const void* begin = nullptr;
    std::size_t bytes = 0;
    int streams = 1;
  };
  // The region last given to prefetch_while_waiting (for tests and diagnostics).
  prefetch_region prefetch_target() const noexcept;

 private:
  void worker(int index);
  void run_job(int index);  // runs chunks of the current job, own share first, until none is left
  void count_done(std::int64_t items, int index);  // items of the job done by thread index
  void pin(int index) const;
  bool prefetch_some(int index) noexcept;  // a few lines of thread index's region; false when none is left

  // A thread's share of the current job: front (next item its owner takes) and back (end) in
  // one word; a cache line each, as their owners write them at every chunk.
  struct alignas(64) range {
    std::atomic<std::uint64_t> items{0};
  };

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  // Written before generation_ is published (release) and read after it is seen (acquire).
  const std::function<void(std::int64_t, std::int64_t, int)>* job_ = nullptr;
  std::vector<range> ranges_;  // one per thread, the caller's first
  std::int64_t n_ = 0;         // items of the current job
  std::uint64_t job_id_ = 0;   // the current job's current_job()
  // Thread i's share [begin, end) of the current job.
  struct share {
    std::int64_t begin, end;
  };
  share share_of(int index) const;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int64_t> remaining_{0};  // items of the current job not yet done
  std::atomic<int> active_{0};               // workers inside a job (claiming, running or scanning)
  std::atomic<bool> publishing_{false};      // the caller is rewriting the job
  std::atomic<bool> stop_{false};
  // The region of prefetch_while_waiting, published by prefetch_generation_ (each thread takes
  // its part when it sees a new generation), and each thread's position in its part.
  std::atomic<const char*> prefetch_begin_{nullptr};
  std::atomic<std::size_t> prefetch_bytes_{0}, prefetch_per_thread_{0};
  std::atomic<int> prefetch_streams_{1};
  std::atomic<std::uint64_t> prefetch_generation_{0};
  static constexpr int max_prefetch_streams = 4;
  struct alignas(64) prefetch_cursor {
    const char* next = nullptr;  // in part `at` of the thread's parts
    const char* end = nullptr;
    int at = 0, parts = 0;
    const char* begin = nullptr;
    std::size_t bytes = 0, each = 0;  // the region and the bytes taken from each part
    std::uint64_t seen = 0;
  };
  void start_part(prefetch_cursor& c, int index) const noexcept;
  std::vector<prefetch_cursor> prefetch_cursors_;  // one per thread, the caller's first
  std::vector<int> cpus_;                   // pinning: the CPUs of thread 0, 1, ...; empty: none
  std::atomic<std::thread::id> pinned_caller_{};
};

}  // namespace spite
