// The daemon's state: loaded models, the current kernel generation and the dispatchers built
// from it, and the command handlers of the control socket.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spite/control/server.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/dispatch/kernel_watcher.hpp"
#include "spite/gguf/file.hpp"
#include "spite/models/model.hpp"
#include "spite/scheduler/engine.hpp"
#include "spite/tokenizer/chat.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::daemon {

struct loaded_model {
  std::string name;
  std::string path;
  gguf::file file;
  std::unique_ptr<models::model> model;
  dispatch::kernel_identity identity;
  std::shared_ptr<dispatch::dispatcher> kernels;  // of the current generation
  std::shared_ptr<const tokenizer::tokenizer> tok;
  std::optional<tokenizer::chat_format> chat;
  std::unique_ptr<scheduler::engine> engine;
};

struct service_options {
  std::vector<std::pair<std::string, std::string>> models;  // name, path
  std::map<std::string, std::string> chat_templates;         // name -> "auto" | "chatml" | variant
  std::vector<std::filesystem::path> kernel_dirs;
  int threads = 0;
  int max_concurrent = 4;
  int queue_size = 64;
  std::int32_t n_ctx = 0;
  std::int32_t max_tokens = 4096;
  scheduler::sampling_params sampling;  // defaults for requests
};

class service {
 public:
  result<void> start(const service_options& options);
  void handle(const nlohmann::json& request, control::responder& out);

  // Called by SIGHUP and the `reload` command: rescans the kernel directories now.
  void reload_kernels();
  void request_shutdown() { shutdown_requested_ = true; }
  bool shutdown_requested() const { return shutdown_requested_; }
  std::string state() {
    std::lock_guard lock(mutex_);
    return state_;
  }
  void set_state(std::string s) {
    std::lock_guard lock(mutex_);
    state_ = std::move(s);
  }

 private:
  void use_generation(std::shared_ptr<const dispatch::kernel_set> set, const dispatch::kernel_change* change);
  loaded_model* find(const std::string& name);
  nlohmann::json status_json();
  nlohmann::json dispatch_json(loaded_model& m, bool explain);
  void run(const nlohmann::json& request, control::responder& out);
  service_options options_;

  std::mutex mutex_;
  std::vector<std::unique_ptr<loaded_model>> models_;
  std::shared_ptr<const dispatch::kernel_set> kernels_;
  std::vector<nlohmann::json> kernel_events_;  // the last changes, newest last
  std::unique_ptr<dispatch::kernel_watcher> watcher_;
  dispatch::dispatch_target cpu_target_;
  std::string cpu_isa_;
  std::vector<std::filesystem::path> kernel_dirs_;
  std::atomic<bool> shutdown_requested_{false};
  std::string state_ = "starting";
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace spite::daemon
