// The experts of a mixture-of-experts layer are bound once at load as matrices of their own:
// repacked for the CPU kernels where those have a layout (as dense matrices are), each expert's
// gate and up one after the other, so that they run as one matrix, and multiplying the same as
// the expert's bytes in the file.
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
#include "spite/models/model.hpp"

namespace {

// y = W x through the built-in CPU kernels, which read w's packed layout when it has one.
std::vector<float> product(const spite::dispatch::weight& w, const std::vector<float>& x, std::int64_t rows,
                           spite::thread_pool& pool) {
  std::vector<float> y(static_cast<std::size_t>(w.out * rows));
  spite::dispatch::cpu_reference_ops().matmul(w, x.data(), rows, y.data(), pool);
  return y;
}

}  // namespace

TEST_CASE("experts are bound packed, gate beside up, and multiply as the file's expert") {
  const std::string name = GENERATE("tiny-qwen3moe.q8_0.gguf", "tiny-deepseek2.q8_0.gguf");
  CAPTURE(name);
  const spite::test::loaded_model loaded = spite::test::load_model("models/tiny/" + name);
  const auto* decoder = dynamic_cast<const spite::models::decoder_model*>(loaded.model.get());
  REQUIRE(decoder != nullptr);

  spite::thread_pool pool(2);
  const bool packs_q8_0 = std::strcmp(spite::dispatch::cpu_kernel_set(), "avx512-vnni") == 0;
  int moe_layers = 0;
  for (const spite::models::ffn_layer& f : decoder->weights.ffn) {
    if (!f.is_moe()) continue;
    ++moe_layers;
    REQUIRE(f.up_exps != nullptr);
    REQUIRE(f.down_exps != nullptr);
    const auto X = static_cast<std::size_t>(f.up_exps->ne[2]);
    REQUIRE(f.up_x.size() == X);
    REQUIRE(f.down_x.size() == X);
    REQUIRE(f.gate_x.size() == (f.gate_exps != nullptr ? X : 0));
    for (std::size_t e = 0; e < X; ++e) {
      CAPTURE(e);
      const auto check = [&](const spite::models::linear& l, const spite::gguf::tensor_info& stack) {
        const spite::dispatch::weight in_file = spite::dispatch::weight_of(stack, static_cast<std::int64_t>(e));
        CHECK(l.tensor == in_file.data);  // the expert's identity (LoRA adapters are keyed by it)
        CHECK(l.w.in == in_file.in);
        CHECK(l.w.out == in_file.out);
        if (packs_q8_0 && stack.type == spite::gguf::tensor_type::q8_0 && in_file.out % 8 == 0) CHECK(l.w.packed != nullptr);
        for (const std::int64_t rows : {1, 3, 8}) {
          const auto x = spite::test::gaussian(static_cast<std::size_t>(in_file.in * rows), 5 + static_cast<unsigned>(e), 1.0f);
          CHECK(product(l.w, x, rows, pool) == product(in_file, x, rows, pool));
        }
      };
      check(f.up_x[e], *f.up_exps);
      check(f.down_x[e], *f.down_exps);
      if (f.gate_exps == nullptr) continue;
      check(f.gate_x[e], *f.gate_exps);
      if (f.gate_x[e].w.packed != nullptr) CHECK(spite::dispatch::packed_together(f.gate_x[e].w, f.up_x[e].w));
    }
  }
  CHECK(moe_layers > 0);
}
