// Running a program of the build (spitectl, spited) from a test and capturing what it printed.
#pragma once

#include <string>
#include <vector>

namespace spite::test {

struct process_result {
  int exit_code = -1;  // 128 + signal number if it was killed by a signal
  std::string out;
  std::string err;
};

process_result run_process(const std::vector<std::string>& argv);

// A program running in the background (a daemon under test). stdout and stderr go to `log`;
// `env` entries ("NAME=value") are added to the environment. The destructor sends SIGTERM and
// reaps it (SIGKILL after 10 s).
class background_process {
 public:
  background_process(const std::vector<std::string>& argv, const std::string& log,
                     const std::vector<std::string>& env = {});
  ~background_process();
  background_process(const background_process&) = delete;
  background_process& operator=(const background_process&) = delete;

  int pid() const noexcept { return pid_; }
  void signal(int sig) const;
  // Waits for the exit (at most `timeout_ms`); the exit code, 128 + signal, or -1 on timeout.
  int wait(int timeout_ms);
  bool running();

 private:
  int pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
};

}  // namespace spite::test
