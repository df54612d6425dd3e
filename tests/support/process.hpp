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

}  // namespace spite::test
