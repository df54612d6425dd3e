// How much of the memory bandwidth a decode kernel's instruction sequence can stream on this
// core. A one-row decode tile does about ten vector instructions per 32 bytes of weights; while
// the core retires them it issues its loads later than a plain read loop does, and keeps fewer of
// them in flight. The sequence here is the packed Q4_0 / Q4_K decode tile's, written in assembly,
// run over a buffer much larger than the caches and timed in turns with the plain read of the
// same bytes: its fraction of that read bounds what those kernels' decode can reach here.
#include <algorithm>
#include <cstring>
#include <thread>

#include "probe_loops.hpp"
#include "spite/bench/bench.hpp"

namespace spite::bench {
namespace {

#if defined(__x86_64__)

alignas(64) const unsigned char activations[64] = {1, 2, 3, 4, 5, 6, 7, 8};  // what the broadcasts load (L1)
alignas(32) const unsigned char low_nibbles[32] = {0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F,
                                                   0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F,
                                                   0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F, 0x0F};

// One 32-byte chunk of a packed group (8 rows x 4 bytes, two nibbles each) against one activation
// row: the chunk split into its nibbles, and for each half the row's 4 bytes broadcast, u8 x s8
// pair sums, added into int16 sums.
#define SPITE_CHUNK(W, X0, X1, ACC0, ACC1)                                                                                  \
  "vmovdqu " #W "(%0), %%ymm1\n\tvpand %%ymm0, %%ymm1, %%ymm2\n\tvpsrlw $4, %%ymm1, %%ymm1\n\tvpand %%ymm0, %%ymm1, %%ymm1\n\t" \
  "vpbroadcastd " #X0 "(%2), %%ymm3\n\tvpmaddubsw %%ymm3, %%ymm2, %%ymm2\n\tvpaddw %%ymm2, %%ymm" #ACC0 ", %%ymm" #ACC0 "\n\t" \
  "vpbroadcastd " #X1 "(%2), %%ymm4\n\tvpmaddubsw %%ymm4, %%ymm1, %%ymm1\n\tvpaddw %%ymm1, %%ymm" #ACC1 ", %%ymm" #ACC1 "\n\t"
#define SPITE_CHUNKS                                                                                                       \
  SPITE_CHUNK(0, 0, 32, 8, 9) SPITE_CHUNK(32, 4, 36, 10, 11) SPITE_CHUNK(64, 8, 40, 12, 13) SPITE_CHUNK(96, 12, 44, 14, 15) \
  SPITE_CHUNK(128, 16, 48, 8, 9) SPITE_CHUNK(160, 20, 52, 10, 11) SPITE_CHUNK(192, 24, 56, 12, 13)                         \
  SPITE_CHUNK(224, 28, 60, 14, 15)
#define SPITE_CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory"

// The sequence over [p, end), 256 bytes per iteration (end - p a positive multiple of 256).
void decode_sequence(const unsigned char* p, const unsigned char* end) {
  __asm__ volatile("vmovdqa (%3), %%ymm0\n\t"
                   "1:\n\t" SPITE_CHUNKS "add $256, %0\n\tcmp %1, %0\n\tjb 1b\n\tvzeroupper"
                   : "+r"(p)
                   : "r"(end), "r"(activations), "r"(low_nibbles)
                   : SPITE_CLOBBERS);
}

// The same with software prefetch of the lines 8 KiB ahead, as the decode tiles fetch the next
// row group while they multiply this one (the bytes past `end` are the buffer's own or the
// next thread's: prefetches do not fault).
void decode_sequence_prefetched(const unsigned char* p, const unsigned char* end) {
  __asm__ volatile("vmovdqa (%3), %%ymm0\n\t"
                   "1:\n\tprefetcht0 8192(%0)\n\tprefetcht0 8256(%0)\n\tprefetcht0 8320(%0)\n\tprefetcht0 8384(%0)\n\t" SPITE_CHUNKS
                   "add $256, %0\n\tcmp %1, %0\n\tjb 1b\n\tvzeroupper"
                   : "+r"(p)
                   : "r"(end), "r"(activations), "r"(low_nibbles)
                   : SPITE_CLOBBERS);
}
#undef SPITE_CLOBBERS
#undef SPITE_CHUNKS
#undef SPITE_CHUNK

#endif

}  // namespace

stream_ceiling measure_stream_ceiling(int threads) {
  stream_ceiling c;
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2")) return c;
  threads = std::max(1, threads);
  c.threads = threads;
  constexpr std::size_t total = std::size_t{256} << 20, in_cache = std::size_t{128} << 10;
  const std::size_t slice = total / static_cast<std::size_t>(threads) / 256 * 256;
  const detail::huge_buffer buf = detail::huge_buffer_of(total + (std::size_t{16} << 10));
  if (!buf) return c;
  auto* bytes = reinterpret_cast<unsigned char*>(buf.get());
  detail::run_together(threads, [&](int t) { std::memset(bytes + slice * static_cast<std::size_t>(t), 1, slice); });
  std::memset(bytes + slice * static_cast<std::size_t>(threads), 1, std::size_t{16} << 10);
  const auto rate = [&](std::size_t per_thread, double seconds) { return static_cast<double>(per_thread) * threads / seconds / 1e9; };
  std::uint64_t sink = 0;
  // Five turns of the three reads over memory and the sequence in L2: the host's changing load
  // falls on all of them alike; each keeps its best.
  for (int pass = 0; pass < 5; ++pass) {
    std::atomic<std::uint64_t> sum{0};
    double s = detail::run_together(threads, [&](int t) {
      sum += detail::sum_avx2(buf.get() + slice / 8 * static_cast<std::size_t>(t), slice / 8);
    });
    c.plain_gbs = std::max(c.plain_gbs, rate(slice, s));
    sink += sum.load();
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      decode_sequence(p, p + slice);
    });
    c.sequence_gbs = std::max(c.sequence_gbs, rate(slice, s));
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      decode_sequence_prefetched(p, p + slice);
    });
    c.prefetched_gbs = std::max(c.prefetched_gbs, rate(slice, s));
    constexpr int repeats = 256;  // 32 MiB per thread from L2
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      for (int r = 0; r < repeats; ++r) decode_sequence(p, p + in_cache);
    });
    c.in_cache_gbs = std::max(c.in_cache_gbs, rate(in_cache * repeats, s));
  }
  volatile std::uint64_t keep = sink;
  (void)keep;
#else
  (void)threads;
#endif
  return c;
}

nlohmann::json stream_ceiling::to_json() const {
  return {{"threads", threads},
          {"plain_read_gb_per_s", plain_gbs},
          {"sequence_in_cache_gb_per_s", in_cache_gbs},
          {"sequence_gb_per_s", sequence_gbs},
          {"sequence_prefetched_gb_per_s", prefetched_gbs},
          {"fraction_of_plain_read", fraction()}};
}

}  // namespace spite::bench
