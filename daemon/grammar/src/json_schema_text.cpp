// The text half of the JSON-schema compiler: fixed rules for JSON's primitives, strings (length,
// formats, patterns), numbers with bounds, and keys that avoid a set of names.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "escape.hpp"
#include "json_schema_internal.hpp"
#include "utf8.hpp"

namespace spite::grammar::detail {

namespace {

// JSON's primitives. Whitespace is bounded (one blank, or a newline and an indentation of at
// most 20) so that a small model cannot stall in it; numbers have at most 16 digits before and
// after the point and a two-digit exponent, so they parse as doubles without overflow; \u
// escapes exclude surrogates, which strict parsers refuse alone.
const std::map<std::string, std::pair<std::string, std::vector<std::string>>, std::less<>>& primitives() {
  static const std::map<std::string, std::pair<std::string, std::vector<std::string>>, std::less<>> table = {
      {"ws", {R"(([ \t] | "\n" [ \t]{0,20})?)", {}}},
      {"value", {"object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}}},
      {"object", {R"("{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}")", {"ws", "string", "value"}}},
      {"array", {R"("[" ws ( value ( ws "," ws value )* ws )? "]")", {"ws", "value"}}},
      {"string", {R"("\"" char* "\"")", {"char"}}},
      {"char", {R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex4 ))", {"hex4"}}},
      {"hex4", {"[0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}", {}}},
      {"number", {R"("-"? int-part ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)", {"int-part"}}},
      {"int-part", {R"("0" | [1-9] [0-9]{0,15})", {}}},
      {"integer", {R"("-"? int-part)", {"int-part"}}},
      {"boolean", {R"("true" | "false")", {}}},
      {"null", {R"("null")", {}}},
  };
  return table;
}

constexpr std::uint64_t max_magnitude = 9999999999999999ULL;  // 16 digits

const std::string quote = R"("\"")";

// ---- integer ranges as digit patterns

// Equal-length decimal strings a <= b: the strings between them, digit by digit.
std::string digits_between(const std::string& a, const std::string& b) {
  const std::size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return gbnf_literal(a);
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) return gbnf_literal(a.substr(0, 1)) + " " + digits_between(ra, rb);
  const bool low_full = ra.find_first_not_of('0') == std::string::npos;
  const bool high_full = rb.find_first_not_of('9') == std::string::npos;
  const std::string tail = n > 1 ? " [0-9]{" + std::to_string(n - 1) + "}" : "";
  std::vector<std::string> alts;
  if (!low_full) alts.push_back(gbnf_literal(a.substr(0, 1)) + " " + group({digits_between(ra, std::string(n - 1, '9'))}));
  const char first = low_full ? a[0] : static_cast<char>(a[0] + 1);
  const char last = high_full ? b[0] : static_cast<char>(b[0] - 1);
  if (first <= last) alts.push_back(std::string("[") + first + "-" + last + "]" + tail);
  if (!high_full) alts.push_back(gbnf_literal(b.substr(0, 1)) + " " + group({digits_between(std::string(n - 1, '0'), rb)}));
  return group(alts);
}

std::uint64_t pow10(std::size_t d) {
  std::uint64_t v = 1;
  while (d-- > 0) v *= 10;
  return v;
}

// Decimal numbers without leading zeros in [lo, hi].
std::string uint_range(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::string> alts;
  const std::size_t dlo = std::to_string(lo).size(), dhi = std::to_string(hi).size();
  for (std::size_t d = dlo; d <= dhi; ++d) {
    const std::uint64_t a = std::max(lo, d == 1 ? 0 : pow10(d - 1));
    const std::uint64_t b = std::min(hi, pow10(d) - 1);
    alts.push_back(digits_between(std::to_string(a), std::to_string(b)));
  }
  return group(alts);
}

// Decimal numbers >= lo, up to 16 digits.
std::string uint_at_least(std::uint64_t lo) {
  const std::size_t d = std::to_string(lo).size();
  std::vector<std::string> alts{uint_range(lo, pow10(d) - 1)};
  if (d < 16) alts.push_back("[1-9] [0-9]{" + std::to_string(d) + ",15}");
  return group(alts);
}

// A bound as an integer, or nullopt when absent; errors for non-numbers.
result<std::optional<double>> number_keyword(const json& s, const char* key, const std::string& ptr) {
  const auto it = s.find(key);
  if (it == s.end()) return std::optional<double>{};
  if (!it->is_number()) return malformed(std::string("'") + key + "' must be a number", ptr);
  return std::optional<double>{it->get<double>()};
}

struct int_bounds {
  std::optional<std::int64_t> lo, hi;
};

// minimum / maximum / exclusive* (numbers, or draft-4 booleans) as inclusive integer bounds.
result<int_bounds> integer_bounds(const json& s, const std::string& ptr) {
  auto mn = number_keyword(s, "minimum", ptr);
  if (!mn) return std::move(mn).err();
  auto mx = number_keyword(s, "maximum", ptr);
  if (!mx) return std::move(mx).err();
  std::optional<double> lo = *mn, hi = *mx, xlo, xhi;
  // Draft 4 spells exclusive bounds as flags on minimum / maximum; later drafts as numbers.
  auto exclusive = [&](const char* key, std::optional<double>& bound, std::optional<double>& out) -> result<void> {
    const auto it = s.find(key);
    if (it == s.end()) return ok();
    if (it->is_number()) {
      out = it->get<double>();
      return ok();
    }
    if (!it->is_boolean()) return malformed(std::string("'") + key + "' must be a number", ptr);
    if (!it->get<bool>()) return ok();
    if (!bound) return malformed(std::string("'") + key + "' is true without its bound", ptr);
    out = bound;
    bound.reset();
    return ok();
  };
  SPITE_TRY(exclusive("exclusiveMinimum", lo, xlo));
  SPITE_TRY(exclusive("exclusiveMaximum", hi, xhi));
  const double limit = static_cast<double>(max_magnitude);
  int_bounds b;
  auto raise = [&](double v) {
    if (!b.lo || v > static_cast<double>(*b.lo)) b.lo = static_cast<std::int64_t>(v);
  };
  auto lower = [&](double v) {
    if (!b.hi || v < static_cast<double>(*b.hi)) b.hi = static_cast<std::int64_t>(v);
  };
  auto clamp = [&](double v) { return std::clamp(v, -limit - 1, limit + 1); };
  if (lo) raise(std::ceil(clamp(*lo)));
  if (xlo) raise(std::floor(clamp(*xlo)) + 1);
  if (hi) lower(std::floor(clamp(*hi)));
  if (xhi) lower(std::ceil(clamp(*xhi)) - 1);
  const auto lim = static_cast<std::int64_t>(max_magnitude);
  if (b.lo && *b.lo > lim) return unsupported("minimum beyond 16 digits", ptr);
  if (b.hi && *b.hi < -lim) return unsupported("maximum beyond 16 digits", ptr);
  if (b.lo && *b.lo < -lim) b.lo.reset();  // every integer the grammar writes satisfies it
  if (b.hi && *b.hi > lim) b.hi.reset();
  if (b.lo && b.hi && *b.lo > *b.hi) return malformed("no integer lies between minimum and maximum", ptr);
  return b;
}

result<std::optional<std::uint32_t>> count_keyword(const json& s, const char* key, const std::string& ptr,
                                                   std::uint32_t max_bound) {
  const auto it = s.find(key);
  if (it == s.end()) return std::optional<std::uint32_t>{};
  const bool integral = it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0) ||
                        (it->is_number_float() && it->get<double>() >= 0 && std::floor(it->get<double>()) == it->get<double>());
  if (!integral) return malformed(std::string("'") + key + "' must be a non-negative integer", ptr);
  const double v = it->get<double>();
  if (v > max_bound) return unsupported(std::string(key) + " above " + std::to_string(max_bound), ptr);
  return std::optional<std::uint32_t>{static_cast<std::uint32_t>(v)};
}

}  // namespace

// ---- rule_set

error unsupported(std::string_view feature, const std::string& ptr) {
  return make_error(errc::unsupported, "unsupported JSON-schema feature '" + std::string(feature) + "' at " + (ptr.empty() ? "/" : ptr));
}

error malformed(std::string_view what, const std::string& ptr) {
  return make_error(errc::invalid_argument, "invalid JSON schema at " + (ptr.empty() ? "/" : ptr) + ": " + std::string(what));
}

std::string pointer_segment(std::string_view key) {
  std::string out = "/";
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

rule_set::rule_set() {
  names_.insert("root");
  for (const auto& [name, _] : primitives()) names_.insert(name);
}

std::string rule_set::reserve(std::string_view hint) {
  std::string base;
  for (const char c : hint) {
    const char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    const bool keep = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (keep) {
      base += l;
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  for (int i = 2; names_.contains(name); ++i) name = base + "-" + std::to_string(i);
  names_.insert(name);
  return name;
}

void rule_set::define(const std::string& name, std::string body) { rules_.emplace_back(name, std::move(body)); }

std::string rule_set::add(std::string_view hint, std::string body) {
  if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  const std::string name = reserve(hint);
  by_body_.emplace(body, name);
  define(name, std::move(body));
  return name;
}

std::string rule_set::prim(std::string_view name) {
  const auto& table = primitives();
  const auto it = table.find(name);
  const std::string key(name);
  if (!prims_.insert(key).second) return key;
  for (const auto& dep : it->second.second) prim(dep);
  define(key, it->second.first);
  return key;
}

std::string rule_set::text(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

// ---- values

std::string json_literal(const json& value) {
  return gbnf_literal(value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

result<std::string> string_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint,
                                const schema_options& options) {
  const bool has_pattern = s.contains("pattern"), has_format = s.contains("format");
  auto min = count_keyword(s, "minLength", ptr, options.max_bound);
  if (!min) return std::move(min).err();
  auto max = count_keyword(s, "maxLength", ptr, options.max_bound);
  if (!max) return std::move(max).err();
  const bool has_length = min->has_value() || max->has_value();
  if (has_format) {
    if (!s["format"].is_string()) return malformed("'format' must be a string", ptr);
    if (has_pattern || has_length) return unsupported("format with pattern, minLength or maxLength", ptr);
    const std::string f = s["format"].get<std::string>();
    const std::string date = R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    const std::string time =
        R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    std::string body;
    if (f == "date") {
      body = date;
    } else if (f == "time") {
      body = time;
    } else if (f == "date-time") {
      body = date + " \"T\" " + time;
    } else if (f == "uuid") {
      body = R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
    } else {
      return unsupported("format '" + f + "'", ptr);
    }
    return rules.add(f + "-string", quote + " " + rules.add(f, body) + " " + quote);
  }
  if (has_pattern) {
    if (!s["pattern"].is_string()) return malformed("'pattern' must be a string", ptr);
    if (has_length) return unsupported("pattern with minLength or maxLength", ptr);
    auto body = pattern_body(s["pattern"].get_ref<const std::string&>(), ptr, options.max_bound, rules.prim("char"));
    if (!body) return std::move(body).err();
    return rules.add(std::string(hint) + "-string", quote + " " + *body + " " + quote);
  }
  if (!has_length) return rules.prim("string");
  const std::uint32_t lo = min->value_or(0);
  if (max->has_value() && **max < lo) return malformed("minLength is above maxLength", ptr);
  const std::string rep = "{" + std::to_string(lo) + "," + (max->has_value() ? std::to_string(**max) : "") + "}";
  return rules.add(std::string(hint) + "-string", quote + " " + rules.prim("char") + rep + " " + quote);
}

result<std::string> integer_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint) {
  auto bounds = integer_bounds(s, ptr);
  if (!bounds) return std::move(bounds).err();
  auto [lo, hi] = *bounds;
  if (const auto f = s.find("format"); f != s.end()) {
    if (*f == "int32") {
      lo = std::max<std::int64_t>(lo.value_or(INT32_MIN), INT32_MIN);
      hi = std::min<std::int64_t>(hi.value_or(INT32_MAX), INT32_MAX);
      if (*lo > *hi) return malformed("no int32 lies between minimum and maximum", ptr);
    } else if (*f != "int64") {  // int64: every integer of at most 16 digits fits
      return unsupported("format '" + f->dump() + "' on integers", ptr);
    }
  }
  if (!lo && !hi) return rules.prim("integer");
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) {
    const auto from = static_cast<std::uint64_t>(std::max<std::int64_t>(lo.value_or(0), 0));
    alts.push_back(hi ? uint_range(from, static_cast<std::uint64_t>(*hi)) : uint_at_least(from));
  }
  if (!lo || *lo < 0) {
    const auto from = static_cast<std::uint64_t>(hi && *hi < 0 ? -*hi : 1);
    alts.push_back("\"-\" " + group({lo ? uint_range(from, static_cast<std::uint64_t>(-*lo)) : uint_at_least(from)}));
  }
  return rules.add(std::string(hint) + "-int", group(alts));
}

result<std::string> number_rule(rule_set& rules, const json& s, const std::string& ptr, std::string_view hint) {
  if (const auto f = s.find("format"); f != s.end() && *f != "double" && *f != "float") {
    return unsupported("format '" + f->dump() + "' on numbers", ptr);
  }
  // Integer bounds only: a bound then splits the integer part exactly, the fraction being free
  // inside, zero at an inclusive bound and non-zero just past an exclusive one. No exponent,
  // which would move the point.
  struct bound {
    bool has = false;
    std::int64_t v = 0;
    bool exclusive = false;
  };
  bound lo, hi;
  const double limit = static_cast<double>(max_magnitude);
  auto take = [&](const char* key, bool is_lo, bool exclusive) -> result<void> {
    const auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return ok();
    if (!it->is_number()) return malformed(std::string("'") + key + "' must be a number", ptr);
    const double d = it->get<double>();
    if (std::floor(d) != d || std::fabs(d) > limit) return unsupported(std::string("non-integer ") + key + " on numbers", ptr);
    // Draft 4: "exclusiveMinimum": true makes "minimum" exclusive.
    const char* flag = is_lo ? "exclusiveMinimum" : "exclusiveMaximum";
    if (!exclusive && s.contains(flag) && (*s.find(flag)).is_boolean() && (*s.find(flag)).get<bool>()) exclusive = true;
    const auto v = static_cast<std::int64_t>(d);
    bound& b = is_lo ? lo : hi;
    const bool tighter = !b.has || (is_lo ? v > b.v : v < b.v) || (v == b.v && exclusive);
    if (tighter) b = {true, v, exclusive};
    return ok();
  };
  SPITE_TRY(take("minimum", true, false));
  SPITE_TRY(take("exclusiveMinimum", true, true));
  SPITE_TRY(take("maximum", false, false));
  SPITE_TRY(take("exclusiveMaximum", false, true));
  if (!lo.has && !hi.has) return rules.prim("number");
  if (lo.has && hi.has && (lo.v > hi.v || (lo.v == hi.v && (lo.exclusive || hi.exclusive)))) {
    return malformed("no number lies between the minimum and the maximum", ptr);
  }
  constexpr std::uint64_t unbounded = UINT64_MAX;
  const std::string frac = R"(( "." [0-9]{1,16} )?)", zero = R"(( "." "0"{1,16} )?)", nonzero = R"("." [0-9]{0,15} [1-9])";
  // Magnitudes m (digits without a sign) with from <= m (from < m when from_x) and m <= to
  // (m < to when to_x; `unbounded`: no upper end).
  auto magnitudes = [&](std::uint64_t from, bool from_x, std::uint64_t to, bool to_x) {
    std::vector<std::string> alts;
    const std::uint64_t first = from + (from_x ? 1 : 0);
    if (to == unbounded) {
      alts.push_back(uint_at_least(first) + " " + frac);
    } else {
      if (to >= 1 && first <= to - 1) alts.push_back(uint_range(first, to - 1) + " " + frac);
      if (!to_x && to >= first) alts.push_back(gbnf_literal(std::to_string(to)) + " " + zero);
    }
    if (from_x && (to == unbounded || from < to)) alts.push_back(gbnf_literal(std::to_string(from)) + " " + nonzero);
    return group(alts);
  };
  std::vector<std::string> alts;
  if (!hi.has || hi.v > 0 || (hi.v == 0 && !hi.exclusive)) {  // values >= 0
    const bool from_lo = lo.has && lo.v >= 0;
    alts.push_back(magnitudes(from_lo ? static_cast<std::uint64_t>(lo.v) : 0, from_lo && lo.exclusive,
                              hi.has ? static_cast<std::uint64_t>(hi.v) : unbounded, hi.exclusive));
  }
  if (!lo.has || lo.v < 0) {  // values < 0: -m >= lo is m <= -lo; -m <= hi is m >= -hi
    const bool from_hi = hi.has && hi.v <= 0;
    alts.push_back("\"-\" " + group({magnitudes(from_hi ? static_cast<std::uint64_t>(-hi.v) : 0, from_hi && hi.exclusive,
                                                  lo.has ? static_cast<std::uint64_t>(-lo.v) : unbounded, lo.exclusive)}));
  }
  return rules.add(std::string(hint) + "-number", group(alts));
}

std::string key_excluding(rule_set& rules, const std::vector<std::string>& keys) {
  const std::string keychar = R"([^"\\\x00-\x1F])";
  // A trie of the excluded keys; each node's rule continues a key that matches so far.
  struct node {
    std::map<char32_t, std::unique_ptr<node>> children;
    bool terminal = false;
  };
  node root;
  for (const auto& k : keys) {
    node* n = &root;
    bool writable = true;
    std::vector<char32_t> cps;
    for (std::size_t i = 0; i < k.size();) {
      const char32_t c = next_cp(k, i);
      if (c == invalid_cp || c < 0x20 || c == '"' || c == '\\') writable = false;
      cps.push_back(c);
    }
    if (!writable) continue;  // such a key cannot be spelled without escapes anyway
    for (const char32_t c : cps) {
      auto& child = n->children[c];
      if (!child) child = std::make_unique<node>();
      n = child.get();
    }
    n->terminal = true;
  }
  auto build = [&](auto&& self, const node& n) -> std::string {
    std::vector<std::string> alts;
    if (!n.terminal) alts.push_back(quote);
    std::string others = R"([^"\\\x00-\x1F)";
    for (const auto& [c, child] : n.children) {
      std::string lit;
      append_gbnf_char(lit, c, false);
      alts.push_back("\"" + lit + "\" " + self(self, *child));
      append_gbnf_char(others, c, true);
    }
    alts.push_back(others + "] " + keychar + "* " + quote);
    return rules.add("key", join(alts, " | "));
  };
  return rules.add("key", quote + " " + build(build, root));
}

}  // namespace spite::grammar::detail
