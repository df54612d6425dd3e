#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "spite/gguf/blocks.hpp"
#include "spite/gguf/types.hpp"

using namespace spite::gguf;

TEST_CASE("the traits table lists every GGUF tensor type with its spec id and block geometry", "[gguf][types]") {
  struct expected {
    std::uint32_t id;
    const char* name;
    std::int64_t block;
    std::size_t bytes;
  };
  const expected table[] = {
      {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},     {3, "Q4_1", 32, 20},
      {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},
      {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},  {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
      {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},  {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},
      {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},        {25, "I16", 1, 2},
      {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},       {29, "IQ1_M", 256, 56},
      {30, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},
  };
  for (const auto& e : table) {
    INFO(e.name);
    const type_traits* t = find_type(e.id);
    REQUIRE(t != nullptr);
    CHECK(t->name == e.name);
    CHECK(t->block_size == e.block);
    CHECK(t->block_bytes == e.bytes);
    CHECK(t->to_float != nullptr);
    CHECK(find_type_by_name(e.name) == t);
  }
  CHECK(all_types().size() == std::size(table));
}

TEST_CASE("retired and unknown type ids are not types", "[gguf][types]") {
  for (std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu}) {
    CHECK(find_type(id) == nullptr);
  }
  CHECK(find_type_by_name("Q4_2") == nullptr);
  CHECK(find_type_by_name("q4_k") == find_type(12));
}

TEST_CASE("quantizers exist for the types spite writes", "[gguf][types]") {
  for (const char* name : {"F32", "F16", "BF16", "Q8_0", "Q8_1", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                           "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS", "MXFP4"}) {
    INFO(name);
    CHECK(find_type_by_name(name)->from_float != nullptr);
  }
}

TEST_CASE("row sizes follow the block geometry and refuse partial blocks", "[gguf][types]") {
  CHECK(row_bytes(tensor_type::q4_K, 4096) == 16u * 144u);
  CHECK(row_bytes(tensor_type::f16, 7) == 14u);
  CHECK_FALSE(row_bytes(tensor_type::q4_0, 33).has_value());
  CHECK_FALSE(row_bytes(tensor_type::q8_0, -32).has_value());
  std::vector<float> out(40);
  std::vector<std::byte> in(64);
  const auto r = dequantize(tensor_type::q4_0, in.data(), out.data(), 40);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("block size"));
  CHECK_FALSE(quantize(tensor_type::iq2_xxs, out.data(), in.data(), 256).ok());
}
