// Matrices the CPU kernels read from a copy in huge pages (dispatch::pack_for_cpu: the rows as
// they are, or a packed layout) keep their identity: a LoRA adapter, keyed by the file's tensor,
// still applies to them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "random_data.hpp"
#include "shared_data.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"
#include "spite/models/model.hpp"
#include "weights.hpp"

namespace {

using spite::gguf::tensor_type;
using spite::gguf::value;

std::vector<std::byte> bytes_of(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

class no_kv final : public spite::models::kv_access {
 public:
  void store(int, std::int64_t, const float*, const float*) override {}
  spite::models::kv_view view(int, std::int32_t) const override { return {}; }
};

// y[o] for one activation row: sum_i m[o * in + i] * x[i], in double.
std::vector<double> times(const std::vector<float>& m, std::int64_t in, std::int64_t out, const std::vector<double>& x) {
  std::vector<double> y(static_cast<std::size_t>(out), 0.0);
  for (std::int64_t o = 0; o < out; ++o) {
    for (std::int64_t i = 0; i < in; ++i) y[static_cast<std::size_t>(o)] += m[static_cast<std::size_t>(o * in + i)] * x[static_cast<std::size_t>(i)];
  }
  return y;
}

}  // namespace

TEST_CASE("a LoRA adapter applies to a matrix the kernels read from a huge-page copy") {
  // 3 MiB of F32: above the 2 MiB from which matrices without a packed layout are copied.
  constexpr std::int64_t in = 768, out = 1024, rank = 4;
  const spite::test::temp_dir dir;
  const auto w = spite::test::gaussian(static_cast<std::size_t>(in * out), 1, 0.05f);
  const auto a = spite::test::gaussian(static_cast<std::size_t>(in * rank), 2, 0.1f);
  const auto b = spite::test::gaussian(static_cast<std::size_t>(rank * out), 3, 0.1f);

  spite::gguf::writer base;
  base.set("general.architecture", value::string("llama"));
  const std::int64_t w_shape[] = {in, out};
  REQUIRE(base.add_tensor("blk.0.attn_q.weight", tensor_type::f32, w_shape, bytes_of(w)).ok());
  REQUIRE(base.write_file((dir / "base.gguf").string()).ok());
  spite::gguf::writer adapter;
  adapter.set("general.architecture", value::string("llama"));
  adapter.set("general.type", value::string("adapter"));
  adapter.set("adapter.type", value::string("lora"));
  const std::int64_t a_shape[] = {in, rank}, b_shape[] = {rank, out};
  REQUIRE(adapter.add_tensor("blk.0.attn_q.weight.lora_a", tensor_type::f32, a_shape, bytes_of(a)).ok());
  REQUIRE(adapter.add_tensor("blk.0.attn_q.weight.lora_b", tensor_type::f32, b_shape, bytes_of(b)).ok());
  REQUIRE(adapter.write_file((dir / "adapter.gguf").string()).ok());

  auto base_file = spite::gguf::file::open((dir / "base.gguf").string());
  auto adapter_file = spite::gguf::file::open((dir / "adapter.gguf").string());
  REQUIRE(base_file.ok());
  REQUIRE(adapter_file.ok());
  spite::models::binder binder(*base_file, "llama");
  const spite::models::linear q = binder.matrix("blk.0.attn_q", in, out);
  REQUIRE(binder.status().ok());
  const auto* tensor = base_file->find_tensor("blk.0.attn_q.weight");
  CHECK(q.tensor == tensor->data);
  if (q.w.packed != nullptr) {
    CHECK(q.w.packed_rows == 16);  // the AVX-512 kernels' 16-row layout, a copy too
  } else if (q.w.data == tensor->data) {
    WARN("transparent huge pages are off on this system: the matrix was not copied");
  } else {
    CHECK(std::memcmp(q.w.data, tensor->data, static_cast<std::size_t>(in * out) * sizeof(float)) == 0);
  }

  spite::models::lora_set loras;
  REQUIRE(loras.add(*adapter_file, *base_file, 1.0f).ok());
  spite::thread_pool pool(2);
  no_kv kv;
  spite::models::forward_context ctx{spite::dispatch::cpu_reference_ops(), pool, {}, kv, nullptr, &loras};
  const auto x = spite::test::gaussian(static_cast<std::size_t>(in), 4, 1.0f);
  std::vector<float> y(static_cast<std::size_t>(out));
  q.apply(ctx, x.data(), 1, y.data());

  // y = W x + B (A x), the adapter's scale 1 (no alpha).
  const std::vector<double> xd(x.begin(), x.end());
  const auto wx = times(w, in, out, xd);
  const auto bax = times(b, rank, out, times(a, in, rank, xd));
  double worst = 0.0, lora_norm = 0.0;
  for (std::size_t o = 0; o < y.size(); ++o) {
    worst = std::max(worst, std::abs(y[o] - (wx[o] + bax[o])));
    lora_norm = std::max(lora_norm, std::abs(bax[o]));
  }
  CHECK(lora_norm > 0.05);  // the adapter's term is far above the tolerance below
  CHECK(worst < 1e-3);
}
