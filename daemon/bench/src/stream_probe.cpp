// How much of the memory bandwidth a decode kernel's instruction sequence can stream on this
// core. A one-row decode tile does about ten vector instructions per 32 bytes of weights; while
// the core retires them it issues its loads later than a plain read loop does, and keeps fewer of
// them in flight. The sequence here is the packed Q4_0 / Q4_K decode tile's, written in assembly,
// reading two streams per thread as the decode kernels do, run over a buffer much larger than the
// caches and timed in turns with the plain read of the same bytes: its fraction of that read
// bounds what those kernels' decode can reach here.
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

// One 32-byte chunk of a packed group (8 rows x 4 bytes, two nibbles each) at W(P) against one
// activation row: the chunk split into its nibbles, and for each half the row's 4 bytes
// broadcast, u8 x s8 pair sums, added into int16 sums.
#define SPITE_CHUNK(P, W, X0, X1, ACC0, ACC1)                                                                             \
  "vmovdqu " #W "(" P "), %%ymm1\n\tvpand %%ymm0, %%ymm1, %%ymm2\n\tvpsrlw $4, %%ymm1, %%ymm1\n\t"                      \
  "vpand %%ymm0, %%ymm1, %%ymm1\n\tvpbroadcastd " #X0 "(%3), %%ymm3\n\tvpmaddubsw %%ymm3, %%ymm2, %%ymm2\n\t"            \
  "vpaddw %%ymm2, %%ymm" #ACC0 ", %%ymm" #ACC0 "\n\tvpbroadcastd " #X1 "(%3), %%ymm4\n\t"                               \
  "vpmaddubsw %%ymm4, %%ymm1, %%ymm1\n\tvpaddw %%ymm1, %%ymm" #ACC1 ", %%ymm" #ACC1 "\n\t"
// 128 bytes of each stream per iteration, their chunks alternated, as the decode tiles read two
// row groups in step (by_group_pairs).
#define SPITE_CHUNKS                                                                                                \
  SPITE_CHUNK("%0", 0, 0, 32, 8, 9) SPITE_CHUNK("%1", 0, 4, 36, 10, 11) SPITE_CHUNK("%0", 32, 8, 40, 12, 13)        \
  SPITE_CHUNK("%1", 32, 12, 44, 14, 15) SPITE_CHUNK("%0", 64, 16, 48, 8, 9) SPITE_CHUNK("%1", 64, 20, 52, 10, 11)   \
  SPITE_CHUNK("%0", 96, 24, 56, 12, 13) SPITE_CHUNK("%1", 96, 28, 60, 14, 15)
#define SPITE_CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory"

// The sequence over the two streams [p, end) and [q, q + (end - p)), 128 bytes of each per
// iteration (end - p a positive multiple of 128).
void decode_sequence(const unsigned char* p, const unsigned char* end, const unsigned char* q) {
  __asm__ volatile("vmovdqa (%4), %%ymm0\n\t"
                   "1:\n\t" SPITE_CHUNKS "add $128, %0\n\tadd $128, %1\n\tcmp %2, %0\n\tjb 1b\n\tvzeroupper"
                   : "+r"(p), "+r"(q)
                   : "r"(end), "r"(activations), "r"(low_nibbles)
                   : SPITE_CLOBBERS);
}

// The same with software prefetch of each stream's lines 1 KiB ahead (the bytes past a stream's
// end are the buffer's own or the next thread's: prefetches do not fault). One stream so read
// streamed at 90-110 % of a plain read 1-2 KiB ahead against 82-96 % 8 KiB and 75-81 % without
// (Zen 3, one thread); two streams at 102-104 % 1 KiB ahead, 98-100 % 9-25 KiB (the distance of
// the kernels' next row group at rows of 2048-5632) and 83-84 % without.
void decode_sequence_prefetched(const unsigned char* p, const unsigned char* end, const unsigned char* q) {
  __asm__ volatile("vmovdqa (%4), %%ymm0\n\t"
                   "1:\n\tprefetcht0 1024(%0)\n\tprefetcht0 1088(%0)\n\tprefetcht0 1024(%1)\n\tprefetcht0 1088(%1)\n\t" SPITE_CHUNKS
                   "add $128, %0\n\tadd $128, %1\n\tcmp %2, %0\n\tjb 1b\n\tvzeroupper"
                   : "+r"(p), "+r"(q)
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
  // Five turns of the reads over memory and the sequence in L2: the host's changing load falls
  // on all of them alike; each keeps its best. The plain read is the better of one stream and two
  // in step per thread, as the bandwidth probe takes it.
  const std::size_t half = slice / 2;
  for (int pass = 0; pass < 5; ++pass) {
    std::atomic<std::uint64_t> sum{0};
    double s = detail::run_together(threads, [&](int t) {
      sum += detail::sum_avx2(buf.get() + slice / 8 * static_cast<std::size_t>(t), slice / 8);
    });
    c.plain_gbs = std::max(c.plain_gbs, rate(slice, s));
    s = detail::run_together(threads, [&](int t) {
      const std::uint64_t* p = buf.get() + slice / 8 * static_cast<std::size_t>(t);
      sum += detail::sum_word_pairs(p, p + half / 8, half / 8);
    });
    c.plain_gbs = std::max(c.plain_gbs, rate(slice, s));
    sink += sum.load();
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      decode_sequence(p, p + half, p + half);
    });
    c.sequence_gbs = std::max(c.sequence_gbs, rate(slice, s));
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      decode_sequence_prefetched(p, p + half, p + half);
    });
    c.prefetched_gbs = std::max(c.prefetched_gbs, rate(slice, s));
    constexpr int repeats = 256;  // 32 MiB per thread from L2
    s = detail::run_together(threads, [&](int t) {
      const unsigned char* p = bytes + slice * static_cast<std::size_t>(t);
      for (int r = 0; r < repeats; ++r) decode_sequence(p, p + in_cache / 2, p + in_cache / 2);
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
