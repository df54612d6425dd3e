// generic/generic/sm_75: the CUDA fallback plug-in. Simple, correct kernels for any NVIDIA card
// with compute capability >= 7.5 (the oldest CUDA 13 targets): rms_norm and matmul with F32 or
// F16 weights. Tuned plug-ins (kernels/<family>/<model>/sm_XY/) outrank it; it is what runs on a
// card nobody has written a kernel for yet.
//
// Contract (see kernels/llama/llama4/sm_89/KERNEL_TEMPLATE.cu for the full list):
//  - dlopen does no CUDA work; init() only counts devices and reads their compute capability
//    (no context is created). With no driver or no device it returns SPITE_ERR_DEVICE and a
//    reason ("no CUDA device: cudaErrorInsufficientDriver (35): ...").
//  - probe() answers from the signature alone until init() succeeded (planning for a card that
//    is not present), then also checks the device index and the device's compute capability.
//  - run() is called on a thread whose current CUDA device is the signature's device; the data
//    pointers in the args are device memory on it; `stream` is a cudaStream_t (null: the legacy
//    default stream). run() enqueues and returns; it never synchronizes.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "spite_kernel.h"

#ifndef SPITE_KERNEL_ID
#define SPITE_KERNEL_ID "generic/generic/sm_75"
#endif
#ifndef SPITE_CUDA_ARCHS  // what CMake compiled in, e.g. "75-real,80-real,89"
#define SPITE_CUDA_ARCHS ""
#endif

#define SPITE_STR2(x) #x
#define SPITE_STR(x) SPITE_STR2(x)
#if defined(__VERSION__)
#define SPITE_HOST_COMPILER " host " __VERSION__
#else
#define SPITE_HOST_COMPILER ""
#endif

namespace {

constexpr int kMaxDevices = 64;
constexpr int32_t kScore = 10;  // generic: any tuned kernel should beat it

struct library_state {
  bool initialised = false;
  int device_count = 0;
  int cc[kMaxDevices] = {};         // compute capability as major * 10 + minor (8.9 -> 89)
  bool usable[kMaxDevices] = {};    // the fat binary holds code this device can run
  const spite_host_api* host = nullptr;
};

// Written only by init() and shutdown(), which the host never runs concurrently with anything
// else of this library; probe() and run() only read it.
library_state g_state;

void write_reason(char* reason, size_t size, const char* format, ...) __attribute__((format(printf, 3, 4)));
void write_reason(char* reason, size_t size, const char* format, ...) {
  if (reason == nullptr || size == 0) return;
  va_list args;
  va_start(args, format);
  std::vsnprintf(reason, size, format, args);
  va_end(args);
}

void log_message(int32_t level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void log_message(int32_t level, const char* format, ...) {
  const spite_host_api* host = g_state.host;
  if (host == nullptr || host->struct_size < offsetof(spite_host_api, log) + sizeof(host->log) ||
      host->log == nullptr) {
    return;
  }
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  host->log(host->host, level, text);
}

// Can a device of compute capability `cc` run this fat binary? SPITE_CUDA_ARCHS lists entries
// like "80-real" (SASS only), "89" (SASS + PTX) or "90a-real". SASS sm_XY runs on the same major
// with minor >= Y; sm_XYa only on exactly XY; PTX compute_XY is JIT-compiled for any cc >= XY.
bool fat_binary_runs_on(int cc) {
  const char* p = SPITE_CUDA_ARCHS;
  while (*p != '\0') {
    char* end = nullptr;
    const long arch = std::strtol(p, &end, 10);
    if (end == p) break;
    bool specific = false;
    while (*end == 'a' || *end == 'f') {
      specific = true;
      ++end;
    }
    const bool real_only = std::strncmp(end, "-real", 5) == 0;
    if (real_only) end += 5;
    if (specific ? arch == cc : (arch / 10 == cc / 10 && arch <= cc)) return true;
    if (!real_only && !specific && arch <= cc) return true;
    p = (*end == ',') ? end + 1 : end;
  }
  return false;
}

bool valid_signature(const spite_op_signature* s, spite_op op, char* reason, size_t size) {
  if (s == nullptr || s->struct_size < sizeof(spite_op_signature)) {
    write_reason(reason, size, "signature missing or older than ABI v1");
    return false;
  }
  if (s->op != op) {
    write_reason(reason, size, "kernel is for op %d, asked for op %d", op, s->op);
    return false;
  }
  if (s->device != SPITE_DEVICE_CUDA) {
    write_reason(reason, size, "runs on CUDA devices only (asked for device kind %d)", s->device);
    return false;
  }
  if (s->activation_dtype != SPITE_DTYPE_F32) {
    write_reason(reason, size, "activations must be F32 (got type %d)", s->activation_dtype);
    return false;
  }
  return true;
}

// Before init() (the host plans for a card that is not here: `spitectl dispatch --card`) the
// answer rests on the signature alone; after it, the device must exist and be one this fat
// binary holds code for.
bool device_ready(const spite_op_signature* s, char* reason, size_t size) {
  if (!g_state.initialised) return true;
  const int d = s->device_index;
  if (d < 0 || d >= g_state.device_count) {
    write_reason(reason, size, "CUDA device %d does not exist (%d found)", d, g_state.device_count);
    return false;
  }
  if (!g_state.usable[d]) {
    write_reason(reason, size, "CUDA device %d is sm_%d; this library holds code for %s", d, g_state.cc[d],
                 SPITE_CUDA_ARCHS);
    return false;
  }
  return true;
}

spite_status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return SPITE_OK;
  log_message(SPITE_LOG_ERROR, "%s: %s (%d): %s", what, cudaGetErrorName(e), static_cast<int>(e),
              cudaGetErrorString(e));
  return SPITE_ERR_DEVICE;
}

// ---------------------------------------------------------------------------------------- rms_norm

constexpr int kNormThreads = 256;

template <typename T>
__device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// One block per row. The squares are summed in double, as the reference does; y may alias x
// (every element is read before the same thread writes it).
__global__ void rms_norm_kernel(const float* x, const float* weight, float* y, int64_t n, int64_t rows, float eps) {
  __shared__ double partial[kNormThreads / 32];
  __shared__ float scale_shared;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = xr[i];
      sum += static_cast<double>(v * v);
    }
    sum = warp_sum(sum);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    if (warp == 0) {
      double total = lane < kNormThreads / 32 ? partial[lane] : 0.0;
      total = warp_sum(total);
      if (lane == 0) {
        const float mean = static_cast<float>(total / static_cast<double>(n));
        scale_shared = 1.0f / sqrtf(mean + eps);
      }
    }
    __syncthreads();
    const float scale = scale_shared;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = xr[i] * scale;
      yr[i] = weight != nullptr ? v * weight[i] : v;
    }
    __syncthreads();  // partial / scale_shared are reused by the next row
  }
}

int32_t rms_norm_probe(const spite_op_signature* s, char* reason, size_t size) {
  if (!valid_signature(s, SPITE_OP_RMS_NORM, reason, size)) return 0;
  if (!device_ready(s, reason, size)) return 0;
  return kScore;
}

spite_status rms_norm_run(const void* args, void* /*workspace*/, void* stream) {
  const auto* a = static_cast<const spite_rms_norm_args*>(args);
  if (!g_state.initialised) return SPITE_ERR_INVALID;
  if (a == nullptr || a->struct_size < sizeof(spite_rms_norm_args) || a->n <= 0 || a->rows < 0 ||
      a->x == nullptr || a->y == nullptr) {
    return SPITE_ERR_INVALID;
  }
  if (a->rows == 0) return SPITE_OK;
  const unsigned blocks = static_cast<unsigned>(a->rows < (1 << 20) ? a->rows : (1 << 20));
  rms_norm_kernel<<<blocks, kNormThreads, 0, static_cast<cudaStream_t>(stream)>>>(a->x, a->weight, a->y, a->n,
                                                                                   a->rows, a->eps);
  return launch_status("rms_norm");
}

// ------------------------------------------------------------------------------------------ matmul

constexpr int kMatmulThreads = 256;
constexpr int kWarpsPerBlock = kMatmulThreads / 32;

__device__ inline float load_weight(const float* w, int64_t i) { return w[i]; }
__device__ inline float load_weight(const __half* w, int64_t i) { return __half2float(w[i]); }

// y[r, o] = sum_i W[o, i] * x[r, i]: one warp per output feature, lanes stride over `in` so the
// loads of W and x are coalesced. With F16 weights the activations are rounded to F16 first, as
// the reference does (the products are then exact in float).
template <typename W, bool kRoundX>
__global__ void matmul_kernel(const char* weight, size_t row_bytes, const float* x, float* y, int64_t in, int64_t out,
                              int64_t rows) {
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (o >= out) return;  // the whole warp leaves together
  const W* wr = reinterpret_cast<const W*>(weight + o * row_bytes);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* xr = x + r * in;
    float acc = 0.0f;
    for (int64_t i = lane; i < in; i += 32) {
      const float xv = kRoundX ? __half2float(__float2half_rn(xr[i])) : xr[i];
      acc += load_weight(wr, i) * xv;
    }
    acc = warp_sum(acc);
    if (lane == 0) y[r * out + o] = acc;
  }
}

const spite_dtype kMatmulTypes[] = {SPITE_DTYPE_F32, SPITE_DTYPE_F16};

size_t element_size(spite_dtype t) { return t == SPITE_DTYPE_F32 ? 4 : t == SPITE_DTYPE_F16 ? 2 : 0; }

int32_t matmul_probe(const spite_op_signature* s, char* reason, size_t size) {
  if (!valid_signature(s, SPITE_OP_MATMUL, reason, size)) return 0;
  if (element_size(s->weight_dtype) == 0) {
    write_reason(reason, size, "weight type %d not supported (F32, F16 only)", s->weight_dtype);
    return 0;
  }
  if (s->in <= 0 || s->out <= 0) {
    write_reason(reason, size, "matmul needs in > 0 and out > 0 (got %lld, %lld)", static_cast<long long>(s->in),
                 static_cast<long long>(s->out));
    return 0;
  }
  if (!device_ready(s, reason, size)) return 0;
  return kScore;
}

spite_status matmul_run(const void* args, void* /*workspace*/, void* stream) {
  const auto* a = static_cast<const spite_matmul_args*>(args);
  if (!g_state.initialised) return SPITE_ERR_INVALID;
  if (a == nullptr || a->struct_size < sizeof(spite_matmul_args) || a->weight == nullptr || a->x == nullptr ||
      a->y == nullptr || a->in <= 0 || a->out <= 0 || a->rows < 0) {
    return SPITE_ERR_INVALID;
  }
  const size_t esize = element_size(a->weight_dtype);
  if (esize == 0) return SPITE_ERR_UNSUPPORTED;
  if (a->row_bytes < static_cast<size_t>(a->in) * esize || a->row_bytes % esize != 0) return SPITE_ERR_INVALID;
  if (a->rows == 0) return SPITE_OK;
  const dim3 grid(static_cast<unsigned>((a->out + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>(a->rows < 65535 ? a->rows : 65535));
  const auto s = static_cast<cudaStream_t>(stream);
  const char* w = static_cast<const char*>(a->weight);
  if (a->weight_dtype == SPITE_DTYPE_F32) {
    matmul_kernel<float, false><<<grid, kMatmulThreads, 0, s>>>(w, a->row_bytes, a->x, a->y, a->in, a->out, a->rows);
  } else {
    matmul_kernel<__half, true><<<grid, kMatmulThreads, 0, s>>>(w, a->row_bytes, a->x, a->y, a->in, a->out, a->rows);
  }
  return launch_status("matmul");
}

// ------------------------------------------------------------------------------ init / shutdown

spite_status library_init(const spite_host_api* host, char* reason, size_t size) {
  if (host == nullptr || host->struct_size < sizeof(spite_host_api)) {
    write_reason(reason, size, "host API missing or older than ABI v1");
    return SPITE_ERR_INVALID;
  }
  if (host->abi_major != SPITE_KERNEL_ABI_MAJOR) {
    write_reason(reason, size, "host ABI %u.%u, library ABI %d.%d", host->abi_major, host->abi_minor,
                 SPITE_KERNEL_ABI_MAJOR, SPITE_KERNEL_ABI_MINOR);
    return SPITE_ERR_INVALID;
  }
  if (g_state.initialised) return SPITE_OK;

  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    write_reason(reason, size, "no CUDA device: %s (%d): %s", cudaGetErrorName(e), static_cast<int>(e),
                 cudaGetErrorString(e));
    return SPITE_ERR_DEVICE;
  }
  if (count <= 0) {
    write_reason(reason, size, "no CUDA device: cudaGetDeviceCount found none");
    return SPITE_ERR_DEVICE;
  }
  library_state state;
  state.device_count = count < kMaxDevices ? count : kMaxDevices;
  int usable = 0;
  for (int d = 0; d < state.device_count; ++d) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    state.cc[d] = major * 10 + minor;
    state.usable[d] = fat_binary_runs_on(state.cc[d]);
    usable += state.usable[d] ? 1 : 0;
  }
  if (usable == 0) {
    write_reason(reason, size,
                 "no CUDA device this library was built for: device 0 is sm_%d, code for %s "
                 "(rebuild with -DSPITE_GPU_ARCHS=sm_%d)",
                 state.cc[0], SPITE_CUDA_ARCHS, state.cc[0]);
    return SPITE_ERR_DEVICE;
  }
  state.host = host;
  state.initialised = true;
  g_state = state;
  log_message(SPITE_LOG_INFO, "%s: %d CUDA device(s), %d usable (code for %s)", SPITE_KERNEL_ID, count, usable,
              SPITE_CUDA_ARCHS);
  return SPITE_OK;
}

// Nothing was allocated; the device and its primary context belong to the host, so no
// cudaDeviceReset() here.
void library_shutdown() { g_state = library_state{}; }

// -------------------------------------------------------------------------------- descriptor

const spite_kernel kKernels[] = {
    {
        .struct_size = sizeof(spite_kernel),
        .op = SPITE_OP_RMS_NORM,
        .name = "rms_norm_f32",
        .dtypes = nullptr,
        .n_dtypes = 0,
        .probe = rms_norm_probe,
        .workspace_size = nullptr,
        .run = rms_norm_run,
    },
    {
        .struct_size = sizeof(spite_kernel),
        .op = SPITE_OP_MATMUL,
        .name = "matmul_f32_f16",
        .dtypes = kMatmulTypes,
        .n_dtypes = sizeof kMatmulTypes / sizeof kMatmulTypes[0],
        .probe = matmul_probe,
        .workspace_size = nullptr,
        .run = matmul_run,
    },
};

const spite_kernel_library kLibrary = {
    .struct_size = sizeof(spite_kernel_library),
    .abi_major = SPITE_KERNEL_ABI_MAJOR,
    .abi_minor = SPITE_KERNEL_ABI_MINOR,
    .id = SPITE_KERNEL_ID,
    .device = SPITE_DEVICE_CUDA,
    .build_info = "nvcc " SPITE_STR(__CUDACC_VER_MAJOR__) "." SPITE_STR(__CUDACC_VER_MINOR__) "." SPITE_STR(
        __CUDACC_VER_BUILD__) SPITE_HOST_COMPILER ", code " SPITE_CUDA_ARCHS ", cudart static",
    .init = library_init,
    .shutdown = library_shutdown,
    .kernels = kKernels,
    .n_kernels = sizeof kKernels / sizeof kKernels[0],
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const spite_kernel_library* spite_kernel_library_v1(void) {
  return &kLibrary;
}
