// A private mkdtemp directory for configuration tests, removed at the end of the test.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <catch2/catch.hpp>

namespace spite::test {

struct config_dir {
  std::filesystem::path root;

  config_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "spite-config-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) FAIL("mkdtemp failed for " << tmpl);
    root = std::filesystem::canonical(tmpl);
  }
  ~config_dir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  config_dir(const config_dir&) = delete;
  config_dir& operator=(const config_dir&) = delete;

  // Writes `text` to root/name (creating folders); returns the path.
  std::filesystem::path write(const std::string& name, std::string_view text) const {
    const auto p = root / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

}  // namespace spite::test
