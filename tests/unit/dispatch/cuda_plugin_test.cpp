// The generic CUDA plug-in (kernels/generic/generic/sm_75) as a host sees it: dlopen, descriptor,
// probe reasons, init() without a device, unload and reload. The [gpu] case runs the kernels
// against a CPU reference and skips (with a warning) where no CUDA device is usable.
//
// Built only when the plug-in target exists (tests/kernel_plugin_tests.cmake), which passes:
//   SPITE_CUDA_PLUGIN_PATH  the built .so
//   SPITE_CUDA_PLUGIN_ID    the id it must report
//   SPITE_TEST_HAS_CUDART   1 when the test links the CUDA runtime (device memory for [gpu])
#include <dlfcn.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spite/core/half.hpp"
#include "spite_kernel.h"

#if SPITE_TEST_HAS_CUDART
#include <cuda_runtime_api.h>
#endif

namespace {

struct test_host {
  std::vector<std::string> log;
};

void host_log(void* host, int32_t /*level*/, const char* message) {
  static_cast<test_host*>(host)->log.emplace_back(message);
}
void* host_alloc(void* /*host*/, size_t size, size_t alignment) {
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void host_free(void* /*host*/, void* pointer) { std::free(pointer); }

spite_host_api make_host_api(test_host& host) {
  spite_host_api api{};
  api.struct_size = sizeof api;
  api.abi_major = SPITE_KERNEL_ABI_MAJOR;
  api.abi_minor = SPITE_KERNEL_ABI_MINOR;
  api.host = &host;
  api.log = host_log;
  api.alloc = host_alloc;
  api.free = host_free;
  api.device_stream = nullptr;
  api.cpu_threads = 1;
  return api;
}

// The plug-in, opened as the host opens it.
struct plugin {
  void* handle = nullptr;
  const spite_kernel_library* lib = nullptr;

  plugin() {
    handle = dlopen(SPITE_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    INFO("dlopen " << SPITE_CUDA_PLUGIN_PATH << ": " << (handle ? "ok" : dlerror()));
    REQUIRE(handle != nullptr);
    auto entry = reinterpret_cast<spite_kernel_entry_fn>(dlsym(handle, SPITE_KERNEL_ENTRY_SYMBOL));
    REQUIRE(entry != nullptr);
    lib = entry();
    REQUIRE(lib != nullptr);
  }
  ~plugin() {
    if (handle != nullptr) dlclose(handle);
  }
  plugin(const plugin&) = delete;
  plugin& operator=(const plugin&) = delete;

  const spite_kernel* kernel(spite_op op) const {
    for (uint32_t i = 0; i < lib->n_kernels; ++i) {
      if (lib->kernels[i].op == op) return &lib->kernels[i];
    }
    return nullptr;
  }
};

spite_op_signature signature(spite_op op, spite_dtype weight, int64_t rows, int64_t in, int64_t out) {
  spite_op_signature s{};
  s.struct_size = sizeof s;
  s.op = op;
  s.weight_dtype = weight;
  s.activation_dtype = SPITE_DTYPE_F32;
  s.rows = rows;
  s.in = in;
  s.out = out;
  s.device = SPITE_DEVICE_CUDA;
  s.device_index = 0;
  return s;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Is a CUDA driver installed at all? Without one, init() must refuse.
bool driver_present() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return false;
  dlclose(driver);
  return true;
}

}  // namespace

TEST_CASE("CUDA plug-in descriptor", "[dispatch][plugin][cuda]") {
  plugin p;
  const spite_kernel_library& lib = *p.lib;
  CHECK(lib.struct_size >= sizeof(spite_kernel_library));
  CHECK(lib.abi_major == SPITE_KERNEL_ABI_MAJOR);
  CHECK(lib.abi_minor <= SPITE_KERNEL_ABI_MINOR);
  REQUIRE(lib.id != nullptr);
  CHECK(std::string(lib.id) == SPITE_CUDA_PLUGIN_ID);
  CHECK(lib.device == SPITE_DEVICE_CUDA);
  REQUIRE(lib.build_info != nullptr);
  CHECK(contains(lib.build_info, "nvcc"));
  CHECK(lib.init != nullptr);
  CHECK(lib.shutdown != nullptr);
  REQUIRE(lib.kernels != nullptr);
  REQUIRE(lib.n_kernels >= 2);
  for (uint32_t i = 0; i < lib.n_kernels; ++i) {
    const spite_kernel& k = lib.kernels[i];
    INFO("kernel " << i);
    CHECK(k.struct_size >= sizeof(spite_kernel));
    CHECK(k.name != nullptr);
    CHECK(k.probe != nullptr);
    CHECK(k.run != nullptr);
    CHECK((k.n_dtypes == 0 || k.dtypes != nullptr));
  }
  REQUIRE(p.kernel(SPITE_OP_RMS_NORM) != nullptr);
  const spite_kernel* matmul = p.kernel(SPITE_OP_MATMUL);
  REQUIRE(matmul != nullptr);
  std::vector<spite_dtype> types(matmul->dtypes, matmul->dtypes + matmul->n_dtypes);
  CHECK(std::find(types.begin(), types.end(), SPITE_DTYPE_F32) != types.end());
  CHECK(std::find(types.begin(), types.end(), SPITE_DTYPE_F16) != types.end());

  // Only the entry symbol is exported (cudart is linked statically and kept local).
  CHECK(dlsym(p.handle, "cudaGetDeviceCount") == nullptr);
}

TEST_CASE("CUDA plug-in probes refuse with reasons", "[dispatch][plugin][cuda]") {
  plugin p;
  const spite_kernel* matmul = p.kernel(SPITE_OP_MATMUL);
  const spite_kernel* norm = p.kernel(SPITE_OP_RMS_NORM);
  REQUIRE(matmul != nullptr);
  REQUIRE(norm != nullptr);
  char reason[256];

  auto s = signature(SPITE_OP_MATMUL, SPITE_DTYPE_F32, 4, 64, 32);
  s.device = SPITE_DEVICE_CPU;
  std::memset(reason, 0, sizeof reason);
  CHECK(matmul->probe(&s, reason, sizeof reason) == 0);
  CHECK(contains(reason, "CUDA"));

  s = signature(SPITE_OP_MATMUL, SPITE_DTYPE_Q4_K, 4, 256, 32);
  std::memset(reason, 0, sizeof reason);
  CHECK(matmul->probe(&s, reason, sizeof reason) == 0);
  CHECK(contains(reason, "not supported"));

  s = signature(SPITE_OP_RMS_NORM, -1, 4, 64, 0);
  std::memset(reason, 0, sizeof reason);
  CHECK(matmul->probe(&s, reason, sizeof reason) == 0);
  CHECK(contains(reason, "op"));

  // Not initialised (the host plans for a card that is not here): the signature alone decides.
  CHECK(norm->probe(&s, reason, sizeof reason) > 0);
  s = signature(SPITE_OP_MATMUL, SPITE_DTYPE_F16, 1, 4096, 4096);
  CHECK(matmul->probe(&s, reason, sizeof reason) > 0);
  s.in = 0;
  std::memset(reason, 0, sizeof reason);
  CHECK(matmul->probe(&s, reason, sizeof reason) == 0);
  CHECK(contains(reason, "in > 0"));
  s = signature(SPITE_OP_RMS_NORM, -1, 4, 64, 0);

  // A reason never overruns the buffer it is given, and is NUL-terminated.
  char tiny[8];
  std::memset(tiny, 'x', sizeof tiny);
  s.device = SPITE_DEVICE_HIP;
  CHECK(norm->probe(&s, tiny, sizeof tiny) == 0);
  CHECK(std::memchr(tiny, '\0', sizeof tiny) != nullptr);
  CHECK(norm->probe(&s, nullptr, 0) == 0);
  CHECK(norm->probe(nullptr, reason, sizeof reason) == 0);

  // run() before a successful init() is refused, not attempted.
  spite_rms_norm_args args{};
  args.struct_size = sizeof args;
  CHECK(norm->run(&args, nullptr, nullptr) == SPITE_ERR_INVALID);
}

TEST_CASE("CUDA plug-in init refuses cleanly without a usable device", "[dispatch][plugin][cuda]") {
  plugin p;
  test_host host;
  spite_host_api api = make_host_api(host);
  char reason[512] = {};

  CHECK(p.lib->init(nullptr, reason, sizeof reason) == SPITE_ERR_INVALID);
  spite_host_api old = api;
  old.struct_size = 8;
  CHECK(p.lib->init(&old, reason, sizeof reason) == SPITE_ERR_INVALID);

  std::memset(reason, 0, sizeof reason);
  const spite_status status = p.lib->init(&api, reason, sizeof reason);
  if (!driver_present()) {
    // This machine: no libcuda.so.1, so the runtime reports the missing driver.
    INFO("init reason: " << reason);
    REQUIRE(status == SPITE_ERR_DEVICE);
    CHECK(contains(reason, "no CUDA device"));
    CHECK(contains(reason, "cudaError"));
  } else if (status != SPITE_OK) {
    INFO("init reason: " << reason);
    CHECK(status == SPITE_ERR_DEVICE);
    CHECK(contains(reason, "CUDA"));
  }
  if (status == SPITE_OK) {
    // A device: probes now check the device index too.
    auto s = signature(SPITE_OP_MATMUL, SPITE_DTYPE_F16, 1, 64, 64);
    s.device_index = 1000;
    std::memset(reason, 0, sizeof reason);
    CHECK(p.kernel(SPITE_OP_MATMUL)->probe(&s, reason, sizeof reason) == 0);
    CHECK(contains(reason, "does not exist"));
  }
  p.lib->shutdown();
  p.lib->shutdown();  // idempotent
}

TEST_CASE("CUDA plug-in unloads and loads again", "[dispatch][plugin][cuda]") {
  for (int round = 0; round < 3; ++round) {
    plugin p;
    test_host host;
    spite_host_api api = make_host_api(host);
    char reason[256] = {};
    const spite_status status = p.lib->init(&api, reason, sizeof reason);
    CHECK((status == SPITE_OK || status == SPITE_ERR_DEVICE));
    p.lib->shutdown();
  }
}

namespace {

// The reference: rms_norm as spite::dispatch computes it; matmul in double over the values the
// kernel sees (activations rounded to F16 for F16 weights).
void reference_rms_norm(const std::vector<float>& x, const float* w, std::vector<float>& y, int64_t n, int64_t rows,
                        float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[r * n + i] * x[r * n + i]);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[r * n + i] * scale;
      y[r * n + i] = w != nullptr ? v * w[i] : v;
    }
  }
}

#if SPITE_TEST_HAS_CUDART
template <typename T>
T* to_device(const std::vector<T>& host) {
  void* d = nullptr;
  REQUIRE(cudaMalloc(&d, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(d);
}

template <typename T>
std::vector<T> from_device(const T* d, size_t count) {
  std::vector<T> host(count);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(host.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}
#endif

}  // namespace

TEST_CASE("CUDA plug-in kernels match the reference on a device", "[gpu][dispatch][plugin][cuda]") {
  plugin p;
  test_host host;
  spite_host_api api = make_host_api(host);
  char reason[512] = {};
  if (p.lib->init(&api, reason, sizeof reason) != SPITE_OK) {
    WARN("skipped: " << reason);
    return;
  }
#if !SPITE_TEST_HAS_CUDART
  WARN("skipped: the test was built without the CUDA runtime");
  p.lib->shutdown();
  return;
#else
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);

  SECTION("rms_norm, odd sizes, with and without weight, in place") {
    const spite_kernel* k = p.kernel(SPITE_OP_RMS_NORM);
    const int64_t n = 4097, rows = 5;
    auto s = signature(SPITE_OP_RMS_NORM, -1, rows, n, 0);
    REQUIRE(k->probe(&s, reason, sizeof reason) > 0);
    std::vector<float> x(n * rows), w(n), ref(n * rows), ref_plain(n * rows);
    for (auto& v : x) v = dist(rng) * 3.0f;
    for (auto& v : w) v = dist(rng);
    reference_rms_norm(x, w.data(), ref, n, rows, 1e-5f);
    reference_rms_norm(x, nullptr, ref_plain, n, rows, 1e-5f);

    float* dx = to_device(x);
    float* dw = to_device(w);
    float* dy = to_device(std::vector<float>(n * rows, 0.0f));
    spite_rms_norm_args a{};
    a.struct_size = sizeof a;
    a.x = dx;
    a.weight = dw;
    a.y = dy;
    a.n = n;
    a.rows = rows;
    a.eps = 1e-5f;
    REQUIRE(k->run(&a, nullptr, nullptr) == SPITE_OK);
    auto y = from_device(dy, x.size());
    for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(ref[i]).epsilon(1e-6).margin(1e-7));

    a.weight = nullptr;
    a.y = dx;  // in place
    REQUIRE(k->run(&a, nullptr, nullptr) == SPITE_OK);
    y = from_device(dx, x.size());
    for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(ref_plain[i]).epsilon(1e-6).margin(1e-7));
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
  }

  SECTION("matmul F32 and F16, odd sizes, padded rows") {
    const spite_kernel* k = p.kernel(SPITE_OP_MATMUL);
    const int64_t in = 333, out = 77, rows = 6;
    for (spite_dtype type : {SPITE_DTYPE_F32, SPITE_DTYPE_F16}) {
      INFO("weight type " << type);
      auto s = signature(SPITE_OP_MATMUL, type, rows, in, out);
      REQUIRE(k->probe(&s, reason, sizeof reason) > 0);
      const size_t esize = type == SPITE_DTYPE_F32 ? 4 : 2;
      const size_t row_bytes = in * esize + 6 * esize;  // a stride larger than the row
      std::vector<unsigned char> wbytes(row_bytes * out, 0);
      std::vector<double> wval(in * out);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
          const float v = dist(rng);
          unsigned char* at = wbytes.data() + o * row_bytes + i * esize;
          if (type == SPITE_DTYPE_F32) {
            std::memcpy(at, &v, 4);
            wval[o * in + i] = v;
          } else {
            const uint16_t h = spite::fp32_to_fp16(v);
            std::memcpy(at, &h, 2);
            wval[o * in + i] = spite::fp16_to_fp32(h);
          }
        }
      }
      std::vector<float> x(in * rows);
      for (auto& v : x) v = dist(rng);
      std::vector<double> ref(out * rows, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < out; ++o) {
          double acc = 0;
          for (int64_t i = 0; i < in; ++i) {
            const float xv = type == SPITE_DTYPE_F16 ? spite::fp16_to_fp32(spite::fp32_to_fp16(x[r * in + i]))
                                                     : x[r * in + i];
            acc += wval[o * in + i] * xv;
          }
          ref[r * out + o] = acc;
        }
      }
      unsigned char* dw = to_device(wbytes);
      float* dx = to_device(x);
      float* dy = to_device(std::vector<float>(out * rows, 0.0f));
      spite_matmul_args a{};
      a.struct_size = sizeof a;
      a.weight_dtype = type;
      a.weight = dw;
      a.in = in;
      a.out = out;
      a.row_bytes = row_bytes;
      a.x = dx;
      a.y = dy;
      a.rows = rows;
      REQUIRE(k->run(&a, nullptr, nullptr) == SPITE_OK);
      auto y = from_device(dy, ref.size());
      for (size_t i = 0; i < y.size(); ++i) REQUIRE(y[i] == Approx(ref[i]).epsilon(1e-4).margin(1e-4));
      cudaFree(dw);
      cudaFree(dx);
      cudaFree(dy);
    }
  }
  p.lib->shutdown();
#endif
}
