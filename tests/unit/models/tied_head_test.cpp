// A model without "output.weight" ties its output head to the token embedding table: the head
// is bound repacked for the CPU kernels as any other matrix (left in the file's layout it went
// through slower kernels), it multiplies as the table does, and the lookups still read the
// table's rows from the file, now copied out of it rather than through the released mapping.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "decoder.hpp"
#include "decoder_model.hpp"
#include "loaded_model.hpp"
#include "random_data.hpp"
#include "shared_data.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/types.hpp"
#include "spite/models/model.hpp"

TEST_CASE("a tied output head is bound packed, multiplies as the embedding table, and lookups read the table") {
  const std::string name = GENERATE("tiny-qwen2.q8_0.gguf", "tiny-gemma3.q8_0.gguf", "tiny-llama3.q8_0.gguf");
  CAPTURE(name);
  const spite::test::loaded_model loaded = spite::test::load_model("models/tiny/" + name);
  REQUIRE(loaded.file.find_tensor("output.weight") == nullptr);
  const auto* decoder = dynamic_cast<const spite::models::decoder_model*>(loaded.model.get());
  REQUIRE(decoder != nullptr);
  const spite::models::decoder_weights& w = decoder->weights;
  REQUIRE(w.token_embd != nullptr);
  const spite::dispatch::weight table = spite::dispatch::weight_of(*w.token_embd);

  CHECK(w.output.tensor == w.token_embd->data);  // adapters' key: the table's address in the file
  CHECK(w.output.w.in == table.in);
  CHECK(w.output.w.out == table.out);
  if (std::strcmp(spite::dispatch::cpu_kernel_set(), "avx512-vnni") == 0) CHECK(w.output.w.packed != nullptr);

  spite::thread_pool pool(2);
  for (const std::int64_t rows : {1, 3}) {
    const auto x = spite::test::gaussian(static_cast<std::size_t>(table.in * rows), 11, 1.0f);
    std::vector<float> head(static_cast<std::size_t>(table.out * rows)), direct(head.size());
    spite::dispatch::cpu_reference_ops().matmul(w.output.w, x.data(), rows, head.data(), pool);
    spite::dispatch::cpu_reference_ops().matmul(table, x.data(), rows, direct.data(), pool);
    CHECK(head == direct);
  }

  const spite::gguf::type_traits& tr = spite::gguf::traits(table.type);
  for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, table.out / 2, table.out - 1}) {
    CAPTURE(r);
    std::vector<float> looked_up(static_cast<std::size_t>(table.in)), expected(looked_up.size());
    spite::models::embedding_row(w.file, *w.token_embd, r, table.in, looked_up.data());
    tr.to_float(table.row(r), expected.data(), table.in);
    CHECK(looked_up == expected);
  }
}
