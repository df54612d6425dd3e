// spitectl bench --attention: one attention call over an F16 KV cache of a given shape and
// depth, random values, timed through the kernel a model's attention takes; figures consistent
// with the shape and the time, and bad shapes refused with a clear error.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "process.hpp"

using nlohmann::json;
using spite::test::run_process;

TEST_CASE("bench --attention times decode and prefill attention and reports ns per head and key and the cache's GB/s") {
  struct run {
    const char* spec;
    std::int64_t heads, kv_heads, dim, depth, tokens;
    bool flash;
  };
  // Decode (one query: the key-by-key path), a batch of 70 queries (the tiled path), the plain
  // kernel, and a head size off the SIMD blocks.
  for (const run c : {run{"8:2:64", 8, 2, 64, 300, 1, true}, run{"4:4:128", 4, 4, 128, 200, 70, true},
                      run{"6:3:64", 6, 3, 64, 100, 3, false}, run{"2:1:40", 2, 1, 40, 90, 1, true}}) {
    const std::string depth = std::to_string(c.depth), tokens = std::to_string(c.tokens);
    INFO(c.spec << " depth " << depth << " tokens " << tokens);
    std::vector<std::string> argv = {SPITECTL_PATH, "bench", "--attention", c.spec, "-d", depth, "--tokens", tokens,
                                     "-t", "2", "-r", "3", "--no-probes", "--json"};
    if (!c.flash) argv.push_back("--no-flash-attn");
    const auto r = run_process(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("n_head") == c.heads);
    CHECK(j.at("n_head_kv") == c.kv_heads);
    CHECK(j.at("head_dim") == c.dim);
    CHECK(j.at("depth") == c.depth);
    CHECK(j.at("tokens") == c.tokens);
    CHECK(j.at("flash_attn") == c.flash);
    CHECK(j.at("threads") == 2);
    CHECK(j.at("reps") == 3);
    CHECK(j.at("kv_bytes").get<std::int64_t>() == 2 * 2 * c.depth * c.kv_heads * c.dim);
    // Causal: query t of T at position depth - T + t sees depth - T + t + 1 keys.
    std::int64_t pairs = 0;
    for (std::int64_t t = 0; t < c.tokens; ++t) pairs += (c.depth - c.tokens + t + 1) * c.heads;
    CHECK(j.at("visible_pairs").get<std::int64_t>() == pairs);
    const double ms = j.at("ms").at("median").get<double>();
    REQUIRE(ms > 0);
    CHECK(j.at("ms").at("min").get<double>() <= ms);
    CHECK(j.at("ns_per_head_key").get<double>() == Approx(ms * 1e6 / static_cast<double>(pairs)).epsilon(1e-9));
    CHECK(j.at("kv_gb_per_s").get<double>() == Approx(j.at("kv_bytes").get<double>() / (ms / 1e3) / 1e9).epsilon(1e-9));
  }

  // With the bandwidth probe: the cache's share of it; and the plain report.
  const auto probed = run_process({SPITECTL_PATH, "bench", "--attention", "4:2:64", "-d", "128", "-t", "1", "-r", "2", "--json"});
  INFO(probed.err);
  REQUIRE(probed.exit_code == 0);
  const json j = json::parse(probed.out);
  CHECK(j.at("bandwidth_gb_per_s").get<double>() > 0);
  CHECK(j.at("bandwidth_fraction").get<double>() ==
        Approx(j.at("kv_gb_per_s").get<double>() / j.at("bandwidth_gb_per_s").get<double>()));
  const auto text = run_process({SPITECTL_PATH, "bench", "--attention", "4:2:64", "-d", "64", "-r", "1", "--no-probes"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("4 heads over 2 kv heads of 64, flash; 1 query at depth 64") != std::string::npos);
  CHECK(text.out.find("ns per query head and key") != std::string::npos);
}

TEST_CASE("bench --attention refuses shapes it cannot run, with the reason") {
  struct bad {
    std::vector<std::string> args;
    const char* says;
  };
  for (const bad& b : {bad{{"--attention", "32:5:64"}, "a whole number of query heads per kv head"},
                      bad{{"--attention", "32:4"}, "HEADS:KV_HEADS:DIM"}, bad{{"--attention", "32:4:x64"}, "HEADS:KV_HEADS:DIM"},
                      bad{{"--attention", "8:2:64", "-d", "10", "--tokens", "11"}, "tokens 1..min(depth, 4096)"},
                      bad{{"--attention", "8:2:2048"}, "head size 1..1024"},
                      bad{{"--attention", "1024:1024:1024", "-d", "1048576"}, "at most 8 GiB"}}) {
    std::vector<std::string> argv = {SPITECTL_PATH, "bench"};
    argv.insert(argv.end(), b.args.begin(), b.args.end());
    argv.push_back("--no-probes");
    const auto r = run_process(argv);
    INFO(r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
}

TEST_CASE("bench --attention --cold rotates over copies of the cache that together exceed the caches") {
  const auto r = run_process({SPITECTL_PATH, "bench", "--attention", "8:2:64", "-d", "1000", "--cold", "-t", "1", "-r", "3",
                              "--no-probes", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  const auto bytes = j.at("kv_bytes").get<std::uint64_t>();
  CHECK(bytes == 2 * 2 * 1000 * 2 * 64);  // one copy's bytes, as without --cold
  const auto copies = j.at("copies").get<std::uint64_t>();
  CHECK(copies * bytes >= std::uint64_t{512} << 20);
  CHECK((copies - 1) * bytes < std::uint64_t{512} << 20);
  CHECK(j.at("ms").at("median").get<double>() > 0);
  const auto warm = run_process({SPITECTL_PATH, "bench", "--attention", "8:2:64", "-d", "1000", "-r", "1", "--no-probes", "--json"});
  REQUIRE(warm.exit_code == 0);
  CHECK(json::parse(warm.out).at("copies") == 1);
  const auto text = run_process({SPITECTL_PATH, "bench", "--attention", "4:2:64", "-d", "4096", "--cold", "-r", "1", "--no-probes"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("copies of the cache (from memory)") != std::string::npos);
  // Two copies of 4.3 GiB exceed the 8 GiB bound: refused before anything is allocated.
  const auto huge = run_process({SPITECTL_PATH, "bench", "--attention", "64:64:128", "-d", "140000", "--cold", "--no-probes"});
  CHECK(huge.exit_code == 2);
  CHECK(huge.err.find("two copies of this cache exceed 8 GiB") != std::string::npos);
}
