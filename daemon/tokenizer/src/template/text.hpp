// Python str semantics over UTF-8: code points, character classes and case mapping.
// Strings stay UTF-8 (std::string); a byte that is not valid UTF-8 decodes to 0xDC80 + byte and
// encodes back to itself, so nothing is lost. Character classes and case mapping cover Latin,
// Greek, Cyrillic, Armenian and full-width forms plus the common CJK/kana ranges; code points
// outside them count as uncased (an approximation of Python's full Unicode database).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spite::tokenizer::template_detail {

using u32string = std::vector<char32_t>;

u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const char32_t* begin, const char32_t* end);
inline std::string encode_utf8(const u32string& s) { return encode_utf8(s.data(), s.data() + s.size()); }
std::size_t count_code_points(std::string_view s);

// Python's str.isspace / isprintable / isalpha / isdigit / isdecimal / isnumeric / isalnum for one
// code point.
bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
bool py_isdecimal(char32_t c);
bool py_isnumeric(char32_t c);
inline bool py_isalnum(char32_t c) { return py_isalpha(c) || py_isnumeric(c); }
bool py_islower_char(char32_t c);
bool py_isupper_char(char32_t c);
inline bool py_iscased(char32_t c) { return py_islower_char(c) || py_isupper_char(c); }

// Full case mappings (may produce several code points: "ß".upper() == "SS").
void append_upper(u32string& out, char32_t c);
void append_lower(u32string& out, char32_t c);
void append_title(u32string& out, char32_t c);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string py_swapcase(std::string_view s);

// Python str algorithms over UTF-8 (indices and widths count code points).
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// split/rsplit: no separator splits on runs of whitespace; maxsplit < 0 means no limit. An empty
// separator is the caller's ValueError.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);
// find/rfind/count within s[start:end] (Python slice bounds); -1 when absent.
std::int64_t py_find(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, bool reverse);
std::int64_t py_count(std::string_view s, std::string_view sub, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end);
// s[start:end] with Python's clamping, in code points.
std::string py_substr(std::string_view s, std::optional<std::int64_t> start, std::optional<std::int64_t> end);
std::string py_pad(std::string_view s, std::int64_t width, char32_t fill, int align);  // align <0 left, 0 center, >0 right

// Python's \s / str.split() whitespace at the byte level for the fast ASCII path.
inline bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

}  // namespace spite::tokenizer::template_detail
