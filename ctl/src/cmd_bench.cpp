// spitectl bench: prefill and decode speed of a model with the machine's measured bandwidth and
// peak FLOP/s, in this process (a GGUF file) or in spited (a loaded model's name); or the speed
// of one matmul kernel on a random matrix of a given type and shape, or of the attention kernel
// over a KV cache of a given shape and depth.
//
//   spitectl bench --model M [-p 512] [-n 128] [-t THREADS] [-r REPS] [--parallel B] [--no-flash-attn] [--json]
//   spitectl bench --matmul TYPE:IN:OUT [--tokens N] [-t THREADS] [-r REPS] [--no-repack] [--cold] [--json]
//   spitectl bench --attention HEADS:KV_HEADS:DIM [-d DEPTH] [--tokens N] [-t THREADS] [-r REPS] [--no-flash-attn] [--cold] [--json]
//   spitectl bench --ceilings [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "spite/core/bytes.hpp"
#include "spite/core/thread_pool.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "spite/bench/bench.hpp"
#include "spite/control/client.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/executor/memory_estimate.hpp"
#include "spite/gguf/types.hpp"
#include "spite/models/model.hpp"

namespace spite::ctl {
namespace {

using nlohmann::json;

int parse_int(const args& a, const char* name, int fallback, int lo, int hi, bool& ok) {
  const auto v = a.get(name);
  if (!v) return fallback;
  try {
    std::size_t used = 0;
    const int x = std::stoi(*v, &used);
    if (used == v->size() && x >= lo && x <= hi) return x;
  } catch (...) {
  }
  std::fprintf(stderr, "spitectl bench: %s must be an integer %d..%d\n", name, lo, hi);
  ok = false;
  return fallback;
}

// The probes of the run: memory bandwidth, f32 FMA peak, and the 8-bit multiply peak where measured.
void print_machine(const json& r) {
  if (r.value("bandwidth_gb_per_s", 0.0) <= 0) {
    std::printf("machine    : not probed (--no-probes)\n");
    return;
  }
  std::printf("machine    : %.1f GB/s memory bandwidth, %.1f GFLOP/s f32 FMA peak", r.value("bandwidth_gb_per_s", 0.0),
              r.value("peak_gflop_per_s", 0.0));
  if (r.value("peak_int8_gop_per_s", 0.0) > 0) std::printf(", %.1f G 8-bit ops/s", r.value("peak_int8_gop_per_s", 0.0));
  std::printf(" (measured now)\n");
  if (const json runs = r.value("bandwidth_gb_per_s_runs", json::object()); runs.value("max", 0.0) > runs.value("min", 0.0)) {
    std::printf("             bandwidth %.1f-%.1f GB/s, probed after each decode repetition (the median above)\n",
                runs.value("min", 0.0), runs.value("max", 0.0));
  }
  const json one = r.value("bandwidth_one_stream_gb_per_s_runs", json::object());
  const json two = r.value("bandwidth_two_streams_gb_per_s_runs", json::object());
  if (one.value("median", 0.0) > 0 && two.value("median", 0.0) > 0) {
    std::printf("             each thread reading one stream %.1f GB/s, two in step %.1f GB/s (medians; the faster is the bandwidth)\n",
                one.value("median", 0.0), two.value("median", 0.0));
  }
}

// ", CPU kernels avx2" (the instruction set of the built-in kernels that took the work), and the
// table of decode fetch distances they took: ", CPU kernels avx512-vnni (decode fetch zen4)".
std::string kernels_note(const json& r) {
  const std::string set = r.value("cpu_kernels", ""), fetch = r.value("cpu_decode_fetch", "");
  if (set.empty()) return {};
  return ", CPU kernels " + set + (fetch.empty() ? std::string() : " (decode fetch " + fetch + ")");
}

// --profile: the ops of a pass (a decode step, a prefill), the longest first; what the ops'
// times leave of the pass is the forward pass's own work (embedding, residual adds, routing)
// and the hand-offs. A matmul's pace as weight GB/s, or GFLOP/s where compute bounds it.
void print_profile(const json& p, const std::string& pass, bool compute_bound) {
  const json ops = p.value("ops", json::array());
  if (ops.empty()) return;
  const double pass_ms = p.value("pass_ms", 0.0);
  std::printf("profile    : %s %.3f ms (over %llu), by op:\n", pass.c_str(), pass_ms,
              static_cast<unsigned long long>(p.value("passes", 0ULL)));
  double ops_ms = 0;
  for (const json& op : ops) {
    const double ms = op.value("ms_per_pass", 0.0);
    ops_ms += ms;
    std::printf("  %-34s %7.1f calls %9.3f ms %6.1f%%", op.value("op", "").c_str(), op.value("calls_per_pass", 0.0), ms,
                100.0 * op.value("share_of_pass", 0.0));
    if (compute_bound && op.contains("gflop_per_s")) {
      std::printf("  %.1f GFLOP/s", op.value("gflop_per_s", 0.0));
    } else if (op.contains("gb_per_s")) {
      std::printf("  %s of weights at %.1f GB/s", human_bytes(static_cast<std::uint64_t>(op.value("weight_bytes_per_pass", 0.0))).c_str(),
                  op.value("gb_per_s", 0.0));
    }
    std::printf("\n");
  }
  if (pass_ms > ops_ms) {
    std::printf("  %-34s %13s %9.3f ms %6.1f%%\n", "outside the ops", "", pass_ms - ops_ms, 100.0 * (pass_ms - ops_ms) / pass_ms);
  }
}

void print_report(const json& r) {
  const auto tps = [](const json& s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f ± %.2f", s.value("median", 0.0), s.value("stddev", 0.0));
    return std::string(buf);
  };
  std::printf("model      : %s (%s, %s, %s)\n", r.value("model", "").c_str(), r.value("arch", "").c_str(),
              r.value("weight_type", "").c_str(), human_bytes(r.value("weight_bytes", 0ULL)).c_str());
  std::printf("threads    : %d, repetitions %d, load %.3f s, rss %s%s\n", r.value("threads", 0), r.value("reps", 0),
              r.value("load_s", 0.0), human_bytes(r.value("rss_bytes", 0ULL)).c_str(), kernels_note(r).c_str());
  print_machine(r);
  const bool probed = r.value("bandwidth_gb_per_s", 0.0) > 0;
  std::printf("%-12s %18s%s\n", "test", "tokens/s", probed ? "   of the machine" : "");
  if (r.value("n_prompt", 0) > 0) {
    std::printf("%-12s %18s", ("pp" + std::to_string(r.value("n_prompt", 0))).c_str(), tps(r["pp_tokens_per_s"]).c_str());
    if (probed) {
      std::printf("   %.1f%% of peak FLOP/s, %.1f%% of the compute roofline", 100.0 * r.value("prefill_peak_fraction", 0.0),
                  100.0 * r.value("prefill_roofline_fraction", 0.0));
    }
    std::printf("\n");
    print_profile(r.value("prefill_profile", json::object()), "a prefill of " + std::to_string(r.value("n_prompt", 0)) + " tokens", true);
  }
  if (r.value("n_gen", 0) > 0) {
    std::string name = "tg" + std::to_string(r.value("n_gen", 0));
    if (r.value("parallel", 1) > 1) name += " x" + std::to_string(r.value("parallel", 1));
    if (r.value("depth", 0) > 0) name += " @ d" + std::to_string(r.value("depth", 0));
    std::printf("%-12s %18s", name.c_str(), tps(r["tg_tokens_per_s"]).c_str());
    if (probed) std::printf("   %.1f%% of the bandwidth roofline", 100.0 * r.value("decode_roofline_fraction", 0.0));
    // Each repetition against the bandwidth probed right after it.
    if (const json runs = r.value("decode_roofline_fraction_runs", json::object()); runs.value("max", 0.0) > runs.value("min", 0.0)) {
      std::printf(" (%.1f-%.1f%% by repetition)", 100.0 * runs.value("min", 0.0), 100.0 * runs.value("max", 0.0));
    }
    std::printf("\n");
    // The step's weights read plainly, op by op, right after each repetition: the kernels'
    // pace against a plain loop's over the same bytes at the same minute.
    if (const json read = r.value("token_read_gb_per_s", json::object()); read.value("median", 0.0) > 0) {
      const json runs = r.value("decode_of_token_read_runs", json::object());
      std::printf("read       : the step's weights read plainly op by op (%s in %zu reads) at %.1f GB/s; decode at %.1f%% of "
                  "that pace",
                  human_bytes(r.value("token_read_bytes", 0ULL)).c_str(), r.value("token_read_ops", std::size_t{0}),
                  read.value("median", 0.0), 100.0 * r.value("decode_of_token_read", 0.0));
      if (runs.value("max", 0.0) > runs.value("min", 0.0)) {
        std::printf(" (%.1f-%.1f%% by repetition)", 100.0 * runs.value("min", 0.0), 100.0 * runs.value("max", 0.0));
      }
      std::printf("\n");
      // The same bytes as one read: what the op boundaries alone cost the plain read.
      if (const json stream = r.value("token_stream_gb_per_s", json::object()); stream.value("median", 0.0) > 0) {
        std::printf("             the same bytes as one read, without the ops' boundaries: %.1f GB/s\n", stream.value("median", 0.0));
      }
    }
    print_profile(r.value("profile", json::object()), "a decode step", false);
    // One sequence alone, timed in the same repetitions: what the parallel total is a multiple of.
    if (const int parallel = r.value("parallel", 1); parallel > 1 && r.contains("single_sequence_tokens_per_s")) {
      const json runs = r.value("parallel_scaling_runs", json::object());
      std::printf("%-12s %18s   x%d is %.2fx one sequence", ("tg" + std::to_string(r.value("n_gen", 0)) + " x1").c_str(),
                  tps(r["single_sequence_tokens_per_s"]).c_str(), parallel, r.value("parallel_scaling", 0.0));
      if (runs.value("max", 0.0) > runs.value("min", 0.0)) {
        std::printf(" (%.2f-%.2fx by repetition)", runs.value("min", 0.0), runs.value("max", 0.0));
      }
      std::printf("\n");
    }
  }
}

void print_matmul_report(const json& r) {
  const json& ms = r["ms"];
  std::printf("matmul     : %s, %lld x %lld (%s%s), %lld activation row%s\n", r.value("type", "").c_str(),
              static_cast<long long>(r.value("out", 0LL)), static_cast<long long>(r.value("in", 0LL)),
              human_bytes(r.value("weight_bytes", 0ULL)).c_str(), r.value("packed_bytes", 0ULL) > 0 ? ", repacked" : "",
              static_cast<long long>(r.value("tokens", 0LL)), r.value("tokens", 0LL) == 1 ? "" : "s");
  std::printf("threads    : %d, repetitions %d%s", r.value("threads", 0), r.value("reps", 0), kernels_note(r).c_str());
  if (r.value("copies", 1) > 1) std::printf(", over %d copies of the matrix (from memory)", r.value("copies", 1));
  std::printf("\n");
  if (r.value("bandwidth_gb_per_s", 0.0) > 0) print_machine(r);
  std::printf("time       : %.3f ms median (min %.3f, max %.3f)\n", ms.value("median", 0.0), ms.value("min", 0.0),
              ms.value("max", 0.0));
  std::printf("compute    : %.1f GFLOP/s", r.value("gflop_per_s", 0.0));
  if (r.value("peak_gflop_per_s", 0.0) > 0) std::printf(", %.1f%% of peak FLOP/s", 100.0 * r.value("peak_fraction", 0.0));
  if (r.value("peak_int8_gop_per_s", 0.0) > 0) std::printf(", %.1f%% of the 8-bit peak", 100.0 * r.value("int8_peak_fraction", 0.0));
  std::printf("\n");
  std::printf("weights    : %.2f GB/s", r.value("weight_gb_per_s", 0.0));
  if (r.value("bandwidth_gb_per_s", 0.0) > 0) std::printf(", %.1f%% of the bandwidth", 100.0 * r.value("bandwidth_fraction", 0.0));
  std::printf("\n");
  if (r.value("plain_read_fraction", 0.0) > 0) {
    const json& plain = r["plain_read_ms"];
    std::printf("plain read : %.3f ms median (min %.3f) for the same bytes through the same threads, in turns: the product "
                "streams at %.1f%% of its speed\n",
                plain.value("median", 0.0), plain.value("min", 0.0), 100.0 * r.value("plain_read_fraction", 0.0));
  }
}

// TYPE:IN:OUT (or TYPE:INxOUT): the weight type by its GGUF name and the matrix shape.
bool parse_matmul_spec(const std::string& spec, bench::matmul_options& o) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return false;
  const gguf::type_traits* t = gguf::find_type_by_name(spec.substr(0, colon));
  if (t == nullptr) return false;
  std::string dims = spec.substr(colon + 1);
  std::replace(dims.begin(), dims.end(), 'x', ':');
  const auto sep = dims.find(':');
  if (sep == std::string::npos) return false;
  try {
    std::size_t used_in = 0, used_out = 0;
    const std::string in = dims.substr(0, sep), out = dims.substr(sep + 1);
    o.in = std::stoll(in, &used_in);
    o.out = std::stoll(out, &used_out);
    if (used_in != in.size() || used_out != out.size()) return false;
  } catch (...) {
    return false;
  }
  o.type = t->type;
  return true;
}

// The options both benchmarks take: threads, repetitions and probes into `o`; pinning applied.
template <class Options>
void parse_run_options(const args& a, int default_reps, bool& ok, Options& o) {
  o.threads = parse_int(a, "-t", 0, 0, 1024, ok);
  o.reps = parse_int(a, "-r", default_reps, 1, 1000, ok);
  o.probes = !a.has("--no-probes");
  thread_pool::set_pinning(a.has("--pin"));
}

// A kernel benchmark's report as JSON or text; its refusal of the options as a usage error.
template <class Report>
int emit_kernel_report(const args& a, const result<Report>& r, void (*print)(const json&)) {
  if (!r) {
    std::fprintf(stderr, "spitectl bench: %s\n", r.err().message.c_str());
    return exit_usage;
  }
  json report = r->to_json();
  report["where"] = "in-process";
  if (a.has("--json")) {
    std::cout << report.dump(2) << "\n";
  } else {
    print(report);
  }
  return exit_ok;
}

int run_matmul_bench(const args& a) {
  bool ok = true;
  bench::matmul_options o;
  if (!parse_matmul_spec(*a.get("--matmul"), o)) {
    std::fprintf(stderr, "spitectl bench: --matmul takes TYPE:IN:OUT, a GGUF type name and the matrix shape (e.g. Q4_K:4096:4096)\n");
    return exit_usage;
  }
  o.tokens = parse_int(a, "--tokens", 1, 1, 65536, ok);
  o.repack = !a.has("--no-repack");
  o.cold = a.has("--cold");
  parse_run_options(a, 10, ok, o);
  if (!ok) return exit_usage;
  return emit_kernel_report(a, bench::run_matmul_bench(o), print_matmul_report);
}

void print_attention_report(const json& r) {
  const json& ms = r["ms"];
  std::printf("attention  : %lld heads over %lld kv heads of %lld, %s; %lld quer%s at depth %lld (%s of keys and values)\n",
              static_cast<long long>(r.value("n_head", 0LL)), static_cast<long long>(r.value("n_head_kv", 0LL)),
              static_cast<long long>(r.value("head_dim", 0LL)), r.value("flash_attn", false) ? "flash" : "without flash attention",
              static_cast<long long>(r.value("tokens", 0LL)), r.value("tokens", 0LL) == 1 ? "y" : "ies",
              static_cast<long long>(r.value("depth", 0LL)), human_bytes(r.value("kv_bytes", 0ULL)).c_str());
  std::printf("threads    : %d, repetitions %d%s", r.value("threads", 0), r.value("reps", 0), kernels_note(r).c_str());
  if (r.value("copies", 1) > 1) std::printf(", over %d copies of the cache (from memory)", r.value("copies", 1));
  std::printf("\n");
  std::printf("time       : %.3f ms median (min %.3f, max %.3f), %.2f ns per query head and key it sees\n",
              ms.value("median", 0.0), ms.value("min", 0.0), ms.value("max", 0.0), r.value("ns_per_head_key", 0.0));
  std::printf("kv cache   : %.2f GB/s", r.value("kv_gb_per_s", 0.0));
  if (r.value("bandwidth_gb_per_s", 0.0) > 0) {
    std::printf(", %.1f%% of the %.1f GB/s memory bandwidth (measured now)", 100.0 * r.value("bandwidth_fraction", 0.0),
                r.value("bandwidth_gb_per_s", 0.0));
  }
  std::printf("\n");
}

// HEADS:KV_HEADS:DIM: query heads, kv heads (a divisor of the query heads) and the head size.
bool parse_attention_spec(const std::string& spec, bench::attention_options& o) {
  std::int64_t v[3];
  std::size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? spec.find(':', at) : spec.size();
    if (end == std::string::npos) return false;
    const std::string part = spec.substr(at, end - at);
    try {
      std::size_t used = 0;
      v[i] = std::stoll(part, &used);
      if (used != part.size() || part.empty()) return false;
    } catch (...) {
      return false;
    }
    at = end + 1;
  }
  o.n_head = v[0];
  o.n_head_kv = v[1];
  o.head_dim = v[2];
  return true;
}

int run_attention_bench(const args& a) {
  bool ok = true;
  bench::attention_options o;
  if (!parse_attention_spec(*a.get("--attention"), o)) {
    std::fprintf(stderr, "spitectl bench: --attention takes HEADS:KV_HEADS:DIM, e.g. 32:8:128 (Llama-3-8B) or 32:4:64 (TinyLlama)\n");
    return exit_usage;
  }
  o.depth = parse_int(a, "-d", 4096, 1, 1 << 20, ok);
  o.tokens = parse_int(a, "--tokens", 1, 1, 4096, ok);
  o.flash = !a.has("--no-flash-attn");
  o.cold = a.has("--cold");
  parse_run_options(a, 10, ok, o);
  if (!ok) return exit_usage;
  return emit_kernel_report(a, bench::run_attention_bench(o), print_attention_report);
}

// The ceilings of the kernels' instruction sequences on this core (bench::measure_sequence_ceilings).
int run_ceilings(const args& a) {
  const bench::sequence_ceilings c = bench::measure_sequence_ceilings();
  if (a.has("--json")) {
    std::cout << c.to_json().dump(2) << "\n";
    return exit_ok;
  }
  if (c.handoff.threads > 0) {
    std::printf("hand-off   : %d threads: an empty job %.2f us; a cache line's round trip between two threads %.0f ns\n",
                c.handoff.threads, c.handoff.empty_job_us, c.handoff.line_round_trip_ns);
  }
  if (c.sequences.empty()) {
    std::printf("ceilings   : not measured here (the sequences are AVX2 and FMA forms on x86-64)\n");
    return exit_ok;
  }
  std::printf("ceilings   : the kernels' exact instruction sequences with operands in registers or L1, one thread (%s)\n",
              c.isa.c_str());
  std::printf("8-bit peak : %.1f G ops/s\n", c.peak_int8_gops);
  for (const auto& s : c.sequences) {
    std::printf("%-14s: %3.0f%% of %s -- %s; %s\n", s.name.c_str(), 100 * s.fraction, s.of.c_str(), s.kernels.c_str(),
                s.sequence.c_str());
  }
  if (!c.streamed.empty()) {
    std::printf("streamed   : the packed Q4_0 / Q4_K decode sequence over 256 MiB, two streams per thread, in turns with the "
                "plain read of it\n");
  }
  for (const auto& s : c.streamed) {
    std::printf("%2d thread%s : plain read %.1f GB/s; the sequence from L2 %.1f GB/s, from memory %.1f GB/s (%.1f with "
                "software prefetch): %.0f%% of the plain read\n",
                s.threads, s.threads == 1 ? " " : "s", s.plain_gbs, s.in_cache_gbs, s.sequence_gbs, s.prefetched_gbs,
                100 * s.fraction());
  }
  return exit_ok;
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "a GGUF file (benchmarked here), or the name of a model spited has loaded")
      .option("-p", "N", "prompt tokens for the prefill test (default 512; 0 skips it)")
      .option("-n", "N", "generated tokens for the decode test (default 128; 0 skips it)")
      .option("-d", "N", "context each sequence holds before the decode test (default 0)")
      .option("-t", "N", "compute threads (default: all)")
      .option("-r", "N", "repetitions (default 3); medians and spread are reported")
      .option("--parallel", "B", "sequences decoding together (default 1): total throughput, and its ratio to one sequence alone")
      .option("--socket", "PATH", "spited's control socket, to benchmark a model loaded there")
      .option("--matmul", "TYPE:IN:OUT", "instead of a model: one weight matrix of this type and shape, random values")
      .option("--tokens", "N", "with --matmul: activation rows per product; with --attention: queries (default 1, a decode step)")
      .option("--attention", "HEADS:KV_HEADS:DIM", "instead of a model: one attention call over an F16 KV cache of -d keys (default 4096), random values")
      .flag("--no-repack", "with --matmul: the file's layout, not the load-time packed one")
      .flag("--cold", "with --matmul / --attention: each call on the next of copies that exceed the caches (weights / cache from memory)")
      .flag("--ceilings", "instead of a model: how fast this core runs each kernel family's instruction sequence, how much of the bandwidth the decode sequence streams, and what a hand-off between the threads costs")
      .option("--kernels", "DIRS", "kernel plug-in directories (in this process)")
      .flag("--reference-kernels", "use only the built-in kernels (in this process)")
      .flag("--no-probes", "skip the bandwidth, peak FLOP/s and 8-bit peak probes")
      .flag("--no-flash-attn", "attention without the flash-attention kernel (default: with it here, spited's setting there)")
      .flag("--pin", "pin each compute thread to a CPU of its own (in this process)")
      .flag("--profile", "with --model: each op's share of a prefill and of a decode step (calls, ms, a matmul's weight GB/s)")
      .flag("--json", "machine-readable output")
      .flag("--help", "show this help");
  auto parsed = a.parse(argv);
  if (!parsed || a.has("--help") || (!a.get("--model") && !a.get("--matmul") && !a.get("--attention") && !a.has("--ceilings"))) {
    if (!parsed) std::fprintf(stderr, "spitectl bench: %s\n", parsed.err().message.c_str());
    else if (!a.has("--help")) std::fprintf(stderr, "spitectl bench: --model, --matmul, --attention or --ceilings is required\n");
    std::fprintf(a.has("--help") ? stdout : stderr,
                 "usage: spitectl bench --model M [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-r REPS] [--parallel B] [--profile] [--json]\n"
                 "       spitectl bench --matmul TYPE:IN:OUT [--tokens N] [-t THREADS] [-r REPS] [--no-repack] [--cold] [--json]\n"
                 "       spitectl bench --attention HEADS:KV_HEADS:DIM [-d DEPTH] [--tokens N] [-t THREADS] [-r REPS] [--no-flash-attn] [--cold] [--json]\n"
                 "       spitectl bench --ceilings [--json]\n%s",
                 a.help().c_str());
    return a.has("--help") && parsed ? exit_ok : exit_usage;
  }
  if (a.has("--ceilings")) return run_ceilings(a);
  if (a.get("--matmul")) return run_matmul_bench(a);
  if (a.get("--attention")) return run_attention_bench(a);
  bool ok = true;
  bench::bench_options o;
  o.n_prompt = parse_int(a, "-p", 512, 0, 1 << 20, ok);
  o.n_gen = parse_int(a, "-n", 128, 0, 1 << 20, ok);
  o.depth = parse_int(a, "-d", 0, 0, 1 << 20, ok);
  o.parallel = parse_int(a, "--parallel", 1, 1, 1024, ok);
  o.flash_attn = !a.has("--no-flash-attn");
  o.profile = a.has("--profile");
  parse_run_options(a, 3, ok, o);
  if (!ok) return exit_usage;
  const std::string model = *a.get("--model");

  json report;
  if (!std::filesystem::is_regular_file(model)) {
    // A model name: spited runs it, with the kernels it dispatches.
    const std::filesystem::path socket = a.get("--socket") ? std::filesystem::path(*a.get("--socket"))
                                                           : control::default_socket_path();
    auto c = control::client::connect(socket);
    if (!c) {
      std::fprintf(stderr, "spitectl bench: '%s' is not a file, and %s\n", model.c_str(), c.err().message.c_str());
      return exit_unreachable;
    }
    json request = {{"cmd", "bench"}, {"model", model}, {"n_prompt", o.n_prompt}, {"n_gen", o.n_gen}, {"depth", o.depth},
                    {"threads", o.threads}, {"reps", o.reps}, {"parallel", o.parallel}, {"probes", o.probes}};
    if (!o.flash_attn) request["flash_attn"] = false;  // else the daemon's own setting
    if (o.profile) request["profile"] = true;
    auto r = (*c)->call(request);
    if (!r) {
      std::fprintf(stderr, "spitectl bench: %s\n", r.err().message.c_str());
      return exit_failure;
    }
    report = std::move(*r);
    report["where"] = "spited " + socket.string();
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto file = gguf::file::open(model);
    if (!file) {
      std::fprintf(stderr, "spitectl bench: %s\n", file.err().message.c_str());
      return exit_failure;
    }
    auto m = models::load_model(*file);
    if (!m) {
      std::fprintf(stderr, "spitectl bench: %s\n", m.err().message.c_str());
      return exit_failure;
    }
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Kernels as spited would pick them here, unless told otherwise.
    if (!a.has("--reference-kernels")) {
      std::vector<std::filesystem::path> path;
      if (const auto k = a.get("--kernels")) path = dispatch::parse_path_list(*k);
      for (auto& p : dispatch::default_kernel_path({})) path.push_back(std::move(p));
      const dispatch::cpu_features cpu = dispatch::detect_cpu();
      dispatch::plugin_options po;
      po.cpu_threads = o.threads > 0 ? o.threads : cpu.threads;
      auto set = dispatch::kernel_set::scan(path, po);
      auto [family, name] = models::kernel_identity_of(*file);
      dispatch::dispatch_target target;
      target.device = SPITE_DEVICE_CPU;
      target.archs = cpu.isa_candidates();
      o.ops = dispatch::dispatcher::create(std::move(set), {family, name}, target)->ops();
    }
    auto r = bench::run_bench(*file, **m, o);
    if (!r) {
      std::fprintf(stderr, "spitectl bench: %s\n", r.err().message.c_str());
      return exit_failure;
    }
    r->model = std::filesystem::path(model).stem().string();
    r->load_s = load_s;
    report = r->to_json();
    report["where"] = "in-process";
  }
  if (a.has("--json")) {
    std::cout << report.dump(2) << "\n";
  } else {
    print_report(report);
  }
  return exit_ok;
}

}  // namespace spite::ctl
