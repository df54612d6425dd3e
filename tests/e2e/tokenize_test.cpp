// spitectl tokenize / detokenize, run as a user runs them.
#include <catch2/catch.hpp>
#include <fstream>

#include "process.hpp"
#include "shared_data.hpp"

using spite::test::run_process;
using spite::test::shared_path;

TEST_CASE("tokenize prints ids and pieces, and --json the same as data", "[e2e][tokenize]") {
  const std::string model = shared_path("models/stories260K.gguf").string();
  const auto text = run_process({SPITECTL_PATH, "tokenize", "--model", model, "--text", "Once upon a time"});
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("1 -> \"<s>\""));
  const auto json = run_process({SPITECTL_PATH, "tokenize", "--model", model, "--text", "Once upon a time", "--json"});
  REQUIRE(json.exit_code == 0);
  const auto j = nlohmann::json::parse(json.out);
  // The reference engine's ids for this prompt (golden/logits/stories260K.gguf.json, run 0).
  const auto golden = spite::test::load_json(shared_path("golden/logits/stories260K.gguf.json"));
  CHECK(j.at("tokens") == golden.at("runs").at(0).at("tokens"));
  const auto no_bos = run_process({SPITECTL_PATH, "tokenize", "--model", model, "--text", "Once", "--no-bos", "--json"});
  CHECK(nlohmann::json::parse(no_bos.out).at("tokens").at(0) != 1);
}

TEST_CASE("tokenize reads files and detokenize inverts it", "[e2e][tokenize]") {
  spite::test::temp_dir dir;
  const auto file = dir / "in.txt";
  std::ofstream(file) << "Lily loved to play outside.";
  const std::string model = shared_path("models/stories260K.gguf").string();
  const auto t = run_process({SPITECTL_PATH, "tokenize", "--model", model, "--file", file.string(), "--no-bos", "--json"});
  REQUIRE(t.exit_code == 0);
  std::vector<std::string> argv = {SPITECTL_PATH, "detokenize", "--model", model};
  const auto parsed = nlohmann::json::parse(t.out);
  for (const auto& id : parsed.at("tokens")) argv.push_back(std::to_string(id.get<int>()));
  const auto d = run_process(argv);
  INFO(d.err);
  REQUIRE(d.exit_code == 0);
  CHECK(d.out == "Lily loved to play outside.\n");
}

TEST_CASE("tokenize and detokenize refuse bad input with one line", "[e2e][tokenize]") {
  const std::string model = shared_path("models/stories260K.gguf").string();
  CHECK(run_process({SPITECTL_PATH, "tokenize", "--model", model}).exit_code == 2);
  const auto bad_id = run_process({SPITECTL_PATH, "detokenize", "--model", model, "99999"});
  CHECK(bad_id.exit_code == 1);
  CHECK_THAT(bad_id.err, Catch::Contains("not a token id"));
  const auto no_vocab = run_process({SPITECTL_PATH, "tokenize", "--model", shared_path("models/derived/split/stories260K-00002-of-00003.gguf").string(), "--text", "x"});
  CHECK(no_vocab.exit_code == 1);
}
