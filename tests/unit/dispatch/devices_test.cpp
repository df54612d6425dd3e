// Device detection (CPU features, GPUs from a fake KFD topology), the card table, card lookups and
// SPITE_GPU_ARCHS resolution; spitectl devices / cards as a user runs them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "process.hpp"
#include "shared_data.hpp"
#include "spite/core/cpu_plan.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"

namespace fs = std::filesystem;
using namespace spite::dispatch;
using spite::test::run_process;
using spite::test::temp_dir;

namespace {

constexpr std::uint64_t GiB = 1024ull * 1024 * 1024;

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

#if defined(__x86_64__)
// What the LZCNT encoding computes for 1: 63 where the instruction exists; older processors
// run the same bytes as BSR, which gives 0.
std::uint64_t lzcnt_encoding_of_one() {
  std::uint64_t out = 0;
  const std::uint64_t one = 1;
  __asm__ volatile("rep bsr %1, %0" : "=r"(out) : "r"(one) : "cc");
  return out;
}
#endif

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A KFD topology as amdgpu publishes it: node 0 a CPU, node 1 an RX 7900 XTX-like gfx1100 with
// 24 GiB, node 2 an MI210-like gfx90a with 64 GiB (plus a system-memory bank that must not count)
// and a DRM product name.
void write_fake_kfd(const fs::path& root) {
  const fs::path nodes = root / "class/kfd/kfd/topology/nodes";
  write(nodes / "0/properties",
        "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n"
        "drm_render_minor 0\n");
  write(nodes / "0/mem_banks/0/properties", "heap_type 0\nsize_in_bytes 67108864000\nflags 0\n");
  write(nodes / "1/properties",
        "cpu_cores_count 0\nsimd_count 192\nmem_banks_count 1\ngfx_target_version 110000\nvendor_id 4098\n"
        "device_id 29772\ndrm_render_minor 128\n");
  write(nodes / "1/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 25769803776\nwidth 384\n");
  write(nodes / "2/properties",
        "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 2\ngfx_target_version 90010\nvendor_id 4098\n"
        "device_id 29711\ndrm_render_minor 129\n");
  write(nodes / "2/mem_banks/0/properties", "heap_type 2\nsize_in_bytes 68719476736\n");
  write(nodes / "2/mem_banks/1/properties", "heap_type 0\nsize_in_bytes 1073741824\n");
  write(root / "class/drm/renderD129/device/product_name", "AMD Instinct MI210\n");
  write(root / "module/amdgpu/version", "6.8.5\n");
}

// Sets an environment variable for the life of the object.
class env_guard {
 public:
  env_guard(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~env_guard() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// No GPU device nodes at all: detection must find only the CPU.
bool machine_has_no_gpu() {
  return !fs::exists("/dev/nvidiactl") && !fs::exists("/dev/kfd") && !fs::exists("/dev/dri");
}

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> out;
    for (std::string w; words >> w;) out.insert(w);
    return out;
  }
  return {};
}

}  // namespace

TEST_CASE("detect_cpu reports a consistent ISA level and feature set", "[devices][cpu]") {
  const cpu_features cpu = detect_cpu();
  INFO(cpu.brand << " " << cpu.isa());
  CHECK(!cpu.brand.empty());
  CHECK(cpu.threads >= 1);
  CHECK(cpu.cores >= 1);
  CHECK(cpu.cores <= cpu.threads);
  const auto candidates = cpu.isa_candidates();
  REQUIRE(!candidates.empty());
  CHECK(candidates.front() == cpu.isa());
  const auto flags = cpu.flags();
  for (const auto& f : cpu.extra_flags()) CHECK(has(flags, f));

#if defined(__x86_64__)
  CHECK(cpu.machine == "x86_64");
  CHECK(!cpu.vendor.empty());
  REQUIRE(cpu.x86_level >= 1);
  REQUIRE(cpu.x86_level <= 4);
  CHECK(cpu.isa() == (cpu.x86_level == 1 ? std::string("x86_64") : "x86_64_v" + std::to_string(cpu.x86_level)));
  CHECK(candidates.back() == "x86_64");
  CHECK(candidates.size() == static_cast<std::size_t>(cpu.x86_level));
  if (cpu.x86_level >= 2) CHECK((cpu.sse3 && cpu.ssse3 && cpu.sse4_1 && cpu.sse4_2 && cpu.popcnt));
  if (cpu.x86_level >= 3) {
    CHECK((cpu.avx && cpu.avx2 && cpu.fma && cpu.f16c && cpu.bmi1 && cpu.bmi2 && cpu.lzcnt && cpu.movbe));
    CHECK(!has(cpu.extra_flags(), "avx2"));
  }
  if (cpu.x86_level == 4) {
    CHECK((cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.avx512cd));
    CHECK(!has(cpu.extra_flags(), "avx512bw"));
  } else {
    CHECK(!(cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.avx512cd && cpu.avx2 && cpu.fma &&
            cpu.bmi2 && cpu.movbe && cpu.lzcnt));
  }
  // AVX-512 extensions need the foundation; AVX needs OS support, which the kernel also reflects.
  if (cpu.avx512_vnni || cpu.avx512_bf16 || cpu.avx512_fp16) CHECK(cpu.avx512f);
  if (cpu.avx2 || cpu.fma) CHECK(cpu.avx);

  // The kernel's view of the same CPU: every feature spite reports is one Linux reports and back.
  const auto linux_flags = proc_cpuinfo_flags();
  if (!linux_flags.empty()) {
    const std::pair<const char*, bool> pairs[] = {
        {"ssse3", cpu.ssse3},           {"sse4_1", cpu.sse4_1},         {"sse4_2", cpu.sse4_2},
        {"popcnt", cpu.popcnt},         {"avx", cpu.avx},               {"avx2", cpu.avx2},
        {"fma", cpu.fma},               {"f16c", cpu.f16c},             {"bmi1", cpu.bmi1},
        {"bmi2", cpu.bmi2},             {"movbe", cpu.movbe},           {"avx512f", cpu.avx512f},
        {"avx512cd", cpu.avx512cd},     {"avx512bw", cpu.avx512bw},     {"avx512dq", cpu.avx512dq},
        {"avx512vl", cpu.avx512vl},     {"avx512_vnni", cpu.avx512_vnni}, {"avx512_bf16", cpu.avx512_bf16},
        {"avx512_fp16", cpu.avx512_fp16}, {"amx_tile", cpu.amx_tile},   {"amx_int8", cpu.amx_int8},
        {"amx_bf16", cpu.amx_bf16},     {"avx_vnni", cpu.avx_vnni},     {"pni", cpu.sse3},
        {"abm", cpu.lzcnt},
    };
    for (const auto& [name, ours] : pairs) {
      INFO(name);
      // Some hypervisors' guest kernels leave "abm" out of the list while CPUID has LZCNT (no OS
      // state needed, so the instruction runs); there the instruction itself is the witness.
      if (std::string_view(name) == "abm" && ours && linux_flags.count(name) == 0) {
        CHECK(lzcnt_encoding_of_one() == 63);
        continue;
      }
      CHECK(ours == (linux_flags.count(name) == 1));
    }
    if (!cpu.lzcnt) CHECK(lzcnt_encoding_of_one() == 0);
  }
#elif defined(__aarch64__)
  CHECK(cpu.machine == "aarch64");
  CHECK(cpu.neon);
  CHECK(cpu.isa().rfind("aarch64", 0) == 0);
  if (cpu.dotprod) CHECK(cpu.isa() != "aarch64");
#endif
}

TEST_CASE("detect_devices lists the CPU first and only GPUs a backend found", "[devices]") {
  temp_dir empty;  // no KFD topology under it
  const auto start = std::chrono::steady_clock::now();
  const device_report r = probe_devices({.sysfs_root = empty.path()});
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 10.0);

  REQUIRE(!r.devices.empty());
  const device_info& cpu = r.devices.front();
  CHECK(cpu.kind == device_kind::cpu);
  CHECK(cpu.index == 0);
  CHECK(cpu.arch == r.cpu.isa());
  CHECK(cpu.name == r.cpu.brand);
  CHECK(cpu.memory_bytes > 0);
  REQUIRE(r.backends.size() == 3);
  CHECK(r.backends[0].name == "CUDA");
  CHECK(r.backends[1].name == "ROCm");
  CHECK(r.backends[2].name == "Level Zero");
  CHECK(!r.backends[1].found);
  CHECK_THAT(r.backends[1].detail, Catch::Contains("no KFD topology"));
  for (const auto& b : r.backends) {
    INFO(b.name << ": " << b.detail);
    CHECK(!b.detail.empty());
    if (!b.found) {
      CHECK(std::none_of(r.devices.begin(), r.devices.end(), [&](const device_info& d) { return d.kind == b.kind; }));
    }
  }
  for (std::size_t i = 1; i < r.devices.size(); ++i) {
    CHECK(r.devices[i].kind != device_kind::cpu);
    CHECK(static_cast<int>(r.devices[i - 1].kind) <= static_cast<int>(r.devices[i].kind));
    CHECK(!r.devices[i].arch.empty());
  }
  if (machine_has_no_gpu()) {
    CHECK(r.devices.size() == 1);
    CHECK(detect_devices({.sysfs_root = empty.path()}).size() == 1);
  }
}

TEST_CASE("a KFD topology yields AMD devices with their gfx target and memory", "[devices][rocm]") {
  temp_dir root;
  write_fake_kfd(root.path());
  const detect_options only_rocm{.sysfs_root = root.path(), .cuda = false, .level_zero = false};
  const device_report r = probe_devices(only_rocm);
  REQUIRE(r.devices.size() == 3);
  CHECK(r.devices[0].kind == device_kind::cpu);

  const device_info& navi = r.devices[1];
  CHECK(navi.kind == device_kind::hip);
  CHECK(navi.index == 0);
  CHECK(navi.arch == "gfx1100");
  CHECK(navi.memory_bytes == 24 * GiB);
  CHECK(navi.name == "AMD gfx1100 GPU (device 0x744c)");
  CHECK(navi.driver == "amdgpu 6.8.5");

  const device_info& mi = r.devices[2];
  CHECK(mi.kind == device_kind::hip);
  CHECK(mi.index == 1);
  CHECK(mi.arch == "gfx90a");
  CHECK(mi.memory_bytes == 64 * GiB);
  CHECK(mi.name == "AMD Instinct MI210");
  const auto card = find_card(mi.name);
  REQUIRE(card.ok());
  CHECK((*card)->arch == mi.arch);

  REQUIRE(r.backends.size() == 1);
  CHECK(r.backends[0].found);
  CHECK(r.backends[0].detail == "amdgpu 6.8.5, 2 devices");

  SECTION("SPITE_SYSFS_ROOT points detection at the same tree") {
    env_guard env("SPITE_SYSFS_ROOT", root.path().string());
    const auto devices = detect_devices({.cuda = false, .level_zero = false});
    REQUIRE(devices.size() == 3);
    CHECK(devices[2].arch == "gfx90a");
  }
  SECTION("a topology with CPU nodes only has no GPU") {
    fs::remove_all(root / "class/kfd/kfd/topology/nodes/1");
    fs::remove_all(root / "class/kfd/kfd/topology/nodes/2");
    const device_report cpu_only = probe_devices(only_rocm);
    CHECK(cpu_only.devices.size() == 1);
    CHECK(cpu_only.backends[0].detail == "no GPU in the KFD topology");
  }
}

TEST_CASE("gfx_target_version maps to the gfx target name", "[devices][rocm]") {
  CHECK(gfx_arch_name(110000) == "gfx1100");
  CHECK(gfx_arch_name(110001) == "gfx1101");
  CHECK(gfx_arch_name(100300) == "gfx1030");
  CHECK(gfx_arch_name(100301) == "gfx1031");
  CHECK(gfx_arch_name(120001) == "gfx1201");
  CHECK(gfx_arch_name(90008) == "gfx908");
  CHECK(gfx_arch_name(90010) == "gfx90a");
  CHECK(gfx_arch_name(90402) == "gfx942");
  CHECK(gfx_arch_name(0).empty());
  CHECK(device_kind_name(device_kind::level_zero) == "level_zero");
  CHECK(static_cast<int>(device_kind::cuda) == 2);  // SPITE_DEVICE_CUDA
}

TEST_CASE("the card table is complete and well-formed", "[cards]") {
  const auto table = cards();
  REQUIRE(table.size() >= 40);
  std::set<std::string> names;
  const std::regex sm(R"(sm_\d+)"), gfx(R"(gfx\d{1,2}[0-9a-f]{2})"), xe(R"(xe2?_(hpg|hpc|lpg|lp))");
  for (const card& c : table) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);
    CHECK(c.memory_bytes >= 4 * GiB);
    CHECK(!c.note.empty());
    // Every name and alias finds its own card: no two cards share a spelling.
    CHECK(*find_card(c.name) == &c);
    for (const auto& a : c.aliases) {
      INFO(a);
      auto found = find_card(a);
      REQUIRE(found.ok());
      CHECK(*found == &c);
    }
    if (c.vendor == "NVIDIA") {
      CHECK(c.kind == device_kind::cuda);
      CHECK(std::regex_match(c.arch, sm));
    } else if (c.vendor == "AMD") {
      CHECK(c.kind == device_kind::hip);
      CHECK(std::regex_match(c.arch, gfx));
    } else if (c.vendor == "Intel") {
      CHECK(c.kind == device_kind::level_zero);
      CHECK(std::regex_match(c.arch, xe));
    } else {
      CHECK(c.vendor == "Apple");
      CHECK(c.kind == device_kind::none);
      CHECK(!c.supported);
      CHECK_THAT(c.note, Catch::Contains("not supported by the Linux daemon"));
    }
    if (c.vendor != "Apple") CHECK(c.supported);
  }
  for (const char* required :
       {"RTX_2060", "RTX_2070", "RTX_2080", "RTX_2080_TI", "RTX_3060", "RTX_3070", "RTX_3080", "RTX_3090", "RTX_3090_TI",
        "RTX_4060", "RTX_4070", "RTX_4080", "RTX_4090", "RTX_5070", "RTX_5080", "RTX_5090", "T4", "A10", "A100_40GB",
        "A100_80GB", "L4", "L40S", "H100_PCIE", "H100_SXM", "H200", "B200", "RX_6700_XT", "RX_6800_XT", "RX_6900_XT",
        "RX_7600", "RX_7800_XT", "RX_7900_XT", "RX_7900_XTX", "RX_9070_XT", "MI100", "MI210", "MI250X", "MI300X",
        "ARC_A380", "ARC_A580", "ARC_A750", "ARC_A770", "ARC_B570", "ARC_B580", "M1", "M2", "M3", "M4"}) {
    INFO(required);
    CHECK(names.count(required) == 1);
  }
  const auto spec = [](const char* name) { return *find_card(name); };
  CHECK((spec("RTX_4090")->arch == "sm_89" && spec("RTX_4090")->memory_bytes == 24 * GiB));
  CHECK((spec("RTX_2080_TI")->arch == "sm_75" && spec("RTX_2080_TI")->memory_bytes == 11 * GiB));
  CHECK((spec("RTX_3060")->arch == "sm_86" && spec("RTX_3060")->memory_bytes == 12 * GiB));
  CHECK((spec("A100_80GB")->arch == "sm_80" && spec("A100_80GB")->memory_bytes == 80 * GiB));
  CHECK((spec("H100_SXM")->arch == "sm_90" && spec("H200")->memory_bytes == 141 * GiB));
  CHECK((spec("B200")->arch == "sm_100" && spec("RTX_5090")->arch == "sm_120"));
  CHECK(spec("RTX_5090")->memory_bytes == 32 * GiB);
  CHECK((spec("RX_7900_XTX")->arch == "gfx1100" && spec("RX_7900_XTX")->memory_bytes == 24 * GiB));
  CHECK((spec("RX_7800_XT")->arch == "gfx1101" && spec("RX_7600")->arch == "gfx1102"));
  CHECK((spec("RX_6700_XT")->arch == "gfx1031" && spec("RX_6800_XT")->arch == "gfx1030"));
  CHECK((spec("RX_9070_XT")->arch == "gfx1201" && spec("MI300X")->memory_bytes == 192 * GiB));
  CHECK((spec("MI100")->arch == "gfx908" && spec("MI250X")->arch == "gfx90a" && spec("MI300X")->arch == "gfx942"));
  CHECK((spec("ARC_A770")->arch == "xe_hpg" && spec("ARC_A770")->memory_bytes == 16 * GiB));
  CHECK((spec("ARC_B580")->arch == "xe2_hpg" && spec("ARC_B580")->memory_bytes == 12 * GiB));
}

TEST_CASE("find_card ignores case, separators and vendor words", "[cards]") {
  const card* rtx4090 = *find_card("RTX_4090");
  REQUIRE(rtx4090->name == "RTX_4090");
  for (const char* spelling : {"rtx 4090", "rtx-4090", "Rtx4090", "  RTX 4090 ", "NVIDIA GeForce RTX 4090"}) {
    INFO(spelling);
    auto c = find_card(spelling);
    REQUIRE(c.ok());
    CHECK(*c == rtx4090);
  }
  CHECK((*find_card("AMD Radeon RX 7900 XTX"))->name == "RX_7900_XTX");
  CHECK((*find_card("Intel(R) Arc(TM) A770 Graphics"))->name == "ARC_A770");
  CHECK((*find_card("Tesla T4"))->name == "T4");
  CHECK((*find_card("NVIDIA H100 80GB HBM3"))->name == "H100_SXM");
  CHECK((*find_card("h100"))->name == "H100_SXM");
  CHECK((*find_card("NVIDIA A100-SXM4-40GB"))->name == "A100_40GB");
}

TEST_CASE("find_card of an unknown name suggests the closest names", "[cards]") {
  auto typo = find_card("RTX_4909");
  REQUIRE(!typo.ok());
  CHECK(typo.err().code == spite::errc::not_found);
  CHECK_THAT(typo.err().message, Catch::StartsWith("unknown card 'RTX_4909'; did you mean RTX_4090"));

  auto xtx = find_card("rx 7900 xtxx");
  REQUIRE(!xtx.ok());
  CHECK_THAT(xtx.err().message, Catch::Contains("did you mean RX_7900_XTX"));

  auto nonsense = find_card("quantum-toaster-9000");
  REQUIRE(!nonsense.ok());
  CHECK_THAT(nonsense.err().message, Catch::Contains("spitectl cards"));
  CHECK(!find_card("").ok());
}

TEST_CASE("resolve_gpu_archs maps card names to archs and passes archs through", "[cards]") {
  using list = std::vector<std::string>;
  CHECK(*resolve_gpu_archs("RTX_4090") == list{"sm_89"});
  CHECK(*resolve_gpu_archs("RTX_4090;RX_7800_XT") == list{"sm_89", "gfx1101"});
  CHECK(*resolve_gpu_archs(" sm_86, gfx1100 ;ARC_A770") == list{"sm_86", "gfx1100", "xe_hpg"});
  CHECK(*resolve_gpu_archs("RTX_4090;sm_89;rtx 4080;RTX_3090") == list{"sm_89", "sm_86"});
  CHECK(*resolve_gpu_archs("SM_90A;gfx90a;gfx942;sm_120") == list{"sm_90a", "gfx90a", "gfx942", "sm_120"});
  CHECK(*resolve_gpu_archs("gfx1100;;") == list{"gfx1100"});
  CHECK(resolve_gpu_archs("")->empty());

  auto typo = resolve_gpu_archs("sm_89;RTX_4909");
  REQUIRE(!typo.ok());
  CHECK(typo.err().code == spite::errc::not_found);
  CHECK_THAT(typo.err().message, Catch::Contains("'RTX_4909'"));
  CHECK_THAT(typo.err().message, Catch::Contains("RTX_4090"));
  CHECK(!resolve_gpu_archs("sm_x").ok());
  CHECK(!resolve_gpu_archs("gfx11").ok());

  auto apple = resolve_gpu_archs("M2");
  REQUIRE(!apple.ok());
  CHECK(apple.err().code == spite::errc::unsupported);
  CHECK_THAT(apple.err().message, Catch::Contains("not supported by the Linux daemon"));
}

TEST_CASE("spitectl devices prints the CPU and why there is no GPU", "[e2e][devices]") {
  const auto r = run_process({SPITECTL_PATH, "devices"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::StartsWith("cpu 0: " + detect_cpu().brand + " (" + detect_cpu().isa()));
  if (machine_has_no_gpu()) {
    CHECK_THAT(r.out, Catch::Contains("no GPU found (CUDA: "));
    CHECK_THAT(r.out, Catch::Contains("; ROCm: no KFD topology"));
    CHECK_THAT(r.out, Catch::Contains("; Level Zero: "));
  }

  const auto j = run_process({SPITECTL_PATH, "devices", "--json"});
  REQUIRE(j.exit_code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc.at("devices").at(0).at("kind") == "cpu");
  CHECK(doc.at("cpu").at("isa") == detect_cpu().isa());
  CHECK(doc.at("backends").size() == 3);
  // What compute runs by default here (one per core within the cgroup's quota), as the pool decides it.
  const int compute = spite::make_cpu_plan(spite::affinity_cpus()).default_threads();
  CHECK(doc.at("cpu").at("compute_threads") == compute);
  CHECK_THAT(r.out, Catch::Contains(", " + std::to_string(compute) + " compute threads by default"));

  CHECK(run_process({SPITECTL_PATH, "devices", "--bogus"}).exit_code == 2);
  CHECK(run_process({SPITECTL_PATH, "devices", "--help"}).exit_code == 0);
}

TEST_CASE("spitectl devices shows the GPUs of a KFD topology", "[e2e][devices]") {
  temp_dir root;
  write_fake_kfd(root.path());
  env_guard env("SPITE_SYSFS_ROOT", root.path().string());
  const auto r = run_process({SPITECTL_PATH, "devices"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("hip 0: AMD gfx1100 GPU (device 0x744c) (gfx1100), 24.00 GiB, amdgpu 6.8.5"));
  CHECK_THAT(r.out, Catch::Contains("hip 1: AMD Instinct MI210 (gfx90a), 64.00 GiB, amdgpu 6.8.5 [card MI210]"));
  CHECK_THAT(r.out, !Catch::Contains("no GPU found"));
}

TEST_CASE("spitectl cards lists, looks up and resolves cards", "[e2e][cards]") {
  const auto all = run_process({SPITECTL_PATH, "cards"});
  REQUIRE(all.exit_code == 0);
  CHECK_THAT(all.out, Catch::Contains("RTX_4090"));
  CHECK_THAT(all.out, Catch::Contains("not supported by the Linux daemon"));

  const auto json = run_process({SPITECTL_PATH, "cards", "--json"});
  REQUIRE(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.out).size() == cards().size());

  const auto one = run_process({SPITECTL_PATH, "cards", "rx 7900 xtx", "--json"});
  REQUIRE(one.exit_code == 0);
  const auto doc = nlohmann::json::parse(one.out);
  REQUIRE(doc.size() == 1);
  CHECK(doc.at(0).at("arch") == "gfx1100");
  CHECK(doc.at(0).at("memory_bytes") == 24 * GiB);

  const auto typo = run_process({SPITECTL_PATH, "cards", "RTX_4909"});
  CHECK(typo.exit_code == 1);
  CHECK_THAT(typo.err, Catch::Contains("did you mean RTX_4090"));

  const auto resolved = run_process({SPITECTL_PATH, "cards", "--resolve", "RTX_4090;gfx1100,ARC_B580"});
  REQUIRE(resolved.exit_code == 0);
  CHECK(resolved.out == "sm_89;gfx1100;xe2_hpg\n");
}

TEST_CASE("GPU arch candidates: NVIDIA falls back to older SASS, AMD to its family folder") {
  using spite::dispatch::gpu_arch_candidates;
  const auto sm89 = gpu_arch_candidates("sm_89");
  REQUIRE(sm89.size() > 3);
  CHECK(sm89[0] == "sm_89");
  CHECK(sm89[1] == "sm_87");
  CHECK(std::find(sm89.begin(), sm89.end(), "sm_90") == sm89.end());
  CHECK(gpu_arch_candidates("sm_90a") == std::vector<std::string>{"sm_90a"});
  CHECK(gpu_arch_candidates("gfx1100") == std::vector<std::string>{"gfx1100", "rdna3"});
  CHECK(gpu_arch_candidates("gfx1030") == std::vector<std::string>{"gfx1030", "rdna2"});
  CHECK(gpu_arch_candidates("gfx1201") == std::vector<std::string>{"gfx1201", "rdna4"});
  CHECK(gpu_arch_candidates("gfx942") == std::vector<std::string>{"gfx942", "cdna3"});
}
