// spitectl inspect, run as a user runs it.
#include <catch2/catch.hpp>
#include <fstream>

#include "process.hpp"
#include "shared_data.hpp"

using spite::test::run_process;
using spite::test::shared_path;

TEST_CASE("inspect prints format, metadata, tensors and totals of a model", "[e2e][inspect]") {
  const auto r = run_process({SPITECTL_PATH, "inspect", shared_path("models/stories260K.gguf").string()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("GGUF v3, alignment 32"));
  CHECK_THAT(r.out, Catch::Contains("architecture  : llama"));
  CHECK_THAT(r.out, Catch::Contains("tokenizer     : SPM (model llama"));
  CHECK_THAT(r.out, Catch::Contains("512 tokens"));
  CHECK_THAT(r.out, Catch::Contains("arr[string,512]"));
  CHECK_THAT(r.out, Catch::Contains("\"<unk>\", \"<s>\", \"</s>\""));
  CHECK_THAT(r.out, Catch::Contains(", ...]"));  // long arrays are abbreviated
  CHECK_THAT(r.out, Catch::Contains("token_embd.weight"));
  CHECK_THAT(r.out, Catch::Contains("tensors (48):"));
  CHECK_THAT(r.out, Catch::Contains("totals per type:"));
}

TEST_CASE("inspect --json gives a machine-readable description", "[e2e][inspect]") {
  const auto r = run_process({SPITECTL_PATH, "inspect", "--json",
                              shared_path("models/derived/split/stories260K-00001-of-00003.gguf").string()});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("version") == 3);
  CHECK(j.at("parts").size() == 3);
  CHECK(j.at("architecture") == "llama");
  CHECK(j.at("tensors").size() == 48);
  CHECK(j.at("totals_per_type").at("F32").at("tensors") == 48);
  std::uint64_t params = 0;
  for (const auto& t : j.at("tensors")) {
    std::uint64_t n = 1;
    for (const auto& d : t.at("shape")) n *= d.get<std::uint64_t>();
    params += n;
  }
  CHECK(j.at("parameters") == params);
  bool found_tokens = false;
  for (const auto& kv : j.at("metadata")) {
    if (kv.at("key") == "tokenizer.ggml.tokens") {
      found_tokens = true;
      CHECK(kv.at("length") == 512);
      CHECK(kv.at("truncated") == true);
    }
  }
  CHECK(found_tokens);
}

TEST_CASE("inspect shows quantized tensor types and their byte totals", "[e2e][inspect]") {
  const auto r = run_process({SPITECTL_PATH, "inspect", "--json",
                              shared_path("models/derived/quants/stories260K-pad256-Q4_K_M.gguf").string()});
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("totals_per_type").at("Q4_K").at("tensors") == 32);
  CHECK(j.at("totals_per_type").at("Q6_K").at("tensors") == 5);
}

TEST_CASE("inspect of a bad file exits non-zero with one clear line", "[e2e][inspect]") {
  spite::test::temp_dir dir;
  const auto bad = dir / "bad.gguf";
  std::ofstream(bad, std::ios::binary) << "GGUF\x03\x00\x00\x00 truncated";
  for (const auto& path : {bad.string(), shared_path("models/derived/stories260K-be.gguf").string(),
                           (dir / "missing.gguf").string()}) {
    const auto r = run_process({SPITECTL_PATH, "inspect", path});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::Contains(path));
  }
  const auto be = run_process({SPITECTL_PATH, "inspect", shared_path("models/derived/stories260K-be.gguf").string()});
  CHECK_THAT(be.err, Catch::Contains("big-endian"));
}

TEST_CASE("spitectl rejects unknown commands and options with usage exit code 2", "[e2e][inspect]") {
  CHECK(run_process({SPITECTL_PATH, "frobnicate"}).exit_code == 2);
  CHECK(run_process({SPITECTL_PATH, "inspect", "--bogus", "x.gguf"}).exit_code == 2);
  CHECK(run_process({SPITECTL_PATH, "inspect"}).exit_code == 2);
  CHECK(run_process({SPITECTL_PATH, "inspect", "--help"}).exit_code == 0);
}
