// CPU feature detection: cpuid + XCR0 on x86, getauxval on aarch64. This file is compiled for the
// baseline ISA (no -m flags): it only asks which instructions exist and never uses them.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "spite/core/cpu_plan.hpp"
#include "spite/dispatch/devices.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SPITE_CPU_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define SPITE_CPU_ARM64 1
#endif

namespace spite::dispatch {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// Physical cores of the online CPUs (offline ones have no topology), counted as the compute
// threads' plan counts them (spite/core/cpu_plan.hpp).
int count_cores() {
  std::error_code ec;
  std::vector<int> online;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.size() > 8 || name.compare(0, 3, "cpu") != 0 ||
        !std::all_of(name.begin() + 3, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    if (fs::exists(entry.path() / "topology" / "core_id", ec)) online.push_back(std::stoi(name.substr(3)));
  }
  return make_cpu_plan(online).cores;
}

#if SPITE_CPU_X86
struct regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return {};
  return r;
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

// XCR0: the register state the OS saves on a context switch. xgetbv is spelled as bytes so that
// neither -mxsave nor a recent assembler is needed.
std::uint64_t read_xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

void detect_x86(cpu_features& f) {
  const regs leaf0 = cpuid(0);
  const unsigned max_leaf = leaf0.a;
  char vendor[13] = {};
  std::memcpy(vendor + 0, &leaf0.b, 4);
  std::memcpy(vendor + 4, &leaf0.d, 4);
  std::memcpy(vendor + 8, &leaf0.c, 4);
  f.vendor = vendor;

  const unsigned max_ext = cpuid(0x80000000u).a;
  if (max_ext >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const regs r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i + 0, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    f.brand = trim(brand);
  }
  if (max_leaf < 1) return;

  const regs l1 = cpuid(1);
  f.sse3 = bit(l1.c, 0);
  f.ssse3 = bit(l1.c, 9);
  const bool fma = bit(l1.c, 12);
  const bool cx16 = bit(l1.c, 13);
  f.sse4_1 = bit(l1.c, 19);
  f.sse4_2 = bit(l1.c, 20);
  f.movbe = bit(l1.c, 22);
  f.popcnt = bit(l1.c, 23);
  const bool osxsave = bit(l1.c, 27);
  const bool avx = bit(l1.c, 28);
  const bool f16c = bit(l1.c, 29);

  const std::uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG and XTILEDATA

  f.avx = avx && os_avx;
  f.fma = fma && os_avx;
  f.f16c = f16c && os_avx;

  if (max_leaf >= 7) {
    const regs l7 = cpuid(7, 0);
    f.bmi1 = bit(l7.b, 3);
    f.avx2 = bit(l7.b, 5) && os_avx;
    f.bmi2 = bit(l7.b, 8);
    f.avx512f = bit(l7.b, 16) && os_avx512;
    f.avx512dq = bit(l7.b, 17) && os_avx512;
    f.avx512cd = bit(l7.b, 28) && os_avx512;
    f.avx512bw = bit(l7.b, 30) && os_avx512;
    f.avx512vl = bit(l7.b, 31) && os_avx512;
    f.avx512_vnni = bit(l7.c, 11) && os_avx512;
    f.amx_bf16 = bit(l7.d, 22) && os_amx;
    f.avx512_fp16 = bit(l7.d, 23) && os_avx512;
    f.amx_tile = bit(l7.d, 24) && os_amx;
    f.amx_int8 = bit(l7.d, 25) && os_amx;
    if (l7.a >= 1) {
      const regs l71 = cpuid(7, 1);
      f.avx_vnni = bit(l71.a, 4) && os_avx;
      f.avx512_bf16 = bit(l71.a, 5) && os_avx512;
    }
  }
  bool lahf = false;
  if (max_ext >= 0x80000001u) {
    const regs e1 = cpuid(0x80000001u);
    lahf = bit(e1.c, 0);
    f.lzcnt = bit(e1.c, 5);
  }

#if defined(__x86_64__)
  // Levels as the x86-64 psABI defines them; each includes the previous one.
  f.x86_level = 1;
  if (cx16 && lahf && f.popcnt && f.sse3 && f.sse4_1 && f.sse4_2 && f.ssse3) {
    f.x86_level = 2;
    if (f.avx && f.avx2 && f.bmi1 && f.bmi2 && f.f16c && f.fma && f.lzcnt && f.movbe) {
      f.x86_level = 3;
      if (f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl) f.x86_level = 4;
    }
  }
#else
  (void)cx16;
  (void)lahf;
#endif
}
#endif  // SPITE_CPU_X86

#if SPITE_CPU_ARM64
// Bits of AT_HWCAP / AT_HWCAP2 (arch/arm64/include/uapi/asm/hwcap.h), spelled out so that old
// headers do not matter.
constexpr unsigned long k_hwcap_asimd = 1ul << 1;
constexpr unsigned long k_hwcap_asimddp = 1ul << 20;
constexpr unsigned long k_hwcap_sve = 1ul << 22;
constexpr unsigned long k_hwcap2_sve2 = 1ul << 1;
constexpr unsigned long k_hwcap2_i8mm = 1ul << 13;
constexpr unsigned long k_hwcap2_bf16 = 1ul << 14;

std::string implementer_name(unsigned long id) {
  switch (id) {
    case 0x41: return "ARM";
    case 0x42: return "Broadcom";
    case 0x43: return "Cavium";
    case 0x46: return "Fujitsu";
    case 0x48: return "HiSilicon";
    case 0x4e: return "NVIDIA";
    case 0x51: return "Qualcomm";
    case 0x61: return "Apple";
    case 0x6d: return "Microsoft";
    case 0xc0: return "Ampere";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "implementer 0x%02lx", id);
      return buf;
    }
  }
}

void detect_arm64(cpu_features& f) {
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  f.neon = hw & k_hwcap_asimd;
  f.dotprod = hw & k_hwcap_asimddp;
  f.sve = hw & k_hwcap_sve;
  f.sve2 = hw2 & k_hwcap2_sve2;
  f.i8mm = hw2 & k_hwcap2_i8mm;
  f.bf16 = hw2 & k_hwcap2_bf16;

  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part, model_name;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "CPU implementer" && implementer.empty()) implementer = value;
    if (key == "CPU part" && part.empty()) part = value;
    if (key == "model name" && model_name.empty()) model_name = value;
  }
  if (!implementer.empty()) f.vendor = implementer_name(std::strtoul(implementer.c_str(), nullptr, 0));
  if (!model_name.empty()) {
    f.brand = model_name;
  } else if (!f.vendor.empty()) {
    f.brand = f.vendor + (part.empty() ? std::string() : " part " + part);
  }
}
#endif  // SPITE_CPU_ARM64

struct flag_ref {
  const char* name;
  bool cpu_features::*member;
};

constexpr flag_ref k_flags[] = {
    {"sse3", &cpu_features::sse3},         {"ssse3", &cpu_features::ssse3},
    {"sse4_1", &cpu_features::sse4_1},     {"sse4_2", &cpu_features::sse4_2},
    {"popcnt", &cpu_features::popcnt},     {"avx", &cpu_features::avx},
    {"avx2", &cpu_features::avx2},         {"fma", &cpu_features::fma},
    {"f16c", &cpu_features::f16c},         {"bmi1", &cpu_features::bmi1},
    {"bmi2", &cpu_features::bmi2},         {"lzcnt", &cpu_features::lzcnt},
    {"movbe", &cpu_features::movbe},       {"avx_vnni", &cpu_features::avx_vnni},
    {"avx512f", &cpu_features::avx512f},   {"avx512cd", &cpu_features::avx512cd},
    {"avx512bw", &cpu_features::avx512bw}, {"avx512dq", &cpu_features::avx512dq},
    {"avx512vl", &cpu_features::avx512vl}, {"avx512_vnni", &cpu_features::avx512_vnni},
    {"avx512_bf16", &cpu_features::avx512_bf16}, {"avx512_fp16", &cpu_features::avx512_fp16},
    {"amx_tile", &cpu_features::amx_tile}, {"amx_int8", &cpu_features::amx_int8},
    {"amx_bf16", &cpu_features::amx_bf16}, {"neon", &cpu_features::neon},
    {"dotprod", &cpu_features::dotprod},   {"i8mm", &cpu_features::i8mm},
    {"sve", &cpu_features::sve},           {"sve2", &cpu_features::sve2},
    {"bf16", &cpu_features::bf16},
};

// Whether isa() already says that `flag` is present.
bool implied_by_isa(std::string_view isa, std::string_view flag) {
  static constexpr std::string_view v2[] = {"sse3", "ssse3", "sse4_1", "sse4_2", "popcnt"};
  static constexpr std::string_view v3[] = {"avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "lzcnt", "movbe"};
  static constexpr std::string_view v4[] = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"};
  const auto in = [&](std::span<const std::string_view> set) {
    return std::find(set.begin(), set.end(), flag) != set.end();
  };
  if (isa == "x86_64_v4") return in(v2) || in(v3) || in(v4);
  if (isa == "x86_64_v3") return in(v2) || in(v3);
  if (isa == "x86_64_v2") return in(v2);
  if (isa.starts_with("aarch64")) {
    return flag == "neon" || (flag == "dotprod" && isa != "aarch64") || (flag == "i8mm" && isa == "aarch64_i8mm");
  }
  return false;
}

}  // namespace

std::string cpu_features::isa() const { return isa_candidates().front(); }

std::vector<std::string> cpu_features::isa_candidates() const {
  std::vector<std::string> out;
  if (machine == "x86_64") {
    for (int level = x86_level; level >= 2; --level) out.push_back("x86_64_v" + std::to_string(level));
    out.push_back("x86_64");
  } else if (machine == "aarch64") {
    if (dotprod && i8mm) out.push_back("aarch64_i8mm");
    if (dotprod) out.push_back("aarch64_dotprod");
    out.push_back("aarch64");
  } else {
    out.push_back(machine.empty() ? std::string("unknown") : machine);
  }
  return out;
}

std::vector<std::string> cpu_features::flags() const {
  std::vector<std::string> out;
  for (const auto& f : k_flags) {
    if (this->*f.member) out.emplace_back(f.name);
  }
  return out;
}

std::vector<std::string> cpu_features::extra_flags() const {
  const std::string arch = isa();
  std::vector<std::string> out;
  for (auto& name : flags()) {
    if (!implied_by_isa(arch, name)) out.push_back(std::move(name));
  }
  return out;
}

cpu_features detect_cpu() {
  cpu_features f;
#if defined(__x86_64__)
  f.machine = "x86_64";
#elif defined(__i386__)
  f.machine = "i386";
#elif defined(__aarch64__)
  f.machine = "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
  f.machine = "riscv64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  f.machine = "ppc64le";
#else
  f.machine = "unknown";
#endif
#if SPITE_CPU_X86
  detect_x86(f);
#elif SPITE_CPU_ARM64
  detect_arm64(f);
#endif
  if (f.brand.empty()) f.brand = f.vendor.empty() ? f.machine + " CPU" : f.vendor + " CPU";
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  f.threads = online > 0 ? static_cast<int>(online) : 1;
  f.cores = count_cores();
  if (f.cores <= 0 || f.cores > f.threads) f.cores = f.threads;
  return f;
}

}  // namespace spite::dispatch
