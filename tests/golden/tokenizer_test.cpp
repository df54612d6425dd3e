// Tokenization against the reference engine's outputs for every shared vocabulary
// (golden/tokenizer, models/vocab/*.inp|.out) and the trained stories260K model's prompts.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using spite::tokenizer::token;
using spite::tokenizer::tokenizer;

std::shared_ptr<const tokenizer> load_tokenizer(const fs::path& path) {
  auto f = spite::gguf::file::open(path.string());
  REQUIRE(f.ok());
  auto t = tokenizer::from_metadata(f->meta());
  if (!t.ok()) FAIL(path.string() << ": " << t.err().message);
  return *t;
}

std::string show(const std::vector<token>& ids) {
  std::ostringstream os;
  for (token t : ids) os << ' ' << t;
  return os.str();
}

}  // namespace

TEST_CASE("every golden tokenizer case gives the reference's token ids and text", "[golden][tokenizer]") {
  const fs::path dir = spite::test::shared_path("golden/tokenizer");
  std::size_t files = 0, cases = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json") continue;
    const auto golden = spite::test::load_json(entry.path());
    const std::string vocab_file = fs::path(golden.at("vocab").get<std::string>()).filename().string();
    fs::path vocab_path = spite::test::shared_dir() / "models/vocab" / vocab_file;
    if (!fs::exists(vocab_path)) vocab_path = spite::test::shared_dir() / "models/vocab/history" / vocab_file;
    INFO("golden " << name << ", vocabulary " << vocab_path.string());
    const auto tok = load_tokenizer(vocab_path);
    const bool add_special = golden.at("tokenize").at("add_special").get<bool>();
    const bool parse_special = golden.at("tokenize").at("parse_special").get<bool>();
    ++files;
    for (const auto& c : golden.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      // "tokens" is what the reference produced; "expected" (when present) what HF produces.
      const auto reference = c.at("tokens").get<std::vector<token>>();
      auto got = tok->tokenize(text, {.add_special = add_special, .parse_special = parse_special});
      REQUIRE(got.ok());
      INFO("text [" << text << "]\n expected" << show(reference) << "\n got     " << show(*got));
      CHECK(*got == reference);
      CHECK(tok->detokenize(reference) == c.at("detok").get<std::string>());
      ++cases;
    }
  }
  CHECK(files >= 25);
  CHECK(cases >= 1000);
}

TEST_CASE("vocabulary fixtures (.inp / .out) tokenize exactly", "[golden][tokenizer]") {
  const fs::path dir = spite::test::shared_path("models/vocab");
  std::size_t pairs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    const fs::path inp = entry.path().string() + ".inp", out = entry.path().string() + ".out";
    if (!fs::exists(inp) || !fs::exists(out)) continue;
    INFO(entry.path().filename().string());
    const auto tok = load_tokenizer(entry.path());
    const auto inp_bytes = spite::test::read_file(inp);
    const std::string all(inp_bytes.begin(), inp_bytes.end());
    std::vector<std::string> texts;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (std::size_t at = 0;;) {
      const std::size_t next = all.find(sep, at);
      if (next == std::string::npos) break;  // the file ends with a separator
      texts.push_back(all.substr(at, next - at));
      at = next + sep.size();
    }
    std::ifstream outs(out);
    std::string line;
    std::size_t i = 0;
    while (std::getline(outs, line) && i < texts.size()) {
      std::istringstream ids(line);
      std::vector<token> expected;
      for (token t; ids >> t;) expected.push_back(t);
      auto got = tok->tokenize(texts[i], {.add_special = false, .parse_special = false});
      REQUIRE(got.ok());
      INFO("case " << i << " [" << texts[i] << "]\n expected" << show(expected) << "\n got     " << show(*got));
      CHECK(*got == expected);
      ++i;
    }
    CHECK(i == texts.size());
    ++pairs;
  }
  CHECK(pairs >= 13);
}

TEST_CASE("the prompts of the trained stories260K model tokenize as the reference did", "[golden][tokenizer]") {
  const auto tok = load_tokenizer(spite::test::shared_path("models/stories260K.gguf"));
  const auto golden = spite::test::load_json(spite::test::shared_path("golden/logits/stories260K.gguf.json"));
  for (const auto& run : golden.at("runs")) {
    const std::string prompt = run.at("prompt").get<std::string>();
    INFO("prompt [" << prompt << "]");
    auto got = tok->tokenize(prompt, {.add_special = true, .parse_special = true});
    REQUIRE(got.ok());
    CHECK(*got == run.at("tokens").get<std::vector<token>>());
  }
}

TEST_CASE("every tiny architecture model's prompts tokenize as the reference did", "[golden][tokenizer]") {
  const fs::path dir = spite::test::shared_path("golden/logits");
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("tiny-") || name.find("+") != std::string::npos) continue;
    const std::string model = name.substr(0, name.size() - 5);  // drop ".json"
    const fs::path model_path = spite::test::shared_dir() / "models/tiny" / model;
    if (!fs::exists(model_path)) continue;
    INFO(model);
    const auto tok = load_tokenizer(model_path);
    const auto golden = spite::test::load_json(entry.path());
    CHECK(tok->vocabulary().add_bos() == golden.at("add_bos").get<bool>());
    for (const auto& run : golden.at("runs")) {
      auto got = tok->tokenize(run.at("prompt").get<std::string>(), {.add_special = true, .parse_special = true});
      REQUIRE(got.ok());
      CHECK(*got == run.at("tokens").get<std::vector<token>>());
    }
    ++checked;
  }
  CHECK(checked >= 19);
}
