// F16, F32 and BF16 weights in 16-row groups for processors with the AVX-512 kernels, for decode
// and batches, with the reference's arithmetic: each row's 16 lanes (element i into lane i % 16;
// BF16: pair l of every 32 values into lane l, its odd element's product first) summed in order
// and reduced as reduce16, as the file-layout kernels of simd_x86_float.cpp do.
//
// Why a layout: those kernels read 4 rows in step (two regions of two rows each), 4 streams per
// thread, and one thread read 58-75 % of a plain read of the same bytes from memory (Zen 4,
// `bench --matmul F32|F16:2048:5632 --cold`) although the arithmetic runs at 1.8-3x a core's
// share of the memory from the caches. A standalone loop over 512 MiB on the same core (huge
// pages, one thread): 4 or 8 rows in step 20-22 GB/s, the same multiply-adds over 16 rows
// interleaved as below 29-30 GB/s, a plain read 29.5. Per group of 16 rows (16 x row_bytes
// bytes, nothing added), chunk c of all 16 rows lies together:
//   group g, chunk c, row r   at (g x chunks + c) x 16 x chunk_bytes + r x chunk_bytes,
// a chunk being 16 elements (F16: 32 bytes, F32: 64) or 32 (BF16: 64 bytes). Decode reads a
// group as one stream with a register per row; batches take 4 x 4, 8 x 2 or 4 x 3 (rows x
// activation rows) tiles of a group, which stays in L2 while its tiles pass. Made only where the
// AVX-512 kernels run, the row count is a multiple of 16 and the reference takes the matrix
// through its GEMM order (float_gemm_path; BF16: rows of whole 32-value chunks); after
// set_avx512(false) such a matrix goes through the file-layout kernels again.
#include "simd_x86_avx512.hpp"
#define SPITE_FLOAT_X16 SPITE_AVX512
#include "simd_x86_float_x16.hpp"

#if defined(__x86_64__)
#include <cstring>

#include "simd_math.hpp"
#include "spite/core/half.hpp"

namespace spite::dispatch::cpu::x86 {
namespace {

// How a row's chunk turns into products against the activations prepared for it (`x`: the
// chunk's floats as prepare() laid them out).
struct f32_chunks {
  static constexpr std::size_t chunk_bytes = 64;
  static constexpr std::int64_t elements = 16, x_floats = 16;
  static constexpr bool loads_in_order = true;
  SPITE_AVX512 static __m512 add(const std::byte* w, const float* x, __m512 acc) {
    return _mm512_fmadd_ps(_mm512_load_ps(reinterpret_cast<const float*>(w)), _mm512_loadu_ps(x), acc);
  }
};

struct f16_chunks {
  static constexpr std::size_t chunk_bytes = 32;
  static constexpr std::int64_t elements = 16, x_floats = 16;
  static constexpr bool loads_in_order = false;
  SPITE_AVX512 static __m512 add(const std::byte* w, const float* x, __m512 acc) {
    const __m512 wv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(w)));
    return _mm512_fmadd_ps(wv, _mm512_loadu_ps(x), acc);
  }
};

// A dword holds a bf16 pair: the odd element is its top half as a float, the even one its bottom
// half shifted up. The activations come as [the 16 odd elements | the 16 even ones] per chunk.
struct bf16_chunks {
  static constexpr std::size_t chunk_bytes = 64;
  static constexpr std::int64_t elements = 32, x_floats = 32;
  static constexpr bool loads_in_order = false;
  SPITE_AVX512 static __m512 add(const std::byte* w, const float* x, __m512 acc) {
    const __m512i pairs = _mm512_load_si512(w);
    const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
    acc = _mm512_fmadd_ps(odd, _mm512_loadu_ps(x), acc);
    return _mm512_fmadd_ps(even, _mm512_loadu_ps(x + 16), acc);
  }
};

// A chunk of one row, as x16_pack_units copies it into its group's step (a unit per chunk).
template <std::size_t Bytes>
struct row_chunk {
  std::byte bytes[Bytes];
};

template <class E>
std::size_t pack16(weight& w) {
  if (w.in % E::elements != 0) return 0;
  using chunk = row_chunk<E::chunk_bytes>;
  return x16_pack_units<chunk, 1>(w, 16 * E::chunk_bytes, E::elements, [](std::byte* step, std::size_t, const chunk& c, std::size_t r) {
    std::memcpy(step + r * E::chunk_bytes, c.bytes, E::chunk_bytes);
  });
}

// Batches get rows `ldx` floats apart, a little more than a row: at a power-of-two length the
// same chunk of each activation row would fall into the same cache sets.
std::int64_t prepared_stride(const weight& w, std::int64_t n_tokens) { return n_tokens > 1 ? w.in + 16 : w.in; }

}  // namespace

std::size_t pack_f32_x16(weight& w) { return float_gemm_path(w) ? pack16<f32_chunks>(w) : 0; }
std::size_t pack_f16_x16(weight& w) { return float_gemm_path(w) ? pack16<f16_chunks>(w) : 0; }
std::size_t pack_bf16_x16(weight& w) { return pack16<bf16_chunks>(w); }

bool matmul_float_x16(const weight& w, const float* x, std::int64_t n_tokens, float* y, thread_pool& pool) {
  if (!has_avx512_kernels()) return false;
  const std::int64_t ldx = prepared_stride(w, n_tokens);
  aligned_vector<float> xs;
  switch (w.type) {
    case gguf::tensor_type::f32:
      if (n_tokens == 1) {  // the activations as they are
        matmul_groups<f32_chunks>(w, x, w.in, 1, y, pool);
        return true;
      }
      xs.resize(static_cast<std::size_t>(ldx * n_tokens));
      for (std::int64_t t = 0; t < n_tokens; ++t) std::memcpy(xs.data() + t * ldx, x + t * w.in, sizeof(float) * static_cast<std::size_t>(w.in));
      matmul_groups<f32_chunks>(w, xs.data(), ldx, n_tokens, y, pool);
      return true;
    case gguf::tensor_type::f16:
      // The reference rounds the activations to f16 for f16 weights.
      xs.resize(static_cast<std::size_t>(ldx * n_tokens));
      for (std::int64_t t = 0; t < n_tokens; ++t) fast_math()->round_f16(x + t * w.in, xs.data() + t * ldx, w.in);
      matmul_groups<f16_chunks>(w, xs.data(), ldx, n_tokens, y, pool);
      return true;
    case gguf::tensor_type::bf16:
      // Batches by VDPBF16PS where it gives the reference's bits (one instruction for the two
      // fmas below: TinyLlama BF16, prefill of 128 tokens on one thread, 53 -> 90 t/s; the file
      // layout's VDPBF16PS tiles ran 67-71); decode reads at memory's pace either way.
      if (n_tokens > 1 && matmul_bf16_x16_dot(w, x, n_tokens, y, pool)) return true;
      // Rounded to bf16, each 32 values as [the odd elements of pairs 0-15 | the even ones].
      xs.resize(static_cast<std::size_t>(ldx * n_tokens));
      for (std::int64_t t = 0; t < n_tokens; ++t) {
        for (std::int64_t i = 0; i < w.in; i += 32) {
          float* chunk = xs.data() + t * ldx + i;
          for (std::int64_t p = 0; p < 16; ++p) {
            chunk[p] = bf16_to_fp32(fp32_to_bf16(x[t * w.in + i + 2 * p + 1]));
            chunk[16 + p] = bf16_to_fp32(fp32_to_bf16(x[t * w.in + i + 2 * p]));
          }
        }
      }
      matmul_groups<bf16_chunks>(w, xs.data(), ldx, n_tokens, y, pool);
      return true;
    default:
      return false;
  }
}

}  // namespace spite::dispatch::cpu::x86

#endif
