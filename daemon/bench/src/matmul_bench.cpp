// `spitectl bench --matmul`: one weight matrix of a given type and shape, random values, timed
// through the same kernels a model's matmuls take (the built-in ones, or a dispatcher's table).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "probe_loops.hpp"
#include "spite/bench/bench.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/types.hpp"

namespace spite::bench {
namespace {

// Bounds on what one run may allocate: the weights, the activations and the outputs.
constexpr std::int64_t max_dim = std::int64_t{1} << 20;
constexpr std::int64_t max_tokens = 65536;
constexpr std::uint64_t max_weight_bytes = std::uint64_t{8} << 30;
constexpr std::uint64_t max_activation_floats = std::uint64_t{1} << 28;

// Distinct random rows, quantized with spite's quantizer where the type has one, repeated over
// the matrix (the time does not depend on the values, and quantizing millions of rows would);
// random bits for types without a quantizer.
std::vector<std::byte> random_weights(gguf::tensor_type type, std::int64_t in, std::int64_t out, std::size_t row_bytes) {
  std::mt19937 rng(20261201);
  std::vector<std::byte> data(row_bytes * static_cast<std::size_t>(out));
  const std::int64_t distinct = std::min<std::int64_t>(out, 64);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<std::size_t>(in));
  for (std::int64_t r = 0; r < distinct; ++r) {
    std::byte* dst = data.data() + static_cast<std::size_t>(r) * row_bytes;
    for (auto& v : row) v = normal(rng);
    if (gguf::traits(type).from_float == nullptr || !gguf::quantize(type, row.data(), dst, in)) {
      for (std::size_t i = 0; i < row_bytes; ++i) dst[i] = static_cast<std::byte>(rng() & 0xFF);
    }
  }
  for (std::int64_t r = distinct; r < out; ++r) {
    std::memcpy(data.data() + static_cast<std::size_t>(r) * row_bytes, data.data() + static_cast<std::size_t>(r % distinct) * row_bytes,
                row_bytes);
  }
  return data;
}

}  // namespace

result<matmul_report> run_matmul_bench(const matmul_options& o) {
  if (o.in < 1 || o.in > max_dim || o.out < 1 || o.out > max_dim || o.tokens < 1 || o.tokens > max_tokens || o.reps < 1 ||
      o.reps > 1000 || o.threads < 0 || o.threads > 1024) {
    return make_error(errc::invalid_argument, "bench --matmul: in and out 1..1048576, tokens 1..65536, -r 1..1000");
  }
  const gguf::type_traits& tr = gguf::traits(o.type);
  const auto row_bytes = gguf::row_bytes(o.type, o.in);
  if (!row_bytes || o.in % tr.block_size != 0) {
    return make_error(errc::invalid_argument, "bench --matmul: " + std::string(tr.name) + " rows hold blocks of " +
                                                  std::to_string(tr.block_size) + " elements; in = " + std::to_string(o.in) +
                                                  " is not a multiple");
  }
  const std::uint64_t weight_bytes = *row_bytes * static_cast<std::uint64_t>(o.out);
  if (weight_bytes > max_weight_bytes || static_cast<std::uint64_t>(std::max(o.in, o.out) * o.tokens) > max_activation_floats) {
    return make_error(errc::invalid_argument, "bench --matmul: at most 8 GiB of weights and 2^28 activations or outputs");
  }

  matmul_report r;
  r.type = std::string(tr.name);
  r.in = o.in;
  r.out = o.out;
  r.tokens = o.tokens;
  r.reps = o.reps;
  r.weight_bytes = weight_bytes;

  // With `cold`, enough copies that one pass over them all leaves none in any cache (512 MiB or
  // more; the largest last-level caches of today's desktop and server parts are 96-384 MiB per
  // chip, a pass of 512 MiB evicts a socket's share of them).
  const std::uint64_t cold_set = std::uint64_t{512} << 20;
  const std::uint64_t copies = o.cold ? std::max<std::uint64_t>(2, (cold_set + weight_bytes - 1) / weight_bytes) : 1;
  if (copies * weight_bytes > max_weight_bytes) {
    return make_error(errc::invalid_argument, "bench --matmul --cold: two copies of this matrix exceed 8 GiB");
  }
  r.copies = static_cast<int>(copies);

  const std::vector<std::byte> one = random_weights(o.type, o.in, o.out, static_cast<std::size_t>(*row_bytes));
  std::vector<std::byte> data(one.size() * copies);
  std::vector<dispatch::weight> ws(copies);
  for (std::uint64_t c = 0; c < copies; ++c) {
    std::byte* dst = data.data() + c * one.size();
    std::memcpy(dst, one.data(), one.size());
    dispatch::weight& w = ws[c];
    w.data = dst;
    w.type = o.type;
    w.in = o.in;
    w.out = o.out;
    w.row_bytes = static_cast<std::size_t>(*row_bytes);
    // `data` is heap memory, not a file's pages: keep it.
    const std::size_t packed = o.repack ? dispatch::pack_for_cpu(w, false) : 0;
    if (c == 0) r.packed_bytes = packed;
  }

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(o.in * o.tokens));
  for (auto& v : x) v = normal(rng);
  std::vector<float> y(static_cast<std::size_t>(o.out * o.tokens));

  thread_pool pool(o.threads);
  r.threads = pool.size();
  const auto& matmul = o.ops ? o.ops->matmul : dispatch::cpu_reference_ops().matmul;
  for (const auto& w : ws) matmul(w, x.data(), o.tokens, y.data(), pool);  // warm-up: first-touch pages, lazy tables
  std::vector<double> ms, plain_ms;
  std::atomic<std::uint64_t> sink{0};
  for (int i = 0; i < o.reps; ++i) {
    const auto& w = ws[static_cast<std::size_t>(i) % ws.size()];
    auto t0 = std::chrono::steady_clock::now();
    matmul(w, x.data(), o.tokens, y.data(), pool);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!o.cold) continue;
    // In turns with the products, so both see the host alike: a plain read of the bytes a
    // product streams (another copy's, from memory too), through the same threads. What the
    // product takes beyond it is the kernel's; the rest is what memory gives a job of this size.
    const auto& other = ws[(static_cast<std::size_t>(i) + ws.size() / 2) % ws.size()];
    t0 = std::chrono::steady_clock::now();
    if (other.packed != nullptr) {
      detail::read_through(pool, other.packed, other.packed_size, sink);
    } else {
      detail::read_through(pool, other.data, static_cast<std::size_t>(weight_bytes), sink);
    }
    plain_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.ms = spread::of(std::move(ms));
  if (!plain_ms.empty()) {
    r.plain_read_ms = spread::of(std::move(plain_ms));
    if (r.ms.median > 0) r.plain_read_fraction = r.plain_read_ms.median / r.ms.median;
  }
  const double s = r.ms.median / 1e3;
  r.gflops = 2.0 * static_cast<double>(o.in) * static_cast<double>(o.out) * static_cast<double>(o.tokens) / s / 1e9;
  r.weight_gbs = static_cast<double>(weight_bytes) / s / 1e9;
  if (o.probes) {
    r.bandwidth_gbs = measure_bandwidth(r.threads);
    r.peak_gflops = measure_peak_gflops(r.threads);
    if (r.bandwidth_gbs > 0) r.bandwidth_fraction = r.weight_gbs / r.bandwidth_gbs;
    if (r.peak_gflops > 0) r.peak_fraction = r.gflops / r.peak_gflops;
    if (tr.quantized) {
      r.peak_int8_gops = measure_peak_int8_gops(r.threads);
      if (r.peak_int8_gops > 0) r.int8_peak_fraction = r.gflops / r.peak_int8_gops;
    }
  }
  return r;
}

nlohmann::json matmul_report::to_json() const {
  return {{"type", type},
          {"in", in},
          {"out", out},
          {"tokens", tokens},
          {"threads", threads},
          {"reps", reps},
          {"cpu_kernels", dispatch::cpu_kernel_set()},
          {"cpu_decode_fetch", dispatch::cpu_decode_fetch()},
          {"weight_bytes", weight_bytes},
          {"packed_bytes", packed_bytes},
          {"copies", copies},
          {"ms", ms.to_json()},
          {"gflop_per_s", gflops},
          {"weight_gb_per_s", weight_gbs},
          {"bandwidth_gb_per_s", bandwidth_gbs},
          {"peak_gflop_per_s", peak_gflops},
          {"peak_fraction", peak_fraction},
          {"peak_int8_gop_per_s", peak_int8_gops},
          {"int8_peak_fraction", int8_peak_fraction},
          {"bandwidth_fraction", bandwidth_fraction},
          {"plain_read_ms", plain_read_ms.to_json()},
          {"plain_read_fraction", plain_read_fraction}};
}

}  // namespace spite::bench
