#include "shared_data.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>

namespace spite::test {

std::filesystem::path shared_dir() {
  const char* env = std::getenv("SPITE_SHARED_DIR");
  if (env == nullptr || *env == '\0') env = std::getenv("SPITE_SHARED_DIR_DEFAULT");
  const std::filesystem::path dir = (env != nullptr && *env != '\0') ? env : "../shared";
  if (!std::filesystem::is_directory(dir / "golden") || !std::filesystem::is_directory(dir / "models")) {
    FAIL("shared test data not found at '" << dir.string()
                                           << "' (expected golden/ and models/ there); set SPITE_SHARED_DIR");
  }
  return dir;
}

std::filesystem::path shared_path(const std::string& rel) {
  const auto p = shared_dir() / rel;
  if (!std::filesystem::exists(p)) FAIL("shared test file missing: " << p.string());
  return p;
}

std::vector<char> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) FAIL("cannot read " << path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::json load_json(const std::filesystem::path& path) {
  const auto bytes = read_file(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

temp_dir::temp_dir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = base / ("spite-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  FAIL("cannot create a temporary directory under " << base.string());
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace spite::test
