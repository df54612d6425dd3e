// The daemon's state: the model catalogue and the loaded models (with reference counts, so a
// model is never freed under a running request), the current kernel generation and the
// dispatchers built from it, and the command handlers of the control socket.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spite/config/config.hpp"
#include "spite/control/server.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/dispatch/kernel_watcher.hpp"
#include "spite/executor/memory_estimate.hpp"
#include "spite/gguf/file.hpp"
#include "spite/models/model.hpp"
#include "spite/scheduler/engine.hpp"
#include "spite/tokenizer/chat.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::daemon {

// What it takes to load one model: a [[model]] table, a --model flag or a load command.
struct model_spec {
  std::string name, path;
  std::string chat_template = "auto";
  std::int32_t n_ctx = 0;            // 0: the server's
  std::int64_t keep_alive_s = -1;    // idle seconds before an on-demand model is unloaded; -1: never
  bool preload = true;
  std::vector<config::lora_adapter> lora;
};

struct loaded_model {
  model_spec spec;
  gguf::file file;
  std::vector<gguf::file> lora_files;  // mapped for as long as the model
  std::shared_ptr<models::lora_set> loras;
  std::unique_ptr<models::model> model;
  dispatch::kernel_identity identity;
  std::shared_ptr<dispatch::dispatcher> kernels;  // of the current generation; guarded by service::mutex_
  std::shared_ptr<const tokenizer::tokenizer> tok;
  std::optional<tokenizer::chat_format> chat;
  executor::memory_estimate memory;
  double load_s = 0;
  bool on_demand = false;  // loaded by a request or a load command rather than at start-up
  bool flash_attn = true;  // the attention kernel its engine uses (service_options::flash_attn)
  std::unique_ptr<scheduler::engine> engine;
  std::atomic<int> in_flight{0};
  std::atomic<std::int64_t> last_used_ms{0};  // steady clock
  // Embeddings (and prompt logprobs) run on a context of their own (made on first use), one
  // request at a time. They run on the HTTP server's handler threads, so only a few may wait:
  // beyond that a request gets 429 at once rather than holding a handler thread.
  std::timed_mutex embed_mutex;
  std::atomic<int> embed_requests{0};  // running and waiting
  static constexpr int max_embed_requests = 2;
  std::unique_ptr<executor::context> embed_ctx;
};

// A request's hold on a model: while any lease lives, the model stays in memory even if it was
// unloaded from the catalogue in the meantime.
class model_lease {
 public:
  model_lease() = default;
  explicit model_lease(std::shared_ptr<loaded_model> m);
  model_lease(model_lease&& o) noexcept = default;
  model_lease& operator=(model_lease&& o) noexcept;
  ~model_lease();
  loaded_model* operator->() const noexcept { return m_.get(); }
  loaded_model& operator*() const noexcept { return *m_; }

 private:
  void release() noexcept;
  std::shared_ptr<loaded_model> m_;
};

struct service_options {
  std::vector<model_spec> catalogue;  // every model this daemon may serve; preload ones load at start
  std::vector<std::filesystem::path> kernel_dirs;
  int threads = 0;
  int max_concurrent = 4;
  int queue_size = 64;
  bool prompt_cache = true;
  bool swa_full = false;
  bool flash_attn = true;
  std::int32_t n_ctx = 0;
  std::int32_t max_tokens = 4096;
  std::uint64_t memory_limit = 0;  // bytes for all models; 0: what is available when loading
  std::chrono::seconds request_timeout{600};  // a request's whole life, queue included
  scheduler::sampling_params sampling;  // defaults for requests
};

// Hooks for the D-Bus layer (or anything else that publishes the daemon's state). Called
// without the service's lock held.
struct service_events {
  std::function<void(const std::string& name)> model_loaded, model_unloaded;
  std::function<void(const dispatch::kernel_change&)> kernels_changed;
  std::function<void()> state_changed;
};

class service {
 public:
  ~service();
  result<void> start(const service_options& options);
  void set_events(service_events events);  // set_events({}) before what the hooks use goes away
  std::vector<std::string> loaded_models();
  void handle(const nlohmann::json& request, control::responder& out);

  // Loads a model now (memory estimate first), or returns the one already loaded under that name.
  result<std::shared_ptr<loaded_model>> load(const model_spec& spec, bool on_demand);
  // Takes the model out of service; requests running on it finish first. Returns how many were
  // still running.
  result<int> unload(const std::string& name);
  // The spec to load `name`: its [[model]] table, or `path` (a GGUF file) under that name.
  result<model_spec> spec_for(const std::string& name, const std::string& path);
  // A lease on a loaded model, loading a catalogued one on demand.
  result<model_lease> acquire(const std::string& name);
  // Unloads on-demand models idle for longer than their keep_alive. Called by the main loop.
  void expire_idle();
  // SIGHUP and the `reload` command: the new options replace the catalogue and defaults (models
  // gone from it are unloaded, new preload ones loaded), and the kernel directories are rescanned.
  result<void> reload(const service_options& options);
  void reload_kernels();

  // Requests outside the control socket (HTTP) count for the drain too.
  void request_started() { in_flight_++; }
  void request_finished() { in_flight_--; }
  // A lease released on an engine thread must not free the model there (its engine would join
  // itself): it is parked here and dropped by the main loop.
  void retire(model_lease lease);
  bool cancelling_all() const { return cancel_all_; }
  std::chrono::steady_clock::time_point request_deadline() {
    std::lock_guard lock(mutex_);
    return std::chrono::steady_clock::now() + options_.request_timeout;
  }
  nlohmann::json models_json();
  nlohmann::json engine_stats_json();
  // The kernels `m` runs with now (its dispatcher changes with every kernel generation).
  std::shared_ptr<const dispatch::op_table> ops_of(loaded_model& m) {
    std::lock_guard lock(mutex_);
    return m.kernels->ops();
  }
  // Shutdown: new requests are refused; requests in flight are counted so they can drain.
  void request_shutdown();
  bool shutdown_requested() const { return shutdown_requested_; }
  int requests_in_flight() const { return in_flight_.load(); }
  // Cancels every request still running (the drain timed out).
  void cancel_all() { cancel_all_ = true; }
  std::string state();
  void set_state(std::string s);
  void set_http_address(std::string a) {
    std::lock_guard lock(mutex_);
    http_address_ = std::move(a);
  }
  // Reload from the control socket goes through the owner (main), which knows the config file.
  void set_reload_handler(std::function<result<void>()> h) { reload_handler_ = std::move(h); }

 private:
  void use_generation(std::shared_ptr<const dispatch::kernel_set> set, const dispatch::kernel_change* change);
  void attach_kernels(loaded_model& m);
  std::shared_ptr<loaded_model> find_loaded(const std::string& name);
  std::optional<model_spec> find_spec(const std::string& name);
  nlohmann::json status_json();
  nlohmann::json dispatch_json(loaded_model& m, bool explain);
  void run(const nlohmann::json& request, control::responder& out);
  void load_command(const nlohmann::json& request, control::responder& out);
  void unload_command(const nlohmann::json& request, control::responder& out);
  std::uint64_t memory_in_use();

  service_options options_;
  service_events events();  // a copy, so hooks run without any lock held
  std::mutex events_mutex_;
  service_events events_;
  std::function<result<void>()> reload_handler_;

  std::mutex mutex_;  // models_, options_, kernels_, kernel_events_, state_
  std::map<std::string, std::shared_ptr<loaded_model>> models_;
  std::mutex load_mutex_;  // one load at a time: loads are rare and memory checks must not race
  std::shared_ptr<const dispatch::kernel_set> kernels_;
  std::vector<nlohmann::json> kernel_events_;  // the last changes, newest last
  std::unique_ptr<dispatch::kernel_watcher> watcher_;
  dispatch::dispatch_target cpu_target_;
  std::string cpu_isa_;
  int cpu_threads_ = 1;
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> cancel_all_{false};
  std::atomic<int> in_flight_{0};
  std::mutex retired_mutex_;
  std::vector<model_lease> retired_;
  std::string state_ = "starting";
  std::string http_address_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// Bytes the machine can still give: MemAvailable, lowered by the cgroup's memory.max when set.
std::uint64_t available_memory();

}  // namespace spite::daemon
