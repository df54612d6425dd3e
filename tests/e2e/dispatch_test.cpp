// spitectl dispatch and spitectl verify (and tools/verify/verify.py) as a user runs them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "process.hpp"
#include "shared_data.hpp"
#include "spite/dispatch/devices.hpp"

using spite::test::run_process;
using spite::test::shared_path;

namespace {

const std::string k_v4_plugin =
    std::string(SPITE_BUILD_KERNEL_DIR) + "/llama/llama3/x86_64_v4/libspite_kernel_llama_llama3_x86_64_v4.so";

bool v4_here() { return spite::dispatch::detect_cpu().x86_level >= 4; }

nlohmann::json dispatch_json(const std::string& model, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{SPITECTL_PATH, "dispatch", "-m", shared_path(model).string(), "--kernels",
                                SPITE_BUILD_KERNEL_DIR, "--json", "--explain"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto r = run_process(argv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& op_entry(const nlohmann::json& j, const std::string& op) {
  for (const auto& e : j.at("kernels")) {
    if (e.at("op") == op) return e;
  }
  FAIL("no entry for " << op);
  throw;
}

}  // namespace

TEST_CASE("spitectl dispatch prints the model, the machine and a kernel per op") {
  const auto r = run_process({SPITECTL_PATH, "dispatch", "-m", shared_path("models/tiny/tiny-llama3.f32.gguf").string(),
                              "--kernels", SPITE_BUILD_KERNEL_DIR});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("model arch   : llama (kernels: llama/llama3)\ncard         : this machine"));
  CHECK_THAT(r.out, Catch::Contains("cpu arch     : " + spite::dispatch::detect_cpu().isa()));
  CHECK_THAT(r.out, Catch::Contains("kernels      :\n  rms_norm           → "));
  CHECK_THAT(r.out, Catch::Contains("  matmul F32         → "));
  CHECK_THAT(r.out, Catch::Contains("  attention_decode   → built-in generic/generic/"));
}

TEST_CASE("on an x86-64-v4 machine the llama3 AVX-512 plug-in serves Llama 3 and not Llama 2") {
  if (!v4_here()) {
    WARN("this CPU is below x86-64-v4: the plug-in is not built here");
    return;
  }
  const auto llama3 = dispatch_json("models/tiny/tiny-llama3.f32.gguf");
  CHECK(llama3.at("kernel_family") == "llama/llama3");
  for (const char* op : {"rms_norm", "swiglu", "matmul F32"}) {
    INFO(op);
    CHECK(op_entry(llama3, op).at("source") == "llama/llama3/x86_64_v4");
  }
  const auto& rms = op_entry(llama3, "rms_norm");
  CHECK(rms.at("kernel") == "rms_norm_avx512");
  REQUIRE(rms.at("candidates").size() == 2);
  CHECK(rms.at("candidates")[1].at("source") == "builtin");
  CHECK(rms.at("candidates")[1].at("reason") == "a plug-in wins");
  // Q8_0 weights are not the plug-in's: its kernel is listed as refused.
  const auto q8 = dispatch_json("models/tiny/tiny-llama3.q8_0.gguf");
  const auto& mm = op_entry(q8, "matmul Q8_0");
  CHECK(mm.at("source") == "builtin");
  CHECK_THAT(mm.at("candidates")[1].at("reason").get<std::string>(), Catch::Contains("does not handle weight type 8"));

  const auto llama2 = dispatch_json("models/stories260K.gguf");
  CHECK(llama2.at("kernel_family") == "llama/llama2");
  const auto& rms2 = op_entry(llama2, "rms_norm");
  CHECK(rms2.at("source") == "builtin");
  CHECK(rms2.at("candidates")[1].at("reason") == "for llama/llama3, not llama/llama2");
}

TEST_CASE("spitectl dispatch --card plans for a card that is not here") {
  const auto j = dispatch_json("models/tiny/tiny-llama3.q8_0.gguf", {"--card", "rtx_4090"});
  CHECK(j.at("card").at("name") == "RTX_4090");
  CHECK(j.at("target").at("device") == "cuda");
  CHECK(j.at("target").at("arch") == "sm_89");
  CHECK(j.at("target").at("archs")[1] == "sm_87");
  const auto text = run_process({SPITECTL_PATH, "dispatch", "-m", shared_path("models/tiny/tiny-llama3.q8_0.gguf").string(),
                                 "--card", "RTX_4090"});
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("card         : rtx_4090 (24 GiB)\ngpu arch     : sm_89\n"));
  CHECK_THAT(text.out, Catch::Contains("→ CPU fallback, built-in generic/generic/"));
}

TEST_CASE("spitectl dispatch refuses an unknown card with close names, and a bad model with its reason") {
  const auto typo = run_process({SPITECTL_PATH, "dispatch", "-m", shared_path("models/stories260K.gguf").string(),
                                 "--card", "rtx4909"});
  CHECK(typo.exit_code == 1);
  CHECK_THAT(typo.err, Catch::Contains("unknown card 'rtx4909'; did you mean RTX_4090"));
  const auto apple = run_process({SPITECTL_PATH, "dispatch", "-m", shared_path("models/stories260K.gguf").string(),
                                  "--card", "M1_MAX"});
  CHECK(apple.exit_code == 1);
  CHECK_THAT(apple.err, Catch::Contains("not supported by spited"));
  // Not a file: a model name for spited, and none answers on this socket.
  const auto missing = run_process({SPITECTL_PATH, "dispatch", "-m", "/nonexistent.gguf", "--socket", "/nonexistent.sock"});
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("cannot reach spited at /nonexistent.sock"));
  CHECK(run_process({SPITECTL_PATH, "dispatch"}).exit_code == 2);
}

TEST_CASE("spitectl verify passes a correct library and fails a wrong one, and verify.py agrees") {
  const std::string wrong = std::string(SPITE_FIXTURE_DIR) + "/wrong_result.so";
  const auto bad = run_process({SPITECTL_PATH, "verify", wrong});
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.out, Catch::Contains("FAIL: error above tolerance"));
  CHECK_THAT(bad.out, Catch::Contains("0 passed, 21 failed"));
  const auto good = run_process({SPITECTL_PATH, "verify", std::string(SPITE_FIXTURE_DIR) + "/good_generic.so", "--json"});
  CHECK(good.exit_code == 0);
  const auto j = nlohmann::json::parse(good.out);
  CHECK(j.at("failed") == 0);
  CHECK(j.at("passed") == 21);  // 7 sizes (odd ones included) x 3 row counts
  bool odd = false;
  for (const auto& c : j.at("cases")) odd = odd || c.at("shape") == "769x17";
  CHECK(odd);

  const auto py_bad = run_process({"python3", SPITE_SOURCE_DIR "/tools/verify/verify.py", wrong, "--quick", "--spitectl", SPITECTL_PATH});
  CHECK(py_bad.exit_code == 1);
  CHECK_THAT(py_bad.out, Catch::Contains("0 passed, 4 failed"));
  if (v4_here()) {
    const auto py_good = run_process({"python3", SPITE_SOURCE_DIR "/tools/verify/verify.py", k_v4_plugin, "--spitectl", SPITECTL_PATH});
    INFO(py_good.out << py_good.err);
    CHECK(py_good.exit_code == 0);
    CHECK_THAT(py_good.out, Catch::Contains(" 0 failed"));
  }
  const auto missing = run_process({SPITECTL_PATH, "verify", "/nonexistent.so"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("/nonexistent.so: cannot open"));
}
