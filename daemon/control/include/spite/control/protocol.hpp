// The control protocol between spitectl and spited, over a Unix stream socket: one JSON object
// per line each way.
//
//   request   {"id": 7, "cmd": "status", ...arguments}
//   events    {"id": 7, "event": "token", ...}            zero or more (streaming commands)
//   final     {"id": 7, "event": "result", "result": {...}}
//         or  {"id": 7, "event": "error", "error": {"code": "bad_request", "message": "..."}}
//
// Every request gets exactly one final line. A line longer than max_line, a line that is not a
// JSON object, a missing id or cmd, and an unknown command are answered with an error and the
// connection stays usable; a client that disconnects cancels its requests.
#pragma once

#include <cstddef>
#include <string_view>

namespace spite::control {

inline constexpr std::size_t default_max_line = 1 << 20;  // 1 MiB per line

// Error codes of the final "error" event.
namespace codes {
inline constexpr std::string_view bad_request = "bad_request";    // not JSON, not an object, missing fields
inline constexpr std::string_view too_large = "too_large";        // line over the limit
inline constexpr std::string_view unknown_command = "unknown_command";
inline constexpr std::string_view not_found = "not_found";        // unknown model, ...
inline constexpr std::string_view busy = "busy";                  // queue full
inline constexpr std::string_view cancelled = "cancelled";
inline constexpr std::string_view failed = "failed";              // the command ran and failed
inline constexpr std::string_view shutting_down = "shutting_down";
}  // namespace codes

}  // namespace spite::control
