// spitectl verify LIB.so [--json] [--quick]: every kernel of a plug-in against the reference ops
// over a sweep of shapes (odd sizes included), with each op's tolerance on the normalised error.
// Exit status 0 only when every case passed (refused cases are listed, not failures).
#include <cmath>
#include <cstdio>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "spite/dispatch/plugin.hpp"
#include "spite/dispatch/verify.hpp"

namespace spite::ctl {

int run_verify(const std::vector<std::string>& argv) {
  namespace dp = spite::dispatch;
  namespace fs = std::filesystem;
  args a;
  a.flag("--json", "machine-readable output")
      .flag("--quick", "only the small self-test shapes")
      .flag("--help", "show this help");
  if (auto r = a.parse(argv); !r || a.has("--help") || a.positional().size() != 1) {
    if (!r) std::fprintf(stderr, "spitectl verify: %s\n", r.err().message.c_str());
    const bool ok = r && a.has("--help");
    std::fprintf(ok ? stdout : stderr, "usage: spitectl verify LIB.so [--quick] [--json]\n%s", a.help().c_str());
    return ok ? exit_ok : exit_usage;
  }
  const fs::path file = fs::absolute(a.positional()[0]);
  // The library is checked as spited would check it, except that it may sit anywhere (a build
  // tree) and the self-test is this command's own sweep.
  dp::plugin_options options;
  options.self_test = false;
  options.check_permissions = false;
  options.check_location = false;
  auto lib = dp::kernel_library::load(file, file.parent_path(), options);
  if (!lib) {
    std::fprintf(stderr, "spitectl verify: %s\n", lib.err().message.c_str());
    return exit_failure;
  }
  if ((*lib)->descriptor().device != SPITE_DEVICE_CPU) {
    std::fprintf(stderr, "spitectl verify: %s runs on a GPU; verifying GPU kernels needs the device (spited)\n",
                 (*lib)->id().c_str());
    return exit_failure;
  }
  dp::verify_options vo;
  vo.sweep = !a.has("--quick");
  int failed = 0, passed = 0, skipped = 0;
  nlohmann::json cases = nlohmann::json::array();
  if (!a.has("--json")) {
    std::printf("%s (%s)\n", (*lib)->id().c_str(), file.string().c_str());
    std::printf("%-24s %-10s %-8s %-14s %-11s %-11s %s\n", "kernel", "op", "dtype", "shape", "error", "tolerance",
                "result");
  }
  for (const spite_kernel& k : (*lib)->kernels()) {
    const std::string name = k.name != nullptr ? std::string(k.name, strnlen(k.name, 128)) : "?";
    for (const dp::verify_case& c : dp::verify_kernel(k, vo)) {
      const char* verdict = c.skipped ? "refused" : c.passed ? "ok" : "FAIL";
      if (c.skipped) {
        ++skipped;
      } else if (c.passed) {
        ++passed;
      } else {
        ++failed;
      }
      if (a.has("--json")) {
        cases.push_back({{"kernel", name}, {"op", c.op}, {"dtype", c.dtype}, {"shape", c.shape},
                         {"error", std::isfinite(c.error) ? nlohmann::json(c.error) : nlohmann::json("inf")},
                         {"tolerance", c.tolerance}, {"result", verdict}, {"note", c.note}});
      } else {
        std::printf("%-24s %-10s %-8s %-14s %-11.3e %-11.1e %s%s%s\n", name.c_str(), c.op.c_str(), c.dtype.c_str(),
                    c.shape.c_str(), c.error, c.tolerance, verdict, c.note.empty() ? "" : ": ", c.note.c_str());
      }
    }
  }
  if (a.has("--json")) {
    std::cout << nlohmann::json{{"library", (*lib)->id()}, {"path", file.string()}, {"passed", passed},
                                {"failed", failed}, {"refused", skipped}, {"cases", cases}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%d passed, %d failed, %d refused by probe\n", passed, failed, skipped);
  }
  return failed == 0 ? exit_ok : exit_failure;
}

}  // namespace spite::ctl
