#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>

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

namespace {

// Resident kilobytes of the mapping that starts at `start`, from /proc/self/smaps.
long mapping_rss_kib(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_it = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {  // a mapping's first line
      in_it = lo == reinterpret_cast<std::uintptr_t>(start);
      continue;
    }
    long kib = 0;
    if (in_it && std::sscanf(line.c_str(), "Rss: %ld kB", &kib) == 1) return kib;
  }
  return -1;
}

}  // namespace

TEST_CASE("mapped_file copies bytes out of the file without mapping them, and refuses reads past its end", "[core][mmap]") {
  spite::test::temp_dir dir;
  const auto path = dir / "big.bin";
  std::string content(4u << 20, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7 + i / 4096);
  std::ofstream(path, std::ios::binary) << content;
  auto opened = spite::mapped_file::open(path.string());
  REQUIRE(opened.ok());
  const spite::mapped_file f = std::move(opened).value();  // the file stays readable after a move
  REQUIRE(mapping_rss_kib(f.data()) == 0);

  std::string out(100, '\0');
  REQUIRE(f.read(2u << 20, std::as_writable_bytes(std::span(out))).ok());
  CHECK(out == content.substr(2u << 20, 100));
  CHECK(mapping_rss_kib(f.data()) == 0);  // nothing of the file mapped into the process

  const auto tail = f.read(content.size() - 10, std::as_writable_bytes(std::span(out)));
  REQUIRE_FALSE(tail.ok());
  CHECK(tail.err().code == spite::errc::out_of_range);

  // The same bytes read through the mapping do become resident: the check above can fail.
  volatile char touched = static_cast<char>(f.data()[(2u << 20) + 1]);
  (void)touched;
  CHECK(mapping_rss_kib(f.data()) > 0);
}
