// GPU detection without build-time dependencies: the CUDA driver API and the Level Zero loader
// are opened with dlopen (the few prototypes needed are declared here), AMD GPUs are read from the
// KFD topology in sysfs. Every probe fails quietly and says why in its backend_status.
#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "spite/dispatch/devices.hpp"

#if __has_include(<level_zero/ze_api.h>)
#include <level_zero/ze_api.h>
#define SPITE_HAVE_ZE_HEADER 1
#endif

namespace spite::dispatch {
namespace {

namespace fs = std::filesystem;

std::string plural(std::size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(::dlsym(lib, name));
}

// Opens a shared library by soname, or returns null with the reason in `why`.
void* open_library(const char* soname, std::string& why) {
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    why = std::string(soname) + " not found";
    ::dlerror();  // clear the message
  }
  return lib;
}

// ---- CUDA: the driver API of libcuda.so.1 --------------------------------------------------

using cu_result = int;  // CUresult; 0 = CUDA_SUCCESS
using cu_device = int;  // CUdevice
constexpr int k_cu_attr_cc_major = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int k_cu_attr_cc_minor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct cuda_api {
  std::string why;  // empty when usable
  int driver_version = 0;
  cu_result (*device_get_count)(int*) = nullptr;
  cu_result (*device_get)(cu_device*, int) = nullptr;
  cu_result (*device_get_name)(char*, int, cu_device) = nullptr;
  cu_result (*device_get_attribute)(int*, int, cu_device) = nullptr;
  cu_result (*device_total_mem)(std::size_t*, cu_device) = nullptr;
};

// Loaded and initialized once per process; the library stays loaded (libcuda starts threads).
const cuda_api& cuda() {
  static const cuda_api api = [] {
    cuda_api a;
    void* lib = open_library("libcuda.so.1", a.why);
    if (lib == nullptr) return a;
    const auto init = symbol<cu_result (*)(unsigned)>(lib, "cuInit");
    const auto driver_get_version = symbol<cu_result (*)(int*)>(lib, "cuDriverGetVersion");
    const auto error_name = symbol<cu_result (*)(cu_result, const char**)>(lib, "cuGetErrorName");
    a.device_get_count = symbol<decltype(a.device_get_count)>(lib, "cuDeviceGetCount");
    a.device_get = symbol<decltype(a.device_get)>(lib, "cuDeviceGet");
    a.device_get_name = symbol<decltype(a.device_get_name)>(lib, "cuDeviceGetName");
    a.device_get_attribute = symbol<decltype(a.device_get_attribute)>(lib, "cuDeviceGetAttribute");
    a.device_total_mem = symbol<decltype(a.device_total_mem)>(lib, "cuDeviceTotalMem_v2");
    if (!init || !a.device_get_count || !a.device_get || !a.device_get_name || !a.device_get_attribute ||
        !a.device_total_mem) {
      a.why = "libcuda.so.1 lacks the driver API entry points (driver too old?)";
      return a;
    }
    if (const cu_result rc = init(0); rc != 0) {
      const char* name = nullptr;
      if (error_name == nullptr || error_name(rc, &name) != 0 || name == nullptr) name = "error";
      a.why = "cuInit failed: " + std::string(name) + " (" + std::to_string(rc) + ")";
      return a;
    }
    if (driver_get_version != nullptr) driver_get_version(&a.driver_version);
    return a;
  }();
  return api;
}

void probe_cuda(device_report& report) {
  backend_status st{device_kind::cuda, "CUDA", false, {}};
  const cuda_api& api = cuda();
  if (!api.why.empty()) {
    st.detail = api.why;
    report.backends.push_back(std::move(st));
    return;
  }
  st.found = true;
  const std::string driver = api.driver_version > 0 ? "CUDA " + std::to_string(api.driver_version / 1000) + "." +
                                                          std::to_string(api.driver_version % 1000 / 10)
                                                    : "CUDA";
  int count = 0;
  if (api.device_get_count(&count) != 0) count = 0;
  std::size_t found = 0;
  for (int i = 0; i < count; ++i) {
    cu_device dev = 0;
    if (api.device_get(&dev, i) != 0) continue;
    device_info d;
    d.kind = device_kind::cuda;
    d.index = i;
    char name[256] = {};
    if (api.device_get_name(name, sizeof name - 1, dev) == 0) d.name = name;
    int major = 0, minor = 0;
    api.device_get_attribute(&major, k_cu_attr_cc_major, dev);
    api.device_get_attribute(&minor, k_cu_attr_cc_minor, dev);
    d.arch = "sm_" + std::to_string(major * 10 + minor);
    std::size_t bytes = 0;
    if (api.device_total_mem(&bytes, dev) == 0) d.memory_bytes = bytes;
    d.driver = driver;
    report.devices.push_back(std::move(d));
    ++found;
  }
  st.detail = "driver " + driver + ", " + plural(found, "device");
  report.backends.push_back(std::move(st));
}

// ---- ROCm: the KFD topology in sysfs -------------------------------------------------------

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// A KFD "properties" file: one "key value" pair per line, values unsigned decimal.
std::map<std::string, std::uint64_t> read_properties(const fs::path& path) {
  std::map<std::string, std::uint64_t> props;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    char k[128];
    unsigned long long v = 0;
    if (std::sscanf(line.c_str(), "%127s %llu", k, &v) == 2) props[k] = v;
  }
  return props;
}

std::uint64_t prop(const std::map<std::string, std::uint64_t>& props, const char* key) {
  const auto it = props.find(key);
  return it == props.end() ? 0 : it->second;
}

// The numeric subdirectories of `dir`, in numeric order.
std::vector<std::pair<unsigned long, fs::path>> numbered_dirs(const fs::path& dir) {
  std::vector<std::pair<unsigned long, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    out.emplace_back(std::strtoul(name.c_str(), nullptr, 10), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

fs::path sysfs_root(const detect_options& options) {
  if (!options.sysfs_root.empty()) return options.sysfs_root;
  if (const char* env = std::getenv("SPITE_SYSFS_ROOT"); env != nullptr && *env != '\0') return env;
  return "/sys";
}

void probe_rocm(device_report& report, const fs::path& root) {
  backend_status st{device_kind::hip, "ROCm", false, {}};
  const fs::path nodes = root / "class" / "kfd" / "kfd" / "topology" / "nodes";
  std::error_code ec;
  if (!fs::is_directory(nodes, ec)) {
    st.detail = "no KFD topology (amdgpu driver not loaded)";
    report.backends.push_back(std::move(st));
    return;
  }
  st.found = true;
  std::string driver = "amdgpu";
  if (const std::string v = read_text(root / "module" / "amdgpu" / "version"); !v.empty()) driver += " " + v;
  int index = 0;
  for (const auto& [id, node] : numbered_dirs(nodes)) {
    const auto props = read_properties(node / "properties");
    const auto gfx = static_cast<std::uint32_t>(prop(props, "gfx_target_version"));
    if (gfx == 0 || prop(props, "simd_count") == 0) continue;  // a CPU node
    device_info d;
    d.kind = device_kind::hip;
    d.index = index++;
    d.arch = gfx_arch_name(gfx);
    d.driver = driver;
    for (const auto& [bank_id, bank] : numbered_dirs(node / "mem_banks")) {
      const auto bp = read_properties(bank / "properties");
      const auto heap = prop(bp, "heap_type");
      if (heap == 1 || heap == 2) d.memory_bytes += prop(bp, "size_in_bytes");  // frame buffer, public/private
    }
    const std::string minor = std::to_string(prop(props, "drm_render_minor"));
    d.name = read_text(root / "class" / "drm" / ("renderD" + minor) / "device" / "product_name");
    if (d.name.empty()) {
      char dev[16];
      std::snprintf(dev, sizeof dev, "0x%04llx", static_cast<unsigned long long>(prop(props, "device_id")));
      d.name = "AMD " + d.arch + " GPU (device " + dev + ")";
    }
    report.devices.push_back(std::move(d));
  }
  st.detail = index == 0 ? "no GPU in the KFD topology" : driver + ", " + plural(static_cast<std::size_t>(index), "device");
  report.backends.push_back(std::move(st));
}

// ---- Level Zero: libze_loader.so.1 ----------------------------------------------------------

using ze_result = std::uint32_t;  // ze_result_t; 0 = ZE_RESULT_SUCCESS
using ze_handle = void*;          // ze_driver_handle_t, ze_device_handle_t
constexpr std::uint32_t k_ze_init_gpu_only = 1;
constexpr std::uint32_t k_ze_stype_device_properties = 0x3;
constexpr std::uint32_t k_ze_stype_device_memory_properties = 0x7;
constexpr std::uint32_t k_ze_device_type_gpu = 1;
constexpr std::uint32_t k_ze_device_flag_integrated = 1;

struct ze_device_props {  // ze_device_properties_t
  std::uint32_t stype;
  void* next;
  std::uint32_t type, vendor_id, device_id, flags, subdevice_id, core_clock_rate;
  std::uint64_t max_mem_alloc_size;
  std::uint32_t max_hardware_contexts, max_command_queue_priority, num_threads_per_eu, physical_eu_simd_width,
      num_eus_per_subslice, num_subslices_per_slice, num_slices;
  std::uint64_t timer_resolution;
  std::uint32_t timestamp_valid_bits, kernel_timestamp_valid_bits;
  std::uint8_t uuid[16];
  char name[256];
};

struct ze_memory_props {  // ze_device_memory_properties_t
  std::uint32_t stype;
  void* next;
  std::uint32_t flags, max_clock_rate, max_bus_width;
  std::uint64_t total_size;
  char name[256];
};

#if SPITE_HAVE_ZE_HEADER
static_assert(sizeof(ze_device_props) == sizeof(ze_device_properties_t));
static_assert(offsetof(ze_device_props, device_id) == offsetof(ze_device_properties_t, deviceId));
static_assert(offsetof(ze_device_props, name) == offsetof(ze_device_properties_t, name));
static_assert(sizeof(ze_memory_props) == sizeof(ze_device_memory_properties_t));
static_assert(offsetof(ze_memory_props, total_size) == offsetof(ze_device_memory_properties_t, totalSize));
static_assert(k_ze_stype_device_properties == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES);
static_assert(k_ze_stype_device_memory_properties == ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES);
#endif

struct ze_api {
  std::string why;
  ze_result (*driver_get)(std::uint32_t*, ze_handle*) = nullptr;
  ze_result (*driver_get_api_version)(ze_handle, std::uint32_t*) = nullptr;
  ze_result (*device_get)(ze_handle, std::uint32_t*, ze_handle*) = nullptr;
  ze_result (*device_get_properties)(ze_handle, ze_device_props*) = nullptr;
  ze_result (*device_get_memory_properties)(ze_handle, std::uint32_t*, ze_memory_props*) = nullptr;
};

const ze_api& level_zero() {
  static const ze_api api = [] {
    ze_api a;
    void* lib = open_library("libze_loader.so.1", a.why);
    if (lib == nullptr) return a;
    const auto init = symbol<ze_result (*)(std::uint32_t)>(lib, "zeInit");
    a.driver_get = symbol<decltype(a.driver_get)>(lib, "zeDriverGet");
    a.driver_get_api_version = symbol<decltype(a.driver_get_api_version)>(lib, "zeDriverGetApiVersion");
    a.device_get = symbol<decltype(a.device_get)>(lib, "zeDeviceGet");
    a.device_get_properties = symbol<decltype(a.device_get_properties)>(lib, "zeDeviceGetProperties");
    a.device_get_memory_properties =
        symbol<decltype(a.device_get_memory_properties)>(lib, "zeDeviceGetMemoryProperties");
    if (!init || !a.driver_get || !a.device_get || !a.device_get_properties || !a.device_get_memory_properties) {
      a.why = "libze_loader.so.1 lacks the core API entry points";
      return a;
    }
    if (const ze_result rc = init(k_ze_init_gpu_only); rc != 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "no GPU driver (zeInit: 0x%08x)", rc);
      a.why = buf;
    }
    return a;
  }();
  return api;
}

// The Xe generation of an Intel GPU from its PCI device id.
std::string intel_arch(std::uint32_t device_id) {
  const std::uint32_t hi = device_id & 0xff00;
  if (hi == 0x5600) return "xe_hpg";                      // Alchemist (DG2), Flex
  if (hi == 0xe200) return "xe2_hpg";                     // Battlemage
  if ((device_id & 0xfff0) == 0x0bd0) return "xe_hpc";    // Ponte Vecchio (Max)
  if (hi == 0x7d00) return "xe_lpg";                      // Meteor Lake, Arrow Lake
  if (hi == 0x6400) return "xe2_lpg";                     // Lunar Lake
  if (hi == 0x9a00 || hi == 0x4600 || hi == 0x4900 || hi == 0xa700) return "xe_lp";  // Tiger/Alder/Raptor Lake, DG1
  char buf[32];
  std::snprintf(buf, sizeof buf, "intel_0x%04x", device_id);
  return buf;
}

void probe_level_zero(device_report& report) {
  backend_status st{device_kind::level_zero, "Level Zero", false, {}};
  const ze_api& api = level_zero();
  if (!api.why.empty()) {
    st.detail = api.why;
    report.backends.push_back(std::move(st));
    return;
  }
  st.found = true;
  std::uint32_t n_drivers = 0;
  if (api.driver_get(&n_drivers, nullptr) != 0) n_drivers = 0;
  std::vector<ze_handle> drivers(n_drivers);
  if (n_drivers > 0 && api.driver_get(&n_drivers, drivers.data()) != 0) n_drivers = 0;
  drivers.resize(n_drivers);
  int index = 0;
  std::string version;
  for (ze_handle drv : drivers) {
    std::uint32_t v = 0;
    const std::string driver = api.driver_get_api_version != nullptr && api.driver_get_api_version(drv, &v) == 0
                                   ? "Level Zero " + std::to_string(v >> 16) + "." + std::to_string(v & 0xffff)
                                   : "Level Zero";
    if (version.empty()) version = driver;
    std::uint32_t n = 0;
    if (api.device_get(drv, &n, nullptr) != 0 || n == 0) continue;
    std::vector<ze_handle> devs(n);
    if (api.device_get(drv, &n, devs.data()) != 0) continue;
    devs.resize(n);
    for (ze_handle dev : devs) {
      ze_device_props p{};
      p.stype = k_ze_stype_device_properties;
      if (api.device_get_properties(dev, &p) != 0 || p.type != k_ze_device_type_gpu) continue;
      device_info d;
      d.kind = device_kind::level_zero;
      d.index = index++;
      p.name[sizeof p.name - 1] = '\0';
      d.name = p.name;
      if (p.flags & k_ze_device_flag_integrated) d.name += " (integrated)";
      d.arch = intel_arch(p.device_id);
      d.driver = driver;
      std::uint32_t n_mem = 0;
      if (api.device_get_memory_properties(dev, &n_mem, nullptr) == 0 && n_mem > 0) {
        std::vector<ze_memory_props> mem(n_mem);
        for (auto& m : mem) m.stype = k_ze_stype_device_memory_properties;
        if (api.device_get_memory_properties(dev, &n_mem, mem.data()) == 0) {
          for (std::uint32_t i = 0; i < n_mem && i < mem.size(); ++i) d.memory_bytes += mem[i].total_size;
        }
      }
      report.devices.push_back(std::move(d));
    }
  }
  if (drivers.empty()) {
    st.detail = "no driver";
  } else {
    st.detail = index == 0 ? version + ", no GPU" : version + ", " + plural(static_cast<std::size_t>(index), "device");
  }
  report.backends.push_back(std::move(st));
}

device_info cpu_device(const cpu_features& cpu) {
  device_info d;
  d.kind = device_kind::cpu;
  d.index = 0;
  d.name = cpu.brand;
  d.arch = cpu.isa();
  utsname u{};
  if (::uname(&u) == 0) d.driver = std::string(u.sysname) + " " + u.release;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) d.memory_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  return d;
}

}  // namespace

std::string_view device_kind_name(device_kind kind) noexcept {
  switch (kind) {
    case device_kind::cpu: return "cpu";
    case device_kind::cuda: return "cuda";
    case device_kind::hip: return "hip";
    case device_kind::level_zero: return "level_zero";
    case device_kind::none: break;
  }
  return "none";
}

std::string gfx_arch_name(std::uint32_t v) {
  if (v == 0) return {};
  const unsigned major = v / 10000, minor = v / 100 % 100, stepping = v % 100;
  char buf[32];
  std::snprintf(buf, sizeof buf, "gfx%u%x%x", major, minor, stepping);
  return buf;
}

device_report probe_devices(const detect_options& options) {
  device_report report;
  report.cpu = detect_cpu();
  report.devices.push_back(cpu_device(report.cpu));
  if (options.cuda) probe_cuda(report);
  if (options.rocm) probe_rocm(report, sysfs_root(options));
  if (options.level_zero) probe_level_zero(report);
  return report;
}

std::vector<device_info> detect_devices(const detect_options& options) {
  return probe_devices(options).devices;
}

}  // namespace spite::dispatch
