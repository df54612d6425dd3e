/*
 * spite kernel plug-in ABI, version 1.
 *
 * The only header a kernel author needs. A plug-in is a shared library that exports one C
 * symbol, SPITE_KERNEL_ENTRY_SYMBOL, returning a pointer to a constant library descriptor. The
 * host (spited, spitectl) opens the library, checks the descriptor, calls init() with its host
 * API table, asks each kernel's probe() whether it can run an operation of a given signature,
 * and calls run(). shutdown() is called before the library is unloaded.
 *
 * Compatibility rules, so that old plug-ins keep loading in new hosts and the reverse:
 *  - every struct starts with `struct_size`; structs only grow at the end; a reader uses a
 *    field only if struct_size covers it;
 *  - enumerations are plain int32 values with fixed numbers; values are only added;
 *  - SPITE_KERNEL_ABI_MAJOR changes only for incompatible changes (the host refuses other
 *    majors); SPITE_KERNEL_ABI_MINOR grows with additions.
 * The static assertions at the end pin the v1 layout on LP64 systems.
 */
#ifndef SPITE_KERNEL_H
#define SPITE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPITE_KERNEL_ABI_MAJOR 1
#define SPITE_KERNEL_ABI_MINOR 0
#define SPITE_KERNEL_ENTRY_SYMBOL "spite_kernel_library_v1"

/* Status codes returned by init() and run(). */
typedef int32_t spite_status;
#define SPITE_OK 0
#define SPITE_ERR_UNSUPPORTED 1 /* not this shape / type / device */
#define SPITE_ERR_INVALID 2     /* bad arguments */
#define SPITE_ERR_DEVICE 3      /* the device failed or is absent */
#define SPITE_ERR_NO_MEMORY 4
#define SPITE_ERR_INTERNAL 5

/* Operations. */
typedef int32_t spite_op;
#define SPITE_OP_RMS_NORM 1
#define SPITE_OP_ROPE 2
#define SPITE_OP_MATMUL 3
#define SPITE_OP_ATTENTION_PREFILL 4
#define SPITE_OP_ATTENTION_DECODE 5
#define SPITE_OP_FFN_GATED 6
#define SPITE_OP_MOE_FFN 7
#define SPITE_OP_LAYER 8
#define SPITE_OP_PREFILL 9
#define SPITE_OP_SPEC_VERIFY 10
#define SPITE_OP_SWIGLU 11

/* Element types: the GGUF tensor type ids (0 = F32, 1 = F16, 8 = Q8_0, 12 = Q4_K, 30 = BF16, ...). */
typedef int32_t spite_dtype;
#define SPITE_DTYPE_F32 0
#define SPITE_DTYPE_F16 1
#define SPITE_DTYPE_Q4_0 2
#define SPITE_DTYPE_Q8_0 8
#define SPITE_DTYPE_Q4_K 12
#define SPITE_DTYPE_Q6_K 14
#define SPITE_DTYPE_BF16 30

/* Device kinds. */
typedef int32_t spite_device_kind;
#define SPITE_DEVICE_CPU 1
#define SPITE_DEVICE_CUDA 2
#define SPITE_DEVICE_HIP 3
#define SPITE_DEVICE_LEVEL_ZERO 4

/* Log levels (syslog priorities). */
#define SPITE_LOG_ERROR 3
#define SPITE_LOG_WARNING 4
#define SPITE_LOG_INFO 6
#define SPITE_LOG_DEBUG 7

/* What the host offers a library. Valid from init() until shutdown() returns. */
typedef struct spite_host_api {
  uint32_t struct_size;
  uint16_t abi_major, abi_minor;
  void* host; /* opaque, passed back to every callback */
  void (*log)(void* host, int32_t level, const char* message);
  /* Host memory for workspaces and the library's own state; never null. */
  void* (*alloc)(void* host, size_t size, size_t alignment);
  void (*free)(void* host, void* pointer);
  /* The compute stream of a device (CUDA/HIP stream, Level Zero command list); null on the CPU
   * or when the host has none. Optional: may be null. */
  void* (*device_stream)(void* host, spite_device_kind kind, int32_t device_index);
  /* Threads the host lets a CPU kernel use. */
  int32_t cpu_threads;
} spite_host_api;

/* What a kernel is asked to run: enough to decide, without data pointers. Zero means "not
 * applicable" for the shape fields of an op that has no such dimension. */
typedef struct spite_op_signature {
  uint32_t struct_size;
  spite_op op;
  spite_dtype weight_dtype;     /* matmul / FFN weights; -1 when the op has none */
  spite_dtype activation_dtype; /* SPITE_DTYPE_F32 today */
  int64_t rows;                 /* tokens in the step */
  int64_t in, out;              /* matmul: input and output features */
  int64_t n_head, n_head_kv, head_dim, head_dim_v;
  spite_device_kind device;
  int32_t device_index;
} spite_op_signature;

/* ---- per-operation arguments (the pointer run() receives, chosen by the kernel's op) */

typedef struct spite_rms_norm_args {
  uint32_t struct_size;
  const float* x; /* [n, rows] */
  const float* weight; /* [n], may be null */
  float* y;       /* [n, rows]; may alias x */
  int64_t n, rows;
  float eps;
} spite_rms_norm_args;

typedef struct spite_matmul_args {
  uint32_t struct_size;
  spite_dtype weight_dtype;
  const void* weight; /* out rows of row_bytes each, in the GGUF block format */
  int64_t in, out;
  size_t row_bytes;
  const float* x; /* [in, rows] */
  float* y;       /* [out, rows] */
  int64_t rows;
} spite_matmul_args;

typedef struct spite_rope_args {
  uint32_t struct_size;
  float* x; /* [head_dim, n_head, rows], rotated in place */
  int64_t rows, n_head, head_dim, n_dims;
  const int32_t* pos;
  int32_t neox;
  float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
  int32_t n_ctx_orig;
  const float* freq_factors; /* [n_dims / 2] or null */
} spite_rope_args;

typedef struct spite_attention_args {
  uint32_t struct_size;
  const float* q; /* [head_dim, n_head, rows] */
  float* out;     /* [head_dim_v, n_head, rows] */
  int64_t rows, n_head, n_head_kv, head_dim, head_dim_v;
  const int32_t* q_pos;
  const uint16_t* k; /* f16 [head_dim, n_head_kv, n_kv] */
  const uint16_t* v; /* f16 [head_dim_v, n_head_kv, n_kv] */
  const int32_t* kv_pos;
  int64_t n_kv;
  float scale, softcap;
  const float* sinks; /* [n_head] or null */
  int32_t swa_window, swa_chunked;
} spite_attention_args;

typedef struct spite_swiglu_args {
  uint32_t struct_size;
  const float* gate;
  const float* up;
  float* out;
  int64_t n, rows;
} spite_swiglu_args;

/* ---- kernels and libraries */

typedef struct spite_kernel {
  uint32_t struct_size;
  spite_op op;
  const char* name;
  /* Weight types handled (empty for ops without weights). */
  const spite_dtype* dtypes;
  uint32_t n_dtypes;
  /* > 0: can run it, higher is better. 0: refuses, and writes why into reason (NUL-terminated,
   * at most reason_size bytes). Must not touch data; may be called often. */
  int32_t (*probe)(const spite_op_signature* signature, char* reason, size_t reason_size);
  /* Bytes of scratch run() needs for this signature; may be null (none). */
  size_t (*workspace_size)(const spite_op_signature* signature);
  /* Runs the op; `args` points to the spite_*_args struct of the kernel's op. */
  spite_status (*run)(const void* args, void* workspace, void* stream);
} spite_kernel;

typedef struct spite_kernel_library {
  uint32_t struct_size;
  uint16_t abi_major, abi_minor;
  const char* id; /* "family/model/arch", e.g. "llama/llama3/x86_64_v4"; must match its directory */
  spite_device_kind device;
  const char* build_info; /* compiler, flags, version: shown by spitectl dispatch --explain */
  /* Called once after loading; anything but SPITE_OK refuses the library (reason written). */
  spite_status (*init)(const spite_host_api* host, char* reason, size_t reason_size);
  /* Mandatory: releases everything init() and the kernels acquired. */
  void (*shutdown)(void);
  const spite_kernel* kernels;
  uint32_t n_kernels;
} spite_kernel_library;

typedef const spite_kernel_library* (*spite_kernel_entry_fn)(void);

/* ---- v1 layout, pinned (LP64) */
#if defined(__LP64__) || defined(_LP64)
#ifdef __cplusplus
#define SPITE_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define SPITE_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
SPITE_STATIC_ASSERT(offsetof(spite_kernel_library, id) == 8, "spite_kernel_library v1 layout");
SPITE_STATIC_ASSERT(offsetof(spite_kernel_library, device) == 16, "spite_kernel_library v1 layout");
SPITE_STATIC_ASSERT(offsetof(spite_kernel_library, init) == 32, "spite_kernel_library v1 layout");
SPITE_STATIC_ASSERT(offsetof(spite_kernel_library, kernels) == 48, "spite_kernel_library v1 layout");
SPITE_STATIC_ASSERT(sizeof(spite_kernel_library) == 64, "spite_kernel_library v1 layout");
SPITE_STATIC_ASSERT(offsetof(spite_kernel, probe) == 32, "spite_kernel v1 layout");
SPITE_STATIC_ASSERT(sizeof(spite_kernel) == 56, "spite_kernel v1 layout");
SPITE_STATIC_ASSERT(offsetof(spite_host_api, log) == 16, "spite_host_api v1 layout");
SPITE_STATIC_ASSERT(sizeof(spite_host_api) == 56, "spite_host_api v1 layout");
SPITE_STATIC_ASSERT(sizeof(spite_op_signature) == 80, "spite_op_signature v1 layout");
SPITE_STATIC_ASSERT(sizeof(spite_matmul_args) == 64, "spite_matmul_args v1 layout");
#undef SPITE_STATIC_ASSERT
#endif

#ifdef __cplusplus
}
#endif

#endif /* SPITE_KERNEL_H */
