// Shared by the OpenAI API tests of test_http: a spited with two small models serving on a free
// port, and helpers for OpenAI error objects, SSE streams and golden text.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_support.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "shared_data.hpp"

namespace spite::test::api {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

using clock_type = std::chrono::steady_clock;

// The end-of-sequence token of both models: banned so that random weights never stop early.
inline const json no_eos = {{"2", -100}};

inline std::string model_path(const std::string& rel) { return fs::absolute(shared_path(rel)).string(); }

// spited from a spite.toml: `stories` (trained, for golden text) and `tiny` (random weights, so a
// long generation stays long), both preloaded. READY before the test goes on; the HTTP port is
// the one spitectl status reports.
struct api_daemon {
  temp_dir dir;
  fs::path socket = dir.path() / "ctl.sock";
  notify_socket notify{dir.path() / "notify"};
  // After READY the notify socket is still read: spited's sd_notify blocks on a full one.
  std::jthread drain;
  std::unique_ptr<background_process> process;
  std::uint16_t port = 0;

  explicit api_daemon(const std::string& server = "") {
    {
      std::ofstream f(dir.path() / "spite.toml");
      f << "[server]\n" << server << "\n[control]\nsocket = \"" << socket.string() << "\"\n\n[inference]\nthreads = 1\n\n"
        << "[[model]]\nname = \"stories\"\npath = \"" << model_path("models/stories260K.gguf") << "\"\n\n"
        << "[[model]]\nname = \"tiny\"\npath = \"" << model_path("models/llama-2-tiny-random.gguf") << "\"\n";
    }
    process = std::make_unique<background_process>(
        std::vector<std::string>{SPITED_PATH, "--port", "0", "--config", (dir.path() / "spite.toml").string()},
        (dir.path() / "log").string(), std::vector<std::string>{"NOTIFY_SOCKET=" + notify.path.string()});
    const bool ready = notify.wait_for("READY=1", 30s);
    INFO(log());
    REQUIRE(ready);
    drain = std::jthread([this](const std::stop_token& stop) {
      while (!stop.stop_requested()) notify.wait_for(std::string(1, '\0'), 50ms);
    });
    const std::string http = status().at("http").get<std::string>();
    port = static_cast<std::uint16_t>(std::stoi(http.substr(http.rfind(':') + 1)));
    REQUIRE(port != 0);
  }

  json status() const {
    const auto r = run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
  }

  int active(const std::string& model) const {
    const json s = status();
    for (const auto& m : s.at("models")) {
      if (m.at("name") == model) return m.at("engine").at("active").get<int>();
    }
    return -1;
  }

  std::string log() const {
    std::ifstream in(dir.path() / "log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  http_client client(std::chrono::milliseconds timeout = 60s) const { return http_client(port, "127.0.0.1", timeout); }
};

inline json ok_json(const http_response& r) {
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == 200);
  return r.json();
}

// An OpenAI error object with this status, type and param (empty: null).
inline void check_error(const http_response& r, int status, const std::string& param,
                 const std::string& type = "invalid_request_error") {
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == status);
  CHECK(r.header("content-type") == "application/json");
  const json j = r.json();
  REQUIRE(j.contains("error"));
  const json& e = j["error"];
  CHECK(e.at("message").is_string());
  CHECK_FALSE(e.at("message").get<std::string>().empty());
  CHECK(e.at("type") == type);
  if (param.empty()) {
    CHECK(e.at("param").is_null());
  } else {
    CHECK(e.at("param") == param);
  }
  CHECK(e.contains("code"));
}

inline std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

// A whole streamed response: its chunks (parsed), and whether `data: [DONE]` ended it.
struct sse_result {
  int status = 0;
  std::string content_type, transfer_encoding;
  std::vector<json> chunks;
  bool done = false;
};

inline sse_result read_stream(sse_stream& s) {
  sse_result out;
  out.status = s.status();
  out.content_type = s.header("content-type");
  out.transfer_encoding = s.header("transfer-encoding");
  while (auto e = s.next()) {
    INFO(s.raw());
    REQUIRE_FALSE(out.done);  // nothing after [DONE]
    if (*e == "[DONE]") {
      out.done = true;
      continue;
    }
    out.chunks.push_back(json::parse(*e));
  }
  return out;
}

inline sse_result stream_post(http_client& c, const std::string& path, const json& body) {
  auto s = c.stream_post(path, body);
  return read_stream(s);
}

// Concatenated text of choice `index`: chat deltas or completion texts.
inline std::string streamed_text(const std::vector<json>& chunks, int index = 0) {
  std::string text;
  for (const auto& ch : chunks) {
    for (const auto& c : ch.at("choices")) {
      if (c.at("index") != index) continue;
      if (c.contains("delta")) {
        text += c["delta"].value("content", "");
      } else {
        text += c.value("text", "");
      }
    }
  }
  return text;
}

// The golden greedy text of a run as token pieces concatenate. The reference's detokenizer
// drops the leading space of a SentencePiece continuation's first token (golden/README.md), so
// that one space is the only difference allowed.
inline void check_golden(const std::string& text, const json& run) {
  const std::string golden = run.at("greedy_text").get<std::string>();
  INFO("prompt: " << run.at("prompt").get<std::string>());
  if (text.size() == golden.size() + 1 && text[0] == ' ') {
    CHECK(text.substr(1) == golden);
  } else {
    CHECK(text == golden);
  }
}

// A value of an unlabelled Prometheus line, or -1.
inline double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace spite::test::api
