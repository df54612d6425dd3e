// The AVX-512 kernels of this library; defined in avx512.cpp, the only file built with
// -march=x86-64-v4 (the descriptor and the CPU check must run on any x86-64).
#pragma once

#include "spite_kernel.h"

namespace spite_llama3_v4 {

spite_status rms_norm(const void* args, void* workspace, void* stream);
spite_status swiglu(const void* args, void* workspace, void* stream);
spite_status matmul(const void* args, void* workspace, void* stream);

}  // namespace spite_llama3_v4
