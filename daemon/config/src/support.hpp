// Helpers of spite::config that need no TOML: suggestions, api key files, name checks.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::config::detail {

// Levenshtein distance between two short strings.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo, else empty.
std::string_view closest(std::string_view word, std::span<const std::string_view> candidates);

// Empty when `key` is acceptable as an api key, else why not.
std::string api_key_problem(std::string_view key);

// Reads an api key file: one key per line, blank lines and lines starting with '#' skipped,
// surrounding whitespace trimmed. Errors name the file and line ("keys.txt:3: ...").
result<std::vector<std::string>> read_api_key_file(const std::filesystem::path& path);

// Reads a whole file of at most `limit` bytes.
result<std::string> read_small_file(const std::filesystem::path& path, std::size_t limit);

// A value shown in a message: quoted and cut to a readable length, control bytes escaped.
std::string quote(std::string_view s);
// The same without the quotes.
std::string escape(std::string_view s);

}  // namespace spite::config::detail
