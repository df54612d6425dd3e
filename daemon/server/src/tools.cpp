#include "spite/server/tools.hpp"

#include <cctype>

#include "spite/grammar/json_schema.hpp"
#include "spite/server/harmony.hpp"

namespace spite::server {
using nlohmann::json;

namespace {

// Markers of each family, as the templates write them.
constexpr std::string_view hermes_open = "<tool_call>", hermes_close = "</tool_call>";
constexpr std::string_view llama3_tag = "<|python_tag|>";
constexpr std::string_view mistral_tag = "[TOOL_CALLS]";
constexpr std::string_view ds_calls_begin = "<｜tool▁calls▁begin｜>", ds_calls_end = "<｜tool▁calls▁end｜>";
constexpr std::string_view ds_call_begin = "<｜tool▁call▁begin｜>", ds_call_end = "<｜tool▁call▁end｜>";
constexpr std::string_view ds_sep = "<｜tool▁sep｜>";
constexpr std::string_view oss_to = "to=functions.", oss_message = "<|message|>", oss_call = "<|call|>";
constexpr std::string_view generic_open = "{\"tool_calls\"";

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

std::string_view trim(std::string_view s) {
  s = trim_left(s);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A GBNF string literal for `s`.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// One JSON value, parsed from the start of `s`; how many bytes it took, or nullopt.
std::optional<std::pair<json, std::size_t>> json_prefix(std::string_view s) {
  // Find the end of the first balanced object or array, strings respected.
  s = std::string_view(s);
  if (s.empty() || (s.front() != '{' && s.front() != '[')) return std::nullopt;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) {
        try {
          return std::make_pair(json::parse(s.substr(0, i + 1)), i + 1);
        } catch (const json::exception&) {
          return std::nullopt;
        }
      }
    }
  }
  return std::nullopt;
}

// {"name": N, "arguments"|"parameters": {...}} as a call.
std::optional<tool_call> call_of(const json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const json* args = j.contains("arguments") ? &j["arguments"] : j.contains("parameters") ? &j["parameters"] : nullptr;
  tool_call c{j["name"].get<std::string>(), "{}"};
  if (args != nullptr) c.arguments = args->is_string() ? args->get<std::string>() : args->dump();
  return c;
}

std::optional<std::vector<tool_call>> calls_of_array(const json& j) {
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<tool_call> out;
  for (const auto& x : j) {
    auto c = call_of(x);
    if (!c) return std::nullopt;
    out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace

std::string_view tool_format_name(tool_format f) {
  switch (f) {
    case tool_format::generic: return "generic";
    case tool_format::hermes: return "hermes";
    case tool_format::llama3: return "llama3";
    case tool_format::mistral: return "mistral";
    case tool_format::deepseek: return "deepseek";
    case tool_format::gpt_oss: return "gpt-oss";
  }
  return "generic";
}

tool_format detect_tool_format(std::string_view src) {
  const auto has = [&](std::string_view m) { return src.find(m) != std::string_view::npos; };
  if (has("<|channel|>") && has("<|call|>")) return tool_format::gpt_oss;
  if (has("tool▁calls▁begin") || has("tool_calls_begin")) return tool_format::deepseek;
  if (has(mistral_tag)) return tool_format::mistral;
  if (has(hermes_open)) return tool_format::hermes;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("tools"))) return tool_format::llama3;
  return tool_format::generic;
}

result<std::vector<tool_spec>> parse_tools(const json& tools) {
  if (!tools.is_array()) return make_error(errc::invalid_argument, "tools must be an array");
  if (tools.size() > 128) return make_error(errc::invalid_argument, "tools: at most 128");
  std::vector<tool_spec> out;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object()) {
      return make_error(errc::invalid_argument, where + " must be {\"type\": \"function\", \"function\": {...}}");
    }
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty() ||
        f["name"].get<std::string>().size() > 64) {
      return make_error(errc::invalid_argument, where + ".function.name must be a string of 1..64 characters");
    }
    tool_spec s{f["name"].get<std::string>(), nullptr};
    for (char c : s.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
        return make_error(errc::invalid_argument, where + ".function.name may hold letters, digits, _ - .");
      }
    }
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      if (!f["parameters"].is_object()) return make_error(errc::invalid_argument, where + ".function.parameters must be a JSON schema");
      s.parameters = nlohmann::ordered_json::parse(f["parameters"].dump());
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string prefix_gbnf_rules(std::string_view g, std::string_view prefix) {
  std::string out;
  out.reserve(g.size() + g.size() / 4);
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (std::size_t i = 0; i < g.size();) {
    const char c = g[i];
    if (c == '"' || c == '[') {  // a literal or class: copied with its escapes
      const char close = c == '"' ? '"' : ']';
      out += c;
      ++i;
      while (i < g.size() && g[i] != close) {
        if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
        out += g[i++];
      }
      if (i < g.size()) out += g[i++];
    } else if (c == '#') {  // a comment, to the end of the line
      while (i < g.size() && g[i] != '\n') out += g[i++];
    } else if (ident(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < g.size() && ident(g[j])) ++j;
      out += prefix;
      out.append(g.substr(i, j - i));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

result<std::string> tool_call_gbnf(tool_format format, const std::vector<tool_spec>& tools, bool parallel) {
  if (tools.empty()) return make_error(errc::invalid_argument, "no tools to call");
  std::string rules, calls;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const tool_spec& t = tools[i];
    std::string p = "t";  // built step by step: GCC 12 warns falsely on "t" + to_string(i)
    p += std::to_string(i);
    p += '-';
    auto args = t.parameters.is_null() ? result<std::string>(grammar::json_object_gbnf()) : grammar::json_schema_to_gbnf(t.parameters);
    if (!args) return make_error(args.err().code, "tools: function '" + t.name + "': " + args.err().message);
    rules += prefix_gbnf_rules(*args, p) + "\n";
    const std::string a = p + "root";
    std::string call;
    switch (format) {
      case tool_format::llama3:
        call = literal("{\"name\": \"" + t.name + "\", \"parameters\": ") + " " + a + " " + literal("}");
        break;
      case tool_format::deepseek:
        call = literal(std::string(ds_call_begin) + "function" + std::string(ds_sep) + t.name + "\n```json\n") + " " + a +
               " " + literal("\n```" + std::string(ds_call_end));
        break;
      case tool_format::gpt_oss:
        call = literal("<|channel|>commentary " + std::string(oss_to) + t.name + " <|constrain|>json" + std::string(oss_message)) +
               " " + a + " " + literal(oss_call);
        break;
      default:
        call = literal("{\"name\": \"" + t.name + "\", \"arguments\": ") + " " + a + " " + literal("}");
    }
    calls += (calls.empty() ? "" : " | ") + std::string("call-") + std::to_string(i);
    rules += "call-" + std::to_string(i) + " ::= " + call + "\n";
  }
  rules += "call ::= " + calls + "\n";
  std::string root;
  switch (format) {
    case tool_format::hermes:
      root = literal(std::string(hermes_open) + "\n") + " call " + literal("\n" + std::string(hermes_close)) +
             (parallel ? " (" + literal("\n" + std::string(hermes_open) + "\n") + " call " +
                             literal("\n" + std::string(hermes_close)) + ")*"
                       : "");
      break;
    case tool_format::mistral:
      root = literal(std::string(mistral_tag) + "[") + " call " + (parallel ? "(" + literal(", ") + " call)* " : "") + literal("]");
      break;
    case tool_format::deepseek:
      root = literal(ds_calls_begin) + " call " + (parallel ? "call* " : "") + literal(ds_calls_end);
      break;
    case tool_format::llama3:
    case tool_format::gpt_oss:
      root = "call";  // one call per turn in these formats
      break;
    case tool_format::generic:
      root = literal("{\"tool_calls\": [") + " call " + (parallel ? "(" + literal(", ") + " call)* " : "") + literal("]}");
      break;
  }
  return "root ::= " + root + "\n" + rules;
}

std::optional<std::vector<tool_call>> parse_tool_calls(tool_format format, std::string_view text, std::string& content) {
  content.clear();
  switch (format) {
    case tool_format::hermes: {
      const auto first = text.find(hermes_open);
      if (first == std::string_view::npos) return std::nullopt;
      std::vector<tool_call> calls;
      std::string_view rest = text.substr(first);
      while (true) {
        rest = trim_left(rest);
        if (!rest.starts_with(hermes_open)) break;
        rest.remove_prefix(hermes_open.size());
        const auto close = rest.find(hermes_close);
        auto j = json_prefix(trim_left(close == std::string_view::npos ? rest : rest.substr(0, close)));
        if (!j) return std::nullopt;
        auto c = call_of(j->first);
        if (!c) return std::nullopt;
        calls.push_back(std::move(*c));
        if (close == std::string_view::npos) break;
        rest.remove_prefix(close + hermes_close.size());
      }
      if (calls.empty() || !trim(rest).empty()) return std::nullopt;
      content = std::string(trim(text.substr(0, first)));
      return calls;
    }
    case tool_format::mistral: {
      const auto at = text.find(mistral_tag);
      if (at == std::string_view::npos) return std::nullopt;
      auto j = json_prefix(trim_left(text.substr(at + mistral_tag.size())));
      if (!j) return std::nullopt;
      auto calls = calls_of_array(j->first);
      if (calls) content = std::string(trim(text.substr(0, at)));
      return calls;
    }
    case tool_format::deepseek: {
      const auto at = text.find(ds_calls_begin);
      if (at == std::string_view::npos) return std::nullopt;
      std::vector<tool_call> calls;
      std::string_view rest = text.substr(at + ds_calls_begin.size());
      while (true) {
        const auto b = rest.find(ds_call_begin);
        if (b == std::string_view::npos) break;
        rest.remove_prefix(b + ds_call_begin.size());
        const auto sep = rest.find(ds_sep);
        if (sep == std::string_view::npos) return std::nullopt;
        rest.remove_prefix(sep + ds_sep.size());
        const auto nl = rest.find('\n');
        if (nl == std::string_view::npos) return std::nullopt;
        tool_call c{std::string(trim(rest.substr(0, nl))), "{}"};
        rest.remove_prefix(nl + 1);
        const auto fence = rest.find("```json");
        if (fence != std::string_view::npos) rest.remove_prefix(fence + 7);
        auto j = json_prefix(trim_left(rest));
        if (!j) return std::nullopt;
        c.arguments = j->first.dump();
        calls.push_back(std::move(c));
      }
      if (calls.empty()) return std::nullopt;
      content = std::string(trim(text.substr(0, at)));
      return calls;
    }
    case tool_format::gpt_oss: {
      const auto to = text.find(oss_to);
      if (to == std::string_view::npos) return std::nullopt;
      std::string_view rest = text.substr(to + oss_to.size());
      std::size_t name_end = 0;
      while (name_end < rest.size() && !std::isspace(static_cast<unsigned char>(rest[name_end])) && rest[name_end] != '<') ++name_end;
      tool_call c{std::string(rest.substr(0, name_end)), "{}"};
      const auto msg = rest.find(oss_message);
      if (msg == std::string_view::npos || c.name.empty()) return std::nullopt;
      auto j = json_prefix(trim_left(rest.substr(msg + oss_message.size())));
      if (!j) return std::nullopt;
      c.arguments = j->first.dump();
      const auto channel = text.rfind("<|channel|>", to);
      content = plain_content(format, text.substr(0, channel == std::string_view::npos ? to : channel));
      return std::vector<tool_call>{std::move(c)};
    }
    case tool_format::llama3: {
      std::string_view t = trim(text);
      if (t.starts_with(llama3_tag)) t = trim_left(t.substr(llama3_tag.size()));
      auto j = json_prefix(t);
      if (!j || !trim(t.substr(j->second)).empty()) return std::nullopt;
      auto c = call_of(j->first);
      if (!c) return std::nullopt;
      return std::vector<tool_call>{std::move(*c)};
    }
    case tool_format::generic: {
      // The calls object, alone or after some text.
      std::string_view t = trim(text);
      if (t.empty()) return std::nullopt;
      const auto at = t.front() == '{' ? 0 : t.rfind(generic_open);
      if (at == std::string_view::npos) return std::nullopt;
      auto j = json_prefix(t.substr(at));
      if (!j || !trim(t.substr(at + j->second)).empty() || !j->first.is_object() || !j->first.contains("tool_calls")) {
        return std::nullopt;
      }
      auto calls = calls_of_array(j->first["tool_calls"]);
      if (calls) content = std::string(trim(t.substr(0, at)));
      return calls;
    }
  }
  return std::nullopt;
}

bool may_become_tool_call(tool_format format, std::string_view text) {
  const std::string_view t = trim_left(text);
  const auto begins = [&](std::string_view marker) {
    return t.size() < marker.size() ? marker.starts_with(t) : t.starts_with(marker);
  };
  switch (format) {
    case tool_format::hermes: return begins(hermes_open);
    case tool_format::mistral: return begins(mistral_tag);
    case tool_format::deepseek: return begins(ds_calls_begin);
    case tool_format::gpt_oss: return begins("<|channel|>");
    case tool_format::llama3: return t.empty() || t.front() == '{' || begins(llama3_tag);
    case tool_format::generic: return t.empty() || t.front() == '{';
  }
  return false;
}

std::string_view tool_call_marker(tool_format format) {
  switch (format) {
    case tool_format::hermes: return hermes_open;
    case tool_format::mistral: return mistral_tag;
    case tool_format::deepseek: return ds_calls_begin;
    case tool_format::llama3: return llama3_tag;
    case tool_format::generic: return generic_open;
    case tool_format::gpt_oss: return {};  // its answers begin with a channel header: held from the start
  }
  return {};
}

std::string plain_content(tool_format format, std::string_view text) {
  if (format != tool_format::gpt_oss || text.find(oss_message) == std::string_view::npos) return std::string(trim(text));
  harmony_stream h;
  const std::string content = h.feed(text).content + h.finish().content;
  return std::string(trim(content));
}

std::string tool_call_stream::feed(std::string_view text) {
  if (content_) return from_content(text);
  call_ += text;
  if (may_become_tool_call(format_, call_)) return {};
  content_ = true;
  const std::string all = std::move(call_);
  call_.clear();
  return from_content(all);
}

std::string tool_call_stream::from_content(std::string_view text) {
  const std::string_view tag = tool_call_marker(format_);
  if (tag.empty()) return std::string(text);
  tag_tail_ += text;
  if (const auto at = tag_tail_.find(tag); at != std::string::npos) {
    std::string ready = tag_tail_.substr(0, at);
    call_ = tag_tail_.substr(at);
    tag_tail_.clear();
    content_ = false;  // what follows the tag is held as a call again
    return ready;
  }
  std::size_t keep = 0;  // the longest end that begins the tag
  for (std::size_t k = std::min(tag.size() - 1, tag_tail_.size()); k > 0; --k) {
    if (std::string_view(tag_tail_).ends_with(tag.substr(0, k))) {
      keep = k;
      break;
    }
  }
  std::string ready = tag_tail_.substr(0, tag_tail_.size() - keep);
  tag_tail_.erase(0, tag_tail_.size() - keep);
  return ready;
}

tool_call_stream::rest tool_call_stream::finish() {
  rest r{std::move(tag_tail_), std::move(call_)};
  tag_tail_.clear();
  call_.clear();
  return r;
}

std::string generic_tool_prompt(const std::vector<tool_spec>& tools) {
  json list = json::array();
  for (const auto& t : tools) list.push_back({{"name", t.name}, {"parameters", t.parameters.is_null() ? json::object() : json::parse(t.parameters.dump())}});
  return "You can call these tools:\n" + list.dump() +
         "\nTo call tools, answer with only this JSON: {\"tool_calls\": [{\"name\": NAME, \"arguments\": {...}}]}. "
         "Otherwise answer normally.";
}

}  // namespace spite::server
