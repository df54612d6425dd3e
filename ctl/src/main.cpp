// spitectl: the command-line client of spite.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "spite/core/working_memory.hpp"

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: spitectl COMMAND [ARGS...]\n\ncommands:\n");
  for (const auto& c : spite::ctl::all_commands()) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(out, "\n'spitectl COMMAND --help' describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return spite::ctl::exit_usage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return spite::ctl::exit_ok;
  }
  if (name == "--version") {
    std::printf("spitectl 0.1.0\n");
    return spite::ctl::exit_ok;
  }
  spite::keep_working_memory();  // run and bench compute in this process
  for (const auto& c : spite::ctl::all_commands()) {
    if (c.name == name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::fprintf(stderr, "spitectl: unknown command '%s'\n", name.c_str());
  print_usage(stderr);
  return spite::ctl::exit_usage;
}
