// What a model's decode steps do, noted through the op table the bench's context runs (each op
// wrapped, the base's work unchanged): the weight ranges a step's matmuls read, in their order
// (the plain read of the step's weights, bench_report), and, for `--profile`, each op's calls and
// time. Internal to spite::bench.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "spite/bench/bench.hpp"
#include "spite/dispatch/ops.hpp"

namespace spite::bench::detail {

class step_recorder {
 public:
  struct range {
    const std::byte* begin;
    std::size_t bytes;
  };

  // base: the ops to run (null: the built-in kernels).
  explicit step_recorder(std::shared_ptr<const dispatch::op_table> base);
  step_recorder(const step_recorder&) = delete;
  step_recorder& operator=(const step_recorder&) = delete;

  // The table to give the context: the base's ops, each noted first while switched on. Valid
  // while the recorder lives.
  std::shared_ptr<const dispatch::op_table> ops();

  // What the ops' times go to: one of two tallies (the decode steps', the prefills'), or none.
  enum class tally { none = -1, decode = 0, prefill = 1 };

  void note_ranges(bool on) noexcept { ranges_on_.store(on, std::memory_order_relaxed); }
  void time_ops(tally t) noexcept { timing_.store(static_cast<int>(t), std::memory_order_relaxed); }

  std::vector<range> ranges() const;
  // The ops a tally timed, the longest first; their times are summed over the calls. Matmuls
  // that run side by side (a decode step's experts) each count their own thread's time; the
  // other ops count one call per parallel job that runs them in blocks, and their wall time.
  std::vector<op_profile> profile(tally t) const;

 private:
  struct op_span;
  template <class... A>
  void wrap(std::function<void(A...)>& f, const char* name);
  void add_ranges(std::span<const dispatch::weight* const> parts);
  bool timing() const noexcept { return timing_.load(std::memory_order_relaxed) >= 0; }
  void add_time(const std::string& op, double seconds, std::uint64_t bytes = 0, double flops = 0, std::uint64_t calls = 1);

  std::shared_ptr<const dispatch::op_table> base_;
  std::atomic<bool> ranges_on_{false};
  std::atomic<int> timing_{-1};
  mutable std::mutex mu_;
  std::vector<range> ranges_;
  std::map<std::string, op_profile> times_[2];
};

}  // namespace spite::bench::detail
