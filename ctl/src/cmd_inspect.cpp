// spitectl inspect FILE [--json] [--full]: what a GGUF file holds.
#include <cstdio>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/summary.hpp"

namespace spite::ctl {
namespace {

constexpr std::size_t k_abbreviated_items = 8;

std::string shape_text(const gguf::tensor_info& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(t.ne[d]);
  }
  return s + "]";
}

nlohmann::json inspect_json(const gguf::file& f, const gguf::file_summary& s, std::size_t max_items) {
  nlohmann::json parts = nlohmann::json::array();
  for (std::size_t i = 0; i < f.n_parts(); ++i) {
    parts.push_back({{"path", f.part_path(i)}, {"bytes", f.part_size(i)}, {"data_offset", f.data_offset(i)}});
  }
  nlohmann::json meta = nlohmann::json::array();
  for (const auto& e : f.meta().entries()) {
    nlohmann::json item = value_json(e.val, max_items);
    item["key"] = std::string(e.key);
    meta.push_back(std::move(item));
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors()) {
    nlohmann::json shape = nlohmann::json::array();
    for (int d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
    tensors.push_back({{"name", std::string(t.name)},
                       {"type", std::string(gguf::type_name(t.type))},
                       {"shape", std::move(shape)},
                       {"part", t.part},
                       {"offset", t.file_offset},
                       {"bytes", t.size}});
  }
  nlohmann::json totals = nlohmann::json::object();
  for (const auto& [name, tt] : s.per_type) {
    totals[name] = {{"tensors", tt.tensors}, {"elements", tt.elements}, {"bytes", tt.bytes}};
  }
  return {{"version", f.version()},
          {"alignment", f.alignment()},
          {"parts", std::move(parts)},
          {"architecture", s.architecture},
          {"name", s.name},
          {"tokenizer", {{"model", s.tokenizer_model}, {"kind", s.tokenizer_kind}, {"pre", s.tokenizer_pre},
                         {"n_vocab", s.n_vocab}}},
          {"parameters", s.n_params},
          {"tensor_bytes", s.tensor_bytes},
          {"metadata", std::move(meta)},
          {"tensors", std::move(tensors)},
          {"totals_per_type", std::move(totals)}};
}

void print_text(const gguf::file& f, const gguf::file_summary& s, std::size_t max_items) {
  std::printf("file          : %s (%s bytes%s)\n", f.part_path(0).c_str(), with_thousands(f.total_bytes()).c_str(),
              f.n_parts() > 1 ? (", " + std::to_string(f.n_parts()) + " parts").c_str() : "");
  for (std::size_t i = 1; i < f.n_parts(); ++i) {
    std::printf("  part %zu      : %s (%s bytes)\n", i + 1, f.part_path(i).c_str(), with_thousands(f.part_size(i)).c_str());
  }
  std::printf("format        : GGUF v%u, alignment %llu\n", f.version(), static_cast<unsigned long long>(f.alignment()));
  std::printf("architecture  : %s\n", s.architecture.empty() ? "(none)" : s.architecture.c_str());
  if (!s.name.empty()) std::printf("name          : %s\n", s.name.c_str());
  std::printf("tokenizer     : %s", s.tokenizer_kind.c_str());
  if (!s.tokenizer_model.empty()) std::printf(" (model %s", s.tokenizer_model.c_str());
  if (!s.tokenizer_pre.empty()) std::printf(", pre %s", s.tokenizer_pre.c_str());
  if (!s.tokenizer_model.empty()) std::printf(", %s tokens)", with_thousands(s.n_vocab).c_str());
  std::printf("\nparameters    : %s (%s)\n", human_count(s.n_params).c_str(), with_thousands(s.n_params).c_str());
  std::printf("tensor data   : %s\n", human_bytes(s.tensor_bytes).c_str());

  std::printf("\nmetadata (%zu keys):\n", f.meta().size());
  for (const auto& e : f.meta().entries()) {
    std::string type(gguf::value_type_name(e.val.type()));
    if (const auto* a = e.val.as_array()) {
      type = "arr[" + std::string(gguf::value_type_name(a->element_type())) + "," + std::to_string(a->size()) + "]";
    }
    std::printf("  %-40.*s %-14s %s\n", static_cast<int>(e.key.size()), e.key.data(), type.c_str(),
                value_text(e.val, max_items).c_str());
  }

  std::printf("\ntensors (%zu):\n", f.tensors().size());
  std::printf("  %-40s %-8s %-22s %14s %14s\n", "name", "type", "shape", "offset", "bytes");
  for (const auto& t : f.tensors()) {
    std::string offset = std::to_string(t.file_offset);
    if (f.n_parts() > 1) offset = std::to_string(t.part + 1) + ":" + offset;
    std::printf("  %-40.*s %-8.*s %-22s %14s %14s\n", static_cast<int>(t.name.size()), t.name.data(),
                static_cast<int>(gguf::type_name(t.type).size()), gguf::type_name(t.type).data(),
                shape_text(t).c_str(), offset.c_str(), with_thousands(t.size).c_str());
  }

  std::printf("\ntotals per type:\n");
  std::printf("  %-8s %8s %16s %16s\n", "type", "tensors", "elements", "bytes");
  for (const auto& [name, tt] : s.per_type) {
    std::printf("  %-8s %8llu %16s %16s\n", name.c_str(), static_cast<unsigned long long>(tt.tensors),
                with_thousands(tt.elements).c_str(), with_thousands(tt.bytes).c_str());
  }
}

}  // namespace

int run_inspect(const std::vector<std::string>& argv) {
  args a;
  a.flag("--json", "print one JSON object")
      .flag("--full", "print long metadata arrays whole instead of abbreviated")
      .flag("--help", "show this help");
  if (auto r = a.parse(argv); !r) {
    std::fprintf(stderr, "spitectl inspect: %s\n", r.err().message.c_str());
    return exit_usage;
  }
  if (a.has("--help") || a.positional().size() != 1) {
    std::fprintf(a.has("--help") ? stdout : stderr, "usage: spitectl inspect FILE [--json] [--full]\n%s",
                 a.help().c_str());
    return a.has("--help") ? exit_ok : exit_usage;
  }
  auto f = gguf::file::open(a.positional()[0]);
  if (!f) {
    std::fprintf(stderr, "spitectl inspect: %s\n", f.err().message.c_str());
    return exit_failure;
  }
  const std::size_t max_items = a.has("--full") ? SIZE_MAX : k_abbreviated_items;
  const gguf::file_summary s = gguf::summarize(*f);
  if (a.has("--json")) {
    std::cout << inspect_json(*f, s, max_items).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_text(*f, s, max_items);
  }
  return exit_ok;
}

}  // namespace spite::ctl
