// The malformed-file corpus: truncations, bit flips and hand-made headers. Every one must give
// an error naming the file and the byte offset (or load, for harmless flips): never a crash,
// never an allocation sized by an unchecked number (the asan preset runs these too).
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "shared_data.hpp"
#include "spite/gguf/file.hpp"

using namespace spite::gguf;

namespace {

// Builds GGUF images field by field, including invalid ones.
struct raw_builder {
  std::vector<std::byte> b;
  raw_builder& u32(std::uint32_t v) { return put(&v, 4); }
  raw_builder& u64(std::uint64_t v) { return put(&v, 8); }
  raw_builder& str(std::string_view s) { return u64(s.size()).put(s.data(), s.size()); }
  raw_builder& put(const void* p, std::size_t n) {
    const auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  raw_builder& header(std::uint64_t n_tensors, std::uint64_t n_kv) { return u32(magic).u32(3).u64(n_tensors).u64(n_kv); }
  raw_builder& pad_to(std::size_t align) {
    while (b.size() % align != 0) b.push_back(std::byte{0});
    return *this;
  }
  raw_builder& zeros(std::size_t n) {
    b.insert(b.end(), n, std::byte{0});
    return *this;
  }
  raw_builder& tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t type, std::uint64_t offset) {
    str(name).u32(static_cast<std::uint32_t>(dims.size()));
    for (auto d : dims) u64(d);
    return u32(type).u64(offset);
  }
};

std::string expect_error(const std::vector<std::byte>& bytes, const std::string& name = "bad.gguf") {
  auto f = file::parse(bytes, name);
  REQUIRE_FALSE(f.ok());
  INFO(f.err().message);
  CHECK(f.err().message.rfind(name + ": ", 0) == 0);
  return f.err().message;
}

}  // namespace

TEST_CASE("every truncation of a valid file is an error that names the byte offset", "[gguf][malformed]") {
  const auto bytes = spite::test::sample_bytes();
  auto full = file::parse(bytes, "sample.gguf");
  REQUIRE(full.ok());
  std::uint64_t data_end = 0;
  for (const auto& t : full->tensors()) data_end = std::max(data_end, t.file_offset + t.size);
  for (std::size_t len = 0; len < data_end; ++len) {
    INFO("truncated to " << len << " bytes");
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    const std::string msg = expect_error(cut, "sample.gguf");
    if (len >= 4) CHECK_THAT(msg, Catch::Contains("byte "));
  }
}

TEST_CASE("truncations of a real model are errors", "[gguf][malformed]") {
  const auto raw = spite::test::read_file(spite::test::shared_path("models/stories260K.gguf"));
  std::vector<std::byte> bytes(raw.size());
  std::memcpy(bytes.data(), raw.data(), raw.size());
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    // Dense near the header and metadata, sparse over the tensor data.
    const std::size_t len = i < 200 ? std::uniform_int_distribution<std::size_t>(0, 8192)(rng)
                                    : std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(rng);
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    expect_error(cut, "stories260K.gguf");
  }
}

TEST_CASE("random bit flips never crash the reader", "[gguf][malformed]") {
  const auto bytes = spite::test::sample_bytes();
  std::mt19937 rng(42);
  std::size_t refused = 0;
  for (int i = 0; i < 5000; ++i) {
    auto mutated = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Most flips land in the header and metadata, where structure lives.
      const std::size_t at = rng() % std::min<std::size_t>(mutated.size(), 900);
      mutated[at] ^= static_cast<std::byte>(1u << (rng() % 8));
    }
    auto f = file::parse(mutated, "flipped.gguf");
    if (!f.ok()) {
      ++refused;
      CHECK_THAT(f.err().message, Catch::StartsWith("flipped.gguf: "));
    } else {
      // Whatever loads must be self-consistent: every tensor inside the buffer.
      for (const auto& t : f->tensors()) {
        REQUIRE(t.data >= mutated.data());
        REQUIRE(t.data + t.size <= mutated.data() + mutated.size());
      }
    }
  }
  CHECK(refused > 1000);
}

TEST_CASE("hand-made malformed headers give precise errors", "[gguf][malformed]") {
  SECTION("bad magic") {
    raw_builder r;
    r.u32(0x46554746).u32(3).u64(0).u64(0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("bad magic"));
  }
  SECTION("unknown versions") {
    for (std::uint32_t v : {0u, 4u, 77u}) {
      raw_builder r;
      r.u32(magic).u32(v).u64(0).u64(0);
      CHECK_THAT(expect_error(r.b), Catch::Contains("version"));
    }
    raw_builder v1;
    v1.u32(magic).u32(1).u64(0).u64(0);
    CHECK_THAT(expect_error(v1.b), Catch::Contains("version 1 is not supported"));
  }
  SECTION("counts beyond the file") {
    CHECK_THAT(expect_error(raw_builder().header(0, 1ull << 60).b), Catch::Contains("metadata count"));
    CHECK_THAT(expect_error(raw_builder().header(~0ull, 0).b), Catch::Contains("tensor count"));
  }
  SECTION("string length beyond the file") {
    raw_builder r;
    r.header(0, 1).u64(1ull << 62).put("key", 3).zeros(32);
    CHECK_THAT(expect_error(r.b), Catch::Contains("byte 24") && Catch::Contains("length"));
  }
  SECTION("unknown value type") {
    raw_builder r;
    r.header(0, 1).str("k").u32(13).u32(0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("unknown value type 13"));
  }
  SECTION("array count beyond the file") {
    raw_builder r;
    r.header(0, 1).str("k").u32(9).u32(6).u64(1ull << 61);
    CHECK_THAT(expect_error(r.b), Catch::Contains("does not fit"));
    raw_builder s;
    s.header(0, 1).str("k").u32(9).u32(8).u64(1ull << 40);
    CHECK_THAT(expect_error(s.b), Catch::Contains("does not fit"));
  }
  SECTION("unknown array element type") {
    raw_builder r;
    r.header(0, 1).str("k").u32(9).u32(99).u64(0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("unknown array element type 99"));
  }
  SECTION("arrays nested too deep") {
    raw_builder r;
    r.header(0, 1).str("k").u32(9);
    for (int i = 0; i < 40; ++i) r.u32(9).u64(1);
    r.u32(0).u64(0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("nested deeper"));
  }
  SECTION("duplicate keys") {
    raw_builder r;
    r.header(0, 2).str("a").u32(4).u32(1).str("a").u32(4).u32(2);
    CHECK_THAT(expect_error(r.b), Catch::Contains("duplicate metadata key 'a'") && Catch::Contains("byte 41"));
  }
  SECTION("bad alignment") {
    raw_builder r;
    r.header(0, 1).str("general.alignment").u32(4).u32(48);
    CHECK_THAT(expect_error(r.b), Catch::Contains("power of two"));
    raw_builder t;
    t.header(0, 1).str("general.alignment").u32(10).u64(32);
    CHECK_THAT(expect_error(t.b), Catch::Contains("general.alignment"));
  }
  SECTION("too many dimensions") {
    raw_builder r;
    r.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("tensor 't' has 5 dimensions"));
  }
  SECTION("unknown tensor type names the tensor") {
    raw_builder r;
    r.header(1, 0).tensor("blk.0.attn_q.weight", {32}, 4, 0).pad_to(32).zeros(64);
    const auto f = file::parse(r.b, "bad.gguf");
    REQUIRE_FALSE(f.ok());
    CHECK(f.err().code == spite::errc::unsupported);
    CHECK_THAT(f.err().message, Catch::Contains("'blk.0.attn_q.weight'") && Catch::Contains("unknown type id 4"));
  }
  SECTION("shape products that overflow") {
    raw_builder r;
    r.header(1, 0).tensor("t", {1ull << 40, 1ull << 40}, 0, 0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("shape overflows"));
    raw_builder s;
    s.header(1, 0).tensor("t", {~0ull}, 0, 0);
    CHECK_THAT(expect_error(s.b), Catch::Contains("shape overflows"));
    raw_builder bytes_overflow;  // elements fit in int64, bytes do not
    bytes_overflow.header(1, 0).tensor("t", {1ull << 62}, 0, 0);
    CHECK_THAT(expect_error(bytes_overflow.b), Catch::Contains("overflow"));
  }
  SECTION("row not a multiple of the block size") {
    raw_builder r;
    r.header(1, 0).tensor("t", {33}, 2, 0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("not a multiple of the Q4_0 block size 32"));
  }
  SECTION("misaligned data offset") {
    raw_builder r;
    r.header(1, 0).tensor("t", {4}, 0, 8).pad_to(32).zeros(64);
    CHECK_THAT(expect_error(r.b), Catch::Contains("not a multiple of the alignment"));
  }
  SECTION("tensor data out of bounds") {
    raw_builder r;
    r.header(1, 0).tensor("t", {64}, 0, 0).pad_to(32).zeros(255);
    CHECK_THAT(expect_error(r.b), Catch::Contains("outside"));
    raw_builder far;
    far.header(1, 0).tensor("t", {8}, 0, ~0ull - 31).pad_to(32).zeros(32);
    CHECK_THAT(expect_error(far.b), Catch::Contains("outside"));
  }
  SECTION("overlapping tensor data") {
    raw_builder r;
    r.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad_to(32).zeros(128);
    CHECK_THAT(expect_error(r.b), Catch::Contains("overlaps"));
  }
  SECTION("duplicate tensor names") {
    raw_builder r;
    r.header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32).zeros(64);
    CHECK_THAT(expect_error(r.b), Catch::Contains("duplicate tensor name 'a'"));
  }
  SECTION("data section past the end") {
    raw_builder r;
    r.header(1, 0).tensor("t", {0}, 0, 0);
    CHECK_THAT(expect_error(r.b), Catch::Contains("data section"));
  }
}

TEST_CASE("a file with no tensors and no metadata is valid", "[gguf][malformed]") {
  raw_builder r;
  r.header(0, 0);
  auto f = file::parse(r.b, "empty.gguf");
  REQUIRE(f.ok());
  CHECK(f->tensors().empty());
}
