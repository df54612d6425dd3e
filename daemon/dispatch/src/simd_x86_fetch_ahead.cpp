// The decode kernels' fetch distances for this processor (decode_fetch_distances in
// simd_x86_prefetch.hpp): a table per core where one was measured, the environment's changes on
// top. SPITE_CPU_FETCH takes a profile name and/or KERNEL=VALUE items, comma-separated ("zen4",
// "q4_0=0,q8_0=1", "default,q6_k=3,q4_k_pairs=2"); an item it cannot read is reported on stderr
// and skipped, so a typo costs speed, never a start.
#include "simd_x86_fetch_ahead.hpp"

#if defined(__x86_64__)
#include <cpuid.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace spite::dispatch::cpu::x86 {
namespace {

// Zen 4 (AMD family 19h with AVX-512; Zen 3, the same family, has none). Measured on a Zen 4
// guest, one and two threads, `spitectl bench --matmul TYPE:2048:5632` and `5632:2048 --cold`,
// each distance's share of a plain read of the same bytes against the others' in the same
// minutes (docs/performance-log.md, "A Zen 4 host"): this core's hardware prefetchers keep up
// with two streams, and software prefetches far ahead slow them.
constexpr decode_fetch_distances zen4_distances() {
  decode_fetch_distances d;
  d.q4_0 = 0;
  d.q8_0 = 0;  // the 16-row layout (the 8-row one read 70-74 % of a plain read at 1, 66-67 % at 0)
  d.q4_k = 0;
  d.q5_k = 0;  // with x16_header_first, Q5_K:2048:5632, one thread: 0.323-0.328 ms at 1, 0.290-0.305
  d.q3_k = 0;
  d.q6_k = 0;  // TinyLlama Q4_K_M, one thread, alternated: 41.8-43.1 t/s, 40.8-42.0 at 1
  d.q2_k = 1;
  d.iq4_xs = 2;
  d.legacy = 0;
  d.mxfp4 = 1;
  d.q4_k_pairs = 64;  // at any thread count
  d.q6_k_pairs = 64;  // without software prefetch (the log: "Q6_K as two streams")
  d.q5_k_pairs = 64;
  return d;
}

struct field {
  std::string_view name;
  int decode_fetch_distances::*member;
};
constexpr std::array<field, 13> fields{{{"q4_0", &decode_fetch_distances::q4_0},
                                        {"q8_0", &decode_fetch_distances::q8_0},
                                        {"q4_k", &decode_fetch_distances::q4_k},
                                        {"q5_k", &decode_fetch_distances::q5_k},
                                        {"q3_k", &decode_fetch_distances::q3_k},
                                        {"q6_k", &decode_fetch_distances::q6_k},
                                        {"q2_k", &decode_fetch_distances::q2_k},
                                        {"iq4_xs", &decode_fetch_distances::iq4_xs},
                                        {"legacy", &decode_fetch_distances::legacy},
                                        {"mxfp4", &decode_fetch_distances::mxfp4},
                                        {"q4_k_pairs", &decode_fetch_distances::q4_k_pairs},
                                        {"q6_k_pairs", &decode_fetch_distances::q6_k_pairs},
                                        {"q5_k_pairs", &decode_fetch_distances::q5_k_pairs}}};

bool is_zen4() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const unsigned family = ((a >> 8) & 0xF) + ((a >> 20) & 0xFF);
  return family == 0x19 && __builtin_cpu_supports("avx512f");
}

decode_fetch_choice g_choice;

decode_fetch_distances chosen() {
  g_choice.profile = is_zen4() ? "zen4" : "default";
  g_choice.distances = profile_distances(g_choice.profile);
  if (const char* env = std::getenv("SPITE_CPU_FETCH"); env != nullptr) {
    g_choice = apply_fetch_spec(std::move(g_choice), env);
    for (const std::string& item : g_choice.ignored) {
      std::fprintf(stderr, "spite: SPITE_CPU_FETCH: ignoring \"%s\" (want default, zen4, or KERNEL=0..64)\n",
                   item.c_str());
    }
  }
  return g_choice.distances;
}

}  // namespace

decode_fetch_distances profile_distances(std::string_view profile) {
  return profile == "zen4" ? zen4_distances() : decode_fetch_distances{};
}

decode_fetch_choice apply_fetch_spec(decode_fetch_choice start, std::string_view spec) {
  decode_fetch_choice c = std::move(start);
  bool changed = false;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    if (item == "default" || item == "zen4") {
      c.distances = profile_distances(item);
      c.profile = std::string(item);
      changed = false;
      continue;
    }
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    int value = -1;
    if (eq != std::string_view::npos) {
      const std::string_view digits = item.substr(eq + 1);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc{} || end != digits.data() + digits.size()) value = -1;
    }
    const field* f = nullptr;
    for (const field& candidate : fields) {
      if (candidate.name == key) f = &candidate;
    }
    // Beyond 64 blocks a fetch lands past what the caches hold until it is read.
    if (f == nullptr || value < 0 || value > 64) {
      c.ignored.emplace_back(item);
      continue;
    }
    c.distances.*(f->member) = value;
    changed = true;
  }
  if (changed && !c.profile.ends_with("+SPITE_CPU_FETCH")) c.profile += "+SPITE_CPU_FETCH";
  return c;
}

decode_fetch_distances decode_fetch = chosen();

const char* decode_fetch_profile() noexcept { return g_choice.profile.c_str(); }

}  // namespace spite::dispatch::cpu::x86

#endif
