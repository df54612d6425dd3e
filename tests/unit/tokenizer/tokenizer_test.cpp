#include <catch2/catch.hpp>
#include <thread>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace {

using namespace spite::tokenizer;

std::shared_ptr<const tokenizer> load(const std::string& rel) {
  auto f = spite::gguf::file::open(spite::test::shared_path(rel).string());
  REQUIRE(f.ok());
  auto t = tokenizer::from_metadata(f->meta());
  REQUIRE(t.ok());
  return *t;
}

// A tokenizer built from metadata written here: a GGUF image in memory.
std::shared_ptr<const tokenizer> from_writer(const spite::gguf::writer& w) {
  static std::vector<std::vector<std::byte>> keep;  // the parsed file views these bytes
  keep.push_back(w.to_bytes());
  auto f = spite::gguf::file::parse(keep.back(), "synthetic.gguf");
  REQUIRE(f.ok());
  auto t = tokenizer::from_metadata(f->meta());
  if (!t.ok()) FAIL(t.err().message);
  return *t;
}

}  // namespace

TEST_CASE("special tokens are matched in text only when asked", "[tokenizer]") {
  const auto t = load("models/vocab/ggml-vocab-qwen2.gguf");
  const token im_start = t->vocabulary().find("<|im_start|>");
  REQUIRE(im_start != no_token);
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = *t->tokenize(text, {.add_special = false, .parse_special = true});
  CHECK(parsed.front() == im_start);
  CHECK(parsed.back() == t->vocabulary().find("<|im_end|>"));
  const auto plain = *t->tokenize(text, {.add_special = false, .parse_special = false});
  CHECK(std::find(plain.begin(), plain.end(), im_start) == plain.end());
  CHECK(t->detokenize(plain) == text);
  // Control tokens print only when asked.
  CHECK(t->detokenize(parsed, false, false) == "user\nhi");
  CHECK(t->detokenize(parsed, false, true) == text);
}

TEST_CASE("BOS is added and removed as the vocabulary says", "[tokenizer]") {
  const auto spm = load("models/vocab/ggml-vocab-llama-spm.gguf");
  const auto ids = *spm->tokenize("Hello world", {.add_special = true});
  REQUIRE(ids.size() >= 2);
  CHECK(ids.front() == spm->vocabulary().special().bos);
  // As in the reference: the space SentencePiece prefixed is dropped only when the text starts
  // with the first word; after a BOS (removed or not) it stays.
  CHECK(spm->detokenize(ids, true) == " Hello world");
  CHECK(spm->detokenize(std::span(ids).subspan(1)) == "Hello world");
  CHECK(spm->tokenize("", {.add_special = true})->size() == 1);
  CHECK(spm->tokenize("", {.add_special = false})->empty());
  const auto bert = load("models/vocab/ggml-vocab-bert-bge.gguf");
  const auto b = *bert->tokenize("hello", {.add_special = true});
  CHECK(b.front() == 101);
  CHECK(b.back() == 102);
}

TEST_CASE("the streaming detokenizer never emits part of a character", "[tokenizer]") {
  const auto t = load("models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string text = "Llamas \xf0\x9f\xa6\x99 and caf\xc3\xa9s \xe4\xbd\xa0\xe5\xa5\xbd";
  const auto ids = *t->tokenize(text, {.add_special = true});
  stream_detokenizer stream(t, false, true);
  std::string joined;
  bool saw_held_back = false;
  for (token id : ids) {
    const std::string part = stream.push(id);
    if (part.empty() && !t->piece(id).empty()) saw_held_back = true;
    // Every emitted part is whole UTF-8 on its own.
    for (std::size_t i = 0; i < part.size();) {
      const auto b = static_cast<unsigned char>(part[i]);
      const std::size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      REQUIRE(i + n <= part.size());
      i += n;
    }
    joined += part;
  }
  joined += stream.flush();
  CHECK(saw_held_back);  // the emoji is four byte tokens in this vocabulary
  CHECK(joined == " " + text);  // after BOS the prefixed space stays (see above)
  CHECK(joined == t->detokenize(ids));
  // Continuing generated text: nothing is stripped.
  stream_detokenizer continuation(t);
  std::string cont;
  for (token id : std::span(ids).subspan(1)) cont += continuation.push(id);
  CHECK(cont + continuation.flush() == " " + text);
}

TEST_CASE("one tokenizer serves many threads at once", "[tokenizer]") {
  const auto t = load("models/vocab/ggml-vocab-llama-bpe.gguf");
  const std::string text = "Tokenizers must be immutable: 12345 tokens, caf\xc3\xa9, <|begin_of_text|> and more.";
  const auto expected = *t->tokenize(text, {.add_special = true, .parse_special = true});
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (*t->tokenize(text, {.add_special = true, .parse_special = true}) != expected) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}

TEST_CASE("a vocabulary without a tokenizer model or with an unknown one is refused", "[tokenizer]") {
  spite::gguf::writer w;
  w.set("tokenizer.ggml.model", spite::gguf::value::string("sentencepiece-3000"));
  w.set("tokenizer.ggml.tokens", spite::gguf::value::array_of_strings({"a"}));
  const auto bytes = w.to_bytes();
  auto f = spite::gguf::file::parse(bytes, "x.gguf");
  REQUIRE(f.ok());
  auto t = tokenizer::from_metadata(f->meta());
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.err().message, Catch::Contains("sentencepiece-3000") && Catch::Contains("supported"));
  spite::gguf::writer dup;
  dup.set("tokenizer.ggml.model", spite::gguf::value::string("llama"));
  dup.set("tokenizer.ggml.tokens", spite::gguf::value::array_of_strings({"a", "b", "a"}));
  const auto dup_bytes = dup.to_bytes();
  auto g = spite::gguf::file::parse(dup_bytes, "y.gguf");
  CHECK_FALSE(tokenizer::from_metadata(g->meta()).ok());
}

TEST_CASE("unigram vocabularies pick the highest-scoring segmentation", "[tokenizer][ugm]") {
  // T5-style: "\u2581" marks word starts. Scores are log-probabilities; the best path for
  // "hello world" is "\u2581hello" + "\u2581world" (-1 + -1.5) over "\u2581he"+"llo"+... (-6).
  spite::gguf::writer w;
  w.set("tokenizer.ggml.model", spite::gguf::value::string("t5"));
  w.set("tokenizer.ggml.add_space_prefix", spite::gguf::value::boolean(true));
  const std::vector<std::string> tokens = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81hello", "\xe2\x96\x81he", "llo",
                                           "\xe2\x96\x81world", "\xe2\x96\x81", "w", "o", "r", "l", "d"};
  const float scores[] = {0, 0, 0, -1.0f, -2.0f, -2.0f, -1.5f, -3.0f, -4.0f, -4.0f, -4.0f, -4.0f, -4.0f};
  const std::int32_t types[] = {3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  w.set("tokenizer.ggml.tokens", spite::gguf::value::array_of_strings(tokens));
  w.set("tokenizer.ggml.scores", spite::gguf::value::array_of<float>(spite::gguf::value_type::f32, scores));
  w.set("tokenizer.ggml.token_type", spite::gguf::value::array_of<std::int32_t>(spite::gguf::value_type::i32, types));
  const auto t = from_writer(w);
  CHECK(*t->tokenize("hello world", {.add_special = false}) == std::vector<token>{3, 6});
  CHECK(*t->tokenize("hello world", {.add_special = true}) == std::vector<token>{3, 6, 1});  // EOS appended
  // "world" without its word start: letters one by one; unknown letters collapse into one <unk>.
  CHECK(*t->tokenize("hello worldXYZ", {.add_special = false}) == std::vector<token>{3, 6, 2});
  CHECK(*t->tokenize("hello XYZ", {.add_special = false}) == std::vector<token>{3, 7, 2});
}
