#include <catch2/catch.hpp>

#include "spite/gguf/value.hpp"

using namespace spite::gguf;

TEST_CASE("numeric values convert only where the value is representable", "[gguf][value]") {
  CHECK(value::u32(7).as_int() == 7);
  CHECK(value::u32(7).as_uint() == 7u);
  CHECK(value::u32(7).as_float() == 7.0);
  CHECK_FALSE(value::i32(-1).as_uint().has_value());
  CHECK(value::i32(-1).as_int() == -1);
  CHECK_FALSE(value::u64(~0ull).as_int().has_value());
  CHECK(value::f32(0.5f).as_float() == 0.5);
  CHECK_FALSE(value::f32(0.5f).as_int().has_value());
  CHECK(value::boolean(true).as_bool() == true);
  CHECK_FALSE(value::u8(1).as_bool().has_value());
  CHECK_FALSE(value::string("x").as_int().has_value());
  CHECK(value::string("x").as_string() == "x");
  CHECK(value::u8(1).as_array() == nullptr);
}

TEST_CASE("arrays expose scalars, strings and nested arrays", "[gguf][value]") {
  const std::uint16_t items[] = {1, 2, 65535};
  const value a = value::array_of<std::uint16_t>(value_type::u16, items);
  REQUIRE(a.as_array() != nullptr);
  CHECK(a.as_array()->size() == 3);
  CHECK(a.as_array()->uint_at(2) == 65535u);
  CHECK_FALSE(a.as_array()->uint_at(3).has_value());
  CHECK(a.as_array()->to_vector<int>() == std::vector<int>{1, 2, 65535});

  const value s = value::array_of_strings({"a", "", "c"});
  CHECK(s.as_array()->string_at(2) == "c");
  CHECK_FALSE(s.as_array()->to_vector<int>().has_value());

  std::vector<array_value> inner{*a.as_array(), *s.as_array()};
  const value n = value::array_of_arrays(inner);
  CHECK(n.as_array()->array_at(1)->string_at(0) == "a");
  CHECK(n.as_array()->array_at(2) == nullptr);
}

TEST_CASE("values compare by type and content", "[gguf][value]") {
  CHECK(value::u32(1) == value::u32(1));
  CHECK_FALSE(value::u32(1) == value::i32(1));
  CHECK(value::string("abc") == value::string_view_of("abc"));
  CHECK_FALSE(value::array_of_strings({"a"}) == value::array_of_strings({"b"}));
}
