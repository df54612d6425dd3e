#include "args.hpp"

namespace spite::ctl {

args& args::flag(std::string name, std::string help) {
  order_.push_back(name);
  specs_[std::move(name)] = {"", std::move(help)};
  return *this;
}

args& args::option(std::string name, std::string metavar, std::string help) {
  order_.push_back(name);
  specs_[std::move(name)] = {std::move(metavar), std::move(help)};
  return *this;
}

result<void> args::parse(const std::vector<std::string>& argv) {
  bool only_positional = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name = a;
    std::optional<std::string> inline_value;
    if (const auto eq = a.find('='); eq != std::string::npos && a.starts_with("--")) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    const auto it = specs_.find(name);
    if (it == specs_.end()) return make_error(errc::invalid_argument, "unknown option " + name);
    if (it->second.metavar.empty()) {
      if (inline_value) return make_error(errc::invalid_argument, name + " takes no value");
      values_[name] = "";
    } else if (inline_value) {
      values_[name] = *inline_value;
    } else if (i + 1 < argv.size()) {
      values_[name] = argv[++i];
    } else {
      return make_error(errc::invalid_argument, name + " needs a value (" + it->second.metavar + ")");
    }
  }
  return ok();
}

bool args::has(std::string_view name) const { return values_.find(name) != values_.end(); }

std::optional<std::string> args::get(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string args::help() const {
  std::string out;
  for (const auto& name : order_) {
    const spec& s = specs_.at(name);
    std::string left = "  " + name + (s.metavar.empty() ? "" : " " + s.metavar);
    if (left.size() < 24) left.resize(24, ' ');
    else left += "  ";
    out += left + s.help + "\n";
  }
  return out;
}

}  // namespace spite::ctl
