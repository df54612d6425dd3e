// Access to the shared reference data (models, golden outputs) that the tests compare against.
// The folder is ../shared beside the repository, or $SPITE_SHARED_DIR. A missing folder fails the
// test with a message saying where it was looked for: data tests never skip silently.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spite::test {

std::filesystem::path shared_dir();                          // fails the test if absent
std::filesystem::path shared_path(const std::string& rel);   // fails the test if absent
nlohmann::json load_json(const std::filesystem::path& path);
std::vector<char> read_file(const std::filesystem::path& path);
// A fresh directory under the system temp dir, removed when the object dies.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace spite::test
