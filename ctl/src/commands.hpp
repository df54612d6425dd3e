// The spitectl command table. A command is a name, a one-line summary and a function; adding a
// command means adding a file and one line to the table in commands.cpp.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spite::ctl {

// Exit codes shared by every command.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;  // the command ran and failed (bad file, refused request)
inline constexpr int exit_usage = 2;    // bad command line
inline constexpr int exit_unreachable = 3;  // no spited answers on the control socket

struct command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const std::vector<std::string>& argv);
};

std::span<const command> all_commands();

int run_run(const std::vector<std::string>& argv);
int run_inspect(const std::vector<std::string>& argv);
int run_tokenize(const std::vector<std::string>& argv);
int run_detokenize(const std::vector<std::string>& argv);
int run_bench_tokenize(const std::vector<std::string>& argv);
int run_devices(const std::vector<std::string>& argv);
int run_cards(const std::vector<std::string>& argv);
int run_dispatch(const std::vector<std::string>& argv);
int run_verify(const std::vector<std::string>& argv);
int run_status(const std::vector<std::string>& argv);
int run_models(const std::vector<std::string>& argv);
int run_reload(const std::vector<std::string>& argv);
int run_load(const std::vector<std::string>& argv);
int run_unload(const std::vector<std::string>& argv);
int run_bench(const std::vector<std::string>& argv);
int run_mkmodel(const std::vector<std::string>& argv);

// `spitectl dispatch -m NAME` for a model loaded in spited.
int daemon_dispatch(const std::string& model, const std::optional<std::string>& socket, bool explain, bool as_json);

}  // namespace spite::ctl
