// Command-line arguments of one spitectl command: flags declared up front, then parsed, so that
// an unknown flag or a missing value is a usage error naming it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::ctl {

class args {
 public:
  // A flag without value (--json) or with one (--model M); names include the dashes.
  args& flag(std::string name, std::string help);
  args& option(std::string name, std::string metavar, std::string help);

  result<void> parse(const std::vector<std::string>& argv);

  bool has(std::string_view name) const;
  std::optional<std::string> get(std::string_view name) const;
  const std::vector<std::string>& positional() const noexcept { return positional_; }
  std::string help() const;

 private:
  struct spec {
    std::string metavar;  // empty for a plain flag
    std::string help;
  };
  std::map<std::string, spec, std::less<>> specs_;
  std::vector<std::string> order_;
  std::map<std::string, std::string, std::less<>> values_;
  std::vector<std::string> positional_;
};

}  // namespace spite::ctl
