#include <catch2/catch.hpp>
#include <string>

#include "spite/core/sha256.hpp"

namespace {
std::string digest(const std::string& s) {
  spite::sha256 h;
  h.update(s.data(), s.size());
  return h.finish_hex();
}
}  // namespace

// Test vectors from FIPS 180-4 examples.
TEST_CASE("sha256 matches the standard test vectors", "[core][sha256]") {
  CHECK(digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  spite::sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk.data(), chunk.size());
  CHECK(h.finish_hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 gives the same digest however the input is split", "[core][sha256]") {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 31));
  const std::string whole = digest(data);
  for (std::size_t step : {1u, 3u, 63u, 64u, 65u, 127u}) {
    spite::sha256 h;
    for (std::size_t at = 0; at < data.size(); at += step) {
      h.update(data.data() + at, std::min(step, data.size() - at));
    }
    CHECK(h.finish_hex() == whole);
  }
}
