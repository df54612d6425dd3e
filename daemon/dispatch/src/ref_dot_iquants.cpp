// Exact matmuls for the i-quant and ternary types with the scalar lane policy (the shape of the
// reference's kernels is described in iquant_dots.hpp).
#include "iquant_dots.hpp"

namespace spite::dispatch::cpu {
namespace {

using namespace iquant;

// The reference's lanes and accumulation, one element at a time.
struct scalar_lanes {
  // The 8 lanes of the AVX2 kernels: lane k = sum over sub-blocks ib of
  // scale(ib, k / 4) * sum_{j = 4k .. 4k+3} w[32 ib + j] * q[32 ib + j].
  static void lanes(const decoded& b, const std::int8_t* q, int* lane) {
    for (int k = 0; k < 8; ++k) lane[k] = 0;
    for (int ib = 0; ib < qk / 32; ++ib) {
      for (int k = 0; k < 8; ++k) {
        int s = 0;
        for (int j = 4 * k; j < 4 * k + 4; ++j) s += b.w[32 * ib + j] * q[32 * ib + j];
        lane[k] += b.scale16[2 * ib + k / 4] * s;
      }
    }
  }

  static void accumulate(float* acc, float d, const int* lane) {
    for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lane[k]), acc[k]);
  }

  // The ternary kernels' lanes: every 32-element run c puts its elements 4k..4k+3 into lane k
  // (unsigned digits times activations), then lane k subtracts bsums[2k] + bsums[2k+1], the sum of
  // activations 32k..32k+31.
  static void ternary(const std::uint8_t* t, const gguf::block_q8_K& y, int* lane) {
    for (int k = 0; k < 8; ++k) {
      int s = 0;
      for (int c = 0; c < 8; ++c) {
        for (int j = 4 * k; j < 4 * k + 4; ++j) s += t[32 * c + j] * y.qs[32 * c + j];
      }
      lane[k] = s - (y.bsums[2 * k] + y.bsums[2 * k + 1]);
    }
  }
};


}  // namespace

std::span<const exact_matmul> exact_matmuls_iquants() { return iquant::matmuls<scalar_lanes>; }

}  // namespace spite::dispatch::cpu
