// spite's quantizers against the reference quantizer on the same data. The shared
// stories260K-pad256-pure-<TYPE> files were quantized by the reference engine from stories260K's
// trained weights, zero-padded to 256-wide rows (original values in the top-left corner of each
// matrix). We rebuild that padded input, quantize it ourselves, and require the reference's
// bytes; where a byte differs, our round-trip error must still not exceed the reference's.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "shared_data.hpp"
#include "spite/gguf/file.hpp"

namespace {

using spite::gguf::file;
using spite::gguf::tensor_info;
using spite::gguf::tensor_type;

// The original 2-D tensor placed in the top-left corner of the padded shape.
std::vector<float> padded_source(const tensor_info& original, const tensor_info& padded) {
  std::vector<float> src(static_cast<std::size_t>(original.n_elements()));
  REQUIRE(spite::gguf::dequantize(original.type, original.data, src.data(), original.n_elements()).ok());
  std::vector<float> out(static_cast<std::size_t>(padded.n_elements()), 0.0f);
  for (std::int64_t r = 0; r < original.ne[1]; ++r) {
    std::memcpy(&out[static_cast<std::size_t>(r * padded.ne[0])], &src[static_cast<std::size_t>(r * original.ne[0])],
                static_cast<std::size_t>(original.ne[0]) * sizeof(float));
  }
  return out;
}

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i) e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return e;
}

struct quant_case {
  const char* file;
  tensor_type type;
};

void check_against_reference(const file& original, const std::string& rel, tensor_type type, bool pad) {
  auto ref = file::open(spite::test::shared_path(rel).string());
  REQUIRE(ref.ok());
  std::size_t checked = 0, identical = 0;
  for (const tensor_info& q : ref->tensors()) {
    if (q.type != type) continue;
    const tensor_info* o = original.find_tensor(q.name);
    REQUIRE(o != nullptr);
    INFO(rel << ": tensor " << q.name);
    const std::vector<float> src = pad ? padded_source(*o, q) : [&] {
      std::vector<float> v(static_cast<std::size_t>(o->n_elements()));
      REQUIRE(spite::gguf::dequantize(o->type, o->data, v.data(), o->n_elements()).ok());
      return v;
    }();
    REQUIRE(src.size() == static_cast<std::size_t>(q.n_elements()));

    std::vector<std::byte> ours(q.size);
    REQUIRE(spite::gguf::quantize(type, src.data(), ours.data(), q.n_elements()).ok());
    ++checked;
    if (std::memcmp(ours.data(), q.data, q.size) == 0) {
      ++identical;
      continue;
    }
    std::vector<float> ours_f(src.size()), ref_f(src.size());
    REQUIRE(spite::gguf::dequantize(type, ours.data(), ours_f.data(), q.n_elements()).ok());
    REQUIRE(spite::gguf::dequantize(type, q.data, ref_f.data(), q.n_elements()).ok());
    const double ours_err = squared_error(ours_f, src), ref_err = squared_error(ref_f, src);
    INFO("squared error ours " << ours_err << " reference " << ref_err);
    CHECK(ours_err <= ref_err * (1.0 + 1e-6));
  }
  INFO(rel << ": " << identical << " of " << checked << " tensors byte-identical");
  REQUIRE(checked > 0);
  CHECK(identical == checked);
}

}  // namespace

TEST_CASE("quantizers reproduce the reference quantizer on trained weights", "[golden][quantize]") {
  auto original = file::open(spite::test::shared_path("models/stories260K.gguf").string());
  REQUIRE(original.ok());
  const quant_case cases[] = {
      {"pure-Q4_0", tensor_type::q4_0}, {"pure-Q4_1", tensor_type::q4_1}, {"pure-Q5_0", tensor_type::q5_0},
      {"pure-Q5_1", tensor_type::q5_1}, {"pure-Q8_0", tensor_type::q8_0}, {"pure-Q2_K", tensor_type::q2_K},
      {"pure-Q3_K_S", tensor_type::q3_K}, {"pure-Q4_K_S", tensor_type::q4_K}, {"pure-Q5_K_S", tensor_type::q5_K},
      {"pure-Q6_K", tensor_type::q6_K}, {"pure-IQ4_NL", tensor_type::iq4_nl},
  };
  for (const auto& c : cases) {
    SECTION(c.file) {
      check_against_reference(*original, std::string("models/derived/quants/stories260K-pad256-") + c.file + ".gguf",
                              c.type, true);
    }
  }
  SECTION("F16") { check_against_reference(*original, "models/derived/stories260K-F16.gguf", tensor_type::f16, false); }
  SECTION("BF16") { check_against_reference(*original, "models/derived/stories260K-BF16.gguf", tensor_type::bf16, false); }
}

TEST_CASE("K-quant quantizers reproduce the reference on the tiny llama model", "[golden][quantize]") {
  auto original = file::open(spite::test::shared_path("models/tiny/tiny-llama.f32.gguf").string());
  REQUIRE(original.ok());
  check_against_reference(*original, "models/tiny/tiny-llama.q4_k_m.gguf", tensor_type::q4_K, false);
  check_against_reference(*original, "models/tiny/tiny-llama.q4_k_m.gguf", tensor_type::q6_K, false);
  check_against_reference(*original, "models/tiny/tiny-llama.q6_k.gguf", tensor_type::q6_K, false);
  check_against_reference(*original, "models/tiny/tiny-llama.q8_0.gguf", tensor_type::q8_0, false);
}
