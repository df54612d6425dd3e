// spited as a real process: sd_notify on a socket the test owns, the control socket with good
// and bad clients, kernel hot reload seen through spitectl, SIGHUP and SIGTERM, and socket
// activation through systemd-socket-activate.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "process.hpp"
#include "shared_data.hpp"
#include "kernel_fixtures.hpp"
#include "daemon_support.hpp"
#include <atomic>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using spite::test::background_process;
using spite::test::run_process;
using spite::test::shared_path;
using spite::test::temp_dir;
using spite::test::notify_socket;
using spite::test::raw_client;
using spite::test::wait_for_file;

namespace {

nlohmann::json dispatch_via(const fs::path& socket, const std::string& model) {
  const auto r = run_process({SPITECTL_PATH, "dispatch", "-m", model, "--socket", socket.string(), "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

std::string rms_source(const nlohmann::json& d) {
  for (const auto& e : d.at("kernels")) {
    if (e.at("op") == "rms_norm") return e.at("source").get<std::string>() + "/" + e.at("kernel").get<std::string>();
  }
  return {};
}

void install(const fs::path& kernels, const std::string& name, const std::string& where, const std::string& as) {
  spite::test::install_fixture(kernels, SPITE_FIXTURE_DIR, name, where, as);
}

// Polls spited until rms_norm is served by `want`; the time it took, or -1 ms.
std::chrono::milliseconds until_rms_is(const fs::path& socket, const std::string& want) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (rms_source(dispatch_via(socket, "stories")) == want) return elapsed;
    if (elapsed > 5s) return -1ms;
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

TEST_CASE("spited tells systemd it is ready, reloads on SIGHUP and stops on SIGTERM") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  notify_socket notify(dir.path() / "notify");
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string(), "--kernels", (dir.path() / "kernels").string()},
                       (dir.path() / "log").string(), {"NOTIFY_SOCKET=" + notify.path.string(), "WATCHDOG_USEC=400000",
                                                     "WATCHDOG_PID=" + std::to_string(::getpid())});
  // WATCHDOG_PID names another process, so spited must not ping (sd_watchdog_enabled checks it).
  REQUIRE(notify.wait_for("READY=1"));
  CHECK_THAT(notify.received, Catch::Contains("STATUS=loading models"));
  CHECK_THAT(notify.received, Catch::Contains("STATUS=serving"));
  CHECK(notify.received.find("WATCHDOG=1") == std::string::npos);
  struct stat st {};
  REQUIRE(::stat(socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);

  const auto status = run_process({SPITECTL_PATH, "status", "--socket", socket.string()});
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("running"));
  CHECK_THAT(status.out, Catch::Contains("stories"));

  d.signal(SIGHUP);
  REQUIRE(notify.wait_for("RELOADING=1"));
  CHECK_THAT(notify.received, Catch::Contains("MONOTONIC_USEC="));
  d.signal(SIGTERM);
  REQUIRE(notify.wait_for("STOPPING=1"));
  CHECK(d.wait(20000) == 0);
  CHECK_FALSE(fs::exists(socket));
}

TEST_CASE("a control socket path too long to stage beside it is bound in place, with its mode") {
  temp_dir dir;
  // A 97-byte directory and a 2-byte name: the socket's path (100 bytes) fits an address (108),
  // the staging one in the directory (a 9-byte directory and the name "s" more) would not.
  const std::string base = (dir.path() / "").string();
  REQUIRE(base.size() < 90);
  const fs::path parent = base + std::string(97 - base.size(), 'd');
  fs::create_directories(parent);
  const fs::path socket = parent / "cs";
  REQUIRE(socket.string().size() == 100);
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string()},
                       (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  // Bound in place, the socket appears before it is opened to its mode: asked until it answers.
  auto status = run_process({SPITECTL_PATH, "status", "--socket", socket.string()});
  for (int i = 0; i < 100 && status.exit_code != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    status = run_process({SPITECTL_PATH, "status", "--socket", socket.string()});
  }
  CHECK(status.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat(socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(std::distance(fs::directory_iterator(parent), fs::directory_iterator()) == 1);  // the socket alone
}

TEST_CASE("spited pings the watchdog at half its interval") {
  temp_dir dir;
  notify_socket notify(dir.path() / "notify");
  background_process d({SPITED_PATH, "--port", "0", "--socket", (dir.path() / "ctl.sock").string()}, (dir.path() / "log").string(),
                       {"NOTIFY_SOCKET=" + notify.path.string(), "WATCHDOG_USEC=200000"});
  REQUIRE(notify.wait_for("READY=1"));
  CHECK(notify.wait_for("WATCHDOG=1", 5s));
}

TEST_CASE("bad control lines get errors while other clients keep working") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string()},
                       (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  raw_client bad(socket), good(socket);
  bad.send("this is not json\n");
  CHECK(bad.line().at("error").at("code") == "bad_request");
  bad.send("{\"cmd\":\"status\"}\n");
  CHECK_THAT(bad.line().at("error").at("message").get<std::string>(), Catch::Contains("\"id\""));
  bad.send("{\"id\":5}\n");
  auto j = bad.line();
  CHECK(j.at("id") == 5);
  CHECK_THAT(j.at("error").at("message").get<std::string>(), Catch::Contains("\"cmd\""));
  bad.send("{\"id\":6,\"cmd\":\"make-coffee\"}\n");
  CHECK(bad.line().at("error").at("code") == "unknown_command");
  bad.send(std::string(2 << 20, 'x'));  // over the 1 MiB line limit, no newline yet
  CHECK(bad.line().at("error").at("code") == "too_large");
  bad.send("\n{\"id\":7,\"cmd\":\"dispatch\",\"model\":\"nope\"}\n");
  j = bad.line();
  CHECK(j.at("error").at("code") == "not_found");
  CHECK_THAT(j.at("error").at("message").get<std::string>(), Catch::Contains("known: stories"));

  good.send("{\"id\":\"a\",\"cmd\":\"status\"}\n");
  j = good.line();
  CHECK(j.at("id") == "a");
  CHECK(j.at("event") == "result");
  CHECK(j.at("result").at("models")[0].at("name") == "stories");
  // The bad connection is still usable.
  bad.send("{\"id\":8,\"cmd\":\"models\"}\n");
  CHECK(bad.line().at("event") == "result");
}

TEST_CASE("kernel libraries added, replaced, broken and removed take effect in a running spited") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock", kernels = dir.path() / "kernels";
  fs::create_directories(kernels);
  ::chmod(kernels.c_str(), 0755);
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string(), "--kernels", kernels.string()},
                       (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  CHECK(rms_source(dispatch_via(socket, "stories")) == "builtin/reference");

  install(kernels, "good_generic", "generic/generic/x86_64", "rms");
  const auto added = until_rms_is(socket, "generic/generic/x86_64/rms_norm_fixture");
  CHECK(added >= 0ms);
  std::printf("hot reload: added library visible through spitectl after %lld ms\n", static_cast<long long>(added.count()));

  install(kernels, "high_score", "generic/generic/x86_64", "rms");
  CHECK(until_rms_is(socket, "generic/generic/x86_64/rms_norm_high") >= 0ms);

  install(kernels, "no_entry", "llama/llama2/x86_64", "broken");
  install(kernels, "garbage_probe", "llama/llama2/x86_64", "garbage");
  std::this_thread::sleep_for(500ms);
  const auto status = run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"});
  REQUIRE(status.exit_code == 0);
  const auto s = nlohmann::json::parse(status.out);
  bool refused = false;
  for (const auto& r : s.at("kernels").at("refused")) {
    refused = refused || r.at("reason").get<std::string>().find("no entry symbol") != std::string::npos;
  }
  CHECK(refused);
  // The garbage probe loaded (its self-test passes) but never wins; spited keeps serving.
  CHECK(rms_source(dispatch_via(socket, "stories")) == "generic/generic/x86_64/rms_norm_high");

  fs::remove(kernels / "generic/generic/x86_64/rms.so");
  CHECK(until_rms_is(socket, "builtin/reference") >= 0ms);
  const auto reload = run_process({SPITECTL_PATH, "reload", "--socket", socket.string()});
  CHECK(reload.exit_code == 0);
  CHECK(d.running());
}

TEST_CASE("spited serves a control socket passed by systemd socket activation") {
  temp_dir dir;
  const fs::path socket = dir.path() / "activated.sock";
  background_process activator({"systemd-socket-activate", "-l", socket.string(), "--fdname=control", SPITED_PATH, "--port", "0"},
                               (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  const auto status = run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"});
  INFO(status.err);
  REQUIRE(status.exit_code == 0);
  CHECK(nlohmann::json::parse(status.out).at("state") == "running");
}

TEST_CASE("spitectl says when no spited answers") {
  const auto r = run_process({SPITECTL_PATH, "status", "--socket", "/nonexistent/spited.sock"});
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("cannot reach spited at /nonexistent/spited.sock"));
}

TEST_CASE("spited starts from spite.toml and refuses a bad one with file, line and exit code 78") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  {
    std::ofstream f(dir.path() / "spite.toml");
    // Relative paths in the file are relative to the file, so the model's is made absolute.
    f << "[control]\nsocket = \"" << socket.string() << "\"\nmode = \"0600\"\n\n[[model]]\nname = \"tiny\"\npath = \""
      << fs::absolute(shared_path("models/stories260K.gguf")).string() << "\"\n";
  }
  {
    background_process d({SPITED_PATH, "--port", "0", "--config", (dir.path() / "spite.toml").string()}, (dir.path() / "log").string());
    const bool up = wait_for_file(socket);
    if (!up) {
      std::ifstream log(dir.path() / "log");
      FAIL("spited did not start: " << std::string(std::istreambuf_iterator<char>(log), {}));
    }
    // The socket appears only once it listens with its mode (it is set up in a private staging
    // directory and renamed into place): checked at once after it appeared, and nothing of the
    // staging is left.
    struct stat st {};
    REQUIRE(::stat(socket.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    std::set<std::string> entries;
    for (const auto& e : fs::directory_iterator(dir.path())) entries.insert(e.path().filename().string());
    CHECK(entries == std::set<std::string>{"ctl.sock", "log", "spite.toml"});
    const auto models = run_process({SPITECTL_PATH, "models", "--socket", socket.string()});
    CHECK(models.exit_code == 0);
    CHECK_THAT(models.out, Catch::StartsWith("tiny "));
  }
  {
    std::ofstream f(dir.path() / "bad.toml");
    f << "[server]\nport = 70000\n";
  }
  const auto bad = run_process({SPITED_PATH, "--port", "0", "--config", (dir.path() / "bad.toml").string()});
  CHECK(bad.exit_code == 78);
  CHECK_THAT(bad.err, Catch::Contains((dir.path() / "bad.toml").string() + ":2: [server] port: 70000 is out of range"));
  const auto missing_model = run_process({SPITED_PATH, "--port", "0", "--model", "/nonexistent.gguf", "--socket", socket.string()});
  CHECK(missing_model.exit_code == 78);
  CHECK_THAT(missing_model.err, Catch::Contains("/nonexistent.gguf"));
}

namespace {

std::string golden_answer(const nlohmann::json& run) {
  return run.at("greedy_text").get<std::string>() + "\n";
}

// spitectl prints a SentencePiece continuation with the space the reference's detokenizer drops.
std::string normalised(std::string out, const std::string& expected) {
  if (out.size() == expected.size() + 1 && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace

TEST_CASE("spitectl run through spited prints what the in-process run prints") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  const std::string model = shared_path("models/stories260K.gguf").string();
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + model, "--socket", socket.string()}, (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  const auto via_daemon = run_process({SPITECTL_PATH, "run", "--model", "stories", "--socket", socket.string(), "--prompt",
                                       "Once upon a time", "-n", "48", "--temperature", "0"});
  const auto local = run_process({SPITECTL_PATH, "run", "--model", model, "--local", "--prompt", "Once upon a time", "-n",
                                  "48", "--temperature", "0"});
  INFO(via_daemon.err);
  REQUIRE(via_daemon.exit_code == 0);
  REQUIRE(local.exit_code == 0);
  CHECK(via_daemon.out == local.out);
  CHECK_THAT(via_daemon.err, Catch::Contains("generated 48 tokens"));
  // The model can be named by its path too; an unknown one is refused with the daemon's reason.
  CHECK(run_process({SPITECTL_PATH, "run", "--model", model, "--socket", socket.string(), "--prompt", "Once upon a time",
                     "-n", "48", "--temperature", "0"})
            .out == local.out);
  const auto unknown = run_process({SPITECTL_PATH, "run", "--model", "nope", "--socket", socket.string(), "--prompt", "x"});
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("no model 'nope' (known: stories)"));
}

TEST_CASE("8 clients stream at once while kernel plug-ins come and go, and every answer is the reference's", "[slow]") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock", kernels = dir.path() / "kernels";
  fs::create_directories(kernels);
  ::chmod(kernels.c_str(), 0755);
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string(), "--kernels", kernels.string()},
                       (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  const auto golden = spite::test::load_json(shared_path("golden/logits/stories260K.gguf.json"));
  const auto& runs = golden.at("runs");

  std::atomic<bool> done{false};
  std::atomic<int> changes{0};
  std::thread churn([&] {
    const char* fixtures[] = {"good_generic", "high_score", "good_family"};
    for (int i = 0; !done; ++i) {
      const std::string name = fixtures[i % 3];
      install(kernels, name, name == "good_family" ? "llama/generic/x86_64" : "generic/generic/x86_64",
              name == "good_family" ? "family" : "rms");
      changes++;
      std::this_thread::sleep_for(40ms);
      if (i % 4 == 3) {
        std::error_code ec;
        fs::remove(kernels / "generic/generic/x86_64/rms.so", ec);
        fs::remove(kernels / "llama/generic/x86_64/family.so", ec);
      }
    }
  });
  struct stop_churn {
    std::atomic<bool>& done;
    std::thread& t;
    ~stop_churn() {
      done = true;
      if (t.joinable()) t.join();
    }
  } stopper{done, churn};

  auto generation = [&] {
    const auto s = nlohmann::json::parse(run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"}).out);
    return s.at("kernels").at("generation").get<int>();
  };
  const int first = generation();
  for (int i = 0; i < 250 && generation() == first; ++i) std::this_thread::sleep_for(20ms);
  REQUIRE(generation() > first);  // reloads are happening

  // 8 clients, each asking 3 prompts in turn, while the churn goes on.
  constexpr std::size_t k_clients = 8, k_rounds = 3;
  std::vector<spite::test::process_result> results(k_clients * k_rounds);
  std::vector<std::thread> clients;
  for (std::size_t c = 0; c < k_clients; ++c) {
    clients.emplace_back([&, c] {
      for (std::size_t k = 0; k < k_rounds; ++k) {
        const std::size_t i = c * k_rounds + k;
        const auto& r = runs.at(i % runs.size());
        results[i] = run_process({SPITECTL_PATH, "run", "--model", "stories", "--socket", socket.string(), "--prompt",
                                  r.at("prompt").get<std::string>(), "-n", "16", "--temperature", "0"});
      }
    });
  }
  for (auto& t : clients) t.join();
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string expected = golden_answer(runs.at(i % runs.size()));
    INFO("request " << i << ": " << results[i].err);
    CHECK(results[i].exit_code == 0);
    CHECK(normalised(results[i].out, expected) == expected);
  }
  CHECK(changes >= 2);
  const auto status = nlohmann::json::parse(
      run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"}).out);
  const auto& engine = status.at("models")[0].at("engine");
  CHECK(engine.at("max_sequences_in_step").get<int>() > 1);  // the loop really batched
}

TEST_CASE("a client that disconnects cancels its request at the next step") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  background_process d({SPITED_PATH, "--port", "0", "--model", "stories=" + shared_path("models/stories260K.gguf").string(), "--socket",
                        socket.string()},
                       (dir.path() / "log").string());
  REQUIRE(wait_for_file(socket));
  {
    raw_client c(socket);
    c.send("{\"id\":1,\"cmd\":\"run\",\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"n_predict\":400,\"temperature\":0}\n");
    CHECK(c.line().at("event") == "token");
  }  // gone mid-generation
  int active = -1;
  for (int i = 0; i < 100 && active != 0; ++i) {
    std::this_thread::sleep_for(20ms);
    const auto s = nlohmann::json::parse(run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"}).out);
    active = s.at("models")[0].at("engine").at("active").get<int>();
  }
  CHECK(active == 0);
  // The daemon still serves.
  CHECK(run_process({SPITECTL_PATH, "status", "--socket", socket.string()}).exit_code == 0);
}

TEST_CASE("run with chat messages uses the model's template, and a template that cannot be used stops the start") {
  temp_dir dir;
  const fs::path socket = dir.path() / "ctl.sock";
  const std::string model = fs::absolute(shared_path("models/tiny/tiny-llama3.f32.gguf")).string();
  {
    std::ofstream f(dir.path() / "spite.toml");
    f << "[control]\nsocket = \"" << socket.string() << "\"\n\n[[model]]\nname = \"chat\"\npath = \"" << model
      << "\"\nchat_template = \"chatml\"\n";
  }
  {
    background_process d({SPITED_PATH, "--port", "0", "--config", (dir.path() / "spite.toml").string()}, (dir.path() / "log").string());
    REQUIRE(wait_for_file(socket));
    raw_client c(socket);
    c.send(R"({"id":1,"cmd":"run","model":"chat","messages":[{"role":"user","content":"Hello"}],"n_predict":4,"temperature":0})"
           "\n");
    nlohmann::json j;
    do {
      j = c.line();
    } while (j.at("event") == "token");
    REQUIRE(j.at("event") == "result");
    // The rendered conversation ("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"),
    // not the bare "Hello", was tokenized.
    CHECK(j.at("result").at("prompt_tokens").get<int>() > 10);
    CHECK(j.at("result").at("generated").get<int>() >= 1);
  }
  {
    std::ofstream f(dir.path() / "bad.toml");
    f << "[control]\nsocket = \"" << socket.string() << "\"\n\n[[model]]\nname = \"chat\"\npath = \"" << model
      << "\"\nchat_template = \"no_such_variant\"\n";
  }
  const auto bad = run_process({SPITED_PATH, "--port", "0", "--config", (dir.path() / "bad.toml").string()});
  CHECK(bad.exit_code == 78);
  CHECK_THAT(bad.err, Catch::Contains("chat template:"));
}
