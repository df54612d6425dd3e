// Leveled logging to stderr. Lines carry the sd-daemon "<N>" priority prefix when stderr is the
// journal (JOURNAL_STREAM set), so journald keeps the level; plain text otherwise.
#pragma once

#include <sstream>
#include <string_view>

namespace spite::log {

enum class level { debug = 7, info = 6, warn = 4, error = 3 };

void set_level(level min_level) noexcept;
level current_level() noexcept;
bool parse_level(std::string_view name, level& out) noexcept;
void write(level lvl, std::string_view message);

namespace detail {
template <class... Args>
void emit(level lvl, const Args&... args) {
  if (static_cast<int>(lvl) > static_cast<int>(current_level())) return;
  std::ostringstream os;
  (os << ... << args);
  write(lvl, os.str());
}
}  // namespace detail

template <class... Args> void debug(const Args&... a) { detail::emit(level::debug, a...); }
template <class... Args> void info(const Args&... a) { detail::emit(level::info, a...); }
template <class... Args> void warn(const Args&... a) { detail::emit(level::warn, a...); }
template <class... Args> void error(const Args&... a) { detail::emit(level::error, a...); }

}  // namespace spite::log
