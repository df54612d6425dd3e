#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "fixtures.hpp"
#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"

using namespace spite::gguf;

namespace {

// Copies every key and tensor of `f` into a writer.
writer copy_of(const file& f) {
  writer w;
  w.set_version(f.version());
  for (const auto& e : f.meta().entries()) w.set(std::string(e.key), e.val);
  REQUIRE(w.set_alignment(static_cast<std::uint32_t>(f.alignment())).ok());
  for (const auto& t : f.tensors()) {
    REQUIRE(w.add_tensor(std::string(t.name), t.type, std::span(t.ne.data(), static_cast<std::size_t>(t.n_dims)),
                         t.bytes())
                .ok());
  }
  return w;
}

void require_same_content(const file& a, const file& b) {
  REQUIRE(a.version() == b.version());
  REQUIRE(a.alignment() == b.alignment());
  REQUIRE(a.meta().size() == b.meta().size());
  for (std::size_t i = 0; i < a.meta().size(); ++i) {
    INFO("key " << a.meta().entries()[i].key);
    CHECK(a.meta().entries()[i].key == b.meta().entries()[i].key);
    CHECK(a.meta().entries()[i].val == b.meta().entries()[i].val);
  }
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (std::size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& x = a.tensors()[i];
    const auto& y = b.tensors()[i];
    INFO("tensor " << x.name);
    CHECK(x.name == y.name);
    CHECK(x.type == y.type);
    CHECK(x.n_dims == y.n_dims);
    CHECK(x.ne == y.ne);
    REQUIRE(x.size == y.size);
    CHECK(std::memcmp(x.data, y.data, x.size) == 0);
    CHECK(y.file_offset % b.alignment() == 0);
  }
}

}  // namespace

TEST_CASE("the writer's output reads back with every value and tensor intact", "[gguf][writer]") {
  const auto bytes = spite::test::sample_bytes();
  auto f = file::parse(bytes, "sample");
  REQUIRE(f.ok());
  CHECK(f->version() == 3);
  CHECK(f->meta().get_uint("test.u64") == 18000000000000000000ull);
  CHECK(f->meta().get_int("test.i64") == -9000000000000000000ll);
  CHECK(f->meta().get_float("test.f64") == -1.0e300);
  CHECK(f->meta().get_bool("test.bool") == true);
  const array_value* tokens = f->meta().get_array("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->size() == 6);
  CHECK(tokens->string_at(5) == "w\xc3\xb6rld");
  const array_value* nested = f->meta().get_array("test.nested");
  REQUIRE(nested != nullptr);
  CHECK(nested->array_at(0)->float_at(1) == -0.25);
  CHECK(nested->array_at(1)->string_at(1) == "bc");
  CHECK(nested->array_at(2)->empty());
  REQUIRE(f->tensors().size() == 3);
  const tensor_info* q = f->find_tensor("blk.0.attn_q.weight");
  REQUIRE(q != nullptr);
  CHECK(q->ne[0] == 64);
  CHECK(q->ne[1] == 3);
  float first;
  std::memcpy(&first, q->data, 4);
  CHECK(first == -7.0f);

  // Writing what was read gives the same bytes again.
  const auto again = copy_of(*f).to_bytes();
  CHECK(again == bytes);
}

TEST_CASE("the writer honours a custom alignment and GGUF version 2", "[gguf][writer]") {
  writer w = spite::test::sample_writer();
  REQUIRE(w.set_alignment(64).ok());
  w.set_version(2);
  const auto bytes = w.to_bytes();
  auto f = file::parse(bytes, "aligned");
  REQUIRE(f.ok());
  CHECK(f->version() == 2);
  CHECK(f->alignment() == 64);
  for (const auto& t : f->tensors()) CHECK(t.file_offset % 64 == 0);
  CHECK_FALSE(w.set_alignment(48).ok());
}

TEST_CASE("the writer refuses tensors whose data does not match their shape", "[gguf][writer]") {
  writer w;
  std::vector<std::byte> data(10);
  const std::int64_t shape[] = {4};
  CHECK_FALSE(w.add_tensor("a", tensor_type::f32, shape, std::span<const std::byte>(data)).ok());
  const std::int64_t partial[] = {16};
  CHECK_FALSE(w.add_tensor("b", tensor_type::q4_0, partial, std::span<const std::byte>(data)).ok());
  const std::int64_t ok_shape[] = {5};
  REQUIRE(w.add_tensor("c", tensor_type::f16, ok_shape, std::span<const std::byte>(data)).ok());
  CHECK_FALSE(w.add_tensor("c", tensor_type::f16, ok_shape, std::span<const std::byte>(data)).ok());
}

TEST_CASE("rewriting a shared model reproduces the file byte for byte", "[gguf][writer]") {
  const auto path = spite::test::shared_path("models/stories260K.gguf");
  auto original = file::open(path.string());
  REQUIRE(original.ok());
  spite::test::temp_dir dir;
  const auto out = dir / "copy.gguf";
  REQUIRE(copy_of(*original).write_file(out.string()).ok());
  auto copy = file::open(out.string());
  REQUIRE(copy.ok());
  require_same_content(*original, *copy);
  CHECK(spite::test::read_file(out) == spite::test::read_file(path));
  // No temporary file is left behind.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator{}) == 1);
}
