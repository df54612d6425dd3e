// Globals (range, dict, namespace, raise_exception, strftime_now) and Python's string formatting:
// str.format, printf-style %, and strftime in the C locale.
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "template/format.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

constexpr std::int64_t k_max_range = 100000;  // jinja2's sandbox MAX_RANGE

struct global_entry {
  std::string_view name;
  builtin_id id;
};

constexpr std::array<global_entry, 8> k_globals = {{
    {"range", builtin_id::range},
    {"dict", builtin_id::dict},
    {"namespace", builtin_id::namespace_},
    {"raise_exception", builtin_id::raise_exception},
    {"strftime_now", builtin_id::strftime_now},
    {"lipsum", builtin_id::lipsum},
    {"cycler", builtin_id::cycler},
    {"joiner", builtin_id::joiner},
}};

result<value_dict> make_dict(interp& in, const call_args& args, std::string_view fn) {
  if (args.pos.size() > 1) return type_error(std::string(fn) + " expected at most 1 argument, got " + std::to_string(args.pos.size()));
  value_dict d;
  if (!args.pos.empty()) {
    const value& src = args.pos[0];
    if (src.is_undefined()) return undefined_error(src);  // dict() looks up src.keys
    if (src.is_dict()) {
      d = src.as_dict();
    } else if (is_object(src, object_kind::namespace_)) {
      return type_error("'Namespace' object is not iterable");
    } else {
      SPITE_TPL_LET(seq items, in.iterate(src));
      for (const auto& pair : *items) {
        SPITE_TPL_LET(seq kv, in.iterate(pair));
        if (kv->size() != 2)
          return value_error("dictionary update sequence element has length " + std::to_string(kv->size()) +
                             "; 2 is required");
        d.set((*kv)[0], (*kv)[1]);
      }
    }
  }
  for (const auto& [k, v] : args.kw) d.set(value(k), v);
  return d;
}

}  // namespace

std::optional<value> find_global(std::string_view name) {
  for (const auto& g : k_globals)
    if (g.name == name) return value::from_object(std::make_shared<builtin_object>(g.id));
  return std::nullopt;
}

result<value> call_builtin(interp& in, builtin_id id, call_args& args) {
  switch (id) {
    case builtin_id::range: {
      if (!args.kw.empty()) return type_error("range() takes no keyword arguments");
      if (args.pos.empty() || args.pos.size() > 3)
        return type_error("range expected at most 3 arguments, got " + std::to_string(args.pos.size()));
      std::int64_t p[3] = {0, 0, 1};
      for (std::size_t i = 0; i < args.pos.size(); ++i) {
        if (!is_integral(args.pos[i]))
          return type_error(quoted_type(args.pos[i]) + " object cannot be interpreted as an integer");
        p[args.pos.size() == 1 ? 1 : i] = to_i64(args.pos[i]);
      }
      if (p[2] == 0) return value_error("range() arg 3 must not be zero");
      const std::int64_t span = p[2] > 0 ? p[1] - p[0] : p[0] - p[1];
      const std::int64_t step = p[2] > 0 ? p[2] : -p[2];
      const std::int64_t count = span <= 0 ? 0 : (span + step - 1) / step;
      if (count > k_max_range)
        return limit_error("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      value_list out;
      out.reserve(static_cast<std::size_t>(count));
      for (std::int64_t k = 0; k < count; ++k) out.emplace_back(p[0] + k * p[2]);
      return value(std::move(out));
    }
    case builtin_id::dict: {
      SPITE_TPL_LET(value_dict d, make_dict(in, args, "dict"));
      return value(std::move(d));
    }
    case builtin_id::namespace_: {
      SPITE_TPL_LET(value_dict d, make_dict(in, args, "namespace"));
      auto ns = std::make_shared<namespace_object>();
      ns->attrs = std::move(d);
      return in.track(std::move(ns));
    }
    case builtin_id::raise_exception: {
      SPITE_TPL_LET(auto a, bind_args(args, "raise_exception", {"message"}, 1));
      return raised_error(py_str(*a[0]));
    }
    case builtin_id::strftime_now: {
      SPITE_TPL_LET(auto a, bind_args(args, "strftime_now", {"format"}, 1));
      if (!a[0]->is_string()) return type_error("strftime() argument 1 must be str, not " + type_name(*a[0]));
      std::tm t{};
      if (in.options().now) {
        t = *in.options().now;
      } else {
        const std::time_t now = std::time(nullptr);
        localtime_r(&now, &t);
      }
      return value(format_time(a[0]->as_string(), t));
    }
    case builtin_id::lipsum:
    case builtin_id::cycler:
    case builtin_id::joiner: break;
  }
  return unsupported_error("this global function is not supported in templates");
}

// ---- number formatting shared by str.format and % ----
namespace {

struct spec {
  char32_t fill = ' ';
  char align = 0;  // < > ^ =
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  std::int64_t width = -1;
  char grouping = 0;
  std::int64_t precision = -1;
  char type = 0;
};

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out.push_back(sep);
    out.push_back(digits[i]);
  }
  return out;
}

std::string c_format_float(double d, std::int64_t precision, char type) {
  if (std::isinf(d)) return std::string(d < 0 ? "-" : "") + (type >= 'a' ? "inf" : "INF");
  if (std::isnan(d)) return type >= 'a' ? "nan" : "NAN";
  char fmt[16];
  std::snprintf(fmt, sizeof fmt, "%%.%d%c", static_cast<int>(std::min<std::int64_t>(precision, 200)), type);
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, d);
  return buf;
}

// Sign, digits and alignment of a formatted number or string.
std::string pad_field(std::string body, const spec& s, bool numeric) {
  std::string sign;
  if (numeric && !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
    sign = body.substr(0, 1);
    body.erase(0, 1);
  }
  const auto len = static_cast<std::int64_t>(count_code_points(sign + body));
  char align = s.align ? s.align : (numeric ? '>' : '<');
  char32_t fill = s.fill;
  if (!s.align && s.zero && numeric) {
    align = '=';
    fill = '0';
  }
  if (s.width <= len) return sign + body;
  const std::int64_t pad = s.width - len;
  std::string fillstr;
  const auto fills = [&](std::int64_t n) {
    std::string f;
    for (std::int64_t i = 0; i < n; ++i) append_utf8(f, fill);
    return f;
  };
  switch (align) {
    case '<': return sign + body + fills(pad);
    case '^': return fills(pad / 2) + sign + body + fills(pad - pad / 2);
    case '=': return sign + fills(pad) + body;
    default: return fills(pad) + sign + body;
  }
}

result<std::string> format_number(const value& v, const spec& s) {
  const char type = s.type;
  if (is_integral(v) && (type == 0 || type == 'd' || type == 'n' || type == 'x' || type == 'X' || type == 'o' ||
                         type == 'b' || type == 'c')) {
    if (v.is_bool() && type == 0 && s.width < 0 && s.sign == '-' && !s.grouping) return std::string(v.as_bool() ? "True" : "False");
    const std::int64_t i = to_i64(v);
    const std::uint64_t mag = i < 0 ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    std::string digits;
    if (type == 'c') {
      std::string c;
      append_utf8(c, static_cast<char32_t>(i));
      return pad_field(c, s, false);
    }
    const int base = (type == 'x' || type == 'X') ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
    std::uint64_t m = mag;
    do {
      digits.insert(digits.begin(), "0123456789abcdef"[m % static_cast<std::uint64_t>(base)]);
      m /= static_cast<std::uint64_t>(base);
    } while (m);
    if (type == 'X')
      for (char& c : digits) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (s.grouping) digits = group_digits(digits, s.grouping);
    if (s.alternate && base != 10) digits = std::string("0") + (type == 'X' ? 'X' : type) + digits;
    const std::string sign = i < 0 ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
    return pad_field(sign + digits, s, true);
  }
  if (is_number(v)) {
    const double d = to_f64(v);
    std::string body;
    const std::int64_t prec = s.precision < 0 ? 6 : s.precision;
    switch (type) {
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': body = c_format_float(d, type == 'g' || type == 'G' ? (prec == 0 ? 1 : prec) : prec, type); break;
      case '%': body = c_format_float(d * 100, prec, 'f') + "%"; break;
      case 0:
        if (s.precision < 0) {
          body = float_repr(d);
        } else {
          body = c_format_float(d, s.precision == 0 ? 1 : s.precision, 'g');
        }
        break;
      default: return value_error(std::string("Unknown format code '") + type + "' for object of type 'float'");
    }
    if (body[0] != '-' && s.sign != '-') body.insert(body.begin(), s.sign);
    if (s.grouping) {
      const std::size_t start = (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
      std::size_t end = start;
      while (end < body.size() && std::isdigit(static_cast<unsigned char>(body[end]))) ++end;
      body = body.substr(0, start) + group_digits(body.substr(start, end - start), s.grouping) + body.substr(end);
    }
    return pad_field(body, s, true);
  }
  return value_error(std::string("Unknown format code '") + type + "' for object of type '" + type_name(v) + "'");
}

result<spec> parse_spec(std::string_view text) {
  spec s;
  const auto cps = decode_utf8(text);
  std::size_t i = 0;
  const auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    s.fill = cps[0];
    s.align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    s.align = static_cast<char>(cps[0]);
    i = 1;
  }
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' ')) s.sign = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '#') s.alternate = true, ++i;
  if (i < cps.size() && cps[i] == '0') s.zero = true, ++i;
  const auto number = [&](std::int64_t& out) {
    if (i >= cps.size() || cps[i] < '0' || cps[i] > '9') return;
    out = 0;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9') out = std::min<std::int64_t>(out * 10 + (cps[i++] - '0'), 1 << 24);
  };
  number(s.width);
  if (i < cps.size() && (cps[i] == ',' || cps[i] == '_')) s.grouping = static_cast<char>(cps[i++]);
  if (i < cps.size() && cps[i] == '.') {
    ++i;
    s.precision = 0;
    number(s.precision);
  }
  if (i < cps.size()) s.type = static_cast<char>(cps[i++]);
  if (i != cps.size()) return value_error("Invalid format specifier");
  return s;
}

result<std::string> format_value(const value& v, std::string_view spec_text) {
  if (spec_text.empty()) return py_str(v);
  SPITE_TPL_LET(spec s, parse_spec(spec_text));
  if (v.is_string()) {
    if (s.type && s.type != 's') return value_error(std::string("Unknown format code '") + s.type + "' for object of type 'str'");
    std::string body = v.as_string();
    if (s.precision >= 0) body = py_substr(body, 0, s.precision);
    return pad_field(body, s, false);
  }
  if (is_number(v)) return format_number(v, s);
  return type_error("unsupported format string passed to " + type_name(v) + ".__format__");
}

}  // namespace

result<std::string> str_format(interp& in, const std::string& fmt, const call_args& args) {
  std::string out;
  std::size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      return value_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const std::size_t close = fmt.find('}', i);
    if (close == std::string::npos) return value_error("expected '}' before end of string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) return unsupported_error("nested format fields are not supported");
    i = close;
    std::string spec_text, conversion;
    if (const std::size_t colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field.resize(colon);
    }
    if (const std::size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    // field: first part (index or name), then .attr / [key] chains.
    std::size_t k = 0;
    while (k < field.size() && field[k] != '.' && field[k] != '[') ++k;
    const std::string first = field.substr(0, k);
    value v;
    if (first.empty()) {
      if (used_manual) return value_error("cannot switch from manual field specification to automatic field numbering");
      used_auto = true;
      if (auto_index >= args.pos.size()) return make_error(errc::malformed, "IndexError: Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      v = args.pos[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(first[0]))) {
      if (used_auto) return value_error("cannot switch from automatic field numbering to manual field specification");
      used_manual = true;
      const std::size_t idx = std::stoul(first);
      if (idx >= args.pos.size()) return make_error(errc::malformed, "IndexError: Replacement index " + first + " out of range for positional args tuple");
      v = args.pos[idx];
    } else {
      bool found = false;
      for (const auto& [name, x] : args.kw)
        if (name == first) {
          v = x;
          found = true;
        }
      if (!found) return make_error(errc::malformed, "KeyError: '" + first + "'");
    }
    while (k < field.size()) {
      if (field[k] == '.') {
        std::size_t e = k + 1;
        while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
        SPITE_TPL_LET(v, in.getattr(v, field.substr(k + 1, e - k - 1)));
        k = e;
      } else {
        const std::size_t e = field.find(']', k);
        if (e == std::string::npos) return value_error("Missing ']' in format string");
        const std::string key = field.substr(k + 1, e - k - 1);
        const bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        SPITE_TPL_LET(v, in.getitem(v, numeric ? value(static_cast<std::int64_t>(std::stoll(key))) : value(key)));
        k = e + 1;
      }
    }
    if (conversion == "r" || conversion == "a") {
      v = value(py_repr(v));
    } else if (conversion == "s") {
      v = value(py_str(v));
    } else if (!conversion.empty()) {
      return value_error("Unknown conversion specifier " + conversion);
    }
    SPITE_TPL_LET(std::string piece, format_value(v, spec_text));
    out += piece;
    SPITE_TRY(in.check_size(out.size()));
  }
  return out;
}

result<std::string> percent_format(const std::string& fmt, const value& args) {
  value_list positional;
  const value_dict* mapping = nullptr;
  if (args.is_list() && args.flavor() == value::flavour::tuple) {
    positional = args.as_list();
  } else if (args.is_dict()) {
    mapping = &args.as_dict();
  } else {
    positional.push_back(args);
  }
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return value_error("incomplete format");
    value v;
    bool have = false;
    if (fmt[i] == '(') {
      const std::size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) return type_error("format requires a mapping");
      const value* found = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) return make_error(errc::malformed, "KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      v = *found;
      have = true;
      i = close + 1;
    }
    spec s;
    s.align = '>';
    for (; i < fmt.size(); ++i) {
      const char f = fmt[i];
      if (f == '-') s.align = '<';
      else if (f == '+') s.sign = '+';
      else if (f == ' ' && s.sign != '+') s.sign = ' ';
      else if (f == '#') s.alternate = true;
      else if (f == '0') s.zero = true;
      else break;
    }
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) s.width = std::max<std::int64_t>(s.width, 0) * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      s.precision = 0;
      ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) s.precision = s.precision * 10 + (fmt[i++] - '0');
    }
    if (i >= fmt.size()) return value_error("incomplete format");
    const char type = fmt[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have) {
      if (mapping) return type_error("format requires a mapping");
      if (next >= positional.size()) return type_error("not enough arguments for format string");
      v = positional[next++];
    }
    if (s.zero && s.align == '>') s.align = 0;
    std::string piece;
    if (type == 's' || type == 'r' || type == 'a') {
      piece = type == 's' ? py_str(v) : py_repr(v);
      if (s.precision >= 0) piece = py_substr(piece, 0, s.precision);
      s.zero = false;
      piece = pad_field(piece, s, false);
    } else if (type == 'd' || type == 'i' || type == 'u' || type == 'x' || type == 'X' || type == 'o' || type == 'c') {
      if (!is_number(v)) return type_error(std::string("%") + type + " format: a real number is required, not " + type_name(v));
      s.type = (type == 'i' || type == 'u') ? 'd' : type;
      const value iv = v.is_float() ? value(static_cast<std::int64_t>(v.as_float())) : value(to_i64(v));
      SPITE_TPL_LET(piece, format_number(iv, s));
    } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G') {
      if (!is_number(v)) return type_error("must be real number, not " + type_name(v));
      s.type = type;
      SPITE_TPL_LET(piece, format_number(value(to_f64(v)), s));
    } else {
      return value_error(std::string("unsupported format character '") + type + "'");
    }
    out += piece;
  }
  if (!mapping && next < positional.size()) return type_error("not all arguments converted during string formatting");
  return out;
}

// ---- strftime (C locale) ----

std::string format_time(std::string_view fmt, const std::tm& in) {
  static const char* days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  static const char* months[] = {"January", "February", "March",     "April",   "May",      "June",
                                 "July",    "August",   "September", "October", "November", "December"};
  std::tm t = in;
  {
    std::tm copy = in;
    copy.tm_isdst = 0;
    const std::time_t secs = timegm(&copy);  // fills weekday and day of the year
    gmtime_r(&secs, &t);
  }
  std::string out;
  const auto num = [&](int v, int width, bool pad) {
    char buf[16];
    if (pad) {
      std::snprintf(buf, sizeof buf, "%0*d", width, v);
    } else {
      std::snprintf(buf, sizeof buf, "%d", v);
    }
    out += buf;
  };
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    char c = fmt[++i];
    bool pad = true;
    if (c == '-' && i + 1 < fmt.size()) {
      pad = false;
      c = fmt[++i];
    }
    const int hour12 = t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12;
    switch (c) {
      case 'a': out.append(days[t.tm_wday], 3); break;
      case 'A': out += days[t.tm_wday]; break;
      case 'b':
      case 'h': out.append(months[t.tm_mon], 3); break;
      case 'B': out += months[t.tm_mon]; break;
      case 'd': num(t.tm_mday, 2, pad); break;
      case 'e': {
        char buf[8];
        std::snprintf(buf, sizeof buf, pad ? "%2d" : "%d", t.tm_mday);
        out += buf;
        break;
      }
      case 'm': num(t.tm_mon + 1, 2, pad); break;
      case 'y': num(t.tm_year % 100, 2, pad); break;
      case 'Y': num(t.tm_year + 1900, 1, false); break;
      case 'C': num((t.tm_year + 1900) / 100, 2, pad); break;
      case 'H': num(t.tm_hour, 2, pad); break;
      case 'I': num(hour12, 2, pad); break;
      case 'M': num(t.tm_min, 2, pad); break;
      case 'S': num(t.tm_sec, 2, pad); break;
      case 'p': out += t.tm_hour < 12 ? "AM" : "PM"; break;
      case 'j': num(t.tm_yday + 1, 3, pad); break;
      case 'w': num(t.tm_wday, 1, false); break;
      case 'u': num(t.tm_wday == 0 ? 7 : t.tm_wday, 1, false); break;
      case 'D': out += format_time("%m/%d/%y", t); break;
      case 'F': out += format_time("%Y-%m-%d", t); break;
      case 'T': out += format_time("%H:%M:%S", t); break;
      case 'R': out += format_time("%H:%M", t); break;
      case 'c': out += format_time("%a %b %e %H:%M:%S %Y", t); break;
      case 'x': out += format_time("%m/%d/%y", t); break;
      case 'X': out += format_time("%H:%M:%S", t); break;
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'f': out += "000000"; break;  // microseconds
      case 'Z':
      case 'z': break;  // naive time: no zone
      case '%': out.push_back('%'); break;
      default: {
        char spec[4] = {'%', c, 0, 0};
        char buf[64];
        const std::size_t n = std::strftime(buf, sizeof buf, spec, &t);
        out.append(buf, n);
      }
    }
  }
  return out;
}

}  // namespace spite::tokenizer::template_detail
