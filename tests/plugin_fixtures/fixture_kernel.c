/* A test plug-in in plain C, built against the frozen copy of the v1 header. Compile-time
 * switches turn it into each kind of broken library the host must refuse:
 *   FIXTURE_ID          the descriptor's id (default "generic/generic/" FIXTURE_ARCH)
 *   FIXTURE_NO_ENTRY    exports no entry symbol
 *   FIXTURE_ABI_MAJOR   a different ABI major
 *   FIXTURE_WRONG_RESULT rms_norm computes the wrong thing (fails the self-test)
 *   FIXTURE_INIT_FAILS  init() refuses
 *   FIXTURE_PROBE_SCORE what probe() returns (default 50; garbage such as 2147483647 too)
 *   FIXTURE_RUN_FAILS   run() reports an error after the self-test passed
 *   FIXTURE_MATMUL_F32  also serves matmul of F32 weights (double sums)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "spite_kernel_v1.h"

#ifndef FIXTURE_ARCH
#define FIXTURE_ARCH "x86_64"
#endif
#ifndef FIXTURE_ID
#define FIXTURE_ID "generic/generic/" FIXTURE_ARCH
#endif
#ifndef FIXTURE_ABI_MAJOR
#define FIXTURE_ABI_MAJOR SPITE_KERNEL_ABI_MAJOR
#endif
#ifndef FIXTURE_PROBE_SCORE
#define FIXTURE_PROBE_SCORE 50
#endif
#ifndef FIXTURE_NAME
#define FIXTURE_NAME "rms_norm_fixture"
#endif

static int calls_after_init = 0;

static spite_status fixture_init(const spite_host_api* host, char* reason, size_t reason_size) {
  (void)host;
#ifdef FIXTURE_INIT_FAILS
  snprintf(reason, reason_size, "fixture refuses to initialise");
  return SPITE_ERR_DEVICE;
#else
  (void)reason;
  (void)reason_size;
  return SPITE_OK;
#endif
}

static void fixture_shutdown(void) {}

static int32_t fixture_probe(const spite_op_signature* s, char* reason, size_t reason_size) {
  if (s->device != SPITE_DEVICE_CPU) {
    snprintf(reason, reason_size, "fixture runs on the CPU only");
    return 0;
  }
  return FIXTURE_PROBE_SCORE;
}

static spite_status fixture_rms_norm(const void* args, void* workspace, void* stream) {
  const spite_rms_norm_args* a = (const spite_rms_norm_args*)args;
  (void)workspace;
  (void)stream;
  if (a == NULL || a->struct_size < sizeof(spite_rms_norm_args)) return SPITE_ERR_INVALID;
#ifdef FIXTURE_RUN_FAILS
  /* The self-test runs 4 cases; fail the ones after it. */
  if (++calls_after_init > 4) return SPITE_ERR_DEVICE;
#else
  (void)calls_after_init;
#endif
  for (int64_t r = 0; r < a->rows; ++r) {
    const float* x = a->x + r * a->n;
    float* y = a->y + r * a->n;
    double sum = 0;
    for (int64_t i = 0; i < a->n; ++i) sum += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(sum / (double)a->n + a->eps));
    for (int64_t i = 0; i < a->n; ++i) {
#ifdef FIXTURE_WRONG_RESULT
      y[i] = x[i] * scale * 1.5f;
#else
      y[i] = x[i] * scale * (a->weight != NULL ? a->weight[i] : 1.0f);
#endif
    }
  }
  return SPITE_OK;
}

#ifdef FIXTURE_MATMUL_F32
static spite_status fixture_matmul(const void* args, void* workspace, void* stream) {
  const spite_matmul_args* a = (const spite_matmul_args*)args;
  (void)workspace;
  (void)stream;
  if (a == NULL || a->struct_size < sizeof(spite_matmul_args) || a->weight_dtype != SPITE_DTYPE_F32) return SPITE_ERR_INVALID;
  for (int64_t t = 0; t < a->rows; ++t) {
    for (int64_t o = 0; o < a->out; ++o) {
      const float* w = (const float*)((const char*)a->weight + (size_t)o * a->row_bytes);
      double sum = 0;
      for (int64_t i = 0; i < a->in; ++i) sum += (double)w[i] * a->x[t * a->in + i];
      a->y[t * a->out + o] = (float)sum;
    }
  }
  return SPITE_OK;
}

static const spite_dtype fixture_matmul_types[] = {SPITE_DTYPE_F32};
#endif

static const spite_kernel fixture_kernels[] = {
    {sizeof(spite_kernel), SPITE_OP_RMS_NORM, FIXTURE_NAME, NULL, 0, fixture_probe, NULL, fixture_rms_norm},
#ifdef FIXTURE_MATMUL_F32
    {sizeof(spite_kernel), SPITE_OP_MATMUL, "matmul_fixture", fixture_matmul_types, 1, fixture_probe, NULL, fixture_matmul},
#endif
};

static const spite_kernel_library fixture_library = {
    sizeof(spite_kernel_library), FIXTURE_ABI_MAJOR, SPITE_KERNEL_ABI_MINOR, FIXTURE_ID, SPITE_DEVICE_CPU,
    "test fixture (frozen v1 header)", fixture_init, fixture_shutdown, fixture_kernels,
    sizeof fixture_kernels / sizeof fixture_kernels[0],
};

#ifndef FIXTURE_NO_ENTRY
__attribute__((visibility("default"))) const spite_kernel_library* spite_kernel_library_v1(void) {
  return &fixture_library;
}
#else
__attribute__((visibility("default"))) const spite_kernel_library* some_other_symbol(void) { return &fixture_library; }
#endif
