// Ceilings of the quantized CPU kernels' exact instruction sequences on this core. The matmuls
// reproduce the reference engine's integer lanes and float steps bit for bit, which fixes the
// instructions per 32 products; how fast the core retires those sequences, with every operand
// in registers or L1, bounds each kernel family below the 8-bit multiply peak.
// Written in assembly so that the compiler neither folds nor spills them; AVX2 forms (the
// AVX-512 VNNI kernels run other sequences).
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "probe_loops.hpp"
#include "spite/bench/bench.hpp"

namespace spite::bench {
namespace {

#if defined(__x86_64__)

// Seconds per iteration of each of `fns`, the best of `passes` runs of `iters` iterations;
// the functions take turns within each pass, so that the host's changing load falls on all
// of them alike (only ratios are reported).
std::vector<double> seconds_per_iteration(const std::vector<void (*)(long)>& fns, long iters, int passes) {
  std::vector<double> best(fns.size(), 1e30);
  for (int pass = 0; pass < passes; ++pass) {
    for (std::size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fns[i](iters);
      // The sequences leave the upper halves of the ymm registers dirty, and this file is
      // built without AVX, so the compiler adds no VZEROUPPER before the SSE code that follows.
      __asm__ volatile("vzeroupper" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  for (double& b : best) b /= static_cast<double>(iters);
  return best;
}

alignas(64) unsigned char scratch[512];  // what the sequences load: L1, values irrelevant

// The 8-bit peak's loop (machine_probe.cpp): 12 x 32 products per iteration.
void maddubs_peak(long n) { detail::dot8_avx2(n); }

// Q8_0-style block against an activation block (ggml's mul_sum_i8_pairs_float and fma): signs
// moved onto the activations, u8 x s8 pair sums, widened to int32 lanes, to float, scaled into
// the block's accumulator. 8 blocks (8 x 32 products) per iteration, 8 accumulators. Loop and
// operands in one statement: the float operands are set (quants 1, scale 1.0f, accumulators 0)
// so that no denormal or garbage value can send an FMA down a slow path.
#define SPITE_Q8_BLOCK(ACC)                                                                                       \
  "vpsignb %%ymm1, %%ymm0, %%ymm6\n\tvpmaddubsw %%ymm6, %%ymm2, %%ymm6\n\tvpmaddwd %%ymm3, %%ymm6, %%ymm6\n\t" \
  "vcvtdq2ps %%ymm6, %%ymm6\n\tvfmadd231ps %%ymm6, %%ymm4, %%ymm" #ACC "\n\t"
#define SPITE_ZERO(R) "vpxor %%xmm" #R ", %%xmm" #R ", %%xmm" #R "\n\t"
void q8_0_blocks(long n) {
  if (n <= 0) return;  // the loop counts down to zero
  __asm__ volatile(
      "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\tvpabsb %%ymm0, %%ymm0\n\tvmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\t"
      "vpcmpeqw %%ymm3, %%ymm3, %%ymm3\n\tvpabsw %%ymm3, %%ymm3\n\t"
      "vpcmpeqd %%ymm4, %%ymm4, %%ymm4\n\tvpsrld $25, %%ymm4, %%ymm4\n\tvpslld $23, %%ymm4, %%ymm4\n\t"  // 1.0f
      SPITE_ZERO(8) SPITE_ZERO(9) SPITE_ZERO(10) SPITE_ZERO(11) SPITE_ZERO(12) SPITE_ZERO(13) SPITE_ZERO(14) SPITE_ZERO(15)
      "1:\n\t" SPITE_Q8_BLOCK(8) SPITE_Q8_BLOCK(9) SPITE_Q8_BLOCK(10) SPITE_Q8_BLOCK(11) SPITE_Q8_BLOCK(12)
          SPITE_Q8_BLOCK(13) SPITE_Q8_BLOCK(14) SPITE_Q8_BLOCK(15) "dec %0\n\tjnz 1b\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm6", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
        "cc");
}
#undef SPITE_ZERO
#undef SPITE_Q8_BLOCK

// An unpacked K-quant row (Q5_K, Q6_K): u8 x s8 pair sums times the group's int16 scales into
// int32 lanes. 8 x 32 products per iteration.
#define SPITE_K_GROUP(ACC) "vpmaddubsw %%ymm0, %%ymm1, %%ymm6\n\tvpmaddwd %%ymm2, %%ymm6, %%ymm6\n\tvpaddd %%ymm6, %%ymm" #ACC ", %%ymm" #ACC "\n\t"
void k_quant_groups(long n) {
  for (long i = 0; i < n; ++i) {
    __asm__ volatile(SPITE_K_GROUP(8) SPITE_K_GROUP(9) SPITE_K_GROUP(10) SPITE_K_GROUP(11) SPITE_K_GROUP(12)
                         SPITE_K_GROUP(13) SPITE_K_GROUP(14) SPITE_K_GROUP(15) ::
                             : "xmm6", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  }
}
#undef SPITE_K_GROUP

// One 32-byte chunk of a packed group (8 rows x 4 elements, two nibbles) unpacked, then for 4
// activation rows: their 4 bytes broadcast, u8 x s8 pair sums added into int16 sums (packed
// Q4_0 / Q4_K tiles). 8 x 32 products per iteration.
#define SPITE_PACKED(OFF, Q, ACC) \
  "vpbroadcastd " #OFF "(%0), %%ymm7\n\tvpmaddubsw %%ymm7, %%ymm" #Q ", %%ymm7\n\tvpaddw %%ymm7, %%ymm" #ACC ", %%ymm" #ACC "\n\t"
void packed_chunks(long n) {
  for (long i = 0; i < n; ++i) {
    __asm__ volatile("vmovdqu 256(%0), %%ymm1\n\tvpand %%ymm0, %%ymm1, %%ymm2\n\tvpsrlw $4, %%ymm1, %%ymm1\n\t"
                     "vpand %%ymm0, %%ymm1, %%ymm3\n\t" SPITE_PACKED(0, 2, 8) SPITE_PACKED(32, 3, 9) SPITE_PACKED(64, 2, 10)
                         SPITE_PACKED(96, 3, 11) SPITE_PACKED(128, 2, 12) SPITE_PACKED(160, 3, 13) SPITE_PACKED(192, 2, 14)
                             SPITE_PACKED(224, 3, 15)::"r"(scratch)
                     : "xmm1", "xmm2", "xmm3", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
                       "memory");
  }
}
#undef SPITE_PACKED

#endif

}  // namespace

sequence_ceilings measure_sequence_ceilings() {
  sequence_ceilings c;
  c.handoff = measure_handoff(static_cast<int>(std::thread::hardware_concurrency()));
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return c;
  c.isa = "avx2";
  // A few ms per run; 15 turns each.
  const std::vector<double> t =
      seconds_per_iteration({maddubs_peak, q8_0_blocks, k_quant_groups, packed_chunks}, 1'000'000, 15);
  const double peak = 12.0 * 32 * 2 / t[0];  // ops/s
  c.peak_int8_gops = peak / 1e9;
  const auto of_peak = [&](double seconds) { return 8.0 * 32 * 2 / seconds / peak; };
  c.sequences.push_back({"q8_0_block", "Q8_0, Q5_0 batches", "per 32 products: vpsignb, vpmaddubsw, vpmaddwd, vcvtdq2ps, vfmadd",
                         "8-bit peak", of_peak(t[1])});
  c.sequences.push_back({"k_quant_group", "Q3_K, Q5_K, Q6_K batches (unpacked rows)",
                         "per 32 products: vpmaddubsw, vpmaddwd by the group scales, vpaddd", "8-bit peak", of_peak(t[2])});
  c.sequences.push_back({"packed_chunk", "packed Q4_0, Q4_K, IQ4_NL batches",
                         "per 32 products: vpbroadcastd, vpmaddubsw, vpaddw; per 8 of them one chunk unpacked", "8-bit peak",
                         of_peak(t[3])});
  c.streamed.push_back(measure_stream_ceiling(1));
  if (const int all = static_cast<int>(std::thread::hardware_concurrency()); all > 1) c.streamed.push_back(measure_stream_ceiling(all));
#endif
  return c;
}

nlohmann::json sequence_ceilings::to_json() const {
  nlohmann::json seqs = nlohmann::json::array();
  for (const auto& s : sequences) {
    seqs.push_back({{"name", s.name}, {"kernels", s.kernels}, {"sequence", s.sequence}, {"of", s.of}, {"fraction", s.fraction}});
  }
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : streamed) streams.push_back(s.to_json());
  return {{"isa", isa},
          {"peak_int8_gop_per_s", peak_int8_gops},
          {"sequences", seqs},
          {"streamed", streams},
          {"handoff", handoff.to_json()}};
}

}  // namespace spite::bench
