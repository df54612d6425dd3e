#include "template/text.hpp"

#include <algorithm>
#include <iterator>

namespace spite::tokenizer::template_detail {
namespace {

struct range {
  char32_t lo, hi;
};

template <std::size_t N>
bool in_ranges(const range (&table)[N], char32_t c) {
  // Tables are sorted by lo; find the last range starting at or before c.
  const range* it = std::upper_bound(std::begin(table), std::end(table), c,
                                     [](char32_t v, const range& r) { return v < r.lo; });
  if (it == std::begin(table)) return false;
  --it;
  return c <= it->hi;
}

// Not printable in Python: controls, format characters, separators other than the space,
// surrogates, private use and noncharacters (unassigned code points are not listed).
const range k_unprintable[] = {
    {0x00, 0x1F},       {0x7F, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},
    {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x1680, 0x1680},
    {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},
    {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFDD0, 0xFDEF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
    {0xFFFE, 0xFFFF},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
    {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
};

const range k_alpha[] = {
    {'A', 'Z'},         {'a', 'z'},         {0xAA, 0xAA},       {0xB5, 0xB5},       {0xBA, 0xBA},
    {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},      {0x2C6, 0x2D1},     {0x2E0, 0x2E4},
    {0x2EC, 0x2EC},     {0x2EE, 0x2EE},     {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x559, 0x559},     {0x560, 0x588},     {0x5D0, 0x5EA},     {0x5EF, 0x5F2},
    {0x620, 0x64A},     {0x66E, 0x66F},     {0x671, 0x6D3},     {0x6D5, 0x6D5},     {0x904, 0x939},
    {0xE01, 0xE30},     {0x10A0, 0x10FF},   {0x1100, 0x11FF},   {0x1E00, 0x1FBC},   {0x2C00, 0x2CE4},
    {0x3041, 0x3096},   {0x309D, 0x309F},   {0x30A1, 0x30FA},   {0x30FC, 0x30FF},   {0x3105, 0x312F},
    {0x3131, 0x318E},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA48C},   {0xAC00, 0xD7A3},
    {0xF900, 0xFAFF},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0xFF66, 0xFFDC},   {0x10400, 0x1044F},
    {0x20000, 0x2FA1F},
};

const range k_decimal[] = {
    {'0', '9'},       {0x660, 0x669},   {0x6F0, 0x6F9},   {0x7C0, 0x7C9},     {0x966, 0x96F},
    {0x9E6, 0x9EF},   {0xE50, 0xE59},   {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF},
};

const range k_digit_extra[] = {
    {0xB2, 0xB3}, {0xB9, 0xB9}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468},
    {0x2474, 0x247C}, {0x2488, 0x2490}, {0x24F5, 0x24FD}, {0x2776, 0x277E}, {0x2780, 0x2788}, {0x278A, 0x2792},
};

const range k_numeric_extra[] = {
    {0xBC, 0xBE},     {0x2150, 0x2182},   {0x2185, 0x2189}, {0x2469, 0x2473}, {0x247D, 0x2487},
    {0x2491, 0x249B}, {0x24EA, 0x24F4},   {0x24FE, 0x24FF}, {0x277F, 0x277F}, {0x2789, 0x2789},
    {0x2793, 0x2793}, {0x3007, 0x3007},   {0x3021, 0x3029}, {0x4E00, 0x4E00}, {0x4E03, 0x4E03},
    {0x4E07, 0x4E07}, {0x4E09, 0x4E09},   {0x4E5D, 0x4E5D}, {0x4E8C, 0x4E8C}, {0x4E94, 0x4E94},
    {0x516B, 0x516B}, {0x516D, 0x516D},   {0x5341, 0x5341}, {0x5343, 0x5343}, {0x56DB, 0x56DB},
    {0x767E, 0x767E}, {0x96F6, 0x96F6},
};

// Pairs laid out as (upper, lower) alternating from `lo`; `upper_even` says whether the upper
// case letter sits on the even code point.
struct pair_block {
  char32_t lo, hi;
  bool upper_even;
};

const pair_block k_pairs[] = {
    {0x100, 0x12F, true},   {0x132, 0x137, true},   {0x139, 0x148, false},  {0x14A, 0x177, true},
    {0x179, 0x17E, false},  {0x1CD, 0x1DC, false},  {0x1DE, 0x1EF, true},   {0x1F8, 0x21F, true},
    {0x222, 0x233, true},   {0x246, 0x24F, true},   {0x3D8, 0x3EF, true},   {0x460, 0x481, true},
    {0x48A, 0x4BF, true},   {0x4C1, 0x4CE, false},  {0x4D0, 0x52F, true},   {0x1E00, 0x1E95, true},
    {0x1EA0, 0x1EFF, true}, {0x2C80, 0x2CE3, true},
};

// Blocks where lower = upper + delta.
struct offset_block {
  char32_t lo, hi;  // upper-case range
  char32_t delta;
};

const offset_block k_offsets[] = {
    {'A', 'Z', 32},           {0xC0, 0xD6, 32},         {0xD8, 0xDE, 32},       {0x388, 0x38A, 37},
    {0x38E, 0x38F, 63},       {0x391, 0x3A1, 32},       {0x3A3, 0x3AB, 32},     {0x400, 0x40F, 80},
    {0x410, 0x42F, 32},       {0x531, 0x556, 48},       {0x10A0, 0x10C5, 7264}, {0x2160, 0x216F, 16},
    {0x24B6, 0x24CF, 26},     {0xFF21, 0xFF3A, 32},     {0x10400, 0x10427, 40},
};

const struct {
  char32_t upper, lower;
} k_singles[] = {
    {0x178, 0xFF}, {0x386, 0x3AC}, {0x38C, 0x3CC}, {0x4C0, 0x4CF}, {0x1E9E, 0xDF},
};

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  for (const auto& b : k_offsets)
    if (c >= b.lo && c <= b.hi) return c + b.delta;
  for (const auto& b : k_pairs)
    if (c >= b.lo && c <= b.hi) return ((c % 2 == 0) == b.upper_even) ? c + 1 : c;
  for (const auto& s : k_singles)
    if (c == s.upper) return s.lower;
  if (c == 0x130) return 'i';
  return c;
}

char32_t simple_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  if (c == 0xDF) return c;  // full mapping handles it
  for (const auto& b : k_offsets)
    if (c >= b.lo + b.delta && c <= b.hi + b.delta) return c - b.delta;
  for (const auto& b : k_pairs)
    if (c >= b.lo && c <= b.hi) return ((c % 2 == 0) == b.upper_even) ? c : c - 1;
  for (const auto& s : k_singles)
    if (c == s.lower && s.lower != 0xDF) return s.upper;
  return c;
}

}  // namespace

u32string decode_utf8(std::string_view s) {
  u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < s.size()) {
    const unsigned char b0 = byte(i);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char b = byte(i + k);
      if ((b & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
      ok = false;
    if (!ok) {
      out.push_back(0xDC80 + b0 - 0x80);  // lossless stand-in for a stray byte
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC80 + 0x80));  // stray byte back as itself
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(const char32_t* begin, const char32_t* end) {
  std::string out;
  out.reserve(static_cast<std::size_t>(end - begin));
  for (const char32_t* p = begin; p != end; ++p) append_utf8(out, *p);
  return out;
}

std::size_t count_code_points(std::string_view s) {
  bool ascii = true;
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  return ascii ? s.size() : decode_utf8(s).size();
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return ascii_space(static_cast<char>(c));
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_isprintable(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return true;
  return !in_ranges(k_unprintable, c);
}

bool py_isalpha(char32_t c) {
  if (c >= 0x2B9 && c <= 0x36F && !(c >= 0x2C6 && c <= 0x2D1) && !(c >= 0x2E0 && c <= 0x2E4) && c != 0x2EC &&
      c != 0x2EE)
    return false;  // modifier symbols and combining marks
  if (c == 0xD7 || c == 0xF7) return false;
  return in_ranges(k_alpha, c);
}

bool py_isdecimal(char32_t c) { return in_ranges(k_decimal, c); }
bool py_isdigit(char32_t c) { return py_isdecimal(c) || in_ranges(k_digit_extra, c); }
bool py_isnumeric(char32_t c) { return py_isdigit(c) || in_ranges(k_numeric_extra, c); }

bool py_islower_char(char32_t c) {
  if (c == 0xDF || c == 0x138 || c == 0x149 || c == 0xAA || c == 0xBA) return true;
  return simple_upper(c) != c;
}

bool py_isupper_char(char32_t c) { return simple_lower(c) != c; }

void append_upper(u32string& out, char32_t c) {
  if (c == 0xDF) {
    out.push_back('S');
    out.push_back('S');
  } else if (c == 0x149) {
    out.push_back(0x2BC);
    out.push_back('N');
  } else {
    out.push_back(simple_upper(c));
  }
}

void append_lower(u32string& out, char32_t c) {
  if (c == 0x130) {
    out.push_back('i');
    out.push_back(0x307);
  } else {
    out.push_back(simple_lower(c));
  }
}

void append_title(u32string& out, char32_t c) {
  if (c == 0xDF) {
    out.push_back('S');
    out.push_back('s');
  } else {
    append_upper(out, c);
  }
}

namespace {

bool all_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

std::string py_upper(std::string_view s) {
  if (all_ascii(s)) {
    std::string r(s);
    for (char& c : r)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return r;
  }
  u32string out;
  for (char32_t c : decode_utf8(s)) append_upper(out, c);
  return encode_utf8(out);
}

std::string py_lower(std::string_view s) {
  if (all_ascii(s)) {
    std::string r(s);
    for (char& c : r)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return r;
  }
  u32string out;
  const u32string in = decode_utf8(s);
  for (std::size_t i = 0; i < in.size(); ++i) {
    // Final sigma: a capital sigma ending a word lowers to ς.
    if (in[i] == 0x3A3 && i > 0 && py_iscased(in[i - 1]) && (i + 1 == in.size() || !py_iscased(in[i + 1]))) {
      out.push_back(0x3C2);
      continue;
    }
    append_lower(out, in[i]);
  }
  return encode_utf8(out);
}

std::string py_title(std::string_view s) {
  u32string out;
  bool prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    if (prev_cased)
      append_lower(out, c);
    else
      append_title(out, c);
    prev_cased = py_iscased(c);
  }
  return encode_utf8(out);
}

std::string py_capitalize(std::string_view s) {
  u32string out;
  bool first = true;
  for (char32_t c : decode_utf8(s)) {
    if (first)
      append_title(out, c);
    else
      append_lower(out, c);
    first = false;
  }
  return encode_utf8(out);
}

std::string py_swapcase(std::string_view s) {
  u32string out;
  for (char32_t c : decode_utf8(s)) {
    if (py_isupper_char(c))
      append_lower(out, c);
    else if (py_islower_char(c))
      append_upper(out, c);
    else
      out.push_back(c);
  }
  return encode_utf8(out);
}

}  // namespace spite::tokenizer::template_detail
