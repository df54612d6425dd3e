// Every tensor of every shared model dequantizes to the reference values: bit-exact sha256 of
// the float32 output, the 64 spot samples exactly, and the sums within rounding of a double
// accumulation (golden/dequant/README.md).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "shared_data.hpp"
#include "spite/core/sha256.hpp"
#include "spite/gguf/file.hpp"

namespace {

namespace fs = std::filesystem;
using spite::gguf::file;
using spite::gguf::tensor_info;

fs::path model_path(const nlohmann::json& entry) {
  const std::string corpus = entry.at("corpus");
  const std::string rel = entry.at("file");
  // The golden corpus "golden/models" is the tiny architecture models folder.
  return corpus == "models" ? spite::test::shared_path("models/" + rel) : spite::test::shared_path("models/tiny/" + rel);
}

std::string file_sha256(const fs::path& path) {
  const auto bytes = spite::test::read_file(path);
  spite::sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.finish_hex();
}

void check_tensor(const tensor_info& t, const nlohmann::json& ref) {
  INFO("tensor " << t.name << " (" << ref.at("type").get<std::string>() << ")");
  REQUIRE(static_cast<std::uint32_t>(t.type) == ref.at("type_id").get<std::uint32_t>());
  const auto& shape = ref.at("shape");
  REQUIRE(static_cast<int>(shape.size()) == t.n_dims);
  for (int d = 0; d < t.n_dims; ++d) REQUIRE(t.ne[d] == shape[d].get<std::int64_t>());

  if (ref.value("unsupported_by_reference", false)) {
    // Integer tables: the reference only hashes the raw bytes.
    CHECK(spite::sha256::hex(t.bytes()) == ref.at("sha256_raw").get<std::string>());
    return;
  }
  const auto n = static_cast<std::size_t>(t.n_elements());
  REQUIRE(n == ref.at("n").get<std::size_t>());
  std::vector<float> values(n);
  REQUIRE(spite::gguf::dequantize(t.type, t.data, values.data(), t.n_elements()).ok());

  for (const auto& sample : ref.at("samples")) {
    const auto index = sample[0].get<std::size_t>();
    const auto expected = static_cast<float>(sample[1].get<double>());
    INFO("sample index " << index);
    REQUIRE(std::bit_cast<std::uint32_t>(values[index]) == std::bit_cast<std::uint32_t>(expected));
  }
  double sum = 0, sum_sq = 0;
  float absmax = 0;
  for (float v : values) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    absmax = std::max(absmax, std::fabs(v));
  }
  const double ref_sum_sq = ref.at("sum_sq").get<double>();
  CHECK(std::fabs(sum - ref.at("sum").get<double>()) <= 1e-9 * std::sqrt(static_cast<double>(n) * ref_sum_sq) + 1e-30);
  CHECK(std::fabs(sum_sq - ref_sum_sq) <= 1e-9 * ref_sum_sq);
  CHECK(absmax == static_cast<float>(ref.at("absmax").get<double>()));
  CHECK(spite::sha256::hex({reinterpret_cast<const std::byte*>(values.data()), n * sizeof(float)}) ==
        ref.at("sha256_f32").get<std::string>());
}

}  // namespace

TEST_CASE("every tensor of every shared model dequantizes bit-exactly to the reference", "[golden][dequant]") {
  const fs::path dir = spite::test::shared_path("golden/dequant");
  const nlohmann::json index = spite::test::load_json(dir / "index.json");
  const auto& files = index.at("files");
  REQUIRE(files.size() >= 80);
  std::size_t checked = 0;
  for (const auto& entry : files) {
    const fs::path path = model_path(entry);
    INFO("model " << path.string());
    // A changed model file would make the golden values meaningless: fail loudly.
    REQUIRE(file_sha256(path) == entry.at("sha256").get<std::string>());
    const nlohmann::json ref = spite::test::load_json(dir / entry.at("json").get<std::string>());
    // Parts of a split model are checked one by one, as the reference hashed them.
    auto f = file::open(path.string(), {.open_split_parts = false});
    REQUIRE(f.ok());
    const auto& tensors = ref.at("tensors");
    REQUIRE(f->tensors().size() == tensors.size());
    for (const auto& t : f->tensors()) {
      REQUIRE(tensors.contains(std::string(t.name)));
      check_tensor(t, tensors.at(std::string(t.name)));
      ++checked;
    }
  }
  CHECK(checked == index.at("summary").at("n_tensors").get<std::size_t>());
}
