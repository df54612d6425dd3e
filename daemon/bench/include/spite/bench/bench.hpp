// `spitectl bench` and spited's `bench` command: prefill (pp) and decode (tg) tokens/s of a model
// over repetitions, with the machine's memory bandwidth and peak FLOP/s measured in the same run
// so that decode is reported as a fraction of the bandwidth roofline and prefill as a fraction
// of peak compute. Figures then compare across machines and across minutes on a shared host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/executor/context.hpp"
#include "spite/gguf/file.hpp"

namespace spite::bench {

struct spread {
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
  static spread of(std::vector<double> samples);
  nlohmann::json to_json() const;
};

// Streaming read of a buffer much larger than the caches with `threads` threads, each thread's
// share read as one stream and as two in step, in turns: each way's best of five passes, GB/s.
// Which is faster depends on the core's prefetchers (two, by 11-21 %, on a Zen 5 host).
struct bandwidth_ways {
  double one_stream_gbs = 0, two_streams_gbs = 0;
  double best() const { return std::max(one_stream_gbs, two_streams_gbs); }
};
bandwidth_ways measure_bandwidth_ways(int threads, std::size_t bytes = std::size_t{256} << 20);
// measure_bandwidth_ways(...).best(): the bandwidth the roofline fractions are set against.
double measure_bandwidth(int threads, std::size_t bytes = std::size_t{256} << 20);
// Independent f32 FMA chains on every thread with the widest vectors the CPU has: GFLOP/s.
double measure_peak_gflops(int threads);
// Independent chains of the CPU's widest u8 x s8 multiply-add (VPDPBUSD with AVX-512 VNNI,
// VPMADDUBSW with AVX2) on every thread: G ops/s, 2 per product. The ceiling of the quantized
// matmuls, whose activations are 8-bit: they can pass the f32 FMA peak but not this one.
double measure_peak_int8_gops(int threads);

// How fast this core retires the exact instruction sequences of the quantized CPU kernel
// families, with every operand in registers or L1, single-threaded: each as a fraction of the
// 8-bit multiply peak (`of`). A kernel cannot beat its family's fraction of the peak;
// `spitectl bench --ceilings` prints them. Empty where their instructions (AVX2 and FMA on
// x86-64) are missing.
struct sequence_ceiling {
  std::string name, kernels, sequence, of;
  double fraction = 0;
};
// The packed Q4_0 / Q4_K one-row decode sequence (per 32 bytes of weights one load, two VPANDs
// and a VPSRLW for the nibbles, and per nibble half a VPBROADCASTD of the activations, a
// VPMADDUBSW and a VPADDW) run by `threads` threads over 256 MiB, each thread reading two
// streams in step as the decode kernels do, in turns with the plain read of the same bytes (the
// better of one stream and two per thread), with and without software prefetch 1 KiB ahead, and
// over 128 KiB per thread that stays in L2. Its best streamed rate over the plain read is the
// share of the bandwidth a decode kernel doing this much work per byte can stream here.
struct stream_ceiling {
  int threads = 0;  // 0: not measured (no AVX2)
  double plain_gbs = 0, in_cache_gbs = 0, sequence_gbs = 0, prefetched_gbs = 0;
  double fraction() const { return plain_gbs > 0 ? std::max(sequence_gbs, prefetched_gbs) / plain_gbs : 0; }
  nlohmann::json to_json() const;
};
stream_ceiling measure_stream_ceiling(int threads);

// What handing an operation to the pool's threads costs (handoff_probe.cpp): the caller's time
// per empty parallel_for job of `threads` threads, and one cache line's round trip between two
// threads (the transfers a hand-off is made of). threads 0: not measured (fewer than 2 CPUs).
struct handoff_cost {
  int threads = 0;
  double empty_job_us = 0, line_round_trip_ns = 0;
  nlohmann::json to_json() const;
};
handoff_cost measure_handoff(int threads);

struct sequence_ceilings {
  handoff_cost handoff;       // every hardware thread, on any processor
  std::string isa;            // "avx2", or empty where nothing was measured
  double peak_int8_gops = 0;  // the 8-bit peak measured the same way, one thread
  std::vector<sequence_ceiling> sequences;
  std::vector<stream_ceiling> streamed;  // one thread, then every hardware thread where more
  nlohmann::json to_json() const;
};
sequence_ceilings measure_sequence_ceilings();

// One op as `--profile` times it (phase_profile): every call of it over the timed passes.
struct op_profile {
  std::string op;           // "matmul Q4_0 2048x2560" (type, input width x rows), "attention", ...
  std::uint64_t calls = 0;
  double seconds = 0;       // ops that run side by side (a step's experts) count each thread's time
  std::uint64_t bytes = 0;  // matmuls: the weight bytes read
  double flops = 0;         // matmuls: 2 x in x out x activation rows
};

// The ops of a timed phase (the decode steps, or the prefills), the longest first, over
// `passes` passes (a decode step, a prefill of the prompt) of pass_s each: wall time, the
// forward pass's own work besides the ops included. JSON: per pass, each op's calls, ms and
// share, a matmul's weight bytes and GB/s; {} when nothing was timed.
struct phase_profile {
  std::vector<op_profile> ops;
  std::uint64_t passes = 0;
  double pass_s = 0;
  nlohmann::json to_json() const;
};

struct bench_options {
  std::int32_t n_prompt = 512;  // prefill tokens; 0 skips prefill
  std::int32_t n_gen = 128;     // decoded tokens per sequence; 0 skips decode
  std::int32_t depth = 0;       // context each sequence holds before the decode test (untimed)
  int threads = 0;              // 0: every hardware thread
  int reps = 3;
  int parallel = 1;             // sequences decoding together
  bool probes = true;           // measure bandwidth and peak FLOP/s and 8-bit ops/s too
  bool flash_attn = true;       // attention through the online-softmax kernel
  bool profile = false;         // time each op of the prefills and decode steps (bench_report)
  std::shared_ptr<const dispatch::op_table> ops;  // null: the built-in kernels
  std::function<bool()> cancelled;                // polled between steps
};

struct bench_report {
  std::string model, arch, weight_type;
  std::uint64_t weight_bytes = 0;        // all tensor data
  std::uint64_t bytes_per_token = 0;     // weights one decode step reads
  double flops_per_token = 0;            // matmul FLOPs of one prefill token
  double flops_8bit_per_token = 0;       // of those, quantized weights x 8-bit activations
  int threads = 0, parallel = 1, reps = 0;
  bool flash_attn = false;
  std::int32_t n_prompt = 0, n_gen = 0, depth = 0;
  double load_s = 0;                     // filled by the caller that loaded the model
  std::uint64_t rss_bytes = 0;
  spread pp_tps, tg_tps;                 // tokens/s per repetition
  double bandwidth_gbs = 0, peak_gflops = 0, peak_int8_gops = 0;
  double decode_roofline = 0, prefill_of_peak = 0;  // fractions, from the medians
  double prefill_of_roofline = 0;  // against f32 peak for float products, 8-bit peak for the others
  // With a decode test: the bandwidth probed right after each decode repetition and that
  // repetition's roofline fraction (bandwidth_gbs and decode_roofline are their medians), so a
  // host whose bandwidth swings from minute to minute is compared with itself at that minute.
  spread bandwidth_runs, decode_roofline_runs;
  // Each way of the probe's read (bandwidth_ways), over the same probes.
  spread bandwidth_one_stream_runs, bandwidth_two_streams_runs;
  // With a decode test and probes: the weight ranges one decode step's matmuls read, in their
  // order (token_read_ops of them, token_read_bytes in all), read plainly op by op through as
  // many threads right after each repetition, as many steps as were decoded or a second's worth
  // (each range's first half beside its second in 16 KiB chunk pairs, as the decode kernels
  // read a matrix, each thread a contiguous share of the pairs, no software prefetch).
  // decode_of_token_read is that read's time over the decode's, per step, from the medians: at
  // 1 the kernels cost nothing beyond reading their weights as a plain loop does, op by op, at
  // that minute; the decode kernels fetch ahead, so they may pass it.
  // token_stream_gbs: the same bytes read as one job per step, each thread a contiguous share
  // of all of them (no op boundaries): what the op-by-op read loses at the boundaries.
  std::uint64_t token_read_bytes = 0;
  std::size_t token_read_ops = 0;
  spread token_read_gbs, token_stream_gbs, decode_of_token_read_runs;
  double decode_of_token_read = 0;
  // With profile: the decode steps' ops (of the parallel run where there are several
  // sequences; JSON "profile") and the prefills' ("prefill_profile").
  phase_profile decode_profile, prefill_profile;
  // With parallel > 1: one sequence decoding alone, timed in each repetition beside the
  // parallel run, and each repetition's ratio of the parallel total to it (the median is
  // `parallel_scaling` in JSON). Empty with parallel 1.
  spread tg_single_tps, parallel_scaling_runs;
  nlohmann::json to_json() const;
};

// Runs the benchmark on a fresh context of `m` (its own KV memory; nothing shared with
// requests). A cancelled run ends with an error saying so.
result<bench_report> run_bench(const gguf::file& file, const models::model& m, const bench_options& options);

// One matrix product y = W x of a weight type and shape on random data, timed over repetitions:
// one kernel without a model around it (`spitectl bench --matmul`). A matrix larger than the
// caches shows how close a decode kernel streams to the bandwidth; many activation rows, how
// close a prefill kernel computes to the peak.
struct matmul_options {
  gguf::tensor_type type = gguf::tensor_type::q4_0;
  std::int64_t in = 4096, out = 4096;  // W: out rows of in elements
  std::int64_t tokens = 1;             // activation rows (1: one decode step)
  int threads = 0;                     // 0: every hardware thread
  int reps = 10;
  bool repack = true;                  // the load-time packed layout, where the type has one
  bool probes = true;
  // Each product on the next of several copies of the matrix that together exceed the caches:
  // weights read from memory, as a model's decode step reads them, not from the last-level cache.
  bool cold = false;
  std::shared_ptr<const dispatch::op_table> ops;  // null: the built-in kernels
};

struct matmul_report {
  std::string type;
  std::int64_t in = 0, out = 0, tokens = 0;
  int threads = 0, reps = 0;
  std::uint64_t weight_bytes = 0, packed_bytes = 0;
  int copies = 1;  // matrices the products rotate over (more than one with `cold`)
  spread ms;                                // per product
  double gflops = 0, weight_gbs = 0;        // from the median: 2 in out tokens / s, weight bytes / s
  double bandwidth_gbs = 0, peak_gflops = 0, peak_int8_gops = 0;
  double peak_fraction = 0, bandwidth_fraction = 0;
  double int8_peak_fraction = 0;  // quantized types (8-bit activations) only
  // With `cold`: a plain read of the bytes each product streams (its packed layout where it has
  // one), from memory through the same threads, timed in turns with the products; and its
  // median over the product's (1: the product streams as fast as a plain read of its size).
  spread plain_read_ms;
  double plain_read_fraction = 0;
  nlohmann::json to_json() const;
};

result<matmul_report> run_matmul_bench(const matmul_options& options);

// One attention call over an F16 KV cache of random keys and values, timed over repetitions:
// the attention kernel without a model around it (`spitectl bench --attention`). One query
// (decode) shows how much of a step at that depth attention takes; 64 and more, the tiled
// prefill path. Causal: query t of T sits at position depth - T + t and sees the keys up to it.
struct attention_options {
  std::int64_t n_head = 32, n_head_kv = 4, head_dim = 64;
  std::int64_t depth = 4096;  // keys in the cache
  std::int64_t tokens = 1;    // queries (1: one decode step)
  bool flash = true;          // the flash-attention kernel (else the plain one)
  // Each call on the next of several copies of the cache that together exceed the caches: keys
  // and values read from memory, as a model's step reads each layer's.
  bool cold = false;
  int threads = 0;            // 0: every CPU the process may use
  int reps = 10;
  bool probes = true;
  std::shared_ptr<const dispatch::op_table> ops;  // null: the built-in kernels
};

struct attention_report {
  std::int64_t n_head = 0, n_head_kv = 0, head_dim = 0, depth = 0, tokens = 0;
  bool flash = false;
  int threads = 0, reps = 0;
  std::uint64_t kv_bytes = 0;       // the cache's keys and values (f16)
  int copies = 1;                   // caches the calls rotate over (more than one with `cold`)
  std::uint64_t visible_pairs = 0;  // (query head, key) pairs the mask lets through
  spread ms;                        // per call
  double ns_per_head_key = 0;       // from the median: time / visible_pairs
  double kv_gbs = 0;                // kv_bytes / median time
  double bandwidth_gbs = 0, bandwidth_fraction = 0;
  nlohmann::json to_json() const;
};

result<attention_report> run_attention_bench(const attention_options& options);

// The resident set of this process, bytes.
std::uint64_t resident_bytes();

}  // namespace spite::bench
