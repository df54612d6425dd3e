// The SIMD matmuls of the built-in CPU kernels against the portable reference implementations
// they replace. The reference ones are what the golden logits tests hold to the reference
// engine; the fast ones must give the very same bits, on shapes that hit every edge (row counts
// that are and are not multiples of 8, batches below, at and past the GEMM split of 4, several
// super-blocks, outliers in the activations).
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cstring>
#include <random>
#include <vector>

#include "aligned_buffer.hpp"
#include "cpu_kernels.hpp"
#include "ref_quant.hpp"
#include "spite/core/thread_pool.hpp"
#include "spite/core/half.hpp"
#include "spite/dispatch/tensor.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/types.hpp"
#include "kernel_test_matrices.hpp"

namespace {

using spite::gguf::tensor_type;
namespace cpu = spite::dispatch::cpu;

using namespace spite_test;

// Whether this processor's kernels pack weights at all (x86 with AVX2); says why not otherwise.
bool packed_layouts_here() {
#if !defined(__x86_64__)
  WARN("the packed layouts are the x86 kernels'; the NEON ones read the stored blocks");
  return false;
#endif
  if (fast_for(tensor_type::q4_0) == nullptr) {
    WARN("no SIMD matmul on this processor; nothing is packed");
    return false;
  }
  return true;
}

void check_bit_identical(tensor_type type, std::int64_t block) {
  const cpu::matmul_fn fast = fast_for(type);
  if (fast == nullptr) {
    WARN("no SIMD matmul for this type on this processor; nothing to compare");
    return;
  }
  // Float types have no exact matmul of their own: the reference is the generic path.
  const cpu::matmul_fn reference =
      cpu::find_reference_matmul(type) != nullptr ? cpu::find_reference_matmul(type) : cpu::generic_matmul;
  REQUIRE(reference != nullptr);
  REQUIRE(cpu::find_exact_matmul(type) == fast);
  std::mt19937 rng(1234);
  // The AVX-512 variants (where this processor has them), the AVX-VNNI ones of the 8-row
  // layouts (where it has those) and the AVX2 ones.
  struct isa {
    bool avx512, avx_vnni;
    const char* name;
  };
  for (const isa mode : {isa{true, true, "AVX-512"}, isa{false, true, "AVX-VNNI"}, isa{false, false, "AVX2"}}) {
    const bool avx512 = mode.avx512;
    cpu::set_avx512(avx512);
    cpu::set_avx_vnni(mode.avx_vnni);
    INFO(mode.name << " variants allowed");
    for (const int threads : {1, 3}) {
      spite::thread_pool pool(threads);
      // 5 blocks of 32: past the 4-block spans of packed Q8_0, with blocks left over.
      const std::vector<std::int64_t> ins = block == 32 ? std::vector<std::int64_t>{block, 3 * block, 5 * block}
                                                        : std::vector<std::int64_t>{block, 3 * block};
      for (const std::int64_t in : ins) {
        // 48: the 16-row groups of the AVX-512 layouts; decode of 16-row Q4_0 and
        // IQ4_NL takes the first group beside the second and the third alone. Decode reads rows in
        // pairs from both halves of a matrix: 10 and 13 leave a pair and a row over, 24 and 40
        // a group of 8.
        for (const std::int64_t out : {8, 10, 13, 24, 40, 48}) {
          const quantized_matrix m = random_matrix(type, in, out, rng);
          // 299 and 300: past the largest block of activation rows the batched kernels take at a
          // time, with and without activation rows left over after the last 4-row tile.
          // 13 and 29: the batched paths of the packed layouts (from 12 rows) with rows left
          // over after their 4-row tiles; 10 and 11: two and three left over, which take one
          // pass of their own (16-row Q4_0 / IQ4_NL tiles).
          for (const std::int64_t n_tokens : {1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 29, 299, 300}) {
            if (n_tokens == 299 && out != 13) continue;
            if ((n_tokens == 10 || n_tokens == 11) && out != 48) continue;  // the 16-row layouts' shape
            if (n_tokens == 300 && out != 40 && out != 48) continue;
            const std::vector<float> x = random_activations(in, n_tokens, rng);
            std::vector<float> want(static_cast<std::size_t>(out * n_tokens)), got(want.size(), -1.0f);
            reference(m.w, x.data(), n_tokens, want.data(), pool);
            fast(m.w, x.data(), n_tokens, got.data(), pool);
            INFO("in " << in << ", out " << out << ", tokens " << n_tokens << ", threads " << threads);
            std::size_t differing = 0;
            for (std::size_t i = 0; i < want.size(); ++i) differing += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
            CHECK(differing == 0);
            // The load-time packed layout, where the type has one.
            spite::dispatch::weight packed = m.w;
            if (cpu::pack_weight(packed) > 0) {
              REQUIRE(packed.packed != nullptr);
              std::vector<float> got_packed(want.size(), -1.0f);
              fast(packed, x.data(), n_tokens, got_packed.data(), pool);
              std::size_t differing_packed = 0;
              for (std::size_t i = 0; i < want.size(); ++i) differing_packed += std::memcmp(&want[i], &got_packed[i], sizeof(float)) != 0;
              CHECK(differing_packed == 0);
              if (avx512) {
                // A layout made for the AVX-512 kernels still works once they stand aside.
                cpu::set_avx512(false);
                std::vector<float> got_avx2(want.size(), -1.0f);
                fast(packed, x.data(), n_tokens, got_avx2.data(), pool);
                cpu::set_avx512(true);
                std::size_t differing_avx2 = 0;
                for (std::size_t i = 0; i < want.size(); ++i) differing_avx2 += std::memcmp(&want[i], &got_avx2[i], sizeof(float)) != 0;
                CHECK(differing_avx2 == 0);
              }
            }
          }
        }
      }
    }
  }
  cpu::set_avx512(true);
  cpu::set_avx_vnni(true);
}

}  // namespace

TEST_CASE("the SIMD Q8_0 matmul gives the reference's bits") { check_bit_identical(tensor_type::q8_0, 32); }
TEST_CASE("the SIMD Q4_0 matmul gives the reference's bits") { check_bit_identical(tensor_type::q4_0, 32); }
TEST_CASE("the SIMD Q4_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q4_K, 256); }
TEST_CASE("the SIMD Q6_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q6_K, 256); }
namespace {

// A batch of n_tokens rows of `in` elements against 16-row groups of `type`: the reference's bits
// across the batch path's blocks of activation rows and the tiles left over at each block's end.
void check_long_batch(tensor_type type, std::int64_t in, std::int64_t n_tokens) {
  const cpu::matmul_fn fast = fast_for(type);
  if (fast == nullptr || !packed_layouts_here()) return;
  std::mt19937 rng(77);
  spite::thread_pool pool(3);
  const std::int64_t out = 32;
  quantized_matrix m = random_matrix(type, in, out, rng);
  const std::vector<float> x = random_activations(in, n_tokens, rng);
  std::vector<float> want(static_cast<std::size_t>(out * n_tokens)), got(want.size(), -1.0f);
  cpu::find_reference_matmul(type)(m.w, x.data(), n_tokens, want.data(), pool);
  if (cpu::pack_weight(m.w) == 0 || m.w.packed_rows != 16) {
    WARN("no 16-row " << spite::gguf::type_name(type) << " layout here (it serves the AVX-512 VNNI kernels)");
    return;
  }
  fast(m.w, x.data(), n_tokens, got.data(), pool);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differing += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
  CHECK(differing == 0);
}

}  // namespace

TEST_CASE("a long batch on 16-row Q6_K groups gives the reference's bits across its blocks of activation rows") {
  // 1100 rows: more than one block of activation rows at any row length the batch path takes.
  check_long_batch(tensor_type::q6_K, 256, 1100);
}
TEST_CASE("a long batch on 16-row Q8_0 groups gives the reference's bits across its blocks of activation rows") {
  // Rows of 5632 elements come about 1 MiB at a time (81 rows with their corrections): 200 rows
  // are blocks of 81, 81 and 38, the last ending in a tile of 2.
  check_long_batch(tensor_type::q8_0, 5632, 200);
}
TEST_CASE("the SIMD Q5_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q5_K, 256); }
TEST_CASE("the SIMD Q3_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q3_K, 256); }
TEST_CASE("the SIMD Q2_K matmul gives the reference's bits") { check_bit_identical(tensor_type::q2_K, 256); }
TEST_CASE("the SIMD Q5_0 matmul gives the reference's bits") { check_bit_identical(tensor_type::q5_0, 32); }
TEST_CASE("the SIMD Q4_1 matmul gives the reference's bits") { check_bit_identical(tensor_type::q4_1, 32); }
TEST_CASE("the SIMD Q5_1 matmul gives the reference's bits") { check_bit_identical(tensor_type::q5_1, 32); }
TEST_CASE("the SIMD IQ4_XS matmul gives the reference's bits") { check_bit_identical(tensor_type::iq4_xs, 256); }
TEST_CASE("the SIMD IQ4_XS matmul gives the reference's bits without AVX-512 VBMI too") {
  // The 16-row decode looks its magnitudes up with VPERMB where the processor has VBMI, else
  // with VPSHUFB (AVX-512 processors before Ice Lake).
  if (!cpu::has_avx512_vbmi_kernels()) {
    WARN("no AVX-512 VBMI here: the VPSHUFB form is the one the test above checks");
    return;
  }
  cpu::set_avx512_vbmi(false);
  CHECK_FALSE(cpu::has_avx512_vbmi_kernels());
  check_bit_identical(tensor_type::iq4_xs, 256);
  cpu::set_avx512_vbmi(true);
}
TEST_CASE("the SIMD IQ4_NL matmul gives the reference's bits") { check_bit_identical(tensor_type::iq4_nl, 32); }
TEST_CASE("the SIMD MXFP4 matmul gives the reference's bits") { check_bit_identical(tensor_type::mxfp4, 32); }
TEST_CASE("the MXFP4 reference matmul is the dot product of the dequantized blocks with the 8-bit activations") {
  // The table, the halved E8M0 scale and the activations' Q8_0 blocks against the file's
  // dequantizer in double precision: only the float rounding of the reference's order differs.
  std::mt19937 rng(11);
  const std::int64_t in = 5 * 32, out = 13, n_tokens = 3;
  const quantized_matrix m = random_matrix(tensor_type::mxfp4, in, out, rng);
  const std::vector<float> x = random_activations(in, n_tokens, rng);
  std::vector<float> got(static_cast<std::size_t>(out * n_tokens)), w(static_cast<std::size_t>(in)), xq(x.size());
  spite::thread_pool pool(1);
  cpu::find_reference_matmul(tensor_type::mxfp4)(m.w, x.data(), n_tokens, got.data(), pool);
  cpu::convert_activations(tensor_type::mxfp4, x.data(), in, n_tokens, xq.data());
  for (std::int64_t o = 0; o < out; ++o) {
    REQUIRE(spite::gguf::dequantize(tensor_type::mxfp4, m.w.row(o), w.data(), in));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      double want = 0.0, magnitude = 0.0;
      for (std::int64_t i = 0; i < in; ++i) {
        const double p = static_cast<double>(w[static_cast<std::size_t>(i)]) * xq[static_cast<std::size_t>(t * in + i)];
        want += p;
        magnitude += std::abs(p);
      }
      INFO("row " << o << ", token " << t);
      CHECK(std::abs(got[static_cast<std::size_t>(t * out + o)] - want) <= 1e-6 * magnitude + 1e-30);
    }
  }
}
TEST_CASE("the SIMD grid i-quant and ternary matmuls give the reference's bits") {
  for (const tensor_type type : {tensor_type::iq1_s, tensor_type::iq1_m, tensor_type::iq2_xxs, tensor_type::iq2_xs, tensor_type::iq2_s,
                                 tensor_type::iq3_xxs, tensor_type::iq3_s, tensor_type::tq1_0, tensor_type::tq2_0}) {
    INFO("type " << spite::gguf::traits(type).name);
    check_bit_identical(type, 256);
  }
}
TEST_CASE("the grid i-quants' AVX-512 VBMI dots run where the processor has the instructions") {
#if defined(__x86_64__)
  const bool vbmi = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl");
  if (!vbmi) WARN("no AVX-512 VBMI here: the grid i-quants take their AVX2 dots, and only those were compared");
  cpu::set_avx512(true);  // allowed, whatever SPITE_CPU_AVX512 said when the process started
  CHECK(cpu::has_avx512_grid_kernels() == vbmi);
  cpu::set_avx512(false);
  CHECK_FALSE(cpu::has_avx512_grid_kernels());
  cpu::set_avx512(true);
#else
  CHECK_FALSE(cpu::has_avx512_grid_kernels());
#endif
}
TEST_CASE("the SIMD F16 matmul gives the reference's bits") {
  check_bit_identical(tensor_type::f16, 16);  // GEMM path (rows a multiple of 4) and vector path
  check_bit_identical(tensor_type::f16, 80);  // 64-element blocks and a tail
  check_bit_identical(tensor_type::f16, 400);  // 1200 elements: the batch GEMM's 512-element chunks and a short last one
}
TEST_CASE("the SIMD F32 matmul gives the reference's bits") {
  check_bit_identical(tensor_type::f32, 16);  // GEMM path (rows a multiple of 4) and vector path
  check_bit_identical(tensor_type::f32, 80);  // 64-element blocks and a tail
  check_bit_identical(tensor_type::f32, 400);  // 1200 elements: the batch GEMM's 512-element chunks and a short last one
}
TEST_CASE("the SIMD BF16 matmul gives the reference's bits") {
  check_bit_identical(tensor_type::bf16, 32);  // the 32-value pair path
  check_bit_identical(tensor_type::bf16, 48);  // a length it leaves to the generic path
  check_bit_identical(tensor_type::bf16, 224);  // 672 values: the batch GEMM's 512-value chunks and a short last one
}

TEST_CASE("packed-weight buffers come zeroed on a cache line, from 2 MiB up on a 2 MiB boundary") {
  constexpr std::size_t huge = std::size_t{2} << 20;
  // Each size twice: the second buffer may reuse the memory of the first, left dirty.
  for (const std::size_t n : {std::size_t{1000}, std::size_t{1000}, huge, 3 * huge + 12345, 3 * huge + 12345}) {
    INFO("bytes " << n);
    const auto buffer = cpu::make_aligned_bytes(n);
    const auto address = reinterpret_cast<std::uintptr_t>(buffer.get());
    CHECK(address % cpu::cache_line == 0);
    if (n >= huge) CHECK(address % huge == 0);
    CHECK(std::all_of(buffer.get(), buffer.get() + n, [](std::byte b) { return b == std::byte{0}; }));
    std::memset(buffer.get(), 0xA5, n);  // every byte writable
    CHECK(buffer[n - 1] == std::byte{0xA5});
  }
}

TEST_CASE("Q4_0 matrices with a multiple of 8 rows are packed, others are left alone") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(3);
  quantized_matrix eight = random_matrix(tensor_type::q4_0, 64, 16, rng);
  CHECK(cpu::pack_weight(eight.w) == eight.bytes.size());
  CHECK(eight.w.packed != nullptr);
  CHECK(cpu::pack_weight(eight.w) == 0);  // already packed
  quantized_matrix odd = random_matrix(tensor_type::q4_0, 64, 13, rng);
  CHECK(cpu::pack_weight(odd.w) == 0);
  CHECK(odd.w.packed == nullptr);
  // 16 rows: the 16-row groups where the AVX-512 kernels run, else two 8-row groups.
  CHECK(eight.w.packed_rows == (cpu::has_avx512_kernels() ? 16 : 8));
  quantized_matrix twenty_four = random_matrix(tensor_type::q4_0, 64, 24, rng);
  CHECK(cpu::pack_weight(twenty_four.w) == twenty_four.bytes.size());
  CHECK(twenty_four.w.packed_rows == 8);
  quantized_matrix iq3 = random_matrix(tensor_type::iq3_s, 256, 16, rng);  // a type without a packed layout
  CHECK(cpu::pack_weight(iq3.w) == 0);
}

TEST_CASE("16-row Q8_0, Q4_0, IQ4_NL, Q2_K to Q6_K, IQ4_XS, Q5_0, Q5_1 and Q4_1, and 4-row Q6_K layouts are made only where the AVX-512 kernels run; Q8_0's, Q3_K's, Q6_K's and IQ4_XS's 8-row groups everywhere else") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(4);
  for (const bool avx512 : {true, false}) {
    cpu::set_avx512(avx512);
    const bool vnni = avx512 && cpu::has_avx512_kernels();
    INFO("AVX-512 kernels " << (vnni ? "run" : "stand aside"));
    quantized_matrix q8 = random_matrix(tensor_type::q8_0, 64, 16, rng);
    CHECK(cpu::pack_weight(q8.w) > 0);
    CHECK(q8.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix q8_24 = random_matrix(tensor_type::q8_0, 64, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(q8_24.w) > 0);
    CHECK(q8_24.w.packed_rows == 8);
    quantized_matrix q8_12 = random_matrix(tensor_type::q8_0, 64, 12, rng);  // not a multiple of 8
    CHECK(cpu::pack_weight(q8_12.w) == 0);
    quantized_matrix k16 = random_matrix(tensor_type::q4_K, 256, 32, rng);
    CHECK(cpu::pack_weight(k16.w) > 0);
    CHECK(k16.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix k24 = random_matrix(tensor_type::q4_K, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(k24.w) > 0);
    CHECK(k24.w.packed_rows == 8);
    quantized_matrix q5 = random_matrix(tensor_type::q5_K, 256, 32, rng);
    CHECK(cpu::pack_weight(q5.w) > 0);
    CHECK(q5.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix q5_24 = random_matrix(tensor_type::q5_K, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(q5_24.w) > 0);
    CHECK(q5_24.w.packed_rows == 8);
    quantized_matrix q2 = random_matrix(tensor_type::q2_K, 256, 32, rng);
    CHECK(cpu::pack_weight(q2.w) > 0);
    CHECK(q2.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix q2_24 = random_matrix(tensor_type::q2_K, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(q2_24.w) > 0);
    CHECK(q2_24.w.packed_rows == 8);
    for (const tensor_type nibbles : {tensor_type::q4_0, tensor_type::iq4_nl}) {
      quantized_matrix n16 = random_matrix(nibbles, 96, 32, rng);  // 3 blocks: the second pair half empty
      CHECK(cpu::pack_weight(n16.w) > 0);
      CHECK(n16.w.packed_rows == (vnni ? 16 : 8));
      // 16 rows: a group is 2 pairs of blocks of 576 bytes; row 17's d of block 2 is second in
      // the second group's second pair.
      if (vnni) CHECK(std::memcmp(n16.w.packed + 3 * 576 + 2, n16.w.row(17) + 2 * 18, 2) == 0);
    }
    for (const tensor_type legacy : {tensor_type::q5_0, tensor_type::q5_1, tensor_type::q4_1}) {
      quantized_matrix l16 = random_matrix(legacy, 64, 32, rng);
      CHECK(cpu::pack_weight(l16.w) > 0);
      CHECK(l16.w.packed_rows == (vnni ? 16 : 8));
      quantized_matrix l24 = random_matrix(legacy, 64, 24, rng);  // not a multiple of 16
      CHECK(cpu::pack_weight(l24.w) > 0);
      CHECK(l24.w.packed_rows == 8);
      // 16 rows: row 17's d second in the second group's first block (a group: 16 rows' bytes).
      if (vnni) CHECK(std::memcmp(l16.w.packed + 16 * l16.w.row_bytes + 2, l16.w.row(17), 2) == 0);
    }
    quantized_matrix xs = random_matrix(tensor_type::iq4_xs, 256, 32, rng);
    CHECK(cpu::pack_weight(xs.w) > 0);
    CHECK(xs.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix xs_24 = random_matrix(tensor_type::iq4_xs, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(xs_24.w) == 3 * 1104);
    CHECK(xs_24.w.packed_rows == 8);
    // 8 rows: a group's super-block is 1104 bytes, row 9's d second in the second; its scale of
    // sub-block 0 (the file's low nibble of scales_l[0] and bits 0-1 of scales_h, minus 32)
    // second of the scales; its index bytes 4..7 of sub-block 0 second in the second vector.
    const auto& row9 = *reinterpret_cast<const spite::gguf::block_iq4_xs*>(xs_24.w.row(9));
    CHECK(std::memcmp(xs_24.w.packed + 1104 + 2, &row9.d, 2) == 0);
    std::uint16_t scales_h;
    std::memcpy(&scales_h, &row9.scales_h, 2);
    CHECK(static_cast<int>(static_cast<std::int8_t>(xs_24.w.packed[1104 + 16 + 1])) == ((row9.scales_l[0] & 0xF) | ((scales_h & 3) << 4)) - 32);
    CHECK(std::memcmp(xs_24.w.packed + 1104 + 80 + 32 + 4, row9.qs + 4, 4) == 0);
    quantized_matrix q3 = random_matrix(tensor_type::q3_K, 256, 32, rng);
    CHECK(cpu::pack_weight(q3.w) > 0);
    CHECK(q3.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix q3_24 = random_matrix(tensor_type::q3_K, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(q3_24.w) == 3 * 912);
    CHECK(q3_24.w.packed_rows == 8);
    // 8 rows: a group's super-block is 912 bytes, row 9's d second in the second.
    CHECK(std::memcmp(q3_24.w.packed + 912 + 2, q3_24.w.row(9) + offsetof(spite::gguf::block_q3_K, d), 2) == 0);
    quantized_matrix q6 = random_matrix(tensor_type::q6_K, 256, 32, rng);
    CHECK(cpu::pack_weight(q6.w) > 0);
    CHECK(q6.w.packed_rows == (vnni ? 16 : 8));
    quantized_matrix q6_24 = random_matrix(tensor_type::q6_K, 256, 24, rng);  // not a multiple of 16
    CHECK(cpu::pack_weight(q6_24.w) > 0);
    CHECK(q6_24.w.packed_rows == (vnni ? 4 : 8));
    quantized_matrix q6_12 = random_matrix(tensor_type::q6_K, 256, 12, rng);  // not a multiple of 8: the file's blocks
    CHECK(cpu::pack_weight(q6_12.w) == 0);
    if (!vnni) {
      // 8 rows: a group's super-block is the file's 8 x 210 bytes, row 9's d second in the
      // second; its sc[3] at 16 + 16 + 2 + 1; the low nibbles of its elements 4..7 (chunk 1) in
      // the second low vector of group 0, bytes 4..7.
      const auto& q6_row9 = *reinterpret_cast<const spite::gguf::block_q6_K*>(q6_24.w.row(9));
      CHECK(std::memcmp(q6_24.w.packed + 1680 + 2, &q6_row9.d, 2) == 0);
      CHECK(static_cast<std::int8_t>(q6_24.w.packed[1680 + 16 + 16 + 2 + 1]) == q6_row9.scales[3]);
      for (int i = 0; i < 4; ++i) {
        CHECK((static_cast<int>(q6_24.w.packed[1680 + 144 + 32 + 4 + i]) & 0xF) == (q6_row9.ql[4 + i] & 0xF));
      }
    }
    if (vnni) {
      // 16 rows: a group's super-block is 3392 bytes, row 17's scale d second in the second.
      CHECK(std::memcmp(q6.w.packed + 3392 + 2, q6.w.row(17) + offsetof(spite::gguf::block_q6_K, d), 2) == 0);
      // Q2_K: a group's super-block is 1344 bytes, row 17's d second in the second.
      CHECK(std::memcmp(q2.w.packed + 1344 + 2, q2.w.row(17) + offsetof(spite::gguf::block_q2_K, d), 2) == 0);
      // IQ4_XS: a group's super-block is 2240 bytes, row 17's d second in the second.
      CHECK(std::memcmp(xs.w.packed + 2240 + 2, xs.w.row(17) + offsetof(spite::gguf::block_iq4_xs, d), 2) == 0);
      // Q3_K: a group's super-block is 1856 bytes, row 17's d second in the second.
      CHECK(std::memcmp(q3.w.packed + 1856 + 2, q3.w.row(17) + offsetof(spite::gguf::block_q3_K, d), 2) == 0);
      // 4 rows: row 5's block 0 sits second in the second group's first 4 blocks.
      CHECK(std::memcmp(q6_24.w.packed + 4 * q6_24.w.row_bytes + sizeof(spite::gguf::block_q6_K), q6_24.w.row(5),
                        sizeof(spite::gguf::block_q6_K)) == 0);
    }
  }
  cpu::set_avx512(true);
}

TEST_CASE("F32, F16 and BF16 matrices take 16-row groups of whole chunks only where the AVX-512 kernels run and the reference's order allows") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(6);
  for (const bool avx512 : {true, false}) {
    cpu::set_avx512(avx512);
    const bool vnni = avx512 && cpu::has_avx512_kernels();
    INFO("AVX-512 kernels " << (vnni ? "run" : "stand aside"));
    for (const tensor_type type : {tensor_type::f32, tensor_type::f16}) {
      // 3 chunks of 16 elements per row, 2 groups: row 17's chunk 2 is second in the second
      // group's third chunk.
      quantized_matrix m = random_matrix(type, 48, 32, rng);
      const std::size_t chunk = type == tensor_type::f32 ? 64 : 32;
      CHECK(cpu::pack_weight(m.w) == (vnni ? m.bytes.size() : 0));
      if (vnni) {
        CHECK(m.w.packed_rows == 16);
        CHECK(std::memcmp(m.w.packed + (3 + 2) * 16 * chunk + chunk, m.w.row(17) + 2 * chunk, chunk) == 0);
      }
      quantized_matrix rows24 = random_matrix(type, 48, 24, rng);  // not a multiple of 16
      CHECK(cpu::pack_weight(rows24.w) == 0);
      quantized_matrix expert = random_matrix(type, 48, 32, rng);
      expert.w.no_gemm = true;  // the reference's vector dot product: another order
      CHECK(cpu::pack_weight(expert.w) == 0);
    }
    // BF16: chunks of 32 values (64 bytes); rows of 48 values are left to the generic path.
    quantized_matrix b = random_matrix(tensor_type::bf16, 64, 32, rng);
    CHECK(cpu::pack_weight(b.w) == (vnni ? b.bytes.size() : 0));
    if (vnni) CHECK(std::memcmp(b.w.packed + (2 + 1) * 16 * 64 + 64, b.w.row(17) + 64, 64) == 0);
    quantized_matrix b48 = random_matrix(tensor_type::bf16, 48, 32, rng);
    CHECK(cpu::pack_weight(b48.w) == 0);
  }
  cpu::set_avx512(true);
}

// Bitwise equality of two results.
std::size_t differing_floats(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = a.size() == b.size() ? 0 : a.size() + b.size();
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

TEST_CASE("matrices placed together run as one matrix and give each part's own product") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(6);
  const std::pair<tensor_type, std::int64_t> types[] = {
      {tensor_type::q4_0, 32}, {tensor_type::q8_0, 32}, {tensor_type::iq4_nl, 32}, {tensor_type::q4_1, 32},
      {tensor_type::q5_0, 32}, {tensor_type::q5_1, 32}, {tensor_type::q2_K, 256},  {tensor_type::q4_K, 256},
      {tensor_type::q3_K, 256}, {tensor_type::q5_K, 256}, {tensor_type::q6_K, 256}, {tensor_type::iq4_xs, 256},
      {tensor_type::f32, 16},   {tensor_type::f16, 16},   {tensor_type::bf16, 32}};
  for (const bool avx512 : {true, false}) {
    cpu::set_avx512(avx512);
    for (const auto& [type, block] : types) {
      INFO(spite::gguf::type_name(type) << ", AVX-512 variants " << (avx512 ? "allowed" : "off"));
      // Row counts of q, k and v projections in miniature: whole 16-row groups, unequal parts.
      const std::int64_t in = 3 * block, outs[] = {48, 16, 32};
      std::vector<quantized_matrix> parts;
      for (const std::int64_t out : outs) parts.push_back(random_matrix(type, in, out, rng));
      std::vector<spite::dispatch::weight> packed;
      for (const auto& m : parts) {
        packed.push_back(m.w);
        cpu::pack_weight(packed.back());
      }
      if (packed[0].packed == nullptr) {
        WARN("no packed layout for this type here");
        continue;
      }
      std::vector<spite::dispatch::weight*> places;
      for (auto& w : packed) places.push_back(&w);
      REQUIRE(spite::dispatch::place_packed_together(places) == 2);
      CHECK(spite::dispatch::packed_together(packed[0], packed[1]));
      CHECK(spite::dispatch::packed_together(packed[1], packed[2]));
      CHECK_FALSE(spite::dispatch::packed_together(packed[1], packed[0]));
      const std::vector<const spite::dispatch::weight*> run{&packed[0], &packed[1], &packed[2]};
      for (const int threads : {1, 3}) {
        spite::thread_pool pool(threads);
        for (const std::int64_t n_tokens : {1, 3, 13, 29}) {
          INFO("tokens " << n_tokens << ", threads " << threads);
          const std::vector<float> x = random_activations(in, n_tokens, rng);
          std::vector<std::vector<float>> want, got, alone;
          std::vector<float*> ys;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            const auto size = static_cast<std::size_t>(outs[i] * n_tokens);
            want.emplace_back(size);
            got.emplace_back(size, -1.0f);
            alone.emplace_back(size, -1.0f);
            cpu::matmul(parts[i].w, x.data(), n_tokens, want.back().data(), pool);  // the file's layout
          }
          for (auto& g : got) ys.push_back(g.data());
          cpu::matmul_parts(run, x.data(), n_tokens, ys.data(), pool);
          for (std::size_t i = 0; i < parts.size(); ++i) {
            INFO("part " << i);
            CHECK(differing_floats(want[i], got[i]) == 0);
            // Each part placed together still works alone.
            cpu::matmul(packed[i], x.data(), n_tokens, alone[i].data(), pool);
            CHECK(differing_floats(want[i], alone[i]) == 0);
          }
        }
      }
    }
  }
  cpu::set_avx512(true);
}

TEST_CASE("buffers carved inside packing_together start on a cache line, after a buffer of any size") {
  spite::dispatch::set_cpu_repack(true);
  const spite::dispatch::packing_together together(std::size_t{4} << 20);
  const auto a = cpu::make_aligned_bytes(100), b = cpu::make_aligned_bytes(1000), c = cpu::make_aligned_bytes(64);
  for (const auto* p : {a.get(), b.get(), c.get()}) CHECK(reinterpret_cast<std::uintptr_t>(p) % cpu::cache_line == 0);
  CHECK(b.get() == a.get() + 128);   // carved from the one region: the next line after 100 bytes
  CHECK(c.get() == b.get() + 1024);  // and after 1000
  for (std::size_t i = 0; i < 1000; ++i) REQUIRE(b[i] == std::byte{0});
  // Too large for what is left: a buffer of its own.
  const auto big = cpu::make_aligned_bytes(std::size_t{5} << 20);
  CHECK((big.get() < a.get() || big.get() >= a.get() + (std::size_t{4} << 20)));
}

TEST_CASE("matrices packed inside packing_together lie together from the start, and placing them copies nothing") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(9);
  // A layer's q, k and v in Q4_0, 2048 wide: over the 2 MiB a carving region needs.
  const std::int64_t in = 2048, outs[] = {2048, 256, 256};
  std::vector<quantized_matrix> parts;
  for (const std::int64_t out : outs) parts.push_back(random_matrix(tensor_type::q4_0, in, out, rng));
  std::size_t bound = 0;
  for (const auto& m : parts) bound += m.bytes.size() + m.bytes.size() / 16 + (64u << 10);
  bound += std::size_t{4} << 20;  // so that the last 2 MiB page touched lies inside the region
  std::vector<spite::dispatch::weight> packed;
  {
    const spite::dispatch::packing_together together(bound);
    for (const auto& m : parts) {
      packed.push_back(m.w);
      cpu::pack_weight(packed.back());
    }
  }
  REQUIRE(packed[0].packed != nullptr);
  CHECK(spite::dispatch::packed_together(packed[0], packed[1]));
  CHECK(spite::dispatch::packed_together(packed[1], packed[2]));
  // The region's pages past the last part are given back: where transparent huge pages back the
  // region, the last 2 MiB page touched would otherwise be resident in full.
  {
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto used_end = reinterpret_cast<std::uintptr_t>(packed[2].packed + packed[2].packed_size);
    const auto from = (used_end + page - 1) / page * page, to = reinterpret_cast<std::uintptr_t>(packed[0].packed) + bound / page * page;
    REQUIRE(to > from);
    std::vector<unsigned char> resident((to - from) / page);
    REQUIRE(::mincore(reinterpret_cast<void*>(from), to - from, resident.data()) == 0);
    CHECK(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) != 0; }) == 0);
  }
  const std::byte* at[] = {packed[0].packed, packed[1].packed, packed[2].packed};
  std::vector<spite::dispatch::weight*> places;
  for (auto& w : packed) places.push_back(&w);
  REQUIRE(spite::dispatch::place_packed_together(places) == 2);
  for (std::size_t i = 0; i < packed.size(); ++i) CHECK(packed[i].packed == at[i]);
  // Once the scope has ended, a matrix packed gets a buffer of its own.
  spite::dispatch::weight later = parts[1].w;
  cpu::pack_weight(later);
  CHECK_FALSE(spite::dispatch::packed_together(packed[2], later));
  spite::thread_pool pool(2);
  const std::vector<const spite::dispatch::weight*> run{&packed[0], &packed[1], &packed[2]};
  // 103 tokens: the run's output (2560 x 103 floats, over 1 MiB) goes to the parts on every thread.
  for (const std::int64_t n_tokens : {1, 5, 103}) {
    INFO("tokens " << n_tokens);
    const std::vector<float> x = random_activations(in, n_tokens, rng);
    std::vector<std::vector<float>> want, got;
    std::vector<float*> ys;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      want.emplace_back(static_cast<std::size_t>(outs[i] * n_tokens));
      got.emplace_back(want.back().size(), -1.0f);
      cpu::matmul(parts[i].w, x.data(), n_tokens, want.back().data(), pool);  // the file's layout
    }
    for (auto& g : got) ys.push_back(g.data());
    cpu::matmul_parts(run, x.data(), n_tokens, ys.data(), pool);
    for (std::size_t i = 0; i < parts.size(); ++i) CHECK(differing_floats(want[i], got[i]) == 0);
    // The parts' outputs one after the other in one buffer, as the layers allocate them: one
    // token's row is the run's (written in place), more tokens' rows are not (moved to the parts).
    std::vector<float> joined(static_cast<std::size_t>(2560 * n_tokens), -1.0f);
    float* next = joined.data();
    for (std::size_t i = 0; i < parts.size(); ++i) {
      ys[i] = next;
      next += outs[i] * n_tokens;
    }
    cpu::matmul_parts(run, x.data(), n_tokens, ys.data(), pool);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      INFO("part " << i << " in the joined buffer");
      CHECK(differing_floats(want[i], std::vector<float>(ys[i], ys[i] + outs[i] * n_tokens)) == 0);
    }
  }
}

TEST_CASE("16-row Q4_K parts placed together run one by one from the file's layout once the AVX-512 kernels stand aside") {
  if (!packed_layouts_here() || !cpu::has_avx512_kernels()) return;
  std::mt19937 rng(8);
  quantized_matrix q = random_matrix(tensor_type::q4_K, 512, 32, rng), k = random_matrix(tensor_type::q4_K, 512, 16, rng);
  spite::dispatch::weight pq = q.w, pk = k.w;
  cpu::pack_weight(pq);
  cpu::pack_weight(pk);
  REQUIRE(pq.packed_rows == 16);
  std::vector<spite::dispatch::weight*> places{&pq, &pk};
  REQUIRE(spite::dispatch::place_packed_together(places) == 1);
  cpu::set_avx512(false);
  spite::thread_pool pool(2);
  const std::vector<float> x = random_activations(512, 3, rng);
  std::vector<float> want_q(32 * 3), want_k(16 * 3), got_q(want_q.size(), -1.0f), got_k(want_k.size(), -1.0f);
  cpu::matmul(q.w, x.data(), 3, want_q.data(), pool);
  cpu::matmul(k.w, x.data(), 3, want_k.data(), pool);
  const std::vector<const spite::dispatch::weight*> run{&pq, &pk};
  float* ys[] = {got_q.data(), got_k.data()};
  cpu::matmul_parts(run, x.data(), 3, ys, pool);
  cpu::set_avx512(true);
  CHECK(differing_floats(want_q, got_q) == 0);
  CHECK(differing_floats(want_k, got_k) == 0);
}

TEST_CASE("only parts with the same packed layout are placed together; the others run alone") {
  if (!packed_layouts_here()) return;
  std::mt19937 rng(7);
  quantized_matrix q = random_matrix(tensor_type::q4_K, 256, 32, rng), k = random_matrix(tensor_type::q4_K, 256, 16, rng),
                   v = random_matrix(tensor_type::q5_K, 256, 16, rng), odd = random_matrix(tensor_type::q4_K, 256, 13, rng);
  spite::dispatch::weight pq = q.w, pk = k.w, pv = v.w, po = odd.w;
  for (auto* w : {&pq, &pk, &pv, &po}) cpu::pack_weight(*w);
  std::vector<spite::dispatch::weight*> places{&pq, &pk, &pv, &po};
  CHECK(spite::dispatch::place_packed_together(places) == 1);  // q and k; v is another type, odd unpacked
  CHECK(spite::dispatch::packed_together(pq, pk));
  CHECK_FALSE(spite::dispatch::packed_together(pk, pv));
  spite::thread_pool pool(2);
  const std::vector<float> x = random_activations(256, 5, rng);
  const std::vector<const spite::dispatch::weight*> run{&pq, &pk, &pv, &po};
  std::vector<std::vector<float>> want, got;
  std::vector<float*> ys;
  for (const auto* m : {&q, &k, &v, &odd}) {
    want.emplace_back(static_cast<std::size_t>(m->w.out * 5));
    got.emplace_back(want.back().size(), -1.0f);
    cpu::matmul(m->w, x.data(), 5, want.back().data(), pool);
  }
  for (auto& g : got) ys.push_back(g.data());
  cpu::matmul_parts(run, x.data(), 5, ys.data(), pool);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(differing_floats(want[i], got[i]) == 0);
}

TEST_CASE("matrices without a packed layout move into huge pages once from 2 MiB up with their bytes") {
  std::mt19937 rng(5);
  // IQ3_S has no packed layout on any processor.
  quantized_matrix small = random_matrix(tensor_type::iq3_s, 1024, 480, rng);  // 206 KiB
  CHECK(spite::dispatch::pack_for_cpu(small.w, false) == 0);
  CHECK(small.w.data == small.bytes.data());
  quantized_matrix big = random_matrix(tensor_type::iq3_s, 4096, 1280, rng);  // 2.1 MiB
  const std::size_t moved = spite::dispatch::pack_for_cpu(big.w, false);
  if (moved == 0) {
    WARN("transparent huge pages are off on this system: nothing moves");
    CHECK(big.w.data == big.bytes.data());
    return;
  }
  CHECK(moved == big.bytes.size());
  CHECK(big.w.packed == nullptr);  // the file's layout, at a new address
  CHECK(big.w.data != big.bytes.data());
  CHECK(reinterpret_cast<std::uintptr_t>(big.w.data) % (std::size_t{2} << 20) == 0);
  CHECK(std::memcmp(big.w.data, big.bytes.data(), big.bytes.size()) == 0);
  const std::byte* first = big.w.data;
  CHECK(spite::dispatch::pack_for_cpu(big.w, false) == 0);
  CHECK(big.w.data == first);
}

TEST_CASE("an x86-64 processor with AVX2 or an ARM one with SDOT gets the SIMD matmuls") {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    CHECK(cpu::fast_matmuls().size() >= 4);
  } else {
    CHECK(cpu::fast_matmuls().empty());
  }
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
  // Every weight type with a SIMD kernel on x86 has a NEON one.
  for (const tensor_type type : {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q5_0, tensor_type::q5_1, tensor_type::q8_0,
                                 tensor_type::q2_K, tensor_type::q3_K, tensor_type::q4_K, tensor_type::q5_K, tensor_type::q6_K,
                                 tensor_type::iq4_nl, tensor_type::iq4_xs, tensor_type::f16, tensor_type::bf16, tensor_type::f32}) {
    INFO("type " << spite::gguf::traits(type).name);
    CHECK(fast_for(type) != nullptr);
  }
#else
  CHECK(cpu::fast_matmuls().empty());
#endif
}

// ---- the activation quantizers, and the decode prefetch hint
// (the attention and SwiGLU pieces: simd_math_test.cpp)

#include <cmath>
#include <limits>

#include "spite/core/half.hpp"

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("the SIMD Q8_0 activation quantizer gives the reference quantizer's blocks") {
  if (fast_for(tensor_type::q8_0) == nullptr) {
    WARN("no SIMD matmul on this processor; nothing to compare");
    return;
  }
  // Through the matmul: a 1-row Q8_0 identity-like weight makes every output depend on the
  // quantized activations only; compared bit for bit with the reference matmul, which uses the
  // scalar quantizer. Ties (x * 127 / max exactly halfway) and zero blocks included.
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t in = 256;
  quantized_matrix m = random_matrix(tensor_type::q8_0, in, 8, rng);
  spite::thread_pool pool(1);
  for (int round = 0; round < 200; ++round) {
    std::vector<float> x = random_activations(in, 1, rng);
    if (round % 4 == 0) std::fill(x.begin(), x.begin() + 32, 0.0f);               // an all-zero block
    if (round % 4 == 1) for (int i = 32; i < 64; ++i) x[i] = static_cast<float>(i - 48) * 0.5f;  // exact halves
    std::vector<float> want(8), got(8);
    cpu::find_reference_matmul(tensor_type::q8_0)(m.w, x.data(), 1, want.data(), pool);
    cpu::find_exact_matmul(tensor_type::q8_0)(m.w, x.data(), 1, got.data(), pool);
    for (int o = 0; o < 8; ++o) REQUIRE(same_bits(want[o], got[o]));
  }
}

TEST_CASE("the SIMD Q8_K activation quantizers give the reference quantizers' bytes") {
  const cpu::q8_K_quantizer first_max = cpu::simd_q8_K_quantizer(false), four_row = cpu::simd_q8_K_quantizer(true);
  if (first_max == nullptr || four_row == nullptr) {
    WARN("no SIMD quantizer on this processor; nothing to compare");
    return;
  }
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr std::int64_t n = 4 * 256;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng) * (trial % 5 == 0 ? 1e-3f : 3.0f);
    // Blocks that test the rules: all zero, +amax and -amax both present, halves exactly.
    std::fill(x.begin(), x.begin() + 256, 0.0f);
    x[300] = 7.5f;
    x[400] = -7.5f;
    x[600] = -9.0f;
    x[601] = 9.0f;
    for (int j = 768; j < 800; ++j) x[j] = static_cast<float>(j - 784) * 0.5f;
    std::vector<spite::gguf::block_q8_K> want(n / 256), got(n / 256);
    REQUIRE(spite::gguf::quantize(tensor_type::q8_K, x.data(), want.data(), n));
    first_max(x.data(), got.data(), n);
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(spite::gguf::block_q8_K)) == 0);
    cpu::quantize_act_q8_K_4x8_scalar(x.data(), want.data(), n);
    four_row(x.data(), got.data(), n);
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(spite::gguf::block_q8_K)) == 0);
  }
}

TEST_CASE("after a decode product the pool's waiting threads are pointed at the matrix that followed it before") {
  std::mt19937 rng(5);
  quantized_matrix a = random_matrix(tensor_type::q4_0, 256, 64, rng), b = random_matrix(tensor_type::q4_0, 256, 48, rng);
  (void)cpu::pack_weight(a.w);
  (void)cpu::pack_weight(b.w);
  // The bytes a product streams: the packed layout where this processor has one.
  const auto* b_bytes = b.w.packed != nullptr ? b.w.packed : b.w.data;
  const std::size_t b_size = b.w.packed != nullptr ? b.w.packed_size : b.w.row_bytes * static_cast<std::size_t>(b.w.out);
  spite::thread_pool pool(2);
  const std::vector<float> x(256, 0.5f);
  std::vector<float> y(64 * 64);
  cpu::matmul(a.w, x.data(), 1, y.data(), pool);
  cpu::matmul(b.w, x.data(), 1, y.data(), pool);
  cpu::matmul(a.w, x.data(), 1, y.data(), pool);
  const spite::thread_pool::prefetch_region next = pool.prefetch_target();
  CHECK(next.begin == b_bytes);
  CHECK(next.bytes == b_size);
#if defined(__x86_64__)
  // The packed Q4_0 decode kernels (8-row AVX2, 16-row AVX-512) read two streams per thread.
  if (b.w.packed != nullptr) CHECK(next.streams == 2);
#endif
  // A batch of activation rows is no decode step: the pool is left pointed where it was.
  const std::vector<float> batch(256 * 64, 0.25f);
  cpu::matmul(b.w, batch.data(), 64, y.data(), pool);
  CHECK(pool.prefetch_target().begin == b_bytes);
  // One thread waits for nobody: nothing to point it at.
  spite::thread_pool alone(1);
  cpu::matmul(a.w, x.data(), 1, y.data(), alone);
  cpu::matmul(b.w, x.data(), 1, y.data(), alone);
  cpu::matmul(a.w, x.data(), 1, y.data(), alone);
  CHECK(alone.prefetch_target().begin == nullptr);
}
