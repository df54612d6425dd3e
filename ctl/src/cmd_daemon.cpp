// spitectl commands answered by a running spited over its control socket:
//   status [--json], models [--json], load NAME [--path F], unload NAME, reload, and
//   dispatch -m NAME (see cmd_dispatch.cpp).
#include <cstdio>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "spite/control/client.hpp"

namespace spite::ctl {
namespace {

using nlohmann::json;

struct daemon_call {
  int exit_code = exit_ok;
  json result;
};

daemon_call call_daemon(const std::string& cmd_name, const args& a, json request) {
  const std::filesystem::path socket = a.get("--socket") ? std::filesystem::path(*a.get("--socket"))
                                                         : control::default_socket_path();
  auto c = control::client::connect(socket);
  if (!c) {
    std::fprintf(stderr, "spitectl %s: %s\n", cmd_name.c_str(), c.err().message.c_str());
    return {exit_unreachable, {}};
  }
  auto r = (*c)->call(std::move(request));
  if (!r) {
    std::fprintf(stderr, "spitectl %s: %s\n", cmd_name.c_str(), r.err().message.c_str());
    return {exit_failure, {}};
  }
  return {exit_ok, std::move(*r)};
}

int parse_or_usage(args& a, const std::vector<std::string>& argv, const char* cmd, const char* synopsis) {
  a.option("--socket", "PATH", "spited's control socket (default $RUNTIME_DIRECTORY/spited.sock, else /run/spite/spited.sock)")
      .flag("--help", "show this help");
  auto r = a.parse(argv);
  if (r && !a.has("--help")) return -1;
  if (!r) std::fprintf(stderr, "spitectl %s: %s\n", cmd, r.err().message.c_str());
  std::fprintf(r ? stdout : stderr, "usage: spitectl %s %s\n%s", cmd, synopsis, a.help().c_str());
  return r ? exit_ok : exit_usage;
}

}  // namespace

int run_status(const std::vector<std::string>& argv) {
  args a;
  a.flag("--json", "machine-readable output");
  if (int rc = parse_or_usage(a, argv, "status", "[--socket PATH] [--json]"); rc >= 0) return rc;
  auto r = call_daemon("status", a, {{"cmd", "status"}});
  if (r.exit_code != exit_ok) return r.exit_code;
  const json& s = r.result;
  if (a.has("--json")) {
    std::cout << s.dump(2) << "\n";
    return exit_ok;
  }
  std::printf("spited %s: %s, pid %lld, up %.0f s\n", s.value("version", "?").c_str(), s.value("state", "?").c_str(),
              s.value("pid", 0LL), s.value("uptime_s", 0.0));
  std::printf("models       : %zu\n", s["models"].size());
  for (const auto& m : s["models"]) {
    std::printf("  %-20s %-10s %s\n", m.value("name", "").c_str(), m.value("arch", "").c_str(), m.value("path", "").c_str());
  }
  const json& k = s["kernels"];
  std::printf("kernels      : generation %llu, %zu libraries, %zu refused\n",
              static_cast<unsigned long long>(k.value("generation", 0ULL)), k["libraries"].size(), k["refused"].size());
  for (const auto& l : k["libraries"]) std::printf("  %-30s %s\n", l.value("id", "").c_str(), l.value("path", "").c_str());
  for (const auto& l : k["refused"]) std::printf("  refused: %s\n", l.value("reason", "").c_str());
  return exit_ok;
}

int run_models(const std::vector<std::string>& argv) {
  args a;
  a.flag("--json", "machine-readable output");
  if (int rc = parse_or_usage(a, argv, "models", "[--socket PATH] [--json]"); rc >= 0) return rc;
  auto r = call_daemon("models", a, {{"cmd", "models"}});
  if (r.exit_code != exit_ok) return r.exit_code;
  if (a.has("--json")) {
    std::cout << r.result.dump(2) << "\n";
    return exit_ok;
  }
  for (const auto& m : r.result) {
    std::printf("%-20s %-10s %-10s %-16s %s\n", m.value("name", "").c_str(),
                m.value("loaded", false) ? "loaded" : "available", m.value("arch", "").c_str(),
                m.value("kernels", "").c_str(), m.value("path", "").c_str());
  }
  return exit_ok;
}

int run_reload(const std::vector<std::string>& argv) {
  args a;
  if (int rc = parse_or_usage(a, argv, "reload", "[--socket PATH]"); rc >= 0) return rc;
  auto r = call_daemon("reload", a, {{"cmd", "reload"}});
  if (r.exit_code != exit_ok) return r.exit_code;
  std::printf("configuration reloaded; kernels generation %llu: %zu libraries, %zu refused\n",
              static_cast<unsigned long long>(r.result.value("generation", 0ULL)), r.result["libraries"].size(),
              r.result["refused"].size());
  return exit_ok;
}

int run_load(const std::vector<std::string>& argv) {
  args a;
  a.option("--path", "FILE", "a GGUF file to load under NAME (default: NAME's [[model]] path in spite.toml)")
      .option("--keep-alive", "S", "unload after S idle seconds (-1: never)")
      .option("--ctx", "N", "context length");
  if (int rc = parse_or_usage(a, argv, "load", "NAME [--path FILE] [--keep-alive S] [--ctx N] [--socket PATH]"); rc >= 0) {
    return rc;
  }
  if (a.positional().size() != 1) {
    std::fprintf(stderr, "spitectl load: one model NAME is required\n");
    return exit_usage;
  }
  json req{{"cmd", "load"}, {"model", a.positional()[0]}};
  if (const auto p = a.get("--path")) req["path"] = std::filesystem::absolute(*p).string();
  try {
    if (const auto k = a.get("--keep-alive")) req["keep_alive"] = std::stoll(*k);
    if (const auto c = a.get("--ctx")) req["n_ctx"] = std::stoi(*c);
  } catch (const std::exception&) {
    std::fprintf(stderr, "spitectl load: --keep-alive and --ctx take integers\n");
    return exit_usage;
  }
  auto r = call_daemon("load", a, req);
  if (r.exit_code != exit_ok) return r.exit_code;
  std::printf("loaded %s (%s) from %s, memory %llu bytes\n", r.result.value("model", "").c_str(),
              r.result.value("arch", "").c_str(), r.result.value("path", "").c_str(),
              static_cast<unsigned long long>(r.result["memory"].value("total", 0ULL)));
  return exit_ok;
}

int run_unload(const std::vector<std::string>& argv) {
  args a;
  if (int rc = parse_or_usage(a, argv, "unload", "NAME [--socket PATH]"); rc >= 0) return rc;
  if (a.positional().size() != 1) {
    std::fprintf(stderr, "spitectl unload: one model NAME is required\n");
    return exit_usage;
  }
  auto r = call_daemon("unload", a, {{"cmd", "unload"}, {"model", a.positional()[0]}});
  if (r.exit_code != exit_ok) return r.exit_code;
  const int finishing = r.result.value("requests_finishing", 0);
  std::printf("unloaded %s%s\n", a.positional()[0].c_str(),
              finishing > 0 ? (" (" + std::to_string(finishing) + " requests finish first)").c_str() : "");
  return exit_ok;
}

int daemon_dispatch(const std::string& model, const std::optional<std::string>& socket, bool explain, bool as_json) {
  const std::filesystem::path path = socket ? std::filesystem::path(*socket) : control::default_socket_path();
  auto c = control::client::connect(path);
  if (!c) {
    std::fprintf(stderr, "spitectl dispatch: '%s' is not a file, and %s\n", model.c_str(), c.err().message.c_str());
    return exit_unreachable;
  }
  auto r = (*c)->call({{"cmd", "dispatch"}, {"model", model}, {"explain", explain}});
  if (!r) {
    std::fprintf(stderr, "spitectl dispatch: %s\n", r.err().message.c_str());
    return exit_failure;
  }
  const json& j = *r;
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return exit_ok;
  }
  std::printf("model arch   : %s (kernels: %s)\n", j.value("model_arch", "").c_str(), j.value("kernel_family", "").c_str());
  std::printf("card         : spited on this machine (kernels generation %llu)\n",
              static_cast<unsigned long long>(j.value("generation", 0ULL)));
  std::printf("cpu arch     : %s\n", j["target"].value("arch", "").c_str());
  std::printf("kernels      :\n");
  for (const auto& e : j["kernels"]) {
    std::printf("  %-18s → %s\n", e.value("op", "").c_str(), e.value("where", "").c_str());
    if (!explain) continue;
    for (const auto& cand : e["candidates"]) {
      std::printf("      %-28s %-24s %s %s\n", cand.value("source", "").c_str(), cand.value("kernel", "").c_str(),
                  cand.value("score", 0) > 0 ? ("score " + std::to_string(cand.value("score", 0))).c_str() : "refused",
                  cand.value("reason", "").c_str());
    }
  }
  return exit_ok;
}

}  // namespace spite::ctl
