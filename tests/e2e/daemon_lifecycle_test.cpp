// spited's model lifecycle and service behaviour as a real process: load and unload on command,
// on-demand loading with keep_alive, the memory estimate refusing what does not fit, SIGHUP
// rereading spite.toml, SIGTERM draining requests in flight, and the bench command.
#include <signal.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "daemon_support.hpp"
#include "process.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using spite::test::background_process;
using spite::test::notify_socket;
using spite::test::raw_client;
using spite::test::run_process;
using spite::test::shared_path;
using spite::test::temp_dir;

namespace {

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// A spite.toml: `stories` preloaded, `tiny` (random weights, so it rarely ends early) on demand.
std::string config_text(const fs::path& dir, const std::string& extra_models = "", const std::string& server = "",
                        const std::string& inference = "") {
  return "[server]\nmax_concurrent = 4\n" + server + "\n[control]\nsocket = \"" + (dir / "ctl.sock").string() +
         "\"\n\n[inference]\nthreads = 1\n" + inference + "\n[[model]]\nname = \"stories\"\npath = \"" +
         fs::absolute(shared_path("models/stories260K.gguf")).string() + "\"\n\n" + extra_models;
}

std::string tiny_model(const std::string& extra = "preload = false\nkeep_alive = 1\n") {
  return "[[model]]\nname = \"tiny\"\npath = \"" + fs::absolute(shared_path("models/llama-2-tiny-random.gguf")).string() + "\"\n" + extra;
}

json models_of(const fs::path& socket) {
  const auto r = run_process({SPITECTL_PATH, "models", "--socket", socket.string(), "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

const json* find_model(const json& models, const std::string& name) {
  for (const auto& m : models) {
    if (m.value("name", "") == name) return &m;
  }
  return nullptr;
}

bool loaded(const fs::path& socket, const std::string& name) {
  const json models = models_of(socket);
  const json* m = find_model(models, name);
  return m != nullptr && m->value("loaded", false);
}

// Sends a long run on `c` and waits for its first token, so that it is in flight.
void start_long_run(raw_client& c, const std::string& model, int n_predict) {
  c.send(json{{"id", 1}, {"cmd", "run"}, {"model", model}, {"prompt", "Once upon a time"}, {"n_predict", n_predict},
              {"temperature", 1.0}, {"seed", 7}}
             .dump() +
         "\n");
  const json first = c.line();
  INFO(first.dump());
  REQUIRE(first.value("event", "") == "token");
}

// Reads the rest of a run: the final line and how many token events came before it.
std::pair<json, int> finish_run(raw_client& c) {
  int tokens = 1;  // start_long_run consumed the first
  for (;;) {
    json j = c.line();
    if (j.value("event", "") == "token") {
      ++tokens;
      continue;
    }
    return {j, tokens};
  }
}

// spited started from a spite.toml in a fresh directory, READY before the test goes on.
struct daemon_under_test {
  temp_dir dir;
  fs::path socket = dir.path() / "ctl.sock";
  fs::path config = dir.path() / "spite.toml";
  notify_socket notify{dir.path() / "notify"};
  std::unique_ptr<background_process> process;
  std::string log() const {
    std::ifstream in(dir.path() / "log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  explicit daemon_under_test(const std::function<std::string(const fs::path& dir)>& make_config) {
    write_file(config, make_config(dir.path()));
    process = std::make_unique<background_process>(std::vector<std::string>{SPITED_PATH, "--port", "0", "--config", config.string()},
                                                   (dir.path() / "log").string(),
                                                   std::vector<std::string>{"NOTIFY_SOCKET=" + notify.path.string()});
    REQUIRE(notify.wait_for("READY=1"));
  }
};

}  // namespace

TEST_CASE("models load on demand, unload after keep_alive, and load and unload on command") {
  daemon_under_test t([](const fs::path& d) { return config_text(d, tiny_model()); });
  const fs::path& socket = t.socket;

  // Preloaded models are in memory at READY; on-demand ones are listed as available.
  json models = models_of(socket);
  REQUIRE(find_model(models, "stories") != nullptr);
  CHECK(find_model(models, "stories")->value("loaded", false));
  CHECK(find_model(models, "stories")->at("memory").value("total", 0ULL) > 0);
  REQUIRE(find_model(models, "tiny") != nullptr);
  CHECK_FALSE(find_model(models, "tiny")->value("loaded", true));

  // A request for `tiny` loads it.
  const auto run = run_process({SPITECTL_PATH, "run", "--socket", socket.string(), "--model", "tiny", "--prompt", "Hello",
                                "-n", "4", "--temperature", "0"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err, Catch::Contains("spited"));
  models = models_of(socket);
  REQUIRE(find_model(models, "tiny") != nullptr);
  CHECK(find_model(models, "tiny")->value("on_demand", false));

  // keep_alive = 1: idle for a second, it goes.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (loaded(socket, "tiny") && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100ms);
  CHECK_FALSE(loaded(socket, "tiny"));
  CHECK(loaded(socket, "stories"));  // preloaded models stay

  // load and unload by command; unknown names are refused with the known ones.
  auto r = run_process({SPITECTL_PATH, "load", "tiny", "--keep-alive", "-1", "--socket", socket.string()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("loaded tiny"));
  CHECK(loaded(socket, "tiny"));
  r = run_process({SPITECTL_PATH, "load", "other", "--path", shared_path("models/stories260K.gguf").string(), "--socket",
                   socket.string()});
  CHECK(r.exit_code == 0);
  CHECK(loaded(socket, "other"));
  r = run_process({SPITECTL_PATH, "unload", "other", "--socket", socket.string()});
  CHECK(r.exit_code == 0);
  CHECK_FALSE(loaded(socket, "other"));
  r = run_process({SPITECTL_PATH, "unload", "nope", "--socket", socket.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("no model 'nope'"));
  r = run_process({SPITECTL_PATH, "load", "nope", "--socket", socket.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("give \"path\""));
}

TEST_CASE("a model unloaded during a request stays until the request finishes") {
  daemon_under_test t([](const fs::path& d) { return config_text(d, tiny_model("preload = true\n")); });
  const fs::path& socket = t.socket;
  raw_client streaming(socket);
  start_long_run(streaming, "tiny", 600);
  raw_client control(socket);
  control.send(R"({"id": 2, "cmd": "unload", "model": "tiny"})" "\n");
  const json unloaded = control.line();
  INFO(unloaded.dump());
  REQUIRE(unloaded.value("event", "") == "result");
  CHECK(unloaded["result"].value("requests_finishing", 0) == 1);
  // It is still in spite.toml, so a new request loads it again (a second copy, on demand) while
  // the running one completes on the first with every token.
  control.send(R"({"id": 3, "cmd": "run", "model": "tiny", "prompt": "x", "n_predict": 1})" "\n");
  json again = control.line();
  while (again.value("event", "") == "token") again = control.line();
  INFO(again.dump());
  CHECK(again.value("event", "") == "result");
  const auto [final_line, tokens] = finish_run(streaming);
  INFO(final_line.dump());
  REQUIRE(final_line.value("event", "") == "result");
  CHECK(final_line["result"].value("generated", 0) == tokens);
  CHECK(tokens > 1);
}

TEST_CASE("a model whose memory estimate does not fit is refused with the numbers") {
  // 3 MiB with n_ctx 64: stories (about 2.3 MiB with its KV memory and scratch) fits, tiny (1.7
  // MiB) does not fit beside it.
  daemon_under_test t([](const fs::path& d) { return config_text(d, tiny_model(), "", "memory_limit_mib = 3\nn_ctx = 64\n"); });
  const fs::path& socket = t.socket;
  const auto r = run_process({SPITECTL_PATH, "load", "tiny", "--socket", socket.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("model 'tiny' needs"));
  CHECK_THAT(r.err, Catch::Contains("weights"));
  CHECK_THAT(r.err, Catch::Contains("memory_limit_mib"));
  // The daemon keeps serving the model it has.
  const auto run = run_process({SPITECTL_PATH, "run", "--socket", socket.string(), "--model", "stories", "--prompt",
                                "Once", "-n", "4"});
  CHECK(run.exit_code == 0);
  CHECK_FALSE(loaded(socket, "tiny"));
}

TEST_CASE("SIGHUP rereads spite.toml, and a broken file leaves the running configuration") {
  daemon_under_test t([](const fs::path& d) { return config_text(d); });
  const fs::path& socket = t.socket;
  notify_socket& notify = t.notify;
  background_process& d = *t.process;
  const fs::path& config = t.config;
  const fs::path dir = t.dir.path();
  CHECK(find_model(models_of(socket), "tiny") == nullptr);

  write_file(config, config_text(dir, tiny_model("preload = true\n")));
  notify.received.clear();
  d.signal(SIGHUP);
  REQUIRE(notify.wait_for("RELOADING=1"));
  REQUIRE(notify.wait_for("READY=1"));
  CHECK(loaded(socket, "tiny"));

  // A typo: refused as a whole, the daemon keeps what it had and keeps serving.
  write_file(config, config_text(dir, tiny_model("preload = true\nkeep_alvie = 3\n")));
  notify.received.clear();
  d.signal(SIGHUP);
  REQUIRE(notify.wait_for("READY=1"));
  CHECK(loaded(socket, "tiny"));
  const auto r = run_process({SPITECTL_PATH, "reload", "--socket", socket.string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("keep_alvie"));

  // Removing a configured model from the file unloads it.
  write_file(config, config_text(dir));
  const auto ok = run_process({SPITECTL_PATH, "reload", "--socket", socket.string()});
  CHECK(ok.exit_code == 0);
  CHECK(find_model(models_of(socket), "tiny") == nullptr);
  CHECK(loaded(socket, "stories"));
}

TEST_CASE("SIGTERM lets requests in flight finish and refuses new ones") {
  daemon_under_test t([](const fs::path& d) { return config_text(d, tiny_model("preload = true\n")); });
  const fs::path& socket = t.socket;
  notify_socket& notify = t.notify;
  background_process& d = *t.process;
  raw_client streaming(socket);
  start_long_run(streaming, "tiny", 400);
  raw_client late(socket);  // connected before the signal
  d.signal(SIGTERM);
  REQUIRE(notify.wait_for("STOPPING=1"));
  late.send(R"({"id": 5, "cmd": "run", "model": "stories", "prompt": "x", "n_predict": 1})" "\n");
  const json refused = late.line();
  INFO(refused.dump());
  CHECK(refused.value("event", "") == "error");
  CHECK(refused["error"].value("code", "") == "shutting_down");
  const auto [final_line, tokens] = finish_run(streaming);
  INFO(final_line.dump());
  CHECK(final_line.value("event", "") == "result");
  CHECK(final_line["result"].value("generated", 0) == tokens);
  const int exit_code = d.wait(20000);
  INFO(t.log());
  CHECK(exit_code == 0);
}

TEST_CASE("a request still running when shutdown_timeout_s ends is cancelled with an error") {
  daemon_under_test t([](const fs::path& d) { return config_text(d, tiny_model("preload = true\n"), "shutdown_timeout_s = 0\n"); });
  const fs::path& socket = t.socket;
  background_process& d = *t.process;
  raw_client streaming(socket);
  start_long_run(streaming, "tiny", 3000);
  d.signal(SIGTERM);
  const auto [final_line, tokens] = finish_run(streaming);
  INFO(final_line.dump());
  CHECK(final_line.value("event", "") == "error");
  CHECK(final_line["error"].value("code", "") == "shutting_down");
  CHECK(tokens < 3000);
  const int exit_code = d.wait(20000);
  INFO(t.log());
  CHECK(exit_code == 0);
}

// --profile's ops of a pass (a decode step, or a prefill of the prompt in one batch) for
// stories260K (5 layers of 64 wide, q / k / v of 64 + 32 + 32 rows and gate / up of 172 + 172
// each run as one product, F32): each op's calls per pass, and the weight bytes of a matmul.
void check_stories_profile(const json& profile, std::int64_t passes, std::int64_t tokens_per_pass) {
  INFO(profile.dump());
  CHECK(profile.value("passes", 0) == passes);
  double ops_ms = 0;
  std::map<std::string, json> by_op;
  for (const json& op : profile.at("ops")) {
    ops_ms += op.value("ms_per_pass", 0.0);
    by_op[op.value("op", "")] = op;
  }
  CHECK(by_op.at("matmul F32 64x128").value("calls_per_pass", 0.0) == 5.0);
  CHECK(by_op.at("matmul F32 64x344").value("weight_bytes_per_pass", 0.0) == 5.0 * 344 * 64 * 4);
  CHECK(by_op.at("matmul F32 172x64").value("calls_per_pass", 0.0) == 5.0);
  CHECK(by_op.at("matmul F32 64x512").value("calls_per_pass", 0.0) == 1.0);  // the output (tied to the embedding)
  CHECK(by_op.at("attention").value("calls_per_pass", 0.0) == 5.0);
  CHECK(by_op.at("rms_norm").value("calls_per_pass", 0.0) == 11.0);
  CHECK(by_op.at("matmul F32 64x64").value("gb_per_s", 0.0) > 0);
  // Its FLOP/s over its time per pass: 2 x 64 x 64 per activation row and layer.
  const json& o = by_op.at("matmul F32 64x64");
  CHECK(o.value("gflop_per_s", 0.0) * o.value("ms_per_pass", 0.0) * 1e6 ==
        Approx(5.0 * 2 * 64 * 64 * static_cast<double>(tokens_per_pass)).epsilon(1e-6));
  // One thread runs the ops one after the other: their times fit in the step's.
  CHECK(ops_ms > 0);
  CHECK(ops_ms <= profile.value("pass_ms", 0.0));
}

TEST_CASE("spitectl bench measures a model in-process and in spited, with the machine's roofline and a profile of its passes") {
  const auto local = run_process({SPITECTL_PATH, "bench", "--model", shared_path("models/stories260K.gguf").string(), "-p",
                                  "32", "-n", "16", "-r", "2", "-t", "1", "--profile", "--json"});
  INFO(local.err);
  REQUIRE(local.exit_code == 0);
  const json l = json::parse(local.out);
  CHECK(l.value("where", "") == "in-process");
  CHECK(l["pp_tokens_per_s"].value("median", 0.0) > 0);
  CHECK(l["tg_tokens_per_s"].value("median", 0.0) > 0);
  CHECK(l.value("bandwidth_gb_per_s", 0.0) > 0);
  CHECK(l.value("peak_gflop_per_s", 0.0) > 0);
  CHECK(l.value("decode_roofline_fraction", 0.0) > 0);
  // The bandwidth is probed after each decode repetition, each repetition's fraction against
  // its own probe; the reported figures are the medians of those.
  const json bandwidths = l.at("bandwidth_gb_per_s_runs"), fractions = l.at("decode_roofline_fraction_runs");
  CHECK(bandwidths.at("min").get<double>() > 0);
  CHECK(bandwidths.at("min").get<double>() <= l.value("bandwidth_gb_per_s", 0.0));
  CHECK(l.value("bandwidth_gb_per_s", 0.0) <= bandwidths.at("max").get<double>());
  CHECK(fractions.at("min").get<double>() > 0);
  CHECK(fractions.at("median").get<double>() == Approx(l.value("decode_roofline_fraction", 0.0)));
  // Each probe reads both ways (one stream per thread, two in step) and keeps the faster: over
  // the repetitions the fastest probe is the fastest read of either way.
  const json one_stream = l.at("bandwidth_one_stream_gb_per_s_runs"), two_streams = l.at("bandwidth_two_streams_gb_per_s_runs");
  CHECK(one_stream.value("min", 0.0) > 0);
  CHECK(two_streams.value("min", 0.0) > 0);
  CHECK(bandwidths.at("max").get<double>() ==
        Approx(std::max(one_stream.value("max", 0.0), two_streams.value("max", 0.0))));
  CHECK(bandwidths.at("min").get<double>() >= std::max(one_stream.value("min", 0.0), two_streams.value("min", 0.0)));
  // Each repetition's fraction is its tokens/s times the bytes a token reads over its bandwidth:
  // the extremes bound what the extremes of both allow.
  const double bytes = static_cast<double>(l.value("bytes_per_token", 0ULL));
  const json tg = l.at("tg_tokens_per_s");
  CHECK(fractions.at("max").get<double>() <=
        Approx(tg.at("max").get<double>() * bytes / (bandwidths.at("min").get<double>() * 1e9)));
  CHECK(fractions.at("min").get<double>() >=
        Approx(tg.at("min").get<double>() * bytes / (bandwidths.at("max").get<double>() * 1e9)));
  CHECK(l.value("prefill_peak_fraction", 0.0) > 0);
  CHECK(l.value("bytes_per_token", 0ULL) > 0);
  // The step's matmuls' weights, read plainly op by op after each repetition: every matrix a
  // token reads (all of a token's bytes but the norms' vectors), one read per matmul (5 layers
  // of 7 matrices and the output), and the decode's pace against that read's. Where the AVX-512
  // kernels lay F32 matrices out in 16-row groups, a layer's q, k and v lie together and are
  // read as one (the 172-row gate and up and the 172-element rows of down keep the file's
  // layout): 5 reads a layer.
  const auto read_bytes = static_cast<double>(l.value("token_read_bytes", 0ULL));
  CHECK(read_bytes <= static_cast<double>(l.value("bytes_per_token", 0ULL)));
  CHECK(read_bytes >= 0.99 * static_cast<double>(l.value("bytes_per_token", 0ULL)));
  CHECK(l.value("token_read_ops", 0) == (l.value("cpu_kernels", "") == "avx512-vnni" ? 26 : 36));
  const json reads = l.at("token_read_gb_per_s"), paces = l.at("decode_of_token_read_runs");
  CHECK(reads.value("min", 0.0) > 0);
  CHECK(l.at("token_stream_gb_per_s").value("min", 0.0) > 0);  // the same bytes as one read
  CHECK(paces.value("min", 0.0) > 0);
  CHECK(paces.value("min", 0.0) <= l.value("decode_of_token_read", -1.0));
  CHECK(l.value("decode_of_token_read", 0.0) <= paces.value("max", -1.0));
  check_stories_profile(l.at("profile"), 2 * 16, 1);         // 16 decode steps in each of 2 repetitions
  check_stories_profile(l.at("prefill_profile"), 2, 32);     // a prefill of 32 tokens in each
  // An F32 model's products are all float: its compute roofline is the f32 FMA peak alone.
  CHECK(l.value("flops_8bit_per_token", -1.0) == 0);
  CHECK(l.value("prefill_roofline_fraction", 0.0) == Approx(l.value("prefill_peak_fraction", 0.0)));
  // A Q8_0 model's are all 8-bit (every 2-D weight is Q8_0): its roofline is the 8-bit peak.
  const auto q8 = run_process({SPITECTL_PATH, "bench", "--model",
                               shared_path("models/derived/quants/stories260K-pad256-pure-Q8_0.gguf").string(), "-p", "32",
                               "-n", "4", "-r", "1", "-t", "1", "--json"});
  INFO(q8.err);
  REQUIRE(q8.exit_code == 0);
  const json q = json::parse(q8.out);
  CHECK(q.value("flops_8bit_per_token", 0.0) == q.value("flops_per_token", -1.0));
  CHECK(q.value("peak_int8_gop_per_s", 0.0) > 0);
  CHECK(q.value("prefill_roofline_fraction", 0.0) ==
        Approx(q["pp_tokens_per_s"].value("median", 0.0) * q.value("flops_per_token", 0.0) /
               (q.value("peak_int8_gop_per_s", 0.0) * 1e9)));

  daemon_under_test t([](const fs::path& d) { return config_text(d); });
  const fs::path& socket = t.socket;
  const auto remote = run_process({SPITECTL_PATH, "bench", "--model", "stories", "--socket", socket.string(), "-p", "32",
                                   "-n", "16", "-d", "40", "-r", "2", "--parallel", "3", "--no-probes", "--profile", "--json"});
  INFO(remote.err);
  REQUIRE(remote.exit_code == 0);
  const json r = json::parse(remote.out);
  CHECK(r.value("model", "") == "stories");
  CHECK(r.value("parallel", 0) == 3);
  CHECK(r.value("depth", 0) == 40);  // decode measured after 40 tokens of context per sequence
  // The parallel run's steps are profiled (three tokens each), not those of the sequence alone.
  CHECK(r.at("profile").value("passes", 0) == 2 * 16);
  CHECK(!r.at("profile").at("ops").empty());
  CHECK(r["tg_tokens_per_s"].value("median", 0.0) > 0);
  CHECK(r.value("load_s", -1.0) >= 0);
  // One sequence alone is timed in each repetition beside the three: each repetition's ratio
  // lies within what the extremes of both allow, and the reported scaling is their median.
  const json single = r.at("single_sequence_tokens_per_s");
  const json scaling = r.at("parallel_scaling_runs");
  CHECK(single.value("median", 0.0) > 0);
  CHECK(scaling.value("min", 0.0) <= r.value("parallel_scaling", -1.0));
  CHECK(r.value("parallel_scaling", 0.0) <= scaling.value("max", -1.0));
  CHECK(scaling.value("max", 0.0) <= Approx(r["tg_tokens_per_s"].value("max", 0.0) / single.value("min", 1.0)));
  CHECK(scaling.value("min", 0.0) >= Approx(r["tg_tokens_per_s"].value("min", 0.0) / single.value("max", 1.0)));
  const auto text = run_process({SPITECTL_PATH, "bench", "--model", "stories", "--socket", socket.string(), "-p", "16",
                                 "-n", "8", "-d", "24", "-r", "1", "--no-probes"});
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("pp16"));
  CHECK_THAT(text.out, Catch::Contains("tg8 @ d24"));
  CHECK_THAT(text.out, !Catch::Contains("one sequence"));  // one sequence: nothing to compare with
  // Without probes there is no measured bandwidth or peak: no fraction of one is printed.
  CHECK_THAT(text.out, Catch::Contains("not probed"));
  CHECK_THAT(text.out, !Catch::Contains("% of"));
  const auto parallel_text = run_process({SPITECTL_PATH, "bench", "--model", "stories", "--socket", socket.string(), "-p",
                                          "0", "-n", "8", "-r", "1", "--parallel", "2", "--no-probes"});
  CHECK(parallel_text.exit_code == 0);
  CHECK_THAT(parallel_text.out, Catch::Contains("tg8 x2"));
  CHECK_THAT(parallel_text.out, Catch::Contains("tg8 x1"));
  CHECK_THAT(parallel_text.out, Catch::Contains("x2 is "));
  const auto bad = run_process({SPITECTL_PATH, "bench", "--model", "stories", "--socket", socket.string(), "-r", "0"});
  CHECK(bad.exit_code == 2);
}
