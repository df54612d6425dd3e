#include "spite/dispatch/verify.hpp"

#include <cmath>
#include <cstring>
#include <random>

#include "cpu_kernels.hpp"
#include "spite/core/half.hpp"
#include "spite/dispatch/plugin.hpp"
#include "spite/gguf/types.hpp"

namespace spite::dispatch {
namespace {

constexpr float k_guard = 1234.5f;
constexpr int k_guard_count = 16;

// An output buffer with guard values after the n useful floats.
struct guarded {
  std::vector<float> data;
  std::size_t n;
  explicit guarded(std::size_t count) : data(count + k_guard_count, k_guard), n(count) {
    std::fill(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
  }
  float* ptr() { return data.data(); }
  bool intact() const {
    for (int i = 0; i < k_guard_count; ++i) {
      if (data[n + static_cast<std::size_t>(i)] != k_guard) return false;
    }
    return true;
  }
};

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double normalised_error(const float* got, const float* ref, std::size_t n) {
  double max_diff = 0, max_ref = 1e-30;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  return max_diff / max_ref;
}

bool probe(const spite_kernel& k, const spite_op_signature& sig, verify_case& c) {
  char reason[256] = {};
  const std::int32_t score = k.probe(&sig, reason, sizeof reason);
  if (score > 0) return true;
  c.skipped = true;
  c.passed = true;
  c.note = std::string(reason, strnlen(reason, sizeof reason));
  return false;
}

spite_op_signature signature(spite_op op) {
  spite_op_signature s{};
  s.struct_size = sizeof s;
  s.op = op;
  s.weight_dtype = -1;
  s.activation_dtype = SPITE_DTYPE_F32;
  s.device = SPITE_DEVICE_CPU;
  return s;
}

std::vector<std::byte> workspace_for(const spite_kernel& k, const spite_op_signature& sig) {
  return std::vector<std::byte>(k.workspace_size != nullptr ? k.workspace_size(&sig) : 0);
}

void finish(verify_case& c, spite_status status, const guarded& out, const float* ref) {
  if (status != SPITE_OK) {
    c.note = "run() returned status " + std::to_string(status);
    return;
  }
  if (!out.intact()) {
    c.note = "wrote past the end of its output";
    c.error = INFINITY;
    return;
  }
  c.error = normalised_error(out.data.data(), ref, out.n);
  c.passed = c.error <= c.tolerance;
  if (!c.passed) c.note = "error above tolerance";
}

verify_case rms_norm_case(const spite_kernel& k, std::int64_t n, std::int64_t rows) {
  verify_case c{"rms_norm", "f32", std::to_string(n) + "x" + std::to_string(rows), 0, 1e-5};
  spite_op_signature sig = signature(SPITE_OP_RMS_NORM);
  sig.rows = rows;
  sig.in = sig.out = n;
  if (!probe(k, sig, c)) return c;
  const auto x = random_vector(static_cast<std::size_t>(n * rows), 1), w = random_vector(static_cast<std::size_t>(n), 2);
  std::vector<float> ref(x.size());
  cpu::rms_norm(x.data(), w.data(), ref.data(), n, rows, 1e-5f);
  guarded out(x.size());
  spite_rms_norm_args a{sizeof a, x.data(), w.data(), out.ptr(), n, rows, 1e-5f};
  auto ws = workspace_for(k, sig);
  finish(c, k.run(&a, ws.data(), nullptr), out, ref.data());
  return c;
}

verify_case swiglu_case(const spite_kernel& k, std::int64_t n, std::int64_t rows) {
  verify_case c{"swiglu", "f32", std::to_string(n) + "x" + std::to_string(rows), 0, 1e-5};
  spite_op_signature sig = signature(SPITE_OP_SWIGLU);
  sig.rows = rows;
  sig.in = sig.out = n;
  if (!probe(k, sig, c)) return c;
  const auto g = random_vector(static_cast<std::size_t>(n * rows), 3), u = random_vector(static_cast<std::size_t>(n * rows), 4);
  std::vector<float> ref(g.size());
  cpu::swiglu(g.data(), u.data(), ref.data(), n, rows);
  guarded out(g.size());
  spite_swiglu_args a{sizeof a, g.data(), u.data(), out.ptr(), n, rows};
  auto ws = workspace_for(k, sig);
  finish(c, k.run(&a, ws.data(), nullptr), out, ref.data());
  return c;
}

verify_case matmul_case(const spite_kernel& k, spite_dtype dtype, std::int64_t in, std::int64_t out_rows, std::int64_t rows) {
  const auto* tr = gguf::find_type(static_cast<std::uint32_t>(dtype));
  verify_case c{"matmul", tr != nullptr ? std::string(tr->name) : std::to_string(dtype),
                std::to_string(in) + "x" + std::to_string(out_rows) + "x" + std::to_string(rows), 0,
                tr != nullptr && tr->quantized ? 2e-2 : 1e-4};
  if (tr == nullptr || tr->from_float == nullptr || in % tr->block_size != 0) {
    c.skipped = c.passed = true;
    c.note = "no reference data for this type or shape";
    return c;
  }
  spite_op_signature sig = signature(SPITE_OP_MATMUL);
  sig.weight_dtype = dtype;
  sig.rows = rows;
  sig.in = in;
  sig.out = out_rows;
  if (!probe(k, sig, c)) return c;
  const auto wf = random_vector(static_cast<std::size_t>(in * out_rows), 5);
  const auto x = random_vector(static_cast<std::size_t>(in * rows), 6);
  const std::size_t row_bytes = *gguf::row_bytes(tr->type, in);
  std::vector<std::byte> wq(row_bytes * static_cast<std::size_t>(out_rows));
  for (std::int64_t r = 0; r < out_rows; ++r) tr->from_float(wf.data() + r * in, wq.data() + static_cast<std::size_t>(r) * row_bytes, in);
  weight w{wq.data(), tr->type, in, out_rows, row_bytes};
  std::vector<float> ref(static_cast<std::size_t>(out_rows * rows));
  thread_pool pool(1);
  cpu::matmul(w, x.data(), rows, ref.data(), pool);
  guarded got(ref.size());
  spite_matmul_args a{sizeof a, dtype, wq.data(), in, out_rows, row_bytes, x.data(), got.ptr(), rows};
  auto ws = workspace_for(k, sig);
  finish(c, k.run(&a, ws.data(), nullptr), got, ref.data());
  return c;
}

}  // namespace

std::vector<verify_case> verify_kernel(const spite_kernel& k, const verify_options& options) {
  std::vector<verify_case> out;
  const std::vector<std::int64_t> sizes = options.sweep ? std::vector<std::int64_t>{1, 7, 64, 67, 256, 769, 4096}
                                                        : std::vector<std::int64_t>{64, 67};
  const std::vector<std::int64_t> rows = options.sweep ? std::vector<std::int64_t>{1, 3, 17} : std::vector<std::int64_t>{1, 3};
  switch (k.op) {
    case SPITE_OP_RMS_NORM:
      for (auto n : sizes)
        for (auto r : rows) out.push_back(rms_norm_case(k, n, r));
      break;
    case SPITE_OP_SWIGLU:
      for (auto n : sizes)
        for (auto r : rows) out.push_back(swiglu_case(k, n, r));
      break;
    case SPITE_OP_MATMUL:
      for (std::uint32_t i = 0; i < k.n_dtypes; ++i) {
        for (auto in : options.sweep ? std::vector<std::int64_t>{32, 256, 768, 4096} : std::vector<std::int64_t>{256}) {
          for (auto r : rows) out.push_back(matmul_case(k, k.dtypes[i], in, options.sweep ? 67 : 5, r));
        }
      }
      break;
    default: {
      verify_case c{"op " + std::to_string(k.op), "-", "-", 0, 0, true, true, "no reference check for this op yet"};
      out.push_back(c);
    }
  }
  return out;
}

result<void> self_test_kernel(const spite_kernel& kernel) {
  for (const verify_case& c : verify_kernel(kernel)) {
    if (!c.passed) {
      return make_error(errc::invalid_argument, c.op + " " + c.dtype + " " + c.shape + ": " + c.note +
                                                    " (error " + std::to_string(c.error) + ", tolerance " +
                                                    std::to_string(c.tolerance) + ")");
    }
  }
  return ok();
}

}  // namespace spite::dispatch
