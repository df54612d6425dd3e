// Helpers of spite::config that need no TOML, plus the defaults and flag overrides.
#include "support.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include "spite/config/config.hpp"

namespace spite::config {
namespace fs = std::filesystem;

namespace detail {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions.
  const std::size_t w = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * w);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t v = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1, d[(i - 1) * w + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) v = std::min(v, d[(i - 2) * w + j - 2] + 1);
      d[i * w + j] = v;
    }
  }
  return d[a.size() * w + b.size()];
}

std::string_view closest(std::string_view word, std::span<const std::string_view> candidates) {
  if (word.empty() || word.size() > 64) return {};
  std::string_view best;
  std::size_t best_d = 0;
  for (std::string_view c : candidates) {
    std::size_t d = edit_distance(word, c);
    // A third of the longer word (1 to 3 edits) counts as a typo, and so does a prefix of 3 or more.
    const std::size_t allowed = std::clamp<std::size_t>(std::max(word.size(), c.size()) / 3, 1, 3);
    const bool prefix = word.size() >= 3 && (c.substr(0, word.size()) == word || word.substr(0, c.size()) == c);
    if (d > allowed && !prefix) continue;
    if (prefix) d = std::min(d, allowed);
    if (best.empty() || d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string api_key_problem(std::string_view key) {
  if (key.empty()) return "is empty";
  if (key.size() > max_string_bytes) return "is longer than " + std::to_string(max_string_bytes) + " bytes";
  for (char c : key) {
    if (c == ' ' || c == '\t') return "contains a space";
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      return "contains a character that is not printable ASCII";
    }
  }
  return {};
}

result<std::string> read_small_file(const fs::path& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::io, path.string() + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[16384];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > limit) {
      return make_error(errc::out_of_range,
                        path.string() + ": larger than the limit of " + std::to_string(limit) + " bytes");
    }
  }
  if (in.bad()) return make_error(errc::io, path.string() + ": read error");
  return text;
}

result<std::vector<std::string>> read_api_key_file(const fs::path& path) {
  auto text = read_small_file(path, max_file_bytes);
  if (!text) return std::move(text).err();
  std::vector<std::string> keys;
  std::string_view rest = *text;
  for (std::size_t line_no = 1; !rest.empty(); ++line_no) {
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = path.string() + ":" + std::to_string(line_no) + ": ";
    if (const std::string problem = api_key_problem(line); !problem.empty()) {
      return make_error(errc::invalid_argument, where + "api key " + problem);
    }
    if (keys.size() == max_api_keys) {
      return make_error(errc::out_of_range, where + "more than " + std::to_string(max_api_keys) + " api keys");
    }
    keys.emplace_back(line);
  }
  return keys;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  out += escape(s);
  out += '"';
  return out;
}

std::string escape(std::string_view s) {
  constexpr std::size_t shown = 80;
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > shown) out += "...";
  return out;
}

}  // namespace detail

fs::path default_control_socket() {
  if (const char* dir = std::getenv("RUNTIME_DIRECTORY"); dir != nullptr && *dir != '\0') {
    // systemd passes several directories separated by ':' when the unit lists several.
    const std::string_view all(dir);
    return fs::path(std::string(all.substr(0, all.find(':')))) / "spited.sock";
  }
  return "/run/spite/spited.sock";
}

daemon_config default_config() {
  daemon_config config;
  config.control.socket = default_control_socket();
  return config;
}

bool valid_model_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
  });
}

std::string model_name_from_path(const fs::path& path) {
  std::string name = path.stem().string();
  if (name.size() > 64) name.resize(64);
  for (char& c : name) {
    if (!valid_model_name(std::string_view(&c, 1))) c = '_';
  }
  return name.empty() ? std::string("model") : name;
}

void apply_overrides(daemon_config& config, const overrides& flags) {
  const auto absolute = [](const fs::path& p) {
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec);
    return ec ? p : abs.lexically_normal();
  };
  if (flags.model) {
    model_config m;
    m.path = absolute(*flags.model);
    m.name = model_name_from_path(m.path);
    config.models.assign(1, std::move(m));
  }
  if (flags.port) config.server.port = *flags.port;
  if (flags.host) config.server.host = *flags.host;
  if (flags.socket) config.control.socket = absolute(*flags.socket);
}

}  // namespace spite::config
