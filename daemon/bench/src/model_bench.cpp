#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "probe_loops.hpp"
#include "step_recorder.hpp"
#include "spite/bench/bench.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/types.hpp"

namespace spite::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

bool is_expert_tensor(std::string_view name) { return name.find("_exps") != std::string_view::npos; }

// What one token costs: the weights a decode step streams, and the matmul FLOPs of one token
// (and how many of them multiply quantized weights by 8-bit activations). The token embedding
// is read one row at a time, unless the output projection is tied to it; of the experts, only
// the used ones are read.
void token_costs(const gguf::file& file, const models::hparams& hp, std::uint64_t& bytes, double& flops,
                 double& flops_8bit) {
  const bool tied = file.find_tensor("output.weight") == nullptr;
  const double expert_share =
      hp.n_expert > 0 ? static_cast<double>(hp.n_expert_used) / static_cast<double>(hp.n_expert) : 1.0;
  double b = 0, f = 0, f8 = 0;
  for (const auto& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    const double share = is_expert_tensor(t.name) ? expert_share : 1.0;
    b += static_cast<double>(t.size) * share;
    if (t.n_dims < 2) continue;
    const double tf = 2.0 * static_cast<double>(t.n_elements()) * share;
    f += tf;
    if (gguf::traits(t.type).quantized) f8 += tf;
  }
  bytes = static_cast<std::uint64_t>(b);
  flops = f;
  flops_8bit = f8;
}

std::string dominant_type(const gguf::file& file) {
  std::map<std::string, std::uint64_t> by_type;
  for (const auto& t : file.tensors()) {
    if (t.n_dims >= 2) by_type[std::string(gguf::type_name(t.type))] += t.size;
  }
  std::string best;
  std::uint64_t most = 0;
  for (const auto& [name, bytes] : by_type) {
    if (bytes > most) {
      most = bytes;
      best = name;
    }
  }
  return best;
}

// Seconds per step of `read_step` (a plain read of a step's weights): up to `steps` steps,
// fewer once a second has gone (a large model's reads would otherwise double the bench's time;
// a second of them is as many steps as a decode's minute needs).
template <class ReadStep>
double seconds_per_read_step(std::int32_t steps, const ReadStep& read_step) {
  const auto t0 = clock_type::now();
  std::int32_t done = 0;
  while (done < steps && (done == 0 || seconds_since(t0) < 1.0)) {
    read_step();
    ++done;
  }
  return seconds_since(t0) / std::max(1, done);
}

// The step's ranges read op by op through the pool.
double time_token_reads(const std::vector<detail::step_recorder::range>& ranges, std::int32_t steps, thread_pool& pool) {
  std::atomic<std::uint64_t> sink{0};
  return seconds_per_read_step(steps, [&] {
    for (const detail::step_recorder::range& r : ranges) detail::read_through(pool, r.begin, r.bytes, sink);
  });
}

// The same bytes as one read per step (read_ranges_through: no op boundaries).
double time_token_stream(const std::vector<detail::step_recorder::range>& ranges, std::int32_t steps, thread_pool& pool) {
  std::vector<detail::byte_range> all;
  all.reserve(ranges.size());
  for (const detail::step_recorder::range& r : ranges) all.push_back({r.begin, r.bytes});
  std::atomic<std::uint64_t> sink{0};
  return seconds_per_read_step(steps, [&] { detail::read_ranges_through(pool, all, sink); });
}

}  // namespace

spread spread::of(std::vector<double> v) {
  spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.stddev = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  return s;
}

std::uint64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      std::uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

result<bench_report> run_bench(const gguf::file& file, const models::model& m, const bench_options& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1 || o.reps > 1000 || o.parallel < 1 || o.parallel > 1024 ||
      o.n_prompt > (1 << 20) || o.n_gen > (1 << 20) || o.depth < 0 || o.depth > (1 << 20)) {
    return make_error(errc::invalid_argument, "bench: -p, -n and -d 0..1048576, -r 1..1000, --parallel 1..1024");
  }
  const models::hparams& hp = m.hp();
  bench_report r;
  r.arch = hp.arch;
  r.weight_type = dominant_type(file);
  for (const auto& t : file.tensors()) r.weight_bytes += t.size;
  token_costs(file, hp, r.bytes_per_token, r.flops_per_token, r.flops_8bit_per_token);
  r.n_prompt = o.n_prompt;
  r.n_gen = o.n_gen;
  r.depth = o.depth;
  r.reps = o.reps;
  r.parallel = o.parallel;
  r.flash_attn = o.flash_attn;
  const std::int32_t n_ctx = std::max(o.n_prompt, o.depth + o.n_gen + 1) + 1;
  if (n_ctx > hp.n_ctx_train && hp.n_ctx_train > 0) {
    return make_error(errc::invalid_argument, "bench: " + std::to_string(n_ctx) + " positions exceed the model's context of " +
                                                  std::to_string(hp.n_ctx_train));
  }
  detail::step_recorder recorder(o.ops);
  auto ctx = executor::context::create(m, {.n_ctx = n_ctx, .n_threads = o.threads, .n_seq_max = o.parallel, .ops = recorder.ops(),
                                           .flash_attn = o.flash_attn});
  if (!ctx) return std::move(ctx).err();
  r.threads = (*ctx)->n_threads();
  // Made only when used: a second pool's threads beside the context's.
  std::unique_ptr<thread_pool> read_pool;
  std::vector<detail::step_recorder::range> token_ranges;
  double decode_profiled_s = 0, prefill_profiled_s = 0;  // wall time of the passes whose ops were timed
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int32_t> any_token(0, static_cast<std::int32_t>(hp.n_vocab - 1));
  const auto cancelled = [&] { return o.cancelled && o.cancelled(); };
  const auto stop = [] { return make_error(errc::busy, "bench cancelled"); };
  std::vector<double> pp, tg, tg_single, scalings, bandwidths, decode_fractions, read_gbs, stream_gbs, read_fractions;
  std::vector<double> one_stream_gbs, two_streams_gbs;
  // The bandwidth probe, each of its two ways kept as well.
  const auto probe_bandwidth = [&] {
    const bandwidth_ways ways = measure_bandwidth_ways(r.threads);
    one_stream_gbs.push_back(ways.one_stream_gbs);
    two_streams_gbs.push_back(ways.two_streams_gbs);
    return ways.best();
  };
  executor::batch b;
  // Decode tokens/s in total of `n_seq` sequences, each from `depth` tokens of context and one
  // more (untimed), then n_gen steps of one token of each.
  const auto timed_decode = [&](int n_seq) -> result<double> {
    (*ctx)->memory().clear();
    for (int s = 0; s < n_seq; ++s) {
      for (std::int32_t done = 0; done <= o.depth;) {
        const std::int32_t n = std::min<std::int32_t>(512, o.depth + 1 - done);
        b.clear();
        for (std::int32_t i = 0; i < n; ++i) b.add(any_token(rng), done + i, s, done + i == o.depth);
        if (auto l = (*ctx)->decode(b); !l) return std::move(l).err();
        done += n;
        if (cancelled()) return stop();
      }
    }
    const bool profiled = o.profile && n_seq == o.parallel;
    recorder.time_ops(profiled ? detail::step_recorder::tally::decode : detail::step_recorder::tally::none);
    const auto t0 = clock_type::now();
    for (std::int32_t step = 1; step <= o.n_gen; ++step) {
      b.clear();
      for (int s = 0; s < n_seq; ++s) b.add(any_token(rng), o.depth + step, s, true);
      // The first step of the parallel run (or the only one) notes the ranges its matmuls read.
      const bool note = o.probes && token_ranges.empty() && step == 1 && n_seq == o.parallel;
      recorder.note_ranges(note);
      auto l = (*ctx)->decode(b);
      if (note) {
        recorder.note_ranges(false);
        token_ranges = recorder.ranges();
      }
      if (!l) return std::move(l).err();
      if (cancelled()) return stop();
    }
    const double s = seconds_since(t0);
    recorder.time_ops(detail::step_recorder::tally::none);
    if (profiled) {
      decode_profiled_s += s;
      r.decode_profile.passes += static_cast<std::uint64_t>(o.n_gen);
    }
    return static_cast<double>(o.n_gen) * n_seq / s;
  };
  for (int rep = 0; rep < o.reps; ++rep) {
    if (o.n_prompt > 0) {
      (*ctx)->memory().clear();
      if (o.profile) recorder.time_ops(detail::step_recorder::tally::prefill);
      const auto t0 = clock_type::now();
      for (std::int32_t done = 0; done < o.n_prompt;) {
        const std::int32_t n = std::min<std::int32_t>(512, o.n_prompt - done);
        b.clear();
        for (std::int32_t i = 0; i < n; ++i) b.add(any_token(rng), done + i, 0, done + i + 1 == o.n_prompt);
        if (auto l = (*ctx)->decode(b); !l) return std::move(l).err();
        done += n;
        if (cancelled()) return stop();
      }
      const double s = seconds_since(t0);
      recorder.time_ops(detail::step_recorder::tally::none);
      pp.push_back(static_cast<double>(o.n_prompt) / s);
      if (o.profile) {
        prefill_profiled_s += s;
        ++r.prefill_profile.passes;
      }
    }
    if (o.n_gen > 0) {
      // With several sequences, one sequence alone is timed in the same repetition, first in
      // even repetitions and second in odd ones, so that the scaling compares two runs of the
      // same minute.
      const int runs = o.parallel > 1 ? 2 : 1;
      for (int run = 0; run < runs; ++run) {
        const bool alone = runs == 2 && (run == 0) == (rep % 2 == 0);
        auto tps = timed_decode(alone ? 1 : o.parallel);
        if (!tps) return std::move(tps).err();
        (alone ? tg_single : tg).push_back(*tps);
      }
      if (o.parallel > 1) scalings.push_back(tg.back() / tg_single.back());
      if (o.probes) {
        // All sequences of a step share one pass over the weights.
        const double bandwidth = probe_bandwidth();
        bandwidths.push_back(bandwidth);
        if (bandwidth > 0) {
          decode_fractions.push_back(tg.back() / o.parallel * static_cast<double>(r.bytes_per_token) / (bandwidth * 1e9));
        }
        if (!token_ranges.empty()) {
          if (!read_pool) read_pool = std::make_unique<thread_pool>(r.threads);
          const double read_s = time_token_reads(token_ranges, o.n_gen, *read_pool);
          std::uint64_t bytes = 0;
          for (const detail::step_recorder::range& range : token_ranges) bytes += range.bytes;
          r.token_read_bytes = bytes;
          r.token_read_ops = token_ranges.size();
          if (read_s > 0) {
            read_gbs.push_back(static_cast<double>(bytes) / read_s / 1e9);
            read_fractions.push_back(read_s * tg.back() / o.parallel);  // read time over decode time per step
          }
          if (const double stream_s = time_token_stream(token_ranges, o.n_gen, *read_pool); stream_s > 0) {
            stream_gbs.push_back(static_cast<double>(bytes) / stream_s / 1e9);
          }
        }
      }
    }
  }
  r.pp_tps = spread::of(pp);
  r.tg_tps = spread::of(tg);
  r.tg_single_tps = spread::of(tg_single);
  r.parallel_scaling_runs = spread::of(scalings);
  r.rss_bytes = resident_bytes();
  const auto finish = [&](phase_profile& p, detail::step_recorder::tally t, double seconds) {
    if (p.passes == 0) return;
    p.ops = recorder.profile(t);
    p.pass_s = seconds / static_cast<double>(p.passes);
  };
  finish(r.decode_profile, detail::step_recorder::tally::decode, decode_profiled_s);
  finish(r.prefill_profile, detail::step_recorder::tally::prefill, prefill_profiled_s);
  if (o.probes) {
    if (bandwidths.empty()) {
      r.bandwidth_gbs = probe_bandwidth();
    } else {
      r.bandwidth_runs = spread::of(bandwidths);
      r.bandwidth_gbs = r.bandwidth_runs.median;
    }
    r.bandwidth_one_stream_runs = spread::of(one_stream_gbs);
    r.bandwidth_two_streams_runs = spread::of(two_streams_gbs);
    if (!decode_fractions.empty()) {
      r.decode_roofline_runs = spread::of(decode_fractions);
      r.decode_roofline = r.decode_roofline_runs.median;
    }
    if (!read_fractions.empty()) {
      r.token_read_gbs = spread::of(read_gbs);
      r.token_stream_gbs = spread::of(stream_gbs);
      r.decode_of_token_read_runs = spread::of(read_fractions);
      r.decode_of_token_read = r.decode_of_token_read_runs.median;
    }
    r.peak_gflops = measure_peak_gflops(r.threads);
    r.peak_int8_gops = measure_peak_int8_gops(r.threads);
    if (r.peak_gflops > 0) r.prefill_of_peak = r.pp_tps.median * r.flops_per_token / (r.peak_gflops * 1e9);
    // The compute roofline: a token's float products at the f32 FMA peak plus its 8-bit ones at
    // the 8-bit peak; the fraction is that time over the measured one.
    if (r.peak_gflops > 0 && r.peak_int8_gops > 0) {
      const double ideal_s = (r.flops_per_token - r.flops_8bit_per_token) / (r.peak_gflops * 1e9) +
                             r.flops_8bit_per_token / (r.peak_int8_gops * 1e9);
      r.prefill_of_roofline = r.pp_tps.median * ideal_s;
    }
  }
  return r;
}

nlohmann::json spread::to_json() const {
  return {{"median", median}, {"min", min}, {"max", max}, {"mean", mean}, {"stddev", stddev}};
}

nlohmann::json phase_profile::to_json() const {
  if (passes == 0 || ops.empty()) return nlohmann::json::object();
  const auto n = static_cast<double>(passes);
  nlohmann::json list = nlohmann::json::array();
  for (const op_profile& p : ops) {
    nlohmann::json op = {{"op", p.op},
                         {"calls_per_pass", static_cast<double>(p.calls) / n},
                         {"ms_per_pass", p.seconds / n * 1e3},
                         {"share_of_pass", pass_s > 0 ? p.seconds / n / pass_s : 0.0}};
    if (p.bytes > 0) {
      op["weight_bytes_per_pass"] = static_cast<double>(p.bytes) / n;
      op["gb_per_s"] = p.seconds > 0 ? static_cast<double>(p.bytes) / p.seconds / 1e9 : 0.0;
    }
    if (p.flops > 0) op["gflop_per_s"] = p.seconds > 0 ? p.flops / p.seconds / 1e9 : 0.0;
    list.push_back(std::move(op));
  }
  return {{"passes", passes}, {"pass_ms", pass_s * 1e3}, {"ops", std::move(list)}};
}

nlohmann::json bench_report::to_json() const {
  return {{"model", model},
          {"arch", arch},
          {"weight_type", weight_type},
          {"weight_bytes", weight_bytes},
          {"bytes_per_token", bytes_per_token},
          {"flops_per_token", flops_per_token},
          {"flops_8bit_per_token", flops_8bit_per_token},
          {"threads", threads},
          {"parallel", parallel},
          {"flash_attn", flash_attn},
          {"reps", reps},
          {"cpu_kernels", dispatch::cpu_kernel_set()},
          {"cpu_decode_fetch", dispatch::cpu_decode_fetch()},
          {"n_prompt", n_prompt},
          {"n_gen", n_gen},
          {"depth", depth},
          {"load_s", load_s},
          {"rss_bytes", rss_bytes},
          {"pp_tokens_per_s", pp_tps.to_json()},
          {"tg_tokens_per_s", tg_tps.to_json()},
          {"bandwidth_gb_per_s", bandwidth_gbs},
          {"peak_gflop_per_s", peak_gflops},
          {"decode_roofline_fraction", decode_roofline},
          {"peak_int8_gop_per_s", peak_int8_gops},
          {"prefill_peak_fraction", prefill_of_peak},
          {"prefill_roofline_fraction", prefill_of_roofline},
          {"bandwidth_gb_per_s_runs", bandwidth_runs.to_json()},
          {"bandwidth_one_stream_gb_per_s_runs", bandwidth_one_stream_runs.to_json()},
          {"bandwidth_two_streams_gb_per_s_runs", bandwidth_two_streams_runs.to_json()},
          {"decode_roofline_fraction_runs", decode_roofline_runs.to_json()},
          {"token_read_bytes", token_read_bytes},
          {"token_read_ops", token_read_ops},
          {"token_read_gb_per_s", token_read_gbs.to_json()},
          {"token_stream_gb_per_s", token_stream_gbs.to_json()},
          {"decode_of_token_read", decode_of_token_read},
          {"decode_of_token_read_runs", decode_of_token_read_runs.to_json()},
          {"profile", decode_profile.to_json()},
          {"prefill_profile", prefill_profile.to_json()},
          {"single_sequence_tokens_per_s", tg_single_tps.to_json()},
          {"parallel_scaling", parallel_scaling_runs.median},
          {"parallel_scaling_runs", parallel_scaling_runs.to_json()}};
}

}  // namespace spite::bench
