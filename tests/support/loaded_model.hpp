// A shared test model opened for engine tests: the mapped file, the model and its tokenizer.
// Header-only: the tests that include it link spite::scheduler / spite::tokenizer themselves.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"
#include "spite/models/model.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::test {

struct loaded_model {
  gguf::file file;
  std::unique_ptr<models::model> model;
  std::shared_ptr<const tokenizer::tokenizer> tok;
};

// `rel`: a path under the shared data folder, e.g. "models/stories260K.gguf".
inline loaded_model load_model(const std::string& rel, std::int32_t n_ctx = 512) {
  auto f = gguf::file::open(shared_path(rel).string());
  REQUIRE(f.ok());
  loaded_model l{std::move(*f), nullptr, nullptr};
  auto m = models::load_model(l.file, {.n_ctx = n_ctx});
  if (!m) FAIL(m.err().message);
  l.model = std::move(*m);
  auto t = tokenizer::tokenizer::from_metadata(l.file.meta());
  REQUIRE(t.ok());
  l.tok = *t;
  return l;
}

}  // namespace spite::test
