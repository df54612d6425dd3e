// =================================================================================================
// KERNEL_TEMPLATE.cu: a complete spite kernel plug-in to copy. It compiles as it is (a working,
// simple rms_norm), so start from something that builds and passes `spitectl verify`, then make
// it fast. Full guide: docs/contributing/CONTRIBUTING.md.
//
//   1. Copy it into the directory of your model and card:
//        mkdir -p kernels/llama/llama4/sm_120
//        cp kernels/llama/llama4/sm_89/KERNEL_TEMPLATE.cu kernels/llama/llama4/sm_120/attention.cu
//   2. Add kernels/llama/llama4/sm_120/CMakeLists.txt with one line (the ID is the directory):
//        spite_add_kernel_library(ID llama/llama4/sm_120 CUDA SOURCES attention.cu)
//   3. Build for your card:
//        cmake -B build -DSPITE_MODELS=llama/llama4 -DSPITE_GPU_ARCHS=RTX_5090
//        cmake --build build --target spite_kernel_llama_llama4_sm_120
//      -> build/kernels/llama/llama4/sm_120/libspite_kernel_llama_llama4_sm_120.so
//
// The only header you need is kernels/abi/spite_kernel.h (C, ABI v1). Link nothing of spite.
// This directory (sm_89) holds only this file and no CMakeLists.txt, so it is never built as a
// plug-in; -DSPITE_CHECK_KERNEL_TEMPLATE=ON compiles it as a check.
//
// A directory named sm_XY is built for every selected card whose compute capability is >= X.Y
// (SASS for each, PTX of the newest), so write code that needs at most sm_XY features; use an
// sm_XYa directory for arch-specific features (wgmma, tcgen05), built only for exactly XYa.
// =================================================================================================
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "spite_kernel.h"

// -------------------------------------------------------------------------------------------------
// 1. Identity. CMake defines SPITE_KERNEL_ID as the directory ("llama/llama4/sm_120") and
//    SPITE_CUDA_ARCHS as what it compiled ("89-real,120"). The host loads a library only if its
//    descriptor id equals its directory, so use the macro rather than a string of your own.
// -------------------------------------------------------------------------------------------------
#ifndef SPITE_KERNEL_ID
#define SPITE_KERNEL_ID "llama/llama4/sm_89"
#endif
#ifndef SPITE_CUDA_ARCHS
#define SPITE_CUDA_ARCHS "?"
#endif

// -------------------------------------------------------------------------------------------------
// 2. What the host guarantees (and what it expects from you)
//
//  Loading
//   - dlopen(RTLD_NOW | RTLD_LOCAL), then spite_kernel_library_v1() returns your descriptor. Do no
//     device work at load time (no global constructors that touch CUDA).
//   - init() is called once before anything else; shutdown() is called before dlclose. No other
//     call of this library runs while init() or shutdown() runs. If init() refuses, the library is
//     unloaded without any further call.
//   - The spite_host_api pointer stays valid until shutdown() returns. Check struct_size before
//     using a field (older hosts have shorter structs); device_stream may be null.
//   - When the host only plans for a card that is not installed (spitectl dispatch --card), it
//     loads the library and calls probe() WITHOUT init(): answer from the signature alone.
//
//  Probing
//   - probe() may run often and from several threads, before and after init(); it must be a pure
//     function of the signature (plus facts init() recorded), must not touch data, and must
//     write a NUL-terminated reason of at most reason_size bytes whenever it returns 0.
//   - Resolution: llama/llama4/<arch> beats llama/generic/<arch> beats generic/generic/<arch>
//     beats the CPU; within one tier the highest score wins. Return 0 to refuse, > 0 to accept,
//     at most 1,000,000. Convention: ~10 for a plain kernel, 100+ for a tuned one, more for a
//     shape it is specifically tuned for. Never accept what you cannot compute within the op's
//     verify tolerance.
//
//  Running
//   - run() is called only after init() succeeded and probe() accepted the same signature; `args`
//     points to the spite_*_args struct of the kernel's op with struct_size set:
//       SPITE_OP_RMS_NORM            spite_rms_norm_args
//       SPITE_OP_MATMUL              spite_matmul_args
//       SPITE_OP_ROPE                spite_rope_args
//       SPITE_OP_ATTENTION_PREFILL / SPITE_OP_ATTENTION_DECODE   spite_attention_args
//       SPITE_OP_SWIGLU              spite_swiglu_args
//   - The calling thread's current CUDA device is the signature's device. Every data pointer in
//     the args is device memory on it. `stream` is the cudaStream_t to enqueue on (null: the
//     legacy default stream). Enqueue and return: never synchronize, never allocate (use the
//     workspace), never print (use host->log).
//   - `workspace` is device memory of workspace_size(signature) bytes, 256-byte aligned, owned by
//     the host and not reused before the stream has passed this call.
//   - run() may be called from several host threads at once (different streams): keep no
//     mutable global state in it.
//   - Return SPITE_OK, or an error: the host then runs the op with the next candidate (in the end
//     the CPU reference) and logs the failure. SPITE_ERR_UNSUPPORTED is the polite way to
//     decline something probe() could not see (e.g. a pointer alignment).
//
//  Correctness
//   - `spitectl verify LIB.so` (CPU libraries) and the GPU test (ctest -L gpu) compare every
//     kernel with the reference ops on odd sizes; a PR must pass them on the card.
// -------------------------------------------------------------------------------------------------

namespace {

// -------------------------------------------------------------------------------------------------
// 3. Library state: written only by init() and shutdown().
// -------------------------------------------------------------------------------------------------
struct library_state {
  bool initialised = false;
  const spite_host_api* host = nullptr;
  int device_count = 0;
};
library_state g_state;

void write_reason(char* reason, size_t size, const char* text) {
  if (reason != nullptr && size > 0) std::snprintf(reason, size, "%s", text);
}

void host_log(int32_t level, const char* text) {
  const spite_host_api* h = g_state.host;
  if (h != nullptr && h->struct_size >= offsetof(spite_host_api, log) + sizeof h->log && h->log != nullptr) {
    h->log(h->host, level, text);
  }
}

// -------------------------------------------------------------------------------------------------
// 4. The device code. Replace this with your op. This example: y = x / rms(x) * weight, one block
//    per row, float4 loads (so n % 4 == 0 and 16-byte aligned pointers are required; the probe
//    and run() below show how to refuse what the kernel cannot do).
// -------------------------------------------------------------------------------------------------
constexpr int kThreads = 256;

__global__ void rms_norm_f32x4(const float4* x, const float4* weight, float4* y, int64_t n4, int64_t rows,
                               float eps) {
  __shared__ float partial[kThreads / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float4* xr = x + r * n4;
    float4* yr = y + r * n4;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 v = xr[i];
      sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    const float scale = rsqrtf(total / static_cast<float>(n4 * 4) + eps);
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 v = xr[i];  // y may alias x: each element is read before it is written
      v.x *= scale, v.y *= scale, v.z *= scale, v.w *= scale;
      if (weight != nullptr) {
        const float4 g = weight[i];
        v.x *= g.x, v.y *= g.y, v.z *= g.z, v.w *= g.w;
      }
      yr[i] = v;
    }
    __syncthreads();  // `partial` is reused by the next row
  }
}

// -------------------------------------------------------------------------------------------------
// 5. probe(): can this kernel run this signature? 0 + a reason, or a score.
//    Check, in this order: the op, the device kind, the types, the shapes; then (only when
//    initialised) the device. Reasons are shown by `spitectl dispatch --explain`: make them say
//    what would have to change ("n must be a multiple of 4 (got 4098)").
// -------------------------------------------------------------------------------------------------
int32_t template_probe(const spite_op_signature* s, char* reason, size_t size) {
  if (s == nullptr || s->struct_size < sizeof(spite_op_signature)) {
    write_reason(reason, size, "signature older than ABI v1");
    return 0;
  }
  if (s->op != SPITE_OP_RMS_NORM) {
    write_reason(reason, size, "only rms_norm");
    return 0;
  }
  if (s->device != SPITE_DEVICE_CUDA) {
    write_reason(reason, size, "CUDA devices only");
    return 0;
  }
  if (s->activation_dtype != SPITE_DTYPE_F32) {
    write_reason(reason, size, "F32 activations only");
    return 0;
  }
  // rms_norm's width is not in the signature in ABI v1 (`in` is 0 when not applicable): when it
  // is given it must suit float4; otherwise run() checks n and declines.
  if (s->in != 0 && s->in % 4 != 0) {
    char text[96];
    std::snprintf(text, sizeof text, "n must be a multiple of 4 (got %lld)", static_cast<long long>(s->in));
    write_reason(reason, size, text);
    return 0;
  }
  if (g_state.initialised && (s->device_index < 0 || s->device_index >= g_state.device_count)) {
    write_reason(reason, size, "no such CUDA device");
    return 0;
  }
  return 100;  // tuned for this card: beats the generic CUDA kernel (10)
}

// -------------------------------------------------------------------------------------------------
// 6. workspace_size(): bytes of scratch run() needs for this signature (0: none). The host
//    allocates it on the device; never cudaMalloc in run(). Example: a split-K matmul would
//    return splits * rows * out * sizeof(float) here.
// -------------------------------------------------------------------------------------------------
size_t template_workspace_size(const spite_op_signature* /*signature*/) { return 0; }

// -------------------------------------------------------------------------------------------------
// 7. run(): check the arguments (never trust them), launch on the host's stream, report launch
//    errors. No synchronization: the host orders the work.
// -------------------------------------------------------------------------------------------------
spite_status template_run(const void* args, void* /*workspace*/, void* stream) {
  const auto* a = static_cast<const spite_rms_norm_args*>(args);
  if (!g_state.initialised) return SPITE_ERR_INVALID;
  if (a == nullptr || a->struct_size < sizeof(spite_rms_norm_args) || a->x == nullptr || a->y == nullptr ||
      a->n <= 0 || a->rows < 0) {
    return SPITE_ERR_INVALID;
  }
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (a->n % 4 != 0 || !aligned(a->x) || !aligned(a->y) || (a->weight != nullptr && !aligned(a->weight))) {
    return SPITE_ERR_UNSUPPORTED;  // the host falls back to the next candidate
  }
  if (a->rows == 0) return SPITE_OK;
  const unsigned blocks = static_cast<unsigned>(a->rows < (1 << 20) ? a->rows : (1 << 20));
  rms_norm_f32x4<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const float4*>(a->x), reinterpret_cast<const float4*>(a->weight),
      reinterpret_cast<float4*>(a->y), a->n / 4, a->rows, a->eps);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    host_log(SPITE_LOG_ERROR, cudaGetErrorString(e));
    return SPITE_ERR_DEVICE;
  }
  return SPITE_OK;
}

// -------------------------------------------------------------------------------------------------
// 8. init() / shutdown(). init() checks that a device exists (cudaGetDeviceCount: cheap, creates
//    no context) and records what probe() needs; without a driver or device it refuses with the
//    CUDA error in the reason. Do not allocate device memory here if you can help it: the library
//    may be loaded on a machine that never runs it. shutdown() releases what init() and the
//    kernels acquired; never cudaDeviceReset() (the context belongs to the host).
// -------------------------------------------------------------------------------------------------
spite_status template_init(const spite_host_api* host, char* reason, size_t size) {
  if (host == nullptr || host->struct_size < sizeof(spite_host_api) || host->abi_major != SPITE_KERNEL_ABI_MAJOR) {
    write_reason(reason, size, "host API missing or of another ABI major");
    return SPITE_ERR_INVALID;
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    if (reason != nullptr && size > 0) {
      std::snprintf(reason, size, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorName(e) : "none found");
    }
    return SPITE_ERR_DEVICE;
  }
  g_state.host = host;
  g_state.device_count = count;
  g_state.initialised = true;
  host_log(SPITE_LOG_INFO, SPITE_KERNEL_ID ": ready");
  return SPITE_OK;
}

void template_shutdown() { g_state = library_state{}; }

// -------------------------------------------------------------------------------------------------
// 9. The descriptor: one spite_kernel per op you implement (an op you leave out is served by the
//    next library in the resolution order). `dtypes` lists the weight types a weighted op
//    handles (SPITE_DTYPE_Q4_K, ...); ops without weights leave it empty. Fields are in the ABI
//    header's order; never reorder them.
// -------------------------------------------------------------------------------------------------
const spite_kernel kKernels[] = {
    {
        .struct_size = sizeof(spite_kernel),
        .op = SPITE_OP_RMS_NORM,
        .name = "rms_norm_f32x4",
        .dtypes = nullptr,
        .n_dtypes = 0,
        .probe = template_probe,
        .workspace_size = template_workspace_size,
        .run = template_run,
    },
};

#define SPITE_STR2(x) #x
#define SPITE_STR(x) SPITE_STR2(x)

const spite_kernel_library kLibrary = {
    .struct_size = sizeof(spite_kernel_library),
    .abi_major = SPITE_KERNEL_ABI_MAJOR,
    .abi_minor = SPITE_KERNEL_ABI_MINOR,
    .id = SPITE_KERNEL_ID,
    .device = SPITE_DEVICE_CUDA,
    .build_info = "nvcc " SPITE_STR(__CUDACC_VER_MAJOR__) "." SPITE_STR(__CUDACC_VER_MINOR__) ", code " SPITE_CUDA_ARCHS,
    .init = template_init,
    .shutdown = template_shutdown,
    .kernels = kKernels,
    .n_kernels = sizeof kKernels / sizeof kKernels[0],
};

}  // namespace

// -------------------------------------------------------------------------------------------------
// 10. The entry symbol: the one name the library exports (the build hides everything else).
// -------------------------------------------------------------------------------------------------
extern "C" __attribute__((visibility("default"))) const spite_kernel_library* spite_kernel_library_v1(void) {
  return &kLibrary;
}
