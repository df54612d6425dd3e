// spitectl dispatch -m MODEL [--card NAME] [--explain] [--json] [--kernels DIR]...
// Which kernel serves each operation of MODEL on this machine, or on a named card: the
// plug-ins found on the kernel search path, resolved the way spited resolves them.
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "args.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/types.hpp"
#include "spite/models/kernel_plan.hpp"
#include "spite/models/model.hpp"

namespace spite::ctl {
namespace {

namespace dp = spite::dispatch;
namespace fs = std::filesystem;

// Built-in kernels run on the CPU whatever the target: on a GPU target they are the fallback.
std::string where(const dp::dispatch_choice& c, const dp::dispatch_target& t, const std::string& cpu_isa) {
  if (c.library == nullptr) {
    return std::string(t.device == SPITE_DEVICE_CPU ? "built-in " : "CPU fallback, built-in ") + "generic/generic/" + cpu_isa;
  }
  return c.library->path().parent_path().string() + " (" + c.kernel_name + ")";
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int run_dispatch(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "GGUF model file")
      .option("-m", "M", "same as --model")
      .option("--card", "NAME", "plan for this card instead of this machine (spitectl cards lists them)")
      .option("--kernels", "DIR", "kernel directory to search first (colon-separated list)")
      .option("--socket", "PATH", "ask the spited on this control socket (-m then names a loaded model)")
      .flag("--explain", "list every candidate with its score or the reason it was refused")
      .flag("--json", "machine-readable output")
      .flag("--help", "show this help");
  if (auto r = a.parse(argv); !r || a.has("--help")) {
    if (!r) std::fprintf(stderr, "spitectl dispatch: %s\n", r.err().message.c_str());
    std::fprintf(r ? stdout : stderr, "usage: spitectl dispatch -m MODEL [--card NAME] [--explain] [--json]\n%s",
                 a.help().c_str());
    return r ? exit_ok : exit_usage;
  }
  const auto model_path = a.get("--model") ? a.get("--model") : a.get("-m");
  if (!model_path) {
    std::fprintf(stderr, "spitectl dispatch: -m MODEL is required\n");
    return exit_usage;
  }
  // A model name rather than a file: ask the daemon, which shows its live kernel generation.
  std::error_code ec;
  if (a.get("--socket") || (!std::filesystem::exists(*model_path, ec) && !a.get("--card"))) {
    return daemon_dispatch(*model_path, a.get("--socket"), a.has("--explain"), a.has("--json"));
  }
  auto file = gguf::file::open(*model_path);
  if (!file) {
    std::fprintf(stderr, "spitectl dispatch: %s\n", file.err().message.c_str());
    return exit_failure;
  }
  auto model = models::load_model(*file);
  if (!model) {
    std::fprintf(stderr, "spitectl dispatch: %s\n", model.err().message.c_str());
    return exit_failure;
  }
  const auto [family, model_name] = models::kernel_identity_of(*file);

  // The target: a named card, or this machine's CPU (GPUs take part once spited runs them).
  dp::dispatch_target target;
  std::string card_line, arch_label = "cpu arch", arch_value;
  const dp::card* card = nullptr;
  const dp::cpu_features cpu = dp::detect_cpu();
  if (auto name = a.get("--card")) {
    auto found = dp::find_card(*name);
    if (!found) {
      std::fprintf(stderr, "spitectl dispatch: %s\n", found.err().message.c_str());
      return exit_failure;
    }
    card = *found;
    if (card->kind == dp::device_kind::none || !card->supported) {
      std::fprintf(stderr, "spitectl dispatch: %s is not supported by spited%s%s\n", card->name.c_str(),
                   card->note.empty() ? "" : ": ", card->note.c_str());
      return exit_failure;
    }
    target.device = static_cast<spite_device_kind>(card->kind);
    target.archs = dp::gpu_arch_candidates(card->arch);
    card_line = lower(card->name) + " (" + gib(card->memory_bytes) + ")";
    arch_label = "gpu arch";
    arch_value = card->arch;
  } else {
    target.device = SPITE_DEVICE_CPU;
    target.archs = cpu.isa_candidates();
    card_line = "this machine (" + (cpu.brand.empty() ? cpu.machine : cpu.brand) + ")";
    arch_value = cpu.isa();
  }

  std::vector<fs::path> path;
  if (auto dirs = a.get("--kernels")) path = dp::parse_path_list(*dirs);
  for (auto& p : dp::default_kernel_path()) path.push_back(std::move(p));
  dp::plugin_options options;
  options.plan_only = card != nullptr;
  options.plan_device = target.device;
  const auto set = dp::kernel_set::scan(path, options);
  auto d = dp::dispatcher::create(set, {family, model_name}, target);
  const auto ops = models::plan_ops(*file, (*model)->hp(), target);

  if (a.has("--json")) {
    nlohmann::json j;
    j["model"] = *model_path;
    j["model_arch"] = (*model)->arch();
    j["kernel_family"] = family + "/" + model_name;
    j["target"] = {{"device", std::string(dp::device_kind_name(static_cast<dp::device_kind>(target.device)))},
                   {"arch", arch_value},
                   {"archs", target.archs}};
    if (card != nullptr) j["card"] = {{"name", card->name}, {"memory_bytes", card->memory_bytes}};
    j["search_path"] = nlohmann::json::array();
    for (const auto& p : path) j["search_path"].push_back(p.string());
    j["rejected"] = nlohmann::json::array();
    for (const auto& r : set->rejected()) j["rejected"].push_back({{"path", r.path.string()}, {"reason", r.reason}});
    j["kernels"] = nlohmann::json::array();
    for (const auto& op : ops) {
      const dp::dispatch_choice& c = d->resolve(op.signature);
      nlohmann::json e{{"op", op.label}, {"source", c.source}, {"kernel", c.kernel_name}, {"where", where(c, target, cpu.isa())}};
      if (a.has("--explain")) {
        e["candidates"] = nlohmann::json::array();
        for (const auto& cand : c.candidates) {
          e["candidates"].push_back(
              {{"source", cand.source}, {"kernel", cand.kernel}, {"score", cand.score}, {"reason", cand.reason}});
        }
      }
      j["kernels"].push_back(std::move(e));
    }
    std::cout << j.dump(2) << "\n";
    return exit_ok;
  }

  std::printf("model arch   : %s (kernels: %s/%s)\n", (*model)->arch().c_str(), family.c_str(), model_name.c_str());
  std::printf("card         : %s\n", card_line.c_str());
  std::printf("%-12s : %s\n", arch_label.c_str(), arch_value.c_str());
  std::printf("kernels      :\n");
  for (const auto& op : ops) {
    const dp::dispatch_choice& c = d->resolve(op.signature);
    std::printf("  %-18s → %s\n", op.label.c_str(), where(c, target, cpu.isa()).c_str());
    if (!a.has("--explain")) continue;
    for (const auto& cand : c.candidates) {
      if (cand.score > 0) {
        std::printf("      %-28s %-24s score %-4d %s\n", cand.source.c_str(), cand.kernel.c_str(), cand.score,
                    cand.reason.empty() ? "(chosen)" : cand.reason.c_str());
      } else {
        std::printf("      %-28s %-24s refused    %s\n", cand.source.c_str(), cand.kernel.c_str(), cand.reason.c_str());
      }
    }
  }
  if (a.has("--explain") || !set->rejected().empty()) {
    for (const auto& r : set->rejected()) std::printf("refused library: %s\n", r.reason.c_str());
  }
  return exit_ok;
}

}  // namespace spite::ctl
