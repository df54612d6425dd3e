// spite.toml: parsed with toml++ (built without exceptions), checked key by key into daemon_config.
#include "spite/config/config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "support.hpp"

namespace spite::config {
namespace fs = std::filesystem;

namespace {

using detail::quote;

struct document {
  std::string file;   // as shown in messages
  fs::path base_dir;  // anchors relative paths
};

const char* type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
  }
  return "an unknown type";
}

std::string bracket(std::string_view name) {
  std::string out = "[";
  out += name;
  out += ']';
  return out;
}

std::string show(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// One table of the file: knows its label ("[server]", "[[model]] #2") for messages.
class section {
 public:
  section(const document& doc, const toml::table& table, std::string label)
      : doc_(doc), table_(table), label_(std::move(label)) {}

  const toml::table& table() const { return table_; }
  const std::string& label() const { return label_; }
  const document& doc() const { return doc_; }

  // "<file>:<line>: <label> <key>: <message>"
  error fail(const toml::source_region& where, std::string_view key, const std::string& message,
             errc code = errc::invalid_argument) const {
    std::string text = doc_.file;
    text += ':';
    text += std::to_string(where.begin.line);
    text += ": ";
    text += label_;
    if (!key.empty() && !label_.empty()) text += ' ';
    text += key;
    text += ": ";
    text += message;
    return make_error(code, std::move(text));
  }

  error wrong_type(const toml::node& n, std::string_view key, std::string_view expected) const {
    return fail(n.source(), key, "expected " + std::string(expected) + ", got " + type_name(n.type()));
  }

  // Every key must be one of `known`.
  // Every key must be one of `known`; the first unknown one in the file is reported.
  result<void> only_keys(std::initializer_list<std::string_view> known) const {
    const toml::key* first = nullptr;
    for (const auto& [k, v] : table_) {
      bool found = false;
      for (std::string_view c : known) found = found || c == k.str();
      if (!found && (first == nullptr || k.source().begin.line < first->source().begin.line)) first = &k;
    }
    if (first == nullptr) return ok();
    const std::string_view name = first->str();
    std::string message = "unknown key";
    if (const std::string_view guess = detail::closest(name, {known.begin(), known.size()}); !guess.empty()) {
      message += ", did you mean \"";
      message += guess;
      message += "\"?";
    }
    return fail(first->source(), detail::escape(name), message);
  }

  template <class Int>
  result<void> integer(std::string_view key, Int& out, std::int64_t lo, std::int64_t hi) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    const auto* v = n->as_integer();
    if (v == nullptr) return wrong_type(*n, key, "an integer");
    const std::int64_t x = v->get();
    if (x < lo || x > hi) {
      return fail(n->source(), key,
                  std::to_string(x) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi),
                  errc::out_of_range);
    }
    out = static_cast<Int>(x);
    return ok();
  }

  // A float (integers accepted) in [lo, hi], or (lo, hi] when `lo_open`.
  result<void> number(std::string_view key, float& out, double lo, double hi, bool lo_open = false) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    double x = 0;
    if (const auto* f = n->as_floating_point()) x = f->get();
    else if (const auto* i = n->as_integer()) x = static_cast<double>(i->get());
    else return wrong_type(*n, key, "a number");
    const bool in = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
    if (!in) {
      std::string range = lo_open ? "(" : "";
      range += show(lo);
      range += lo_open ? ", " : "..";
      range += show(hi);
      if (lo_open) range += ']';
      return fail(n->source(), key, show(x) + " is out of range " + range, errc::out_of_range);
    }
    out = static_cast<float>(x);
    return ok();
  }

  result<void> boolean(std::string_view key, bool& out) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    const auto* v = n->as_boolean();
    if (v == nullptr) return wrong_type(*n, key, "a boolean");
    out = v->get();
    return ok();
  }

  // A string node checked for length and control characters.
  result<std::string> text_of(const toml::node& n, std::string_view key, bool allow_empty) const {
    const auto* v = n.as_string();
    if (v == nullptr) return wrong_type(n, key, "a string");
    const std::string& s = v->get();
    if (s.size() > max_string_bytes) {
      return fail(n.source(), key, "longer than " + std::to_string(max_string_bytes) + " bytes", errc::out_of_range);
    }
    if (!allow_empty && s.empty()) return fail(n.source(), key, "must not be empty");
    for (char c : s) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return fail(n.source(), key, quote(s) + " contains a control character");
      }
    }
    return s;
  }

  result<void> string(std::string_view key, std::string& out, bool allow_empty = true) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    auto s = text_of(*n, key, allow_empty);
    if (!s) return std::move(s).err();
    out = std::move(*s);
    return ok();
  }

  fs::path resolve(const std::string& p) const {
    const fs::path path(p);
    return (path.is_absolute() ? path : doc_.base_dir / path).lexically_normal();
  }

  result<void> path(std::string_view key, fs::path& out) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    auto s = text_of(*n, key, false);
    if (!s) return std::move(s).err();
    out = resolve(*s);
    return ok();
  }

  // An array of at most `max` strings; `each(node, key_with_index, text)` may reject one.
  template <class Each>
  result<void> strings(std::string_view key, std::size_t max, Each&& each) const {
    const toml::node* n = table_.get(key);
    if (n == nullptr) return ok();
    const auto* arr = n->as_array();
    if (arr == nullptr) return wrong_type(*n, key, "an array of strings");
    if (arr->size() > max) {
      return fail(n->source(), key, std::to_string(arr->size()) + " entries, at most " + std::to_string(max),
                  errc::out_of_range);
    }
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string indexed = std::string(key) + "[" + std::to_string(i) + "]";
      auto s = text_of(*arr->get(i), indexed, false);
      if (!s) return std::move(s).err();
      SPITE_TRY(each(*arr->get(i), indexed, std::move(*s)));
    }
    return ok();
  }

 private:
  const document& doc_;
  const toml::table& table_;
  std::string label_;
};

result<void> parse_server(const section& s, server_config& out) {
  SPITE_TRY(s.only_keys({"host", "port", "max_concurrent", "queue_size", "api_keys", "api_key_file",
                         "max_request_bytes", "max_tokens", "request_timeout_s", "shutdown_timeout_s", "cors_origins"}));
  SPITE_TRY(s.string("host", out.host, false));
  for (char c : out.host) {
    if (c == ' ') return s.fail(s.table().get("host")->source(), "host", quote(out.host) + " contains a space");
  }
  SPITE_TRY(s.integer("port", out.port, 1, 65535));
  SPITE_TRY(s.integer("max_concurrent", out.max_concurrent, 1, 1024));
  SPITE_TRY(s.integer("queue_size", out.queue_size, 0, 65536));
  SPITE_TRY(s.integer("max_request_bytes", out.max_request_bytes, 1024, std::int64_t{64} << 20));
  SPITE_TRY(s.integer("max_tokens", out.max_tokens, 1, 1 << 20));
  SPITE_TRY(s.integer("request_timeout_s", out.request_timeout_s, 1, 86400));
  SPITE_TRY(s.integer("shutdown_timeout_s", out.shutdown_timeout_s, 0, 3600));
  SPITE_TRY(s.strings("cors_origins", 64, [&](const toml::node& n, const std::string& key, std::string v) {
    if (v != "*" && !(v.starts_with("http://") || v.starts_with("https://"))) {
      return result<void>(s.fail(n.source(), key, "origin '" + v + "' must be \"*\" or start with http:// or https://"));
    }
    out.cors_origins.push_back(std::move(v));
    return ok();
  }));
  SPITE_TRY(s.strings("api_keys", max_api_keys, [&](const toml::node& n, const std::string& key, std::string v) {
    if (const std::string problem = detail::api_key_problem(v); !problem.empty()) {
      return result<void>(s.fail(n.source(), key, "api key " + problem));
    }
    out.api_keys.push_back(std::move(v));
    return ok();
  }));
  SPITE_TRY(s.path("api_key_file", out.api_key_file));
  if (!out.api_key_file.empty()) {
    const toml::node& n = *s.table().get("api_key_file");
    auto keys = detail::read_api_key_file(out.api_key_file);
    if (!keys) return s.fail(n.source(), "api_key_file", keys.err().message, keys.err().code);
    if (out.api_keys.size() + keys->size() > max_api_keys) {
      return s.fail(n.source(), "api_key_file",
                    "more than " + std::to_string(max_api_keys) + " api keys with api_keys", errc::out_of_range);
    }
    for (auto& k : *keys) out.api_keys.push_back(std::move(k));
  }
  return ok();
}

// "0660" (a string of octal digits) or an integer such as 0o660.
result<void> parse_control(const section& s, control_config& out) {
  SPITE_TRY(s.only_keys({"socket", "mode", "group"}));
  if (const toml::node* n = s.table().get("socket")) {  // "" keeps the default
    auto text = s.text_of(*n, "socket", true);
    if (!text) return std::move(text).err();
    out.socket = text->empty() ? fs::path() : s.resolve(*text);
    if (out.socket.string().size() > 107) {
      return s.fail(n->source(), "socket", "path is longer than a unix socket allows (107 bytes)",
                    errc::out_of_range);
    }
  }
  SPITE_TRY(s.string("group", out.group));
  const toml::node* n = s.table().get("mode");
  if (n == nullptr) return ok();
  std::int64_t mode = -1;
  if (const auto* i = n->as_integer()) {
    mode = i->get();
  } else if (const auto* str = n->as_string()) {
    const std::string& t = str->get();
    const bool octal = !t.empty() && t.size() <= 4 &&
                       t.find_first_not_of("01234567") == std::string::npos;
    if (!octal) return s.fail(n->source(), "mode", quote(t) + " is not an octal mode such as \"0660\"");
    mode = std::stoll(t, nullptr, 8);
  } else {
    return s.wrong_type(*n, "mode", "an octal string such as \"0660\"");
  }
  if (mode < 0 || mode > 0777) {
    return s.fail(n->source(), "mode",
                  std::to_string(mode) + " is not a permission mode within 0777 (write it as \"0660\" or 0o660)",
                  errc::out_of_range);
  }
  if ((mode & 0007) != 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode));
    return s.fail(n->source(), "mode",
                  std::string(buf) + " gives permissions to others; the control socket must not be "
                                     "world-accessible (use 0660 and a group)");
  }
  out.mode = static_cast<std::uint32_t>(mode);
  return ok();
}

// One LoRA entry: {path = "...", scale = 0.5} or "path[:scale]".
result<lora_adapter> parse_lora(const section& model, const toml::node& n, const std::string& key) {
  constexpr double scale_limit = 10.0;
  lora_adapter out;
  if (const auto* t = n.as_table()) {
    const section sub(model.doc(), *t, model.label() + " " + key);
    SPITE_TRY(sub.only_keys({"path", "scale"}));
    if (t->get("path") == nullptr) return sub.fail(n.source(), "path", "is required");
    SPITE_TRY(sub.path("path", out.path));
    SPITE_TRY(sub.number("scale", out.scale, -scale_limit, scale_limit));
    return out;
  }
  if (n.as_string() == nullptr) return model.wrong_type(n, key, "a table {path, scale} or a string \"path[:scale]\"");
  auto text = model.text_of(n, key, false);
  if (!text) return std::move(text).err();
  std::string p = *text;
  if (const std::size_t colon = p.rfind(':'); colon != std::string::npos && colon + 1 < p.size()) {
    float scale = 0;
    const char* first = p.data() + colon + 1;
    const char* last = p.data() + p.size();
    const auto r = std::from_chars(first, last, scale);
    if (r.ec == std::errc{} && r.ptr == last) {
      if (!(std::isfinite(scale) && std::fabs(scale) <= scale_limit)) {
        return model.fail(n.source(), key, show(scale) + " is out of range -10..10", errc::out_of_range);
      }
      out.scale = scale;
      p.resize(colon);
    }
  }
  if (p.empty()) return model.fail(n.source(), key, "the path is empty");
  out.path = model.resolve(p);
  return out;
}

// A [[model]] entry, or the brief's single [model] table (where name defaults to the stem).
result<model_config> parse_model(const section& s, bool name_required) {
  SPITE_TRY(s.only_keys({"name", "path", "lora", "n_ctx", "preload", "keep_alive", "chat_template"}));
  model_config m;
  if (s.table().get("path") == nullptr) return s.fail(s.table().source(), "path", "is required");
  SPITE_TRY(s.path("path", m.path));
  if (const toml::node* n = s.table().get("name")) {
    SPITE_TRY(s.string("name", m.name));
    if (!valid_model_name(m.name)) {
      return s.fail(n->source(), "name", quote(m.name) + " is not a valid model name ([A-Za-z0-9._:-], 1 to 64)");
    }
  } else if (name_required) {
    return s.fail(s.table().source(), "name", "is required");
  } else {
    m.name = model_name_from_path(m.path);
  }
  SPITE_TRY(s.integer("n_ctx", m.n_ctx, 0, 1 << 24));
  SPITE_TRY(s.boolean("preload", m.preload));
  SPITE_TRY(s.integer("keep_alive", m.keep_alive_s, -1, 2147483647));
  SPITE_TRY(s.string("chat_template", m.chat_template, false));
  if (const toml::node* n = s.table().get("lora")) {
    const auto* arr = n->as_array();
    if (arr == nullptr) return s.wrong_type(*n, "lora", "an array");
    if (arr->size() > max_lora_per_model) {
      return s.fail(n->source(), "lora",
                    std::to_string(arr->size()) + " adapters, at most " + std::to_string(max_lora_per_model),
                    errc::out_of_range);
    }
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto l = parse_lora(s, *arr->get(i), "lora[" + std::to_string(i) + "]");
      if (!l) return std::move(l).err();
      m.lora.push_back(std::move(*l));
    }
  }
  return m;
}

result<void> parse_models(const document& doc, const toml::node& n, std::vector<model_config>& out) {
  std::map<std::string, std::uint32_t> lines;  // name -> line of its table
  const auto add = [&](const section& s, model_config m) -> result<void> {
    const std::uint32_t line = s.table().source().begin.line;
    const auto [it, fresh] = lines.emplace(m.name, line);
    if (!fresh) {
      const toml::node* name = s.table().get("name");
      return s.fail(name != nullptr ? name->source() : s.table().source(), "name",
                    "duplicate model name " + quote(m.name) + " (first at line " + std::to_string(it->second) + ")");
    }
    out.push_back(std::move(m));
    return ok();
  };
  if (const auto* t = n.as_table()) {
    const section s(doc, *t, "[model]");
    auto m = parse_model(s, false);
    if (!m) return std::move(m).err();
    return add(s, std::move(*m));
  }
  static const toml::table no_keys;
  const section top(doc, no_keys, "");
  const auto* arr = n.as_array();
  if (arr == nullptr) return top.wrong_type(n, "[[model]]", "an array of tables");
  if (arr->size() > max_models) {
    return top.fail(n.source(), "[[model]]",
                    std::to_string(arr->size()) + " models, at most " + std::to_string(max_models), errc::out_of_range);
  }
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const std::string label = "[[model]] #" + std::to_string(i + 1);
    const auto* t = arr->get(i)->as_table();
    if (t == nullptr) return top.wrong_type(*arr->get(i), label, "a table");
    const section s(doc, *t, label);
    auto m = parse_model(s, true);
    if (!m) return std::move(m).err();
    SPITE_TRY(add(s, std::move(*m)));
  }
  return ok();
}

result<void> parse_inference(const section& s, inference_config& out) {
  SPITE_TRY(s.only_keys({"threads", "n_threads", "n_ctx", "batch_size", "memory_limit_mib", "repack_weights", "prompt_cache",
                         "pin_threads", "swa_full", "flash_attn"}));
  if (s.table().get("threads") != nullptr && s.table().get("n_threads") != nullptr) {
    return s.fail(s.table().get("n_threads")->source(), "n_threads", "is an alias of threads; set only one");
  }
  SPITE_TRY(s.integer("threads", out.threads, 0, 1024));
  SPITE_TRY(s.integer("n_threads", out.threads, 0, 1024));
  SPITE_TRY(s.integer("n_ctx", out.n_ctx, 0, 1 << 24));
  SPITE_TRY(s.integer("batch_size", out.batch_size, 1, 65536));
  SPITE_TRY(s.integer("memory_limit_mib", out.memory_limit_mib, 0, std::int64_t{1} << 40));
  SPITE_TRY(s.boolean("repack_weights", out.repack_weights));
  SPITE_TRY(s.boolean("prompt_cache", out.prompt_cache));
  SPITE_TRY(s.boolean("pin_threads", out.pin_threads));
  SPITE_TRY(s.boolean("swa_full", out.swa_full));
  SPITE_TRY(s.boolean("flash_attn", out.flash_attn));
  return ok();
}

result<void> parse_kernels(const section& s, kernels_config& out) {
  SPITE_TRY(s.only_keys({"dirs"}));
  return s.strings("dirs", max_kernel_dirs, [&](const toml::node&, const std::string&, std::string v) {
    out.dirs.push_back(s.resolve(v));
    return ok();
  });
}

result<void> parse_sampling(const section& s, sampling_config& out) {
  SPITE_TRY(s.only_keys({"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "seed"}));
  SPITE_TRY(s.number("temperature", out.temperature, 0, 5));
  SPITE_TRY(s.integer("top_k", out.top_k, 0, 1 << 20));
  SPITE_TRY(s.number("top_p", out.top_p, 0, 1, true));
  SPITE_TRY(s.number("min_p", out.min_p, 0, 1));
  SPITE_TRY(s.number("repeat_penalty", out.repeat_penalty, 0, 10, true));
  if (s.table().get("seed") != nullptr) {
    std::int64_t seed = 0;
    SPITE_TRY(s.integer("seed", seed, 0, INT64_MAX));
    out.seed = static_cast<std::uint64_t>(seed);
  }
  return ok();
}

result<void> parse_log(const section& s, log::level& out) {
  SPITE_TRY(s.only_keys({"level"}));
  const toml::node* n = s.table().get("level");
  if (n == nullptr) return ok();
  std::string name;
  SPITE_TRY(s.string("level", name));
  if (name == "error") out = log::level::error;
  else if (name == "warning") out = log::level::warn;
  else if (name == "info") out = log::level::info;
  else if (name == "debug") out = log::level::debug;
  else {
    static constexpr std::array<std::string_view, 4> levels = {"error", "warning", "info", "debug"};
    std::string message = quote(name) + " is not one of error, warning, info, debug";
    const std::string_view guess = detail::closest(name, levels);
    if (!guess.empty()) message += "; did you mean \"" + std::string(guess) + "\"?";
    return s.fail(n->source(), "level", message);
  }
  return ok();
}

result<void> parse_root(const document& doc, const toml::table& root, daemon_config& config) {
  const section top(doc, root, "");
  static constexpr std::array<std::string_view, 7> tables = {
      "server", "control", "model", "inference", "kernels", "sampling", "log"};
  // In the order of the file, so that the first problem in it is the one reported.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [k, v] : root) entries.emplace_back(&k, &v);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin.line < b.first->source().begin.line;
  });
  for (const auto& [key, node] : entries) {
    const toml::key& k = *key;
    const toml::node& v = *node;
    const std::string_view name = k.str();
    bool known = false;
    for (std::string_view t : tables) known = known || t == name;
    if (!known) {
      std::string message = v.is_table() ? "unknown table" : "unknown key";
      if (const std::string_view guess = detail::closest(name, tables); !guess.empty()) {
        message += ", did you mean [" + std::string(guess) + "]?";
      }
      return top.fail(k.source(), v.is_table() ? bracket(detail::escape(name)) : quote(name), message);
    }
    if (name == "model") {
      SPITE_TRY(parse_models(doc, v, config.models));
      continue;
    }
    const std::string label = bracket(name);
    const auto* t = v.as_table();
    if (t == nullptr) return top.wrong_type(v, label, "a table");
    const section s(doc, *t, label);
    if (name == "server") SPITE_TRY(parse_server(s, config.server));
    else if (name == "control") SPITE_TRY(parse_control(s, config.control));
    else if (name == "inference") SPITE_TRY(parse_inference(s, config.inference));
    else if (name == "kernels") SPITE_TRY(parse_kernels(s, config.kernels));
    else if (name == "sampling") SPITE_TRY(parse_sampling(s, config.sampling));
    else if (name == "log") SPITE_TRY(parse_log(s, config.log_level));
  }
  return ok();
}

}  // namespace

result<daemon_config> parse_config(std::string_view text, const fs::path& origin) {
  document doc;
  doc.file = origin.empty() ? std::string("<config>") : origin.string();
  std::error_code ec;
  const fs::path abs = origin.empty() ? fs::current_path(ec) / "spite.toml" : fs::absolute(origin, ec);
  doc.base_dir = ec ? origin.parent_path() : abs.parent_path().lexically_normal();
  if (text.size() > max_file_bytes) {
    return make_error(errc::out_of_range,
                      doc.file + ": larger than the limit of " + std::to_string(max_file_bytes) + " bytes");
  }
  toml::parse_result parsed = toml::parse(text, doc.file);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return make_error(errc::malformed, doc.file + ":" + std::to_string(e.source().begin.line) + ":" +
                                           std::to_string(e.source().begin.column) +
                                           ": TOML syntax error: " + std::string(e.description()));
  }
  daemon_config config;
  config.origin = origin;
  SPITE_TRY(parse_root(doc, parsed.table(), config));
  if (config.control.socket.empty()) config.control.socket = default_control_socket();
  return config;
}

result<daemon_config> load_config(const fs::path& path) {
  auto text = detail::read_small_file(path, max_file_bytes);
  if (!text) return std::move(text).err();
  return parse_config(*text, path);
}

}  // namespace spite::config
