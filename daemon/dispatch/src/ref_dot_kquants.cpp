// Exact matmuls for Q3_K, Q5_K and Q6_K (see ref_quant.hpp).
//
// On x86 the reference multiplies these types with ggml_vec_dot_*_q8_K, one output at a time
// (llamafile's tinyBLAS and the CPU_REPACK buffer type do not take them), against activations
// quantized per row by the scalar Q8_K quantizer (quantize_act_q8_K). The AVX2 branch of each
// kernel is the one compiled on AVX-512 machines too; they share one shape:
//
// * 32 consecutive elements are multiplied at a time: pairs of products become int16 lanes,
//   pairs of those (multiplied by the sub-block scale) int32 lanes, so int32 lane L collects
//   elements 4L..4L+3 of every 32-element group of a super-block. All of it is exact integer
//   arithmetic; only the split of the total over the 8 lanes matters.
// * Per super-block: d = d_x * d_w, acc[L] = fma(d, float(lane[L]), acc[L]); at the end the
//   AVX horizontal sum (reduce8).
//
// Per type:
// * Q3_K: quants in [-4, 3] (the missing high bit subtracts 4), 16 signed 6-bit scales - 32.
// * Q5_K: quants in [0, 31], 8 unsigned 6-bit scales (one per 32 elements). The mins go to a
//   separate scalar: summs = fma(-d_x * dmin_w, sum(min_j * (bsum[2j] + bsum[2j+1])), summs),
//   added after the lane reduction.
// * Q6_K (the bsums variant of the kernel): the lanes take the unsigned quants (0..63) times
//   the 16 signed scales, and the -32 offset is subtracted from them afterwards as
//   32 * (scale[2L] * bsum[2L] + scale[2L+1] * bsum[2L+1]) in lane L, i.e. lane L carries the
//   offset of elements 32L..32L+31, not of its own elements.
//
// Each weight row is unpacked once into integer quants and per-16-element scales, then dotted
// with every token's quantized activations.
#include "ref_kquants.hpp"

namespace spite::dispatch::cpu {
namespace {

using kquants::matmul_k;

constexpr exact_matmul k_table[] = {
    {gguf::tensor_type::q3_K, matmul_k<gguf::tensor_type::q3_K>},
    {gguf::tensor_type::q5_K, matmul_k<gguf::tensor_type::q5_K>},
    {gguf::tensor_type::q6_K, matmul_k<gguf::tensor_type::q6_K>},
};

}  // namespace

std::span<const exact_matmul> exact_matmuls_kquants() { return k_table; }

}  // namespace spite::dispatch::cpu
