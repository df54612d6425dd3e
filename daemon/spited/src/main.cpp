// spited: preloads models, watches the kernel directories, answers spitectl on the control
// socket, and tells systemd where it stands (READY, STATUS, WATCHDOG, RELOADING, STOPPING).
//
//   spited [--config FILE] [--model [NAME=]FILE]... [--socket PATH] [--kernels DIR[:DIR...]] [--threads N]
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <grp.h>

#include "service.hpp"
#include "spite/config/config.hpp"
#include "spite/control/client.hpp"
#include "spite/core/log.hpp"

namespace {

using namespace spite;

constexpr int exit_usage = 64;   // EX_USAGE
constexpr int exit_config = 78;  // EX_CONFIG: the daemon never starts half-configured

int usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "spited: %s\n", why);
  std::fprintf(why ? stderr : stdout,
               "usage: spited [--config FILE] [--model [NAME=]FILE]... [--socket PATH] [--kernels DIR[:DIR...]] [--threads N]\n"
               "  --config    spite.toml (see config/spite.toml); flags override it\n"
               "  --model     preload a GGUF model (NAME defaults to the file name without .gguf)\n"
               "  --socket    control socket (default $RUNTIME_DIRECTORY/spited.sock, else /run/spite/spited.sock)\n"
               "  --kernels   kernel plug-in directories searched before the default path\n"
               "  --threads   compute threads (default: all)\n");
  return why ? exit_usage : 0;
}

std::uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

// The control socket systemd passed (LISTEN_FDNAMES "control"), or -1.
int activated_control_socket() {
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);
  int fd = -1;
  for (int i = 0; i < n; ++i) {
    const bool control = names != nullptr && names[i] != nullptr && std::strcmp(names[i], "control") == 0;
    if (control || (n == 1 && fd < 0)) fd = SD_LISTEN_FDS_START + i;
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  daemon::service_options options;
  std::filesystem::path socket_path, config_path;
  std::vector<std::filesystem::path> extra_kernels;
  std::vector<std::pair<std::string, std::string>> flag_models;
  int flag_threads = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") return usage(nullptr);
    const char* v = nullptr;
    if (arg == "--model" || arg == "--socket" || arg == "--kernels" || arg == "--threads" || arg == "--config") {
      v = value();
      if (v == nullptr) return usage((arg + " needs a value").c_str());
    }
    if (arg == "--model") {
      std::string spec = v, name;
      if (const auto eq = spec.find('='); eq != std::string::npos) {
        name = spec.substr(0, eq);
        spec = spec.substr(eq + 1);
      } else {
        name = std::filesystem::path(spec).stem().string();
      }
      flag_models.emplace_back(name, spec);
    } else if (arg == "--config") {
      config_path = v;
    } else if (arg == "--socket") {
      socket_path = v;
    } else if (arg == "--kernels") {
      extra_kernels = dispatch::parse_path_list(v);
    } else if (arg == "--threads") {
      flag_threads = std::atoi(v);
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  // The configuration file, then the flags over it. A bad file stops here: never half-configured.
  config::daemon_config cfg = config::default_config();
  if (!config_path.empty()) {
    auto loaded = config::load_config(config_path);
    if (!loaded) {
      std::fprintf(stderr, "spited: %s\n", loaded.err().message.c_str());
      return config::exit_config;
    }
    cfg = std::move(*loaded);
  }
  log::set_level(cfg.log_level);
  if (!flag_models.empty()) {
    options.models = flag_models;
  } else {
    for (const auto& m : cfg.models) {
      if (m.preload) options.models.emplace_back(m.name, m.path.string());
      options.chat_templates[m.name] = m.chat_template;
    }
  }
  options.threads = flag_threads >= 0 ? flag_threads : static_cast<int>(cfg.inference.threads);
  options.max_concurrent = static_cast<int>(cfg.server.max_concurrent);
  options.queue_size = static_cast<int>(cfg.server.queue_size);
  options.n_ctx = static_cast<std::int32_t>(cfg.inference.n_ctx);
  options.max_tokens = static_cast<std::int32_t>(cfg.server.max_tokens);
  options.sampling.temperature = cfg.sampling.temperature;
  options.sampling.top_k = cfg.sampling.top_k;
  options.sampling.top_p = cfg.sampling.top_p;
  options.sampling.min_p = cfg.sampling.min_p;
  options.sampling.repeat_penalty = cfg.sampling.repeat_penalty;
  if (cfg.sampling.seed) options.sampling.seed = *cfg.sampling.seed;
  if (socket_path.empty()) socket_path = config_path.empty() ? control::default_socket_path() : cfg.control.socket;
  options.kernel_dirs = extra_kernels;
  for (const auto& d : cfg.kernels.dirs) options.kernel_dirs.push_back(d);
  const auto config_dir = config_path.empty() ? std::filesystem::path() : std::filesystem::absolute(config_path).parent_path();
  for (auto& p : dispatch::default_kernel_path(config_dir)) options.kernel_dirs.push_back(std::move(p));

  // Signals are taken synchronously by the main loop; every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  daemon::service svc;
  sd_notify(0, "STATUS=loading models");
  if (auto r = svc.start(options); !r) {
    std::fprintf(stderr, "spited: %s\n", r.err().message.c_str());
    sd_notifyf(0, "STATUS=failed: %s", r.err().message.c_str());
    return exit_config;
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
      std::fprintf(stderr, "spited: %s: [control] group: no group '%s'\n", config_path.c_str(), cfg.control.group.c_str());
      return config::exit_config;
    }
    so.group = g->gr_gid;
  }
  auto handler = [&svc](const nlohmann::json& req, control::responder& out) { svc.handle(req, out); };
  const int activated = activated_control_socket();
  auto server = activated >= 0 ? control::server::adopt(activated, so, handler) : control::server::listen(so, handler);
  if (!server) {
    std::fprintf(stderr, "spited: %s\n", server.err().message.c_str());
    return exit_config;
  }
  log::info("spited ready: control socket ", activated >= 0 ? "(socket activation)" : socket_path.string());
  sd_notify(0, "READY=1\nSTATUS=serving");

  std::uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  const long tick_ms = watchdog ? static_cast<long>(std::max<std::uint64_t>(watchdog_usec / 2000, 1)) : 200;
  for (;;) {
    timespec timeout{tick_ms / 1000, (tick_ms % 1000) * 1000000L};
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (watchdog) sd_notify(0, "WATCHDOG=1");
    if (sig == SIGHUP) {
      sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading kernels",
                 static_cast<unsigned long long>(monotonic_usec()));
      svc.reload_kernels();
      sd_notify(0, "READY=1\nSTATUS=serving");
    } else if (sig == SIGTERM || sig == SIGINT || svc.shutdown_requested()) {
      break;
    }
  }
  svc.set_state("stopping");
  svc.request_shutdown();
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  log::info("spited stopping");
  server->reset();  // answers in flight finish; clients are closed
  return 0;
}
