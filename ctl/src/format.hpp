// Rendering of sizes, counts and GGUF metadata values for spitectl's human and JSON output.
#pragma once

#include "spite/core/bytes.hpp"

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "spite/gguf/value.hpp"

namespace spite::ctl {

std::string with_thousands(std::uint64_t n);  // 1185376 -> "1,185,376"
using spite::human_bytes;  // 1185376 -> "1.13 MiB"
std::string human_count(std::uint64_t n);     // 292432 -> "292.43K"
std::string quoted(std::string_view s);       // "a\nb" with control and invalid bytes escaped

// One line; arrays longer than `max_items` show their first items and their length.
std::string value_text(const gguf::value& v, std::size_t max_items);
// {"type": ..., "value": ...}; arrays: {"type": "array", "element_type", "length", "values"
// (at most max_items), "truncated"}.
nlohmann::json value_json(const gguf::value& v, std::size_t max_items);

}  // namespace spite::ctl
