#include <catch2/catch.hpp>
#include <fstream>

#include "shared_data.hpp"
#include "spite/core/mapped_file.hpp"

TEST_CASE("mapped_file maps a file's bytes without copying them", "[core][mmap]") {
  spite::test::temp_dir dir;
  const auto path = dir / "data.bin";
  std::ofstream(path, std::ios::binary) << "hello mapped world";
  auto f = spite::mapped_file::open(path.string());
  REQUIRE(f.ok());
  REQUIRE(f->size() == 18);
  CHECK(std::string(reinterpret_cast<const char*>(f->data()), f->size()) == "hello mapped world");
  // Moving keeps the same mapping.
  const std::byte* before = f->data();
  spite::mapped_file moved = std::move(f).value();
  CHECK(moved.data() == before);
}

TEST_CASE("mapped_file reports a missing file with its path", "[core][mmap]") {
  auto f = spite::mapped_file::open("/nonexistent/dir/model.gguf");
  REQUIRE_FALSE(f.ok());
  CHECK(f.err().code == spite::errc::io);
  CHECK_THAT(f.err().message, Catch::Contains("/nonexistent/dir/model.gguf"));
}

TEST_CASE("mapped_file refuses a directory and maps an empty file as empty", "[core][mmap]") {
  spite::test::temp_dir dir;
  CHECK_FALSE(spite::mapped_file::open(dir.path().string()).ok());
  const auto empty = dir / "empty";
  std::ofstream(empty).close();
  auto f = spite::mapped_file::open(empty.string());
  REQUIRE(f.ok());
  CHECK(f->size() == 0);
}
