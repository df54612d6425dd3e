// spited as a real process with models given by --model NAME=FILE, on a free port, for the HTTP
// tests (the including test defines SPITED_PATH and SPITECTL_PATH), and a POST that must answer 200.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon_support.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "shared_data.hpp"

namespace spite::test {

struct models_daemon {
  temp_dir dir;
  fs::path socket = dir.path() / "ctl.sock";
  notify_socket notify{dir.path() / "notify"};
  std::unique_ptr<background_process> process;
  std::uint16_t port = 0;

  // models: "NAME=FILE" each; server: lines of a [server] section, if any.
  explicit models_daemon(const std::vector<std::string>& models, const std::string& server = "") {
    std::vector<std::string> args{SPITED_PATH, "--port", "0", "--threads", "1", "--socket", socket.string()};
    if (!server.empty()) {
      std::ofstream(dir.path() / "spite.toml") << "[server]\n" << server << "\n";
      args.push_back("--config");
      args.push_back((dir.path() / "spite.toml").string());
    }
    for (const auto& m : models) {
      args.push_back("--model");
      args.push_back(m);
    }
    process = std::make_unique<background_process>(args, (dir.path() / "log").string(),
                                                   std::vector<std::string>{"NOTIFY_SOCKET=" + notify.path.string()});
    REQUIRE(notify.wait_for("READY=1", 30s));
    const auto r = run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"});
    REQUIRE(r.exit_code == 0);
    const std::string http = nlohmann::json::parse(r.out).at("http").get<std::string>();
    port = static_cast<std::uint16_t>(std::stoi(http.substr(http.rfind(':') + 1)));
  }
};

inline nlohmann::json post_ok(http_client& c, const std::string& path, const nlohmann::json& body) {
  const auto r = c.post(path, body);
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == 200);
  return r.json();
}

}  // namespace spite::test
