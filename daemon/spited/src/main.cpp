// spited: preloads models, watches the kernel directories, answers spitectl on the control
// socket, and tells systemd where it stands (READY, STATUS, WATCHDOG, RELOADING, STOPPING).
//
//   spited [--config FILE] [--model [NAME=]FILE]... [--socket PATH] [--kernels DIR[:DIR...]] [--threads N]
//          [--host ADDR] [--port N] [--user]
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <grp.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "service.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/core/working_memory.hpp"
#include "spite/bus/daemon_bus.hpp"
#include "http_backend.hpp"
#include "spite/server/http_server.hpp"
#include "spite/server/openai.hpp"
#include "spite/config/config.hpp"
#include "spite/control/client.hpp"
#include "spite/core/log.hpp"
#include "spite/dispatch/tensor.hpp"

namespace {

using namespace spite;

constexpr int exit_usage = 64;   // EX_USAGE
constexpr int exit_config = 78;  // EX_CONFIG: the daemon never starts half-configured

int usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "spited: %s\n", why);
  std::fprintf(why ? stderr : stdout,
               "usage: spited [--config FILE] [--model [NAME=]FILE]... [--socket PATH] [--kernels DIR[:DIR...]] [--threads N]\n"
               "              [--host ADDR] [--port N] [--user]\n"
               "  --config    spite.toml (see config/spite.toml); flags override it\n"
               "  --model     preload a GGUF model (NAME defaults to the file name without .gguf)\n"
               "  --socket    control socket (default $RUNTIME_DIRECTORY/spited.sock, else /run/spite/spited.sock)\n"
               "  --kernels   kernel plug-in directories searched before the default path\n"
               "  --threads   compute threads (default: all)\n"
               "  --host      HTTP address (default 127.0.0.1)\n"
               "  --port      HTTP port (default 8080; 0: any free port, shown by spitectl status)\n"
               "  --user      publish org.spite.Daemon1 on the session bus instead of the system bus\n");
  return why ? exit_usage : 0;
}

std::uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

// The sockets systemd passed, by LISTEN_FDNAMES ("control", "http"). A single unnamed socket is
// the control socket.
std::map<std::string, int> activated_sockets() {
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);
  std::map<std::string, int> out;
  for (int i = 0; i < n; ++i) {
    std::string name = names != nullptr && names[i] != nullptr ? names[i] : "";
    if (name != "http" && name != "control") name = n == 1 ? "control" : name;
    out.emplace(name, SD_LISTEN_FDS_START + i);
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  return out;
}

struct flags {
  std::filesystem::path config_path;
  config::overrides over;
  std::vector<std::filesystem::path> extra_kernels;
  std::vector<std::pair<std::string, std::string>> models;  // --model NAME=FILE
  int threads = -1;
  bool user_bus = false;
};

// The configuration file (if any) with the flags over it. A bad file is an error: the caller
// either refuses to start (exit 78) or, on SIGHUP, keeps the configuration it runs with.
result<config::daemon_config> read_config(const flags& f) {
  config::daemon_config cfg = config::default_config();
  if (!f.config_path.empty()) {
    auto loaded = config::load_config(f.config_path);
    if (!loaded) return std::move(loaded).err();
    cfg = std::move(*loaded);
  }
  config::apply_overrides(cfg, f.over);
  return cfg;
}

daemon::service_options service_options_from(const config::daemon_config& cfg, const flags& f) {
  daemon::service_options options;
  if (!f.models.empty()) {
    for (const auto& [name, path] : f.models) {
      options.catalogue.push_back({.name = name, .path = path});
    }
  } else {
    for (const auto& m : cfg.models) {
      options.catalogue.push_back({.name = m.name, .path = m.path.string(), .chat_template = m.chat_template,
                                   .n_ctx = static_cast<std::int32_t>(m.n_ctx), .keep_alive_s = m.keep_alive_s,
                                   .preload = m.preload, .lora = m.lora});
    }
  }
  options.threads = f.threads >= 0 ? f.threads : static_cast<int>(cfg.inference.threads);
  dispatch::set_cpu_repack(cfg.inference.repack_weights);
  thread_pool::set_pinning(cfg.inference.pin_threads);
  options.max_concurrent = static_cast<int>(cfg.server.max_concurrent);
  options.queue_size = static_cast<int>(cfg.server.queue_size);
  options.prompt_cache = cfg.inference.prompt_cache;
  options.swa_full = cfg.inference.swa_full;
  options.flash_attn = cfg.inference.flash_attn;
  options.n_ctx = static_cast<std::int32_t>(cfg.inference.n_ctx);
  options.max_tokens = static_cast<std::int32_t>(cfg.server.max_tokens);
  options.memory_limit = cfg.inference.memory_limit_mib << 20;
  options.request_timeout = std::chrono::seconds(cfg.server.request_timeout_s);
  options.sampling.temperature = cfg.sampling.temperature;
  options.sampling.top_k = cfg.sampling.top_k;
  options.sampling.top_p = cfg.sampling.top_p;
  options.sampling.min_p = cfg.sampling.min_p;
  options.sampling.repeat_penalty = cfg.sampling.repeat_penalty;
  if (cfg.sampling.seed) options.sampling.seed = *cfg.sampling.seed;
  options.kernel_dirs = f.extra_kernels;
  for (const auto& d : cfg.kernels.dirs) options.kernel_dirs.push_back(d);
  const auto config_dir =
      f.config_path.empty() ? std::filesystem::path() : std::filesystem::absolute(f.config_path).parent_path();
  for (auto& p : dispatch::default_kernel_path(config_dir)) options.kernel_dirs.push_back(std::move(p));
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  spite::keep_working_memory();
  flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") return usage(nullptr);
    if (arg == "--user") {
      f.user_bus = true;
      continue;
    }
    const char* v = nullptr;
    if (arg == "--model" || arg == "--socket" || arg == "--kernels" || arg == "--threads" || arg == "--config" ||
        arg == "--port" || arg == "--host") {
      v = value();
      if (v == nullptr) return usage((arg + " needs a value").c_str());
    }
    if (arg == "--model") {
      std::string spec = v, name;
      if (const auto eq = spec.find('='); eq != std::string::npos) {
        name = spec.substr(0, eq);
        spec = spec.substr(eq + 1);
      } else {
        name = config::model_name_from_path(spec);
      }
      if (!config::valid_model_name(name)) return usage(("--model: '" + name + "' is not a valid model name").c_str());
      f.models.emplace_back(name, spec);
    } else if (arg == "--config") {
      f.config_path = v;
    } else if (arg == "--socket") {
      f.over.socket = std::filesystem::path(v);
    } else if (arg == "--host") {
      f.over.host = std::string(v);
    } else if (arg == "--port") {
      char* end = nullptr;
      const long port = std::strtol(v, &end, 10);
      if (*end != '\0' || port < 0 || port > 65535) return usage("--port must be 0..65535 (0: any free port)");
      f.over.port = static_cast<std::uint16_t>(port);
    } else if (arg == "--kernels") {
      f.extra_kernels = dispatch::parse_path_list(v);
    } else if (arg == "--threads") {
      f.threads = std::atoi(v);
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  // The configuration file, then the flags over it. A bad file stops here: never half-configured.
  auto cfg_or = read_config(f);
  if (!cfg_or) {
    log::error(cfg_or.err().message);
    return config::exit_config;
  }
  config::daemon_config cfg = std::move(*cfg_or);
  log::set_level(cfg.log_level);
  const std::filesystem::path socket_path = cfg.control.socket;

  // Signals are taken synchronously by the main loop; every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  daemon::service svc;
  sd_notify(0, "STATUS=loading models");
  if (auto r = svc.start(service_options_from(cfg, f)); !r) {
    log::error(r.err().message);
    sd_notifyf(0, "STATUS=failed: %s", r.err().message.c_str());
    return exit_config;
  }
  // SIGHUP and `spitectl reload`: the file is read again; a bad one is refused as a whole and the
  // running configuration stays.
  std::mutex reload_mutex;
  auto reload = [&]() -> result<void> {
    std::lock_guard lock(reload_mutex);
    auto next = read_config(f);
    if (!next) {
      log::error("reload refused, configuration unchanged: ", next.err().message);
      return std::move(next).err();
    }
    log::set_level(next->log_level);
    dispatch::set_cpu_repack(next->inference.repack_weights);  // for models loaded from now on
    thread_pool::set_pinning(next->inference.pin_threads);
    if (next->control.socket != cfg.control.socket || next->server.port != cfg.server.port ||
        next->server.host != cfg.server.host) {
      log::warn("reload: [server] host/port and [control] socket take effect at the next restart");
    }
    auto r = svc.reload(service_options_from(*next, f));
    log::info("configuration reloaded", f.config_path.empty() ? "" : " from " + f.config_path.string());
    return r;
  };
  svc.set_reload_handler(reload);

  // org.spite.Daemon1 on the system bus (the session bus with --user). Without a bus the daemon
  // says so once and serves on.
  bus::daemon_callbacks calls;
  calls.version = [] { return std::string(SPITE_VERSION); };
  calls.state = [&svc] { return svc.state(); };
  calls.models = [&svc] { return svc.loaded_models(); };
  calls.load_model = [&svc](const std::string& name, const std::string& path) -> result<void> {
    auto spec = svc.spec_for(name, path);
    if (!spec) return std::move(spec).err();
    auto m = svc.load(*spec, true);
    if (!m) return std::move(m).err();
    return ok();
  };
  calls.unload_model = [&svc](const std::string& name) -> result<void> {
    auto r = svc.unload(name);
    if (!r) return std::move(r).err();
    return ok();
  };
  calls.reload = reload;
  auto connected = bus::daemon_bus::connect({.user_bus = f.user_bus}, calls);
  std::unique_ptr<bus::daemon_bus> dbus;
  if (connected) {
    dbus = std::move(*connected);
    log::info("D-Bus: ", bus::service_name, " on the ", f.user_bus ? "session" : "system", " bus as ", dbus->unique_name());
    bus::daemon_bus* b = dbus.get();
    svc.set_events({.model_loaded = [b](const std::string& n) { b->model_loaded(n); b->models_changed(); },
                    .model_unloaded = [b](const std::string& n) { b->model_unloaded(n); b->models_changed(); },
                    .kernels_changed =
                        [b](const dispatch::kernel_change& c) {
                          std::vector<std::pair<std::string, std::string>> refused;
                          for (const auto& r : c.refused) refused.emplace_back(r.path.string(), r.reason);
                          b->kernels_changed(c.generation, c.added, c.replaced, c.removed, refused);
                        },
                    .state_changed = [b] { b->state_changed(); }});
  } else {
    log::info("D-Bus: not published (", connected.err().message, ")");
  }
  // Models are loaded: the daemon is running from the first request the socket accepts (with
  // socket activation a client may be waiting already).
  svc.set_state("running");
  control::server_options so;
  so.path = socket_path;
  so.mode = cfg.control.mode;
  if (!cfg.control.group.empty()) {
    const group* g = ::getgrnam(cfg.control.group.c_str());
    if (g == nullptr) {
      log::error(f.config_path.string(), ": [control] group: no group '", cfg.control.group, "'");
      return config::exit_config;
    }
    so.group = g->gr_gid;
  }
  auto handler = [&svc](const nlohmann::json& req, control::responder& out) { svc.handle(req, out); };
  const auto activated = activated_sockets();
  const auto control_fd = activated.find("control");
  auto server = control_fd != activated.end() ? control::server::adopt(control_fd->second, so, handler)
                                              : control::server::listen(so, handler);
  if (!server) {
    log::error(server.err().message);
    return exit_config;
  }

  // The OpenAI API: its own I/O threads, requests handed to the same service.
  server::api_options api;
  api.api_keys = cfg.server.api_keys;
  api.max_tokens = static_cast<std::int32_t>(cfg.server.max_tokens);
  api.version = SPITE_VERSION;
  {
    const auto defaults = service_options_from(cfg, f).sampling;
    api.defaults = defaults;
    api.default_seed_fixed = cfg.sampling.seed.has_value();
  }
  auto openai = std::make_shared<server::openai_api>(std::make_shared<daemon::http_backend>(svc), api);
  server::http_options ho;
  ho.host = cfg.server.host;
  ho.port = cfg.server.port;
  ho.max_body = cfg.server.max_request_bytes;
  ho.cors_origins = cfg.server.cors_origins;
  ho.max_connections = std::max<int>(64, static_cast<int>(cfg.server.max_concurrent + cfg.server.queue_size) * 4);
  auto route = [openai](const server::http_request& r, std::shared_ptr<server::http_responder> out) {
    openai->handle(r, std::move(out));
  };
  const auto http_fd = activated.find("http");
  auto http = http_fd != activated.end() ? server::http_server::adopt(http_fd->second, ho, route)
                                         : server::http_server::listen(ho, route);
  if (!http) {
    log::error(http.err().message);
    return exit_config;
  }
  openai->set_transport([h = http->get()] { return h->stats(); });
  svc.set_http_address(cfg.server.host + ":" + std::to_string((*http)->port()));
  log::info("spited ready: control socket ", control_fd != activated.end() ? "(socket activation)" : socket_path.string(),
            ", HTTP ", http_fd != activated.end() ? std::string("(socket activation)")
                                                  : cfg.server.host + ":" + std::to_string((*http)->port()));
  sd_notify(0, "READY=1\nSTATUS=serving");

  std::uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  const long tick_ms = watchdog ? std::min<long>(static_cast<long>(std::max<std::uint64_t>(watchdog_usec / 2000, 1)), 1000) : 200;
  for (;;) {
    timespec timeout{tick_ms / 1000, (tick_ms % 1000) * 1000000L};
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (watchdog) sd_notify(0, "WATCHDOG=1");
    if (sig == SIGHUP) {
      sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
                 static_cast<unsigned long long>(monotonic_usec()));
      svc.set_state("reloading");
      (void)reload();
      svc.set_state("running");
      sd_notify(0, "READY=1\nSTATUS=serving");
    } else if (sig == SIGTERM || sig == SIGINT || svc.shutdown_requested()) {
      break;
    }
    svc.expire_idle();
  }
  // Stopping: nothing new starts; requests in flight get shutdown_timeout_s to finish, then
  // they are cancelled and end with an error rather than silently.
  svc.request_shutdown();
  openai->set_stopping();  // new API requests get 503 while the others finish
  svc.set_state("stopping");
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.server.shutdown_timeout_s);
  log::info("spited stopping: ", svc.requests_in_flight(), " requests in flight");
  // Notifications only when something changed or the watchdog is due: a service manager that
  // reads slowly must not be flooded (a full notify queue would block us).
  int reported = -1;
  auto next_ping = std::chrono::steady_clock::now();
  while (svc.requests_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    const auto now = std::chrono::steady_clock::now();
    if (watchdog && now >= next_ping) {
      sd_notify(0, "WATCHDOG=1");
      next_ping = now + std::chrono::milliseconds(tick_ms);
    }
    if (const int n = svc.requests_in_flight(); n != reported) {
      sd_notifyf(0, "STATUS=stopping: %d requests finishing", n);
      reported = n;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (svc.requests_in_flight() > 0) {
    log::warn("shutdown timeout: cancelling ", svc.requests_in_flight(), " requests");
    svc.cancel_all();
    while (svc.requests_in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Give the last answers a moment to reach their clients, then close everything.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  http->reset();
  server->reset();  // answers in flight are written; clients are closed
  svc.set_events({});
  dbus.reset();
  log::info("spited stopped");
  return 0;
}
