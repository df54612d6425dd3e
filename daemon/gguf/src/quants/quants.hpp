// Scalar reference (de)quantizers, one pair per tensor type. Internal to spite::gguf: callers use
// the traits table in spite/gguf/types.hpp. n is the number of elements, always a multiple of the
// type's block size (the traits table checks that before calling).
#pragma once

#include <cstdint>

namespace spite::gguf::quants {

#define SPITE_DEQUANT(name) void dequantize_row_##name(const void* src, float* dst, std::int64_t n)
#define SPITE_QUANT(name) void quantize_row_##name(const float* src, void* dst, std::int64_t n)

// legacy.cpp: plain float and integer types and the 32-element block family
SPITE_DEQUANT(f32); SPITE_DEQUANT(f16); SPITE_DEQUANT(bf16); SPITE_DEQUANT(f64);
SPITE_DEQUANT(i8); SPITE_DEQUANT(i16); SPITE_DEQUANT(i32); SPITE_DEQUANT(i64);
SPITE_DEQUANT(q4_0); SPITE_DEQUANT(q4_1); SPITE_DEQUANT(q5_0); SPITE_DEQUANT(q5_1);
SPITE_DEQUANT(q8_0); SPITE_DEQUANT(q8_1); SPITE_DEQUANT(mxfp4);
SPITE_QUANT(f32); SPITE_QUANT(f16); SPITE_QUANT(bf16);
SPITE_QUANT(q4_0); SPITE_QUANT(q4_1); SPITE_QUANT(q5_0); SPITE_QUANT(q5_1);
SPITE_QUANT(q8_0); SPITE_QUANT(q8_1); SPITE_QUANT(mxfp4);

// kquants.cpp (dequantize) and kquants_quantize.cpp (quantize)
SPITE_DEQUANT(q2_K); SPITE_DEQUANT(q3_K); SPITE_DEQUANT(q4_K); SPITE_DEQUANT(q5_K);
SPITE_DEQUANT(q6_K); SPITE_DEQUANT(q8_K);
SPITE_QUANT(q2_K); SPITE_QUANT(q3_K); SPITE_QUANT(q4_K); SPITE_QUANT(q5_K);
SPITE_QUANT(q6_K); SPITE_QUANT(q8_K);

// iquants.cpp (with the codebooks of iq_tables.cpp) and ternary.cpp
SPITE_DEQUANT(iq2_xxs); SPITE_DEQUANT(iq2_xs); SPITE_DEQUANT(iq2_s);
SPITE_DEQUANT(iq3_xxs); SPITE_DEQUANT(iq3_s);
SPITE_DEQUANT(iq1_s); SPITE_DEQUANT(iq1_m);
SPITE_DEQUANT(iq4_nl); SPITE_DEQUANT(iq4_xs);
SPITE_QUANT(iq4_nl); SPITE_QUANT(iq4_xs);
SPITE_DEQUANT(tq1_0); SPITE_DEQUANT(tq2_0);

#undef SPITE_DEQUANT
#undef SPITE_QUANT

}  // namespace spite::gguf::quants
