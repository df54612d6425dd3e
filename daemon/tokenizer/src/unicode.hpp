// Code points, UTF-8 and the Unicode properties the tokenizers need. Decoding is lenient in the
// same way as the reference engine: a byte that does not start a well-formed sequence decodes to
// U+FFFD and consumes one byte, so every input tokenizes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spite::tokenizer::unicode {

enum flag : std::uint32_t {
  undefined = 0x01,
  number = 0x02,
  letter = 0x04,
  separator = 0x08,
  mark = 0x10,
  control = 0x20,
  punctuation = 0x40,
  symbol = 0x80,
};

inline constexpr std::uint32_t replacement_char = 0xFFFD;

std::uint32_t flags(std::uint32_t cp) noexcept;
bool is_whitespace(std::uint32_t cp) noexcept;
std::uint32_t to_lower(std::uint32_t cp) noexcept;
// First code point of the canonical decomposition (the base letter of an accented one).
std::uint32_t nfd_base(std::uint32_t cp) noexcept;

// Length of the sequence a lead byte announces (1 for continuation and invalid bytes).
inline std::size_t sequence_length(unsigned char lead) noexcept {
  static constexpr std::uint8_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lengths[lead >> 4];
}

// Decodes the code point at `offset` and advances it; U+FFFD (one byte) for a malformed one.
std::uint32_t decode_next(std::string_view s, std::size_t& offset) noexcept;
std::vector<std::uint32_t> decode(std::string_view s);
void append_utf8(std::string& out, std::uint32_t cp);
std::string to_utf8(std::uint32_t cp);
// True for strict UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;
// Bytes at the end of `s` that start a sequence not yet complete (0 if none): what a streaming
// decoder must hold back.
std::size_t incomplete_tail(std::string_view s) noexcept;

// The byte-level BPE alphabet: every byte maps to a printable code point (GPT-2 scheme).
const std::string& byte_to_symbol(std::uint8_t byte) noexcept;
// The byte a symbol code point stands for, or -1.
int symbol_to_byte(std::uint32_t cp) noexcept;

}  // namespace spite::tokenizer::unicode
