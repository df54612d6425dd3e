// What this machine can run kernels on, and what a named card would offer. Detection never needs
// a GPU runtime at build time and never fails: CUDA and Level Zero are reached through dlopen,
// ROCm through the KFD topology in sysfs, and a missing driver only leaves its GPUs out (the
// report says why). The card table maps marketing names (RTX_4090, RX_7800_XT, ARC_A770, ...) to
// vendor, arch and memory, so a plan can be made for a card that is not present.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::dispatch {

// Values equal SPITE_DEVICE_* of kernels/abi/spite_kernel.h; `none` marks cards of the table that
// no backend of spite drives (Apple GPUs).
enum class device_kind : int { none = 0, cpu = 1, cuda = 2, hip = 3, level_zero = 4 };

std::string_view device_kind_name(device_kind kind) noexcept;  // "cpu", "cuda", "hip", "level_zero", "none"

struct cpu_features {
  std::string machine;  // "x86_64", "aarch64", ... (what the binary was built for)
  std::string vendor;   // "GenuineIntel", "AuthenticAMD"; aarch64: the implementer ("ARM", "Apple", ...)
  std::string brand;    // "Intel(R) Xeon(R) Platinum 8480+", ...

  // x86: usable features, i.e. reported by cpuid and, for AVX/AVX-512/AMX state, enabled by the
  // OS in XCR0.
  bool sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false, popcnt = false;
  bool avx = false, avx2 = false, fma = false, f16c = false, bmi1 = false, bmi2 = false, lzcnt = false,
       movbe = false, avx_vnni = false;
  bool avx512f = false, avx512cd = false, avx512bw = false, avx512dq = false, avx512vl = false,
       avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  int x86_level = 0;  // x86-64 psABI micro-architecture level 1..4; 0 on other machines

  // aarch64 (getauxval HWCAP/HWCAP2)
  bool neon = false, dotprod = false, i8mm = false, sve = false, sve2 = false, bf16 = false;

  int cores = 0;    // physical cores
  int threads = 0;  // logical CPUs online

  // The kernel arch directory for this CPU: "x86_64_v4", "x86_64_v3", "x86_64_v2", "x86_64",
  // "aarch64_i8mm", "aarch64_dotprod", "aarch64", or `machine` elsewhere.
  std::string isa() const;
  // Every arch directory this CPU can run, best first: {"x86_64_v3", "x86_64_v2", "x86_64"}.
  std::vector<std::string> isa_candidates() const;
  // Names of the features present ("avx2", "avx512_vnni", ...), in declaration order.
  std::vector<std::string> flags() const;
  // The present features beyond what isa() already implies (v4 -> avx512_vnni, avx512_bf16, ...).
  std::vector<std::string> extra_flags() const;
};

// cpuid (x86) or getauxval (aarch64), plus the core/thread counts of /sys and sysconf.
cpu_features detect_cpu();

struct device_info {
  device_kind kind = device_kind::cpu;
  int index = 0;             // ordinal among the devices of its kind, as its runtime numbers them
  std::string name;          // "NVIDIA GeForce RTX 4090", CPU brand, ...
  std::string arch;          // "sm_89", "gfx1100", "xe_hpg", "x86_64_v4"
  std::string driver;        // "CUDA 12.4", "amdgpu 6.8.5", "Level Zero 1.3", kernel release for the CPU
  std::uint64_t memory_bytes = 0;  // device memory; system memory for the CPU
};

// Why each GPU backend did or did not contribute devices.
struct backend_status {
  device_kind kind = device_kind::none;
  std::string name;    // "CUDA", "ROCm", "Level Zero"
  bool found = false;  // the runtime or driver answered (it may still have no devices)
  std::string detail;  // "libcuda.so.1 not found", "no KFD topology", "driver CUDA 12.4, 2 devices", ...
};

struct detect_options {
  // The sysfs mount to read KFD topology from; empty: $SPITE_SYSFS_ROOT, else "/sys".
  std::filesystem::path sysfs_root;
  bool cuda = true;
  bool rocm = true;
  bool level_zero = true;
};

struct device_report {
  cpu_features cpu;
  std::vector<device_info> devices;  // the CPU first, then CUDA, HIP, Level Zero devices
  std::vector<backend_status> backends;
};

device_report probe_devices(const detect_options& options = {});
std::vector<device_info> detect_devices(const detect_options& options = {});

// "gfx" name of a KFD gfx_target_version (major * 10000 + minor * 100 + stepping): 110000 ->
// "gfx1100", 90010 -> "gfx90a", 90402 -> "gfx942"; empty for 0.
std::string gfx_arch_name(std::uint32_t gfx_target_version);

struct card {
  std::string name;                  // RTX_4090
  std::vector<std::string> aliases;  // other names that find_card accepts
  std::string vendor;                // NVIDIA, AMD, Intel, Apple
  device_kind kind = device_kind::none;
  std::string arch;                  // sm_89, gfx1100, xe_hpg
  std::uint64_t memory_bytes = 0;
  bool supported = false;
  std::string note;
};

// The table of daemon/dispatch/data/cards.tsv, embedded at build time.
std::span<const card> cards();

// Names compare case-insensitively, ignoring '_', '-' and ' ' and a leading vendor word
// ("NVIDIA GeForce RTX 4090" finds RTX_4090). An unknown name is errc::not_found with the closest
// names suggested.
result<const card*> find_card(std::string_view name);

// A ';' or ','-separated list of card names and archs (sm_89, gfx1100, xe_hpg) -> the archs, in
// order, without duplicates; for the SPITE_GPU_ARCHS build option.
result<std::vector<std::string>> resolve_gpu_archs(std::string_view list);

}  // namespace spite::dispatch
