#include "spite/core/page_memory.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <new>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

bool all_zero(const std::byte* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 4096) {
    if (p[i] != std::byte{0}) return false;
  }
  return p[n - 1] == std::byte{0};
}

// The VmFlags line of the mapping that holds `p` in /proc/self/smaps.
std::string vm_flags_of(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    // A mapping's first line starts "lo-hi " in hex; its field lines start with a name.
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) inside = lo <= at && at < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return {};
}

}  // namespace

TEST_CASE("page memory: zero bytes give no mapping", "[core][page_memory]") { CHECK(spite::map_zeroed_pages(0) == nullptr); }

TEST_CASE("page memory: a small buffer is zeroed, page aligned and writable", "[core][page_memory]") {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto m = spite::map_zeroed_pages(5000);
  REQUIRE(m != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(m.get()) % page == 0);
  CHECK(all_zero(m.get(), 5000));
  m[4999] = std::byte{7};
  CHECK(m[4999] == std::byte{7});
}

TEST_CASE("page memory: from 2 MiB up, a mapping on a 2 MiB boundary that asks for huge pages", "[core][page_memory]") {
  const std::size_t n = 3 * mib + 123;
  auto m = spite::map_zeroed_pages(n);
  REQUIRE(m != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(m.get()) % (2 * mib) == 0);
  CHECK(all_zero(m.get(), n));
  for (std::size_t i = 0; i < n; i += 4096) m[i] = std::byte{1};
  m[n - 1] = std::byte{2};
  CHECK(m[n - 1] == std::byte{2});
  // The advice is visible where the kernel has transparent huge pages at all ("hg" in the
  // mapping's flags), whatever the system's mode is.
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    CHECK(vm_flags_of(m.get()).find(" hg") != std::string::npos);
  }
}

TEST_CASE("page memory: a refused size throws instead of returning memory", "[core][page_memory]") {
  CHECK_THROWS_AS(spite::map_zeroed_pages(SIZE_MAX - 4096), std::bad_alloc);
}
