// spitectl devices [--json]: the CPU and GPUs spite can use here, and why a GPU runtime is missing.
// spitectl cards [NAME...] [--json] [--resolve LIST]: the card table for planning without the card.
#include <cstdio>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "spite/core/cpu_plan.hpp"
#include "spite/dispatch/devices.hpp"

namespace spite::ctl {
namespace {

namespace dp = spite::dispatch;

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string gib_text(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

int usage(const char* cmd, const args& a, const char* synopsis, bool help) {
  std::fprintf(help ? stdout : stderr, "usage: spitectl %s %s\n%s", cmd, synopsis, a.help().c_str());
  return help ? exit_ok : exit_usage;
}

// The card a detected GPU's name matches, if any ("NVIDIA GeForce RTX 4090" -> RTX_4090).
const dp::card* matching_card(const dp::device_info& d) {
  if (d.kind == dp::device_kind::cpu) return nullptr;
  auto c = dp::find_card(d.name);
  return c ? *c : nullptr;
}

nlohmann::json devices_json(const dp::device_report& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices) {
    nlohmann::json j = {{"kind", std::string(dp::device_kind_name(d.kind))},
                        {"index", d.index},
                        {"name", d.name},
                        {"arch", d.arch},
                        {"driver", d.driver},
                        {"memory_bytes", d.memory_bytes}};
    if (const auto* c = matching_card(d)) j["card"] = c->name;
    devices.push_back(std::move(j));
  }
  nlohmann::json backends = nlohmann::json::array();
  for (const auto& b : r.backends) {
    backends.push_back({{"name", b.name},
                        {"kind", std::string(dp::device_kind_name(b.kind))},
                        {"found", b.found},
                        {"detail", b.detail}});
  }
  const auto& c = r.cpu;
  const spite::cpu_plan compute = spite::make_cpu_plan(spite::affinity_cpus());
  return {{"devices", std::move(devices)},
          {"backends", std::move(backends)},
          {"cpu",
           {{"machine", c.machine},
            {"vendor", c.vendor},
            {"brand", c.brand},
            {"isa", c.isa()},
            {"isa_candidates", c.isa_candidates()},
            {"x86_level", c.x86_level},
            {"flags", c.flags()},
            {"cores", c.cores},
            {"threads", c.threads},
            {"compute_threads", compute.default_threads()},
            {"cpu_quota", compute.quota}}}};
}

// "1.5 CPUs", "2 CPUs".
std::string format_quota(double cpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g CPU%s", cpus, cpus == 1.0 ? "" : "s");
  return buf;
}

void print_devices(const dp::device_report& r) {
  std::size_t gpus = 0;
  for (const auto& d : r.devices) {
    std::string line = std::string(dp::device_kind_name(d.kind)) + " " + std::to_string(d.index) + ": " + d.name;
    if (d.kind == dp::device_kind::cpu) {
      const auto extra = r.cpu.extra_flags();
      line += " (" + d.arch + (extra.empty() ? "" : ": " + joined(extra, " ")) + "), " +
              std::to_string(r.cpu.cores) + " cores, " + std::to_string(r.cpu.threads) + " threads";
      // What compute runs here by default: one thread per core it may use, within its cgroup's quota.
      const spite::cpu_plan compute = spite::make_cpu_plan(spite::affinity_cpus());
      line += ", " + std::to_string(compute.default_threads()) + " compute threads by default";
      if (compute.quota > 0) line += " (cgroup CPU quota " + format_quota(compute.quota) + ")";
    } else {
      ++gpus;
      line += " (" + d.arch + ")";
    }
    if (d.memory_bytes > 0) line += ", " + human_bytes(d.memory_bytes);
    if (!d.driver.empty()) line += ", " + d.driver;
    if (const auto* c = matching_card(d)) line += " [card " + c->name + "]";
    std::printf("%s\n", line.c_str());
  }
  if (gpus == 0) {
    std::vector<std::string> why;
    for (const auto& b : r.backends) why.push_back(b.name + ": " + b.detail);
    std::printf("no GPU found%s\n", why.empty() ? "" : (" (" + joined(why, "; ") + ")").c_str());
  }
}

nlohmann::json card_json(const dp::card& c) {
  return {{"name", c.name},
          {"aliases", c.aliases},
          {"vendor", c.vendor},
          {"kind", std::string(dp::device_kind_name(c.kind))},
          {"arch", c.arch},
          {"memory_bytes", c.memory_bytes},
          {"supported", c.supported},
          {"note", c.note}};
}

void print_cards(const std::vector<const dp::card*>& list) {
  std::printf("%-18s %-7s %-11s %-8s %9s  %-9s %s\n", "name", "vendor", "kind", "arch", "memory", "supported", "note");
  for (const auto* c : list) {
    std::printf("%-18s %-7s %-11s %-8s %9s  %-9s %s\n", c->name.c_str(), c->vendor.c_str(),
                std::string(dp::device_kind_name(c->kind)).c_str(), c->arch.c_str(), gib_text(c->memory_bytes).c_str(),
                c->supported ? "yes" : "no", c->note.c_str());
  }
}

}  // namespace

int run_devices(const std::vector<std::string>& argv) {
  args a;
  a.flag("--json", "print one JSON object").flag("--help", "show this help");
  constexpr const char* synopsis = "[--json]";
  if (auto r = a.parse(argv); !r) {
    std::fprintf(stderr, "spitectl devices: %s\n", r.err().message.c_str());
    return usage("devices", a, synopsis, false);
  }
  if (a.has("--help")) return usage("devices", a, synopsis, true);
  if (!a.positional().empty()) return usage("devices", a, synopsis, false);
  const dp::device_report report = dp::probe_devices();
  if (a.has("--json")) {
    std::cout << devices_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_devices(report);
  }
  return exit_ok;
}

int run_cards(const std::vector<std::string>& argv) {
  args a;
  a.flag("--json", "print a JSON array")
      .option("--resolve", "LIST", "print the GPU archs of a ';'-separated list of cards and archs")
      .flag("--help", "show this help");
  constexpr const char* synopsis = "[NAME...] [--json] | --resolve LIST";
  if (auto r = a.parse(argv); !r) {
    std::fprintf(stderr, "spitectl cards: %s\n", r.err().message.c_str());
    return usage("cards", a, synopsis, false);
  }
  if (a.has("--help")) return usage("cards", a, synopsis, true);
  if (const auto list = a.get("--resolve")) {
    if (!a.positional().empty()) return usage("cards", a, synopsis, false);
    auto archs = dp::resolve_gpu_archs(*list);
    if (!archs) {
      std::fprintf(stderr, "spitectl cards: %s\n", archs.err().message.c_str());
      return exit_failure;
    }
    if (a.has("--json")) {
      std::cout << nlohmann::json(*archs).dump() << "\n";
    } else {
      std::printf("%s\n", joined(*archs, ";").c_str());
    }
    return exit_ok;
  }
  std::vector<const dp::card*> list;
  if (a.positional().empty()) {
    for (const auto& c : dp::cards()) list.push_back(&c);
  }
  for (const auto& name : a.positional()) {
    auto c = dp::find_card(name);
    if (!c) {
      std::fprintf(stderr, "spitectl cards: %s\n", c.err().message.c_str());
      return exit_failure;
    }
    list.push_back(*c);
  }
  if (a.has("--json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto* c : list) out.push_back(card_json(*c));
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_cards(list);
  }
  return exit_ok;
}

}  // namespace spite::ctl
