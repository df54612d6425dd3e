// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF): whole characters for
// grammar and pattern text, and a byte-at-a-time decoder for token texts, which may end or start
// in the middle of a character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spite::grammar::detail {

inline constexpr char32_t invalid_cp = 0xFFFFFFFF;

// The character at text[pos], advancing pos past it; invalid_cp (pos advanced by one) if the
// bytes there are not valid UTF-8.
inline char32_t next_cp(std::string_view text, std::size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
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
  } else {
    ++pos;
    return invalid_cp;
  }
  if (pos + static_cast<std::size_t>(len) > text.size()) {
    ++pos;
    return invalid_cp;
  }
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(text[pos + static_cast<std::size_t>(i)]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return invalid_cp;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return invalid_cp;
  }
  pos += static_cast<std::size_t>(len);
  return cp;
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A character being assembled from bytes. `remaining` == 0: nothing pending.
struct partial_utf8 {
  std::uint32_t value = 0;    // the bits seen so far
  std::uint8_t remaining = 0;  // continuation bytes still expected
  std::uint8_t length = 0;     // bytes of the whole character

  // The code points the pending character can still become.
  std::pair<char32_t, char32_t> range() const noexcept {
    const unsigned shift = 6u * remaining;
    char32_t lo = static_cast<char32_t>(value) << shift;
    char32_t hi = lo | ((char32_t{1} << shift) - 1);
    const char32_t min_for_length = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    if (lo < min_for_length) lo = min_for_length;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    return {lo, hi};
  }
};

enum class byte_step { need_more, complete, invalid };

// Feeds one byte. On `complete` the character is in `cp` and `p` is reset.
inline byte_step feed_byte(partial_utf8& p, unsigned char b, char32_t& cp) {
  if (p.remaining == 0) {
    if (b < 0x80) {
      cp = b;
      return byte_step::complete;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      p = {static_cast<std::uint32_t>(b & 0x1F), 1, 2};
    } else if (b >= 0xE0 && b <= 0xEF) {
      p = {static_cast<std::uint32_t>(b & 0x0F), 2, 3};
    } else if (b >= 0xF0 && b <= 0xF4) {
      p = {static_cast<std::uint32_t>(b & 0x07), 3, 4};
    } else {
      return byte_step::invalid;
    }
    return byte_step::need_more;
  }
  if ((b & 0xC0) != 0x80) return byte_step::invalid;
  p.value = (p.value << 6) | (b & 0x3F);
  if (--p.remaining > 0) {
    // Reject overlong forms and surrogates as soon as the bits that reveal them are in.
    const auto [lo, hi] = p.range();
    if (lo > hi) return byte_step::invalid;
    return byte_step::need_more;
  }
  const char32_t c = p.value;
  const std::uint8_t len = p.length;
  p = {};
  const bool overlong = (len == 3 && c < 0x800) || (len == 4 && c < 0x10000);
  if (overlong || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return byte_step::invalid;
  cp = c;
  return byte_step::complete;
}

}  // namespace spite::grammar::detail
