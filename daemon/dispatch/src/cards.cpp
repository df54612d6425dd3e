// The card table (data/cards.tsv, compiled in) and lookups by name, with suggestions for typos.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cards_data.hpp"
#include "spite/dispatch/devices.hpp"

namespace spite::dispatch {
namespace {

constexpr std::string_view k_header = "name\taliases\tvendor\tkind\tarch\tmemory_gib\tsupported\tnote";

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[noreturn]] void bad_table(std::size_t line, const std::string& what) {
  throw std::logic_error("cards.tsv line " + std::to_string(line) + ": " + what);
}

device_kind parse_kind(std::string_view s, std::size_t line) {
  if (s == "cuda") return device_kind::cuda;
  if (s == "hip") return device_kind::hip;
  if (s == "level_zero") return device_kind::level_zero;
  if (s == "none") return device_kind::none;
  bad_table(line, "unknown kind '" + std::string(s) + "'");
}

// A malformed table is a build defect (the test suite parses it), hence exceptions.
std::vector<card> parse_table(std::string_view text) {
  std::vector<card> out;
  bool header_seen = false;
  std::size_t line_no = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty() || line.front() == '#') continue;
    if (!header_seen) {
      if (line != k_header) bad_table(line_no, "the header must be: " + std::string(k_header));
      header_seen = true;
      continue;
    }
    const auto cols = split(line, '\t');
    if (cols.size() != 8) bad_table(line_no, "expected 8 tab-separated columns, got " + std::to_string(cols.size()));
    card c;
    c.name = std::string(trim(cols[0]));
    if (c.name.empty()) bad_table(line_no, "empty name");
    if (trim(cols[1]) != "-") {
      for (auto a : split(cols[1], ',')) {
        if (!trim(a).empty()) c.aliases.emplace_back(trim(a));
      }
    }
    c.vendor = std::string(trim(cols[2]));
    c.kind = parse_kind(trim(cols[3]), line_no);
    c.arch = std::string(trim(cols[4]));
    const std::string_view mem = trim(cols[5]);
    double gib = 0;
    const auto [end, ec] = std::from_chars(mem.data(), mem.data() + mem.size(), gib);
    if (ec != std::errc() || end != mem.data() + mem.size() || !(gib > 0)) {
      bad_table(line_no, "bad memory '" + std::string(mem) + "'");
    }
    c.memory_bytes = static_cast<std::uint64_t>(std::llround(gib * 1024.0 * 1024.0 * 1024.0));
    const std::string_view supported = trim(cols[6]);
    if (supported != "yes" && supported != "no") bad_table(line_no, "supported must be yes or no");
    c.supported = supported == "yes";
    c.note = std::string(trim(cols[7]));
    out.push_back(std::move(c));
  }
  if (!header_seen) bad_table(line_no, "no header line");
  return out;
}

bool strip_prefix(std::string& s, std::string_view prefix) {
  if (s.size() <= prefix.size() || s.compare(0, prefix.size(), prefix) != 0) return false;
  s.erase(0, prefix.size());
  return true;
}

// The comparison key of a card name: lower case without separators, trademark signs, a leading
// vendor or brand word and a trailing "graphics", so that what the drivers report
// ("NVIDIA GeForce RTX 4090", "Intel(R) Arc(TM) A770 Graphics") matches the table's names.
std::string normalize(std::string_view name) {
  std::string s;
  for (char c : lower(name)) {
    if (c != '_' && c != '-' && !std::isspace(static_cast<unsigned char>(c))) s += c;
  }
  for (std::string_view mark : {"(r)", "(tm)"}) {
    for (std::size_t at; (at = s.find(mark)) != std::string::npos;) s.erase(at, mark.size());
  }
  static constexpr std::string_view brands[] = {"nvidia", "geforce", "tesla",  "amd",
                                                "radeon", "instinct", "intel", "apple"};
  for (bool again = true; again;) {
    again = false;
    for (auto b : brands) again = strip_prefix(s, b) || again;
  }
  constexpr std::string_view graphics = "graphics";
  if (s.size() > graphics.size() && s.ends_with(graphics)) s.resize(s.size() - graphics.size());
  return s;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Up to three card names closest to `key` (already normalized), best first.
std::vector<std::string> closest_names(const std::string& key) {
  struct candidate {
    std::size_t distance, prefix, order;
  };
  const auto table = cards();
  std::vector<candidate> all;
  for (std::size_t i = 0; i < table.size(); ++i) {
    candidate c{edit_distance(key, normalize(table[i].name)), common_prefix(key, normalize(table[i].name)), i};
    for (const auto& a : table[i].aliases) {
      const std::string na = normalize(a);
      c.distance = std::min(c.distance, edit_distance(key, na));
      c.prefix = std::max(c.prefix, common_prefix(key, na));
    }
    all.push_back(c);
  }
  std::sort(all.begin(), all.end(), [](const candidate& x, const candidate& y) {
    if (x.distance != y.distance) return x.distance < y.distance;
    if (x.prefix != y.prefix) return x.prefix > y.prefix;
    return x.order < y.order;
  });
  const std::size_t limit = std::max<std::size_t>(2, key.size() / 2);
  std::vector<std::string> out;
  for (const auto& c : all) {
    if (out.size() == 3 || c.distance > limit || c.distance > all.front().distance + 1) break;
    out.push_back(table[c.order].name);
  }
  return out;
}

error unknown(std::string_view what, std::string_view name) {
  std::string msg = "unknown " + std::string(what) + " '" + std::string(name) + "'";
  const auto names = closest_names(normalize(name));
  if (names.empty()) {
    msg += " ('spitectl cards' lists the known cards)";
  } else {
    msg += "; did you mean ";
    for (std::size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : "") + names[i];
    msg += "?";
  }
  return make_error(errc::not_found, std::move(msg));
}

bool all_of(std::string_view s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](unsigned char c) { return pred(c) != 0; });
}

// sm_75, sm_120, sm_90a, sm_100f
bool is_cuda_arch(std::string_view s) {
  if (!s.starts_with("sm_")) return false;
  s.remove_prefix(3);
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) s.remove_suffix(1);
  return s.size() >= 2 && s.size() <= 3 && all_of(s, [](int c) { return std::isdigit(c); });
}

// gfx908, gfx90a, gfx942, gfx1030, gfx1201: a decimal major, then minor and stepping in hex
bool is_gfx_arch(std::string_view s) {
  if (!s.starts_with("gfx")) return false;
  s.remove_prefix(3);
  return (s.size() == 3 || s.size() == 4) && all_of(s.substr(0, s.size() - 2), [](int c) { return std::isdigit(c); }) &&
         all_of(s.substr(s.size() - 2), [](int c) { return std::isxdigit(c); });
}

bool is_table_arch(std::string_view s) {
  const auto table = cards();
  return std::any_of(table.begin(), table.end(),
                     [&](const card& c) { return c.kind != device_kind::none && c.arch == s; });
}

}  // namespace

std::span<const card> cards() {
  static const std::vector<card> table = parse_table(detail::cards_tsv());
  return table;
}

result<const card*> find_card(std::string_view name) {
  const std::string key = normalize(trim(name));
  if (key.empty()) return make_error(errc::invalid_argument, "empty card name");
  for (const card& c : cards()) {
    if (normalize(c.name) == key) return &c;
    for (const auto& a : c.aliases) {
      if (normalize(a) == key) return &c;
    }
  }
  return unknown("card", trim(name));
}

result<std::vector<std::string>> resolve_gpu_archs(std::string_view list) {
  std::vector<std::string> out;
  const auto add = [&](std::string arch) {
    if (std::find(out.begin(), out.end(), arch) == out.end()) out.push_back(std::move(arch));
  };
  std::string normalized(list);
  std::replace(normalized.begin(), normalized.end(), ',', ';');
  for (std::string_view item : split(normalized, ';')) {
    item = trim(item);
    if (item.empty()) continue;
    const std::string arch = lower(item);
    if (is_cuda_arch(arch) || is_gfx_arch(arch) || is_table_arch(arch)) {
      add(arch);
      continue;
    }
    auto c = find_card(item);
    if (!c) {
      if (c.err().code == errc::not_found) return unknown("GPU card or arch", item);
      return std::move(c).err();
    }
    if (!(*c)->supported) {
      return make_error(errc::unsupported, "card " + (*c)->name + " cannot be targeted: " + (*c)->note);
    }
    add((*c)->arch);
  }
  return out;
}

}  // namespace spite::dispatch
