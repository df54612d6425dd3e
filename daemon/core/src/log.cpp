#include "spite/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace spite::log {
namespace {

std::atomic<int> g_level{static_cast<int>(level::info)};

bool stderr_is_journal() {
  // systemd sets JOURNAL_STREAM when stderr is connected to journald.
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  return journal;
}

const char* tag(level lvl) {
  switch (lvl) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warning";
    case level::error: return "error";
  }
  return "?";
}

}  // namespace

void set_level(level min_level) noexcept { g_level.store(static_cast<int>(min_level)); }
level current_level() noexcept { return static_cast<level>(g_level.load()); }

bool parse_level(std::string_view name, level& out) noexcept {
  if (name == "debug") out = level::debug;
  else if (name == "info") out = level::info;
  else if (name == "warn" || name == "warning") out = level::warn;
  else if (name == "error") out = level::error;
  else return false;
  return true;
}

void write(level lvl, std::string_view message) {
  static std::mutex mu;  // one line at a time across threads
  std::string line;
  if (stderr_is_journal()) {
    line = "<" + std::to_string(static_cast<int>(lvl)) + ">";
  } else {
    line = std::string(tag(lvl)) + ": ";
  }
  line.append(message);
  line.push_back('\n');
  std::lock_guard lock(mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace spite::log
