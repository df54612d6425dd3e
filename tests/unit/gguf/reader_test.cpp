#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/summary.hpp"

using namespace spite::gguf;
using spite::test::shared_path;

TEST_CASE("a real model opens with its metadata and tensors", "[gguf][reader]") {
  auto f = file::open(shared_path("models/stories260K.gguf").string());
  REQUIRE(f.ok());
  CHECK(f->version() == 3);
  CHECK(f->alignment() == 32);
  CHECK(f->meta().get_string("general.architecture") == "llama");
  CHECK(f->meta().get_uint("llama.embedding_length") == 64u);
  CHECK(f->tensors().size() == 48);
  const tensor_info* emb = f->find_tensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->type == tensor_type::f32);
  CHECK(emb->n_dims == 2);
  CHECK(emb->ne[0] == 64);
  CHECK(emb->ne[1] == 512);
  CHECK(emb->size == 64u * 512u * 4u);
  CHECK(emb->file_offset % 32 == 0);
  const file_summary s = summarize(*f);
  CHECK(s.architecture == "llama");
  CHECK(s.tokenizer_kind == "SPM");
  CHECK(s.n_vocab == 512);
  CHECK(s.per_type.at("F32").tensors == 48);
}

TEST_CASE("tensor data is used in place from the mapping", "[gguf][reader]") {
  auto f = file::open(shared_path("models/stories260K.gguf").string());
  REQUIRE(f.ok());
  // Data pointers lie inside the single mapped part at their declared offsets.
  const auto bytes = spite::test::read_file(shared_path("models/stories260K.gguf"));
  for (const auto& t : f->tensors()) {
    REQUIRE(t.file_offset + t.size <= bytes.size());
    REQUIRE(std::memcmp(t.data, bytes.data() + t.file_offset, t.size) == 0);
  }
}

TEST_CASE("a tensor's bytes copied out of the file equal its mapped bytes, in every split part", "[gguf][reader]") {
  auto split = file::open(shared_path("models/derived/split/stories260K-00001-of-00003.gguf").string());
  REQUIRE(split.ok());
  for (const auto& t : split->tensors()) {
    std::vector<std::byte> out(t.size);
    REQUIRE(split->read(t, 0, out).ok());
    REQUIRE(std::memcmp(out.data(), t.data, t.size) == 0);
    if (t.size < 8) continue;
    std::vector<std::byte> tail(5);
    REQUIRE(split->read(t, t.size - 5, tail).ok());
    REQUIRE(std::memcmp(tail.data(), t.data + t.size - 5, 5) == 0);
  }
  const tensor_info& last = split->tensors().back();
  std::vector<std::byte> past(2);
  const auto r = split->read(last, last.size - 1, past);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains(std::string(last.name)) && Catch::Contains("past"));
}

TEST_CASE("GGUF version 2 files are read", "[gguf][reader]") {
  auto f = file::open(shared_path("models/vocab/history/ggml-vocab-falcon-2023.gguf").string());
  REQUIRE(f.ok());
  CHECK(f->version() == 2);
  CHECK(f->meta().get_array("tokenizer.ggml.tokens")->size() == 65024);
  CHECK(summarize(*f).tokenizer_kind == "BPE");
}

TEST_CASE("opening the first part of a split model maps every part", "[gguf][reader][split]") {
  auto split = file::open(shared_path("models/derived/split/stories260K-00001-of-00003.gguf").string());
  REQUIRE(split.ok());
  CHECK(split->n_parts() == 3);
  auto whole = file::open(shared_path("models/stories260K.gguf").string());
  REQUIRE(whole.ok());
  REQUIRE(split->tensors().size() == whole->tensors().size());
  for (const auto& t : whole->tensors()) {
    const tensor_info* s = split->find_tensor(t.name);
    REQUIRE(s != nullptr);
    REQUIRE(s->size == t.size);
    CHECK(std::memcmp(s->data, t.data, t.size) == 0);
  }
  CHECK(split->tensors().front().part == 0);
  CHECK(split->tensors().back().part == 2);

  // Without following parts, only the first part's tensors are there.
  auto first_only = file::open(shared_path("models/derived/split/stories260K-00001-of-00003.gguf").string(),
                               {.open_split_parts = false});
  REQUIRE(first_only.ok());
  CHECK(first_only->tensors().size() == 20);
}

TEST_CASE("opening a later part of a split model says to open the first", "[gguf][reader][split]") {
  auto f = file::open(shared_path("models/derived/split/stories260K-00002-of-00003.gguf").string());
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.err().message, Catch::Contains("part 2 of 3") && Catch::Contains("first part"));
}

TEST_CASE("a split model with a missing part names the part", "[gguf][reader][split]") {
  spite::test::temp_dir dir;
  const auto src = shared_path("models/derived/split/stories260K-00001-of-00003.gguf");
  const auto first = dir / "m-00001-of-00003.gguf";
  std::filesystem::copy_file(src, first);
  std::filesystem::copy_file(shared_path("models/derived/split/stories260K-00002-of-00003.gguf"),
                             dir / "m-00002-of-00003.gguf");
  auto f = file::open(first.string());
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.err().message, Catch::Contains("m-00003-of-00003.gguf") && Catch::Contains("split part 3"));
}

TEST_CASE("big-endian files are refused with a message naming the byte order", "[gguf][reader]") {
  auto f = file::open(shared_path("models/derived/stories260K-be.gguf").string());
  REQUIRE_FALSE(f.ok());
  CHECK(f.err().code == spite::errc::unsupported);
  CHECK_THAT(f.err().message, Catch::Contains("big-endian") && Catch::Contains("stories260K-be.gguf"));
}

TEST_CASE("a file with a duplicated metadata key is refused", "[gguf][reader]") {
  auto f = file::open(shared_path("models/negative/ggml-vocab-dbrx.gguf").string());
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.err().message, Catch::Contains("duplicate metadata key 'general.file_type'") && Catch::Contains("byte "));
}

TEST_CASE("every shared model and vocabulary opens", "[gguf][reader]") {
  std::size_t opened = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(spite::test::shared_dir() / "models")) {
    const auto& p = entry.path();
    if (p.extension() != ".gguf") continue;
    const std::string name = p.filename().string();
    if (name == "stories260K-be.gguf" || name == "ggml-vocab-dbrx.gguf") continue;  // negative cases above
    if (name.find("-00002-of-") != std::string::npos || name.find("-00003-of-") != std::string::npos) continue;
    INFO(p.string());
    auto f = file::open(p.string());
    CHECK(f.ok());
    if (!f.ok()) UNSCOPED_INFO(f.err().message);
    ++opened;
  }
  CHECK(opened >= 70);
}
