// Python str algorithms: strip, split, splitlines, replace, find, count, padding.
#include <algorithm>

#include "template/text.hpp"

namespace spite::tokenizer::template_detail {
namespace {

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

// Python slice bounds [start, end) clamped to [0, n].
void clamp_bounds(std::int64_t n, std::optional<std::int64_t> start, std::optional<std::int64_t> end, std::int64_t& lo,
                  std::int64_t& hi) {
  lo = start.value_or(0);
  hi = end.value_or(n);
  if (lo < 0) lo = std::max<std::int64_t>(0, lo + n);
  if (hi < 0) hi = std::max<std::int64_t>(0, hi + n);
  hi = std::min(hi, n);
}

bool match_at(const u32string& s, std::size_t i, const u32string& sub) {
  return i + sub.size() <= s.size() && std::equal(sub.begin(), sub.end(), s.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const u32string cps = decode_utf8(s);
  const u32string set = chars ? decode_utf8(*chars) : u32string{};
  const auto strip_it = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : py_isspace(c);
  };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return encode_utf8(cps.data() + b, cps.data() + e);
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t pos = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      const std::size_t q = s.find(*sep, pos);
      if (q == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, q - pos));
      pos = q + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const u32string cps = decode_utf8(s);
  std::size_t i = 0;
  const std::size_t n = cps.size();
  while (true) {
    while (i < n && py_isspace(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.push_back(encode_utf8(cps.data() + i, cps.data() + n));
      break;
    }
    std::size_t j = i;
    while (j < n && !py_isspace(cps[j])) ++j;
    out.push_back(encode_utf8(cps.data() + i, cps.data() + j));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t end = s.size();
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const std::size_t q = s.rfind(*sep, end - sep->size());
      if (q == std::string_view::npos) break;
      out.emplace_back(s.substr(q + sep->size(), end - q - sep->size()));
      end = q;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const u32string cps = decode_utf8(s);
  std::size_t j = cps.size();
  while (true) {
    while (j > 0 && py_isspace(cps[j - 1])) --j;
    if (j == 0) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.push_back(encode_utf8(cps.data(), cps.data() + j));
      break;
    }
    std::size_t i = j;
    while (i > 0 && !py_isspace(cps[i - 1])) --i;
    out.push_back(encode_utf8(cps.data() + i, cps.data() + j));
    j = i;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const u32string cps = decode_utf8(s);
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) continue;
    std::size_t end = i + 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(encode_utf8(cps.data() + start, cps.data() + (keepends ? end : i)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.push_back(encode_utf8(cps.data() + start, cps.data() + cps.size()));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  std::string out;
  if (old.empty()) {
    const u32string cps = decode_utf8(s);
    std::int64_t done = 0;
    for (std::size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    return out;
  }
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t q = s.find(old, pos);
    if (q == std::string_view::npos) break;
    out.append(s.substr(pos, q - pos));
    out.append(repl);
    pos = q + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::int64_t py_find(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, bool reverse) {
  const u32string cps = decode_utf8(s);
  const u32string needle = decode_utf8(sub);
  std::int64_t lo = 0, hi = 0;
  clamp_bounds(static_cast<std::int64_t>(cps.size()), start, end, lo, hi);
  const auto len = static_cast<std::int64_t>(needle.size());
  if (hi - lo < len) return -1;
  if (!reverse) {
    for (std::int64_t i = lo; i + len <= hi; ++i)
      if (match_at(cps, static_cast<std::size_t>(i), needle)) return i;
  } else {
    for (std::int64_t i = hi - len; i >= lo; --i)
      if (match_at(cps, static_cast<std::size_t>(i), needle)) return i;
  }
  return -1;
}

std::int64_t py_count(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end) {
  const u32string cps = decode_utf8(s);
  const u32string needle = decode_utf8(sub);
  std::int64_t lo = 0, hi = 0;
  clamp_bounds(static_cast<std::int64_t>(cps.size()), start, end, lo, hi);
  if (hi < lo) return 0;
  if (needle.empty()) return hi - lo + 1;
  std::int64_t n = 0;
  const auto len = static_cast<std::int64_t>(needle.size());
  for (std::int64_t i = lo; i + len <= hi;) {
    if (match_at(cps, static_cast<std::size_t>(i), needle)) {
      ++n;
      i += len;
    } else {
      ++i;
    }
  }
  return n;
}

std::string py_substr(std::string_view s, std::optional<std::int64_t> start, std::optional<std::int64_t> end) {
  const u32string cps = decode_utf8(s);
  std::int64_t lo = 0, hi = 0;
  clamp_bounds(static_cast<std::int64_t>(cps.size()), start, end, lo, hi);
  if (hi <= lo) return {};
  return encode_utf8(cps.data() + lo, cps.data() + hi);
}

std::string py_pad(std::string_view s, std::int64_t width, char32_t fill, int align) {
  const auto len = static_cast<std::int64_t>(count_code_points(s));
  if (width <= len) return std::string(s);
  const std::int64_t marg = width - len;
  std::int64_t left = 0;
  if (align > 0) left = marg;
  if (align == 0) left = marg / 2 + (marg & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) append_utf8(out, fill);
  out.append(s);
  for (std::int64_t i = left; i < marg; ++i) append_utf8(out, fill);
  return out;
}

}  // namespace spite::tokenizer::template_detail
