#include "unicode.hpp"

#include <algorithm>
#include <array>

#include "unicode_data.hpp"

namespace spite::tokenizer::unicode {

std::uint32_t flags(std::uint32_t cp) noexcept {
  if (cp >= 0x110000) return undefined;
  const flag_range* end = k_flag_ranges + k_flag_ranges_size;
  const flag_range* it = std::upper_bound(k_flag_ranges, end, cp,
                                          [](std::uint32_t v, const flag_range& r) { return v < r.first; });
  return (it - 1)->flags;
}

bool is_whitespace(std::uint32_t cp) noexcept {
  // The White_Space property.
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {
std::uint32_t lookup_pair(const cp_pair* table, std::size_t size, std::uint32_t cp) noexcept {
  const cp_pair* end = table + size;
  const cp_pair* it = std::lower_bound(table, end, cp, [](const cp_pair& p, std::uint32_t v) { return p.from < v; });
  return it != end && it->from == cp ? it->to : cp;
}
}  // namespace

std::uint32_t to_lower(std::uint32_t cp) noexcept { return lookup_pair(k_lowercase, k_lowercase_size, cp); }
std::uint32_t nfd_base(std::uint32_t cp) noexcept { return lookup_pair(k_nfd_base, k_nfd_base_size, cp); }

std::uint32_t decode_next(std::string_view s, std::size_t& offset) noexcept {
  const auto b0 = static_cast<unsigned char>(s[offset]);
  const auto cont = [&](std::size_t k) {
    return offset + k < s.size() && (static_cast<unsigned char>(s[offset + k]) & 0xC0) == 0x80;
  };
  const auto bits = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[offset + k]) & 0x3F); };
  std::uint32_t cp;
  if (b0 < 0x80) {
    cp = b0;
    offset += 1;
  } else if ((b0 & 0xE0) == 0xC0 && cont(1)) {
    cp = ((b0 & 0x1Fu) << 6) | bits(1);
    offset += 2;
  } else if ((b0 & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    cp = ((b0 & 0x0Fu) << 12) | (bits(1) << 6) | bits(2);
    offset += 3;
  } else if ((b0 & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    cp = ((b0 & 0x07u) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
    offset += 4;
  } else {
    cp = replacement_char;
    offset += 1;
  }
  return cp;
}

std::vector<std::uint32_t> decode(std::string_view s) {
  std::vector<std::uint32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out.push_back(decode_next(s, i));
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(std::uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

bool is_valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t n;
    std::uint32_t min;
    if ((b0 & 0xE0) == 0xC0) { n = 2; min = 0x80; }
    else if ((b0 & 0xF0) == 0xE0) { n = 3; min = 0x800; }
    else if ((b0 & 0xF8) == 0xF0) { n = 4; min = 0x10000; }
    else return false;
    if (i + n > s.size()) return false;
    std::size_t next = i;
    const std::uint32_t cp = decode_next(s, next);
    if (next != i + n || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i = next;
  }
  return true;
}

std::size_t incomplete_tail(std::string_view s) noexcept {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const std::size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {

struct byte_alphabet {
  std::array<std::string, 256> to_symbol;
  std::array<int, 512> to_byte{};  // symbols are below U+0200

  byte_alphabet() {
    to_byte.fill(-1);
    // Printable bytes stand for themselves; the others are shifted to U+0100 and up, in order.
    const auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const std::uint32_t cp = printable(b) ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + shifted++);
      to_symbol[b] = to_utf8(cp);
      to_byte[cp] = b;
    }
  }
};

const byte_alphabet& alphabet() {
  static const byte_alphabet a;
  return a;
}

}  // namespace

const std::string& byte_to_symbol(std::uint8_t byte) noexcept { return alphabet().to_symbol[byte]; }

int symbol_to_byte(std::uint32_t cp) noexcept { return cp < 512 ? alphabet().to_byte[cp] : -1; }

}  // namespace spite::tokenizer::unicode
