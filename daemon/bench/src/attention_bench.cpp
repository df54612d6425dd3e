// `spitectl bench --attention`: one attention call over an F16 KV cache of random keys and
// values, timed through the kernel a model's attention takes (the built-in one, or a
// dispatcher's table).
#include <algorithm>
#include <chrono>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "spite/bench/bench.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/core/half.hpp"
#include "spite/core/page_memory.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"

namespace spite::bench {
namespace {

// Bounds on what one run may allocate: the cache, the queries and the outputs.
constexpr std::int64_t max_heads = 1024, max_head_dim = 1024, max_depth = std::int64_t{1} << 20, max_tokens = 4096;
constexpr std::uint64_t max_kv_bytes = std::uint64_t{8} << 30;
constexpr std::uint64_t max_query_floats = std::uint64_t{1} << 28;

}  // namespace

result<attention_report> run_attention_bench(const attention_options& o) {
  if (o.n_head < 1 || o.n_head > max_heads || o.n_head_kv < 1 || o.n_head % o.n_head_kv != 0 || o.head_dim < 1 ||
      o.head_dim > max_head_dim || o.depth < 1 || o.depth > max_depth || o.tokens < 1 || o.tokens > std::min(o.depth, max_tokens) ||
      o.reps < 1 || o.reps > 1000 || o.threads < 0 || o.threads > 1024) {
    return make_error(errc::invalid_argument,
                      "bench --attention: heads 1..1024, a whole number of query heads per kv head, head size 1..1024, "
                      "depth 1..1048576, tokens 1..min(depth, 4096), -r 1..1000");
  }
  const auto kv_elements = static_cast<std::uint64_t>(o.depth * o.n_head_kv * o.head_dim);
  const std::uint64_t kv_bytes = 2 * kv_elements * sizeof(std::uint16_t);
  if (kv_bytes > max_kv_bytes || static_cast<std::uint64_t>(o.tokens * o.n_head * o.head_dim) > max_query_floats) {
    return make_error(errc::invalid_argument, "bench --attention: at most 8 GiB of keys and values and 2^28 query elements");
  }

  attention_report r;
  r.n_head = o.n_head;
  r.n_head_kv = o.n_head_kv;
  r.head_dim = o.head_dim;
  r.depth = o.depth;
  r.tokens = o.tokens;
  r.flash = o.flash;
  r.reps = o.reps;
  r.kv_bytes = kv_bytes;
  for (std::int64_t t = 0; t < o.tokens; ++t) r.visible_pairs += static_cast<std::uint64_t>((o.depth - o.tokens + t + 1) * o.n_head);

  // Keys scaled so that scores spread over a few units, as a trained model's do: the softmax
  // then has both large and negligible weights, and new maxima now and then. A million distinct
  // values repeat over a larger cache (the time does not depend on them; drawing billions would).
  std::mt19937 rng(20261204);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // With `cold`, enough copies of the cache that a pass over them all leaves none in any cache
  // (as --matmul --cold): a model's step reads every layer's cache once, after the weights
  // and the other layers have been through the caches, so its keys and values come from memory.
  const std::uint64_t cold_set = std::uint64_t{512} << 20;
  const std::uint64_t copies = o.cold ? std::max<std::uint64_t>(2, (cold_set + kv_bytes - 1) / kv_bytes) : 1;
  if (copies * kv_bytes > max_kv_bytes) {
    return make_error(errc::invalid_argument, "bench --attention --cold: two copies of this cache exceed 8 GiB");
  }
  r.copies = static_cast<int>(copies);
  // In memory as the daemon's cache lies (spite/core/page_memory.hpp: huge pages where allowed).
  const std::size_t n_kv_elements = kv_elements * copies;
  const page_memory k_memory = map_zeroed_pages(n_kv_elements * sizeof(std::uint16_t));
  const page_memory v_memory = map_zeroed_pages(n_kv_elements * sizeof(std::uint16_t));
  const std::span k(reinterpret_cast<std::uint16_t*>(k_memory.get()), n_kv_elements);
  const std::span v(reinterpret_cast<std::uint16_t*>(v_memory.get()), n_kv_elements);
  const std::size_t distinct = std::min<std::size_t>(kv_elements, std::size_t{1} << 20);
  for (std::size_t i = 0; i < distinct; ++i) {
    k[i] = fp32_to_fp16(normal(rng) * 0.5f);
    v[i] = fp32_to_fp16(normal(rng));
  }
  for (std::size_t i = distinct; i < k.size(); ++i) {
    k[i] = k[i % distinct];
    v[i] = v[i % distinct];
  }
  std::vector<float> q(static_cast<std::size_t>(o.tokens * o.n_head * o.head_dim));
  for (auto& x : q) x = normal(rng);
  std::vector<float> out(q.size());
  std::vector<std::int32_t> kv_pos(static_cast<std::size_t>(o.depth)), q_pos(static_cast<std::size_t>(o.tokens));
  for (std::int64_t i = 0; i < o.depth; ++i) kv_pos[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  for (std::int64_t t = 0; t < o.tokens; ++t) q_pos[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(o.depth - o.tokens + t);

  dispatch::attention_args a{};
  a.q = q.data();
  a.out = out.data();
  a.n_tokens = o.tokens;
  a.n_head = o.n_head;
  a.n_head_kv = o.n_head_kv;
  a.head_dim = o.head_dim;
  a.head_dim_v = o.head_dim;
  a.q_pos = q_pos.data();
  a.k = k.data();
  a.v = v.data();
  a.kv_pos = kv_pos.data();
  a.n_kv = o.depth;
  a.scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  a.flash = o.flash;

  thread_pool pool(o.threads);
  r.threads = pool.size();
  const auto& attention = o.ops ? o.ops->attention : dispatch::cpu_reference_ops().attention;
  const auto use_copy = [&](std::uint64_t c) {
    a.k = k.data() + c * kv_elements;
    a.v = v.data() + c * kv_elements;
  };
  for (std::uint64_t c = 0; c < copies; ++c) {
    use_copy(c);
    attention(a, pool);  // warm-up: first-touch pages, lazy tables
  }
  std::vector<double> ms;
  for (int i = 0; i < o.reps; ++i) {
    use_copy(static_cast<std::uint64_t>(i) % copies);
    const auto t0 = std::chrono::steady_clock::now();
    attention(a, pool);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.ms = spread::of(std::move(ms));
  const double s = r.ms.median / 1e3;
  r.ns_per_head_key = s * 1e9 / static_cast<double>(r.visible_pairs);
  r.kv_gbs = static_cast<double>(kv_bytes) / s / 1e9;
  if (o.probes) {
    r.bandwidth_gbs = measure_bandwidth(r.threads);
    if (r.bandwidth_gbs > 0) r.bandwidth_fraction = r.kv_gbs / r.bandwidth_gbs;
  }
  return r;
}

nlohmann::json attention_report::to_json() const {
  return {{"n_head", n_head},
          {"n_head_kv", n_head_kv},
          {"head_dim", head_dim},
          {"depth", depth},
          {"tokens", tokens},
          {"flash_attn", flash},
          {"threads", threads},
          {"reps", reps},
          {"cpu_kernels", dispatch::cpu_kernel_set()},
          {"cpu_decode_fetch", dispatch::cpu_decode_fetch()},
          {"kv_bytes", kv_bytes},
          {"copies", copies},
          {"visible_pairs", visible_pairs},
          {"ms", ms.to_json()},
          {"ns_per_head_key", ns_per_head_key},
          {"kv_gb_per_s", kv_gbs},
          {"bandwidth_gb_per_s", bandwidth_gbs},
          {"bandwidth_fraction", bandwidth_fraction}};
}

}  // namespace spite::bench
