#include "step_recorder.hpp"

#include <algorithm>
#include <chrono>

#include "spite/core/thread_pool.hpp"
#include "spite/gguf/types.hpp"

namespace spite::bench::detail {
namespace {

using clock_type = std::chrono::steady_clock;

step_recorder::range range_of(const dispatch::weight& w) {
  return w.packed != nullptr ? step_recorder::range{w.packed, w.packed_size}
                             : step_recorder::range{w.data, static_cast<std::size_t>(w.out) * w.row_bytes};
}

// "matmul TYPE INxOUT" (a run of matrices that take the same input: their types joined by "+",
// their rows added up), the key of a matmul's times.
std::string matmul_name(std::span<const dispatch::weight* const> parts) {
  std::string types;
  std::int64_t out = 0;
  for (const dispatch::weight* w : parts) {
    const std::string t(gguf::type_name(w->type));
    if (types.find(t) == std::string::npos) types += (types.empty() ? "" : "+") + t;
    out += w->out;
  }
  return "matmul " + types + " " + std::to_string(parts.empty() ? 0 : parts.front()->in) + "x" + std::to_string(out);
}

}  // namespace

step_recorder::step_recorder(std::shared_ptr<const dispatch::op_table> base)
    : base_(base ? std::move(base)
                 : std::shared_ptr<const dispatch::op_table>(std::shared_ptr<void>(), &dispatch::cpu_reference_ops())) {}

// An op the forward pass calls once per block of rows from a parallel job (a prefill's rms_norm,
// rope, swiglu) counts one call per job, and the time while some block of it runs: its wall
// time, not its blocks' thread times added up, and the same count however the pool split the
// rows.
struct step_recorder::op_span {
  std::mutex mu;
  int running = 0;
  clock_type::time_point start;
  std::uint64_t counted_job = 0;  // the parallel job a call was last counted for
};

template <class... A>
void step_recorder::wrap(std::function<void(A...)>& f, const char* name) {
  if (!f) return;
  f = [this, inner = f, op = std::string(name), span = std::make_shared<op_span>()](A... a) {
    if (!timing()) return inner(a...);
    {
      std::lock_guard lock(span->mu);
      if (span->running++ == 0) span->start = clock_type::now();
    }
    inner(a...);
    std::lock_guard lock(span->mu);
    if (--span->running > 0) return;
    const std::uint64_t job = thread_pool::current_job();
    const bool new_call = job == 0 || job != span->counted_job;
    span->counted_job = job;
    add_time(op, std::chrono::duration<double>(clock_type::now() - span->start).count(), 0, 0, new_call ? 1 : 0);
  };
}

std::shared_ptr<const dispatch::op_table> step_recorder::ops() {
  auto t = std::make_shared<dispatch::op_table>(*base_);
  t->matmul = [this](const dispatch::weight& w, const float* x, std::int64_t n, float* y, thread_pool& pool) {
    const dispatch::weight* one = &w;
    if (ranges_on_.load(std::memory_order_relaxed)) add_ranges({&one, 1});
    if (!timing()) return base_->matmul(w, x, n, y, pool);
    const auto t0 = clock_type::now();
    base_->matmul(w, x, n, y, pool);
    add_time(matmul_name({&one, 1}), std::chrono::duration<double>(clock_type::now() - t0).count(), range_of(w).bytes,
             2.0 * static_cast<double>(w.in) * static_cast<double>(w.out) * static_cast<double>(n));
  };
  if (base_->matmul_parts) {
    t->matmul_parts = [this](std::span<const dispatch::weight* const> parts, const float* x, std::int64_t n, float* const* ys,
                             thread_pool& pool) {
      if (ranges_on_.load(std::memory_order_relaxed)) add_ranges(parts);
      if (!timing()) return base_->matmul_parts(parts, x, n, ys, pool);
      const auto t0 = clock_type::now();
      base_->matmul_parts(parts, x, n, ys, pool);
      std::uint64_t bytes = 0;
      double flops = 0;
      for (const dispatch::weight* w : parts) {
        bytes += range_of(*w).bytes;
        flops += 2.0 * static_cast<double>(w->in) * static_cast<double>(w->out) * static_cast<double>(n);
      }
      add_time(matmul_name(parts), std::chrono::duration<double>(clock_type::now() - t0).count(), bytes, flops);
    };
  }
  wrap(t->rms_norm, "rms_norm");
  wrap(t->attention, "attention");
  wrap(t->attention_many, "attention");
  wrap(t->rope, "rope");
  wrap(t->swiglu, "swiglu");
  wrap(t->geglu, "geglu");
  wrap(t->swiglu_oai, "swiglu_oai");
  return t;
}

std::vector<step_recorder::range> step_recorder::ranges() const {
  std::lock_guard lock(mu_);
  return ranges_;
}

std::vector<op_profile> step_recorder::profile(tally t) const {
  std::vector<op_profile> v;
  if (t == tally::none) return v;
  {
    std::lock_guard lock(mu_);
    for (const auto& [op, p] : times_[static_cast<int>(t)]) v.push_back(p);
  }
  std::sort(v.begin(), v.end(), [](const op_profile& a, const op_profile& b) { return a.seconds > b.seconds; });
  return v;
}

// One call's matrices: where a packed matrix continues the one before it in the same call
// (packed together, which the kernels multiply as one matrix), the ranges are one.
void step_recorder::add_ranges(std::span<const dispatch::weight* const> parts) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const range r = range_of(*parts[i]);
    if (i > 0 && parts[i]->packed != nullptr && parts[i - 1]->packed != nullptr &&
        ranges_.back().begin + ranges_.back().bytes == r.begin) {
      ranges_.back().bytes += r.bytes;
    } else {
      ranges_.push_back(r);
    }
  }
}

void step_recorder::add_time(const std::string& op, double seconds, std::uint64_t bytes, double flops, std::uint64_t calls) {
  const int t = timing_.load(std::memory_order_relaxed);
  if (t < 0) return;  // switched off while the op ran
  std::lock_guard lock(mu_);
  op_profile& p = times_[t][op];
  p.op = op;
  p.calls += calls;
  p.seconds += seconds;
  p.bytes += bytes;
  p.flops += flops;
}

}  // namespace spite::bench::detail
