// llama/llama3/x86_64_v4: AVX-512 kernels for Llama 3 on x86-64-v4 CPUs. The descriptor, the
// CPU check and the probes live here, compiled for baseline x86-64, so that a host without
// AVX-512 gets a refusal with its reason instead of an illegal instruction.
#include <cstdio>

#include "kernels.hpp"

namespace {

const spite_host_api* g_host = nullptr;

bool cpu_has_v4() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma");
}

spite_status init(const spite_host_api* host, char* reason, size_t reason_size) {
  if (host == nullptr || host->struct_size < sizeof(spite_host_api)) {
    std::snprintf(reason, reason_size, "host API table too small");
    return SPITE_ERR_INVALID;
  }
  if (!cpu_has_v4()) {
    std::snprintf(reason, reason_size, "this CPU lacks AVX-512 (F, BW, VL, DQ) with F16C and FMA");
    return SPITE_ERR_UNSUPPORTED;
  }
  g_host = host;
  return SPITE_OK;
}

void shutdown() { g_host = nullptr; }

bool on_cpu(const spite_op_signature* s, char* reason, size_t reason_size) {
  if (s == nullptr || s->struct_size < sizeof(spite_op_signature)) {
    std::snprintf(reason, reason_size, "signature too small");
    return false;
  }
  if (s->device != SPITE_DEVICE_CPU) {
    std::snprintf(reason, reason_size, "runs on the CPU only");
    return false;
  }
  if (s->activation_dtype != SPITE_DTYPE_F32) {
    std::snprintf(reason, reason_size, "f32 activations only");
    return false;
  }
  return true;
}

// Rows of at least one vector: below that the built-in kernel is as good.
int32_t probe_elementwise(const spite_op_signature* s, char* reason, size_t reason_size) {
  if (!on_cpu(s, reason, reason_size)) return 0;
  if (s->in < 16) {
    std::snprintf(reason, reason_size, "rows of %lld elements are shorter than one vector", (long long)s->in);
    return 0;
  }
  return 100;
}

int32_t probe_matmul(const spite_op_signature* s, char* reason, size_t reason_size) {
  if (!on_cpu(s, reason, reason_size)) return 0;
  if (s->weight_dtype != SPITE_DTYPE_F32 && s->weight_dtype != SPITE_DTYPE_F16) {
    std::snprintf(reason, reason_size, "weight type %d is not f32 or f16", s->weight_dtype);
    return 0;
  }
  return 100;
}

const spite_dtype k_matmul_types[] = {SPITE_DTYPE_F32, SPITE_DTYPE_F16};

const spite_kernel k_kernels[] = {
    {sizeof(spite_kernel), SPITE_OP_RMS_NORM, "rms_norm_avx512", nullptr, 0, probe_elementwise, nullptr,
     spite_llama3_v4::rms_norm},
    {sizeof(spite_kernel), SPITE_OP_SWIGLU, "swiglu_avx512", nullptr, 0, probe_elementwise, nullptr,
     spite_llama3_v4::swiglu},
    {sizeof(spite_kernel), SPITE_OP_MATMUL, "matmul_avx512", k_matmul_types, 2, probe_matmul, nullptr,
     spite_llama3_v4::matmul},
};

const spite_kernel_library k_library = {
    sizeof(spite_kernel_library),
    SPITE_KERNEL_ABI_MAJOR,
    SPITE_KERNEL_ABI_MINOR,
    "llama/llama3/x86_64_v4",
    SPITE_DEVICE_CPU,
    "g++ " __VERSION__ ", -O3 -march=x86-64-v4 (kernels only)",
    init,
    shutdown,
    k_kernels,
    sizeof k_kernels / sizeof k_kernels[0],
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const spite_kernel_library* spite_kernel_library_v1(void) {
  return &k_library;
}
