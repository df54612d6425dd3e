// The plug-in host against real shared libraries: fixtures in plain C built against the frozen
// v1 header, each copied into a private kernels/<family>/<model>/<arch>/ tree.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <cstring>
#include <string>
#include <vector>

#include "spite/dispatch/dispatcher.hpp"
#include "spite/dispatch/plugin.hpp"
#include "spite/gguf/types.hpp"

namespace fs = std::filesystem;
using namespace spite;
using namespace spite::dispatch;

namespace {

// A private kernel directory, removed at the end of the test.
struct kernel_tree {
  fs::path root;
  kernel_tree() {
    std::string tmpl = (fs::temp_directory_path() / "spite-plugins-XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  ~kernel_tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // Copies fixture `name` to <root>/<where>/<name>.so; returns the copy.
  fs::path add(const std::string& name, const std::string& where) {
    const fs::path dir = root / where;
    fs::create_directories(dir);
    for (fs::path d = dir; d != root; d = d.parent_path()) ::chmod(d.c_str(), 0755);
    const fs::path to = dir / (name + ".so");
    fs::copy_file(fs::path(SPITE_FIXTURE_DIR) / (name + ".so"), to, fs::copy_options::overwrite_existing);
    ::chmod(to.c_str(), 0755);
    return to;
  }
};

std::string load_error(const fs::path& file, const fs::path& root, plugin_options options = {}) {
  auto lib = kernel_library::load(file, root, options);
  REQUIRE_FALSE(lib.ok());
  return lib.err().message;
}

dispatch_target cpu_target(std::vector<std::string> archs = {"x86_64"}) {
  dispatch_target t;
  t.device = SPITE_DEVICE_CPU;
  t.archs = std::move(archs);
  return t;
}

spite_op_signature rms_signature(const dispatch_target& t, std::int64_t n = 64) {
  spite_op_signature s = make_signature(SPITE_OP_RMS_NORM, t);
  s.rows = 1;
  s.in = s.out = n;
  return s;
}

}  // namespace

TEST_CASE("a plug-in built against the frozen v1 header loads, passes its self-test and serves rms_norm") {
  kernel_tree tree;
  const fs::path file = tree.add("good_generic", "generic/generic/x86_64");
  auto lib = kernel_library::load(file, tree.root);
  REQUIRE(lib.ok());
  CHECK((*lib)->id() == "generic/generic/x86_64");
  CHECK((*lib)->arch() == "x86_64");
  REQUIRE((*lib)->kernels().size() == 1);
  CHECK((*lib)->kernels()[0].op == SPITE_OP_RMS_NORM);
  CHECK(self_test_kernel((*lib)->kernels()[0]).ok());
}

TEST_CASE("broken libraries are refused with the reason") {
  kernel_tree tree;
  CHECK_THAT(load_error(tree.add("no_entry", "generic/generic/x86_64"), tree.root),
             Catch::Contains("no entry symbol spite_kernel_library_v1"));
  CHECK_THAT(load_error(tree.add("wrong_abi", "generic/generic/x86_64"), tree.root),
             Catch::Contains("kernel ABI 99.0, this host speaks 1.x"));
  CHECK_THAT(load_error(tree.add("good_generic", "llama/llama3/x86_64"), tree.root),
             Catch::Contains("its id 'generic/generic/x86_64' does not match its directory 'llama/llama3/x86_64'"));
  CHECK_THAT(load_error(tree.add("wrong_result", "generic/generic/x86_64"), tree.root),
             Catch::Contains("self-test of kernel 'rms_norm_fixture' failed") && Catch::Contains("error above tolerance"));
  CHECK_THAT(load_error(tree.add("init_fails", "generic/generic/x86_64"), tree.root),
             Catch::Contains("init() refused (status 3): fixture refuses to initialise"));
  {
    const fs::path junk = tree.root / "generic/generic/x86_64/junk.so";
    std::FILE* f = std::fopen(junk.c_str(), "w");
    std::fputs("not an ELF file", f);
    std::fclose(f);
    ::chmod(junk.c_str(), 0755);
    CHECK_THAT(load_error(junk, tree.root), Catch::Contains("junk.so: cannot load:"));
  }
  CHECK_THAT(load_error(tree.add("good_generic", "generic/x86_64"), tree.root),
             Catch::Contains("not in a <family>/<model>/<arch>/ directory"));
}

TEST_CASE("a library or directory writable by group or others is refused") {
  kernel_tree tree;
  const fs::path file = tree.add("good_generic", "generic/generic/x86_64");
  ::chmod(file.c_str(), 0775);
  CHECK_THAT(load_error(file, tree.root), Catch::Contains("writable by group or others"));
  ::chmod(file.c_str(), 0755);
  ::chmod(file.parent_path().c_str(), 0777);
  CHECK_THAT(load_error(file, tree.root), Catch::Contains(file.parent_path().string() + " is writable by group or others"));
  ::chmod(file.parent_path().c_str(), 0755);
  CHECK(kernel_library::load(file, tree.root).ok());
}

TEST_CASE("a scan loads the good libraries and lists the refused ones") {
  kernel_tree tree;
  tree.add("good_generic", "generic/generic/x86_64");
  tree.add("wrong_abi", "generic/generic/x86_64");
  tree.add("no_entry", "llama/llama3/x86_64");
  const auto set = kernel_set::scan({tree.root, tree.root / "does-not-exist"});
  REQUIRE(set->libraries().size() == 1);
  CHECK(set->libraries()[0]->id() == "generic/generic/x86_64");
  CHECK(set->rejected().size() == 2);
  CHECK(kernel_set::scan({tree.root})->generation() > set->generation());
}

TEST_CASE("resolution prefers family/model/arch, then family/generic, then generic/generic, then lesser ISAs") {
  kernel_tree tree;
  tree.add("good_generic", "generic/generic/x86_64");
  tree.add("good_family", "llama/generic/x86_64");
  tree.add("good_model", "llama/llama3/x86_64");
  tree.add("good_model_v2", "llama/llama3/x86_64_v2");
  tree.add("other_model", "qwen/qwen2/x86_64");
  const auto set = kernel_set::scan({tree.root});
  REQUIRE(set->libraries().size() == 5);

  auto pick = [&](kernel_identity who, std::vector<std::string> archs) {
    auto d = dispatcher::create(set, std::move(who), cpu_target(std::move(archs)));
    return d->resolve(rms_signature(d->target())).source;
  };
  CHECK(pick({"llama", "llama3"}, {"x86_64_v2", "x86_64"}) == "llama/llama3/x86_64_v2");
  CHECK(pick({"llama", "llama3"}, {"x86_64"}) == "llama/llama3/x86_64");
  CHECK(pick({"llama", "llama2"}, {"x86_64"}) == "llama/generic/x86_64");
  CHECK(pick({"phi", "phi3"}, {"x86_64"}) == "generic/generic/x86_64");
  CHECK(pick({"qwen", "qwen2"}, {"x86_64"}) == "qwen/qwen2/x86_64");
  // A more specific library on a lesser ISA loses to the better ISA's generic one.
  CHECK(pick({"llama", "llama2"}, {"x86_64_v2", "x86_64"}) == "llama/generic/x86_64");
  CHECK(pick({"phi", "phi3"}, {"aarch64"}) == "builtin");
}

TEST_CASE("within one tier the higher probe score wins, and every candidate is explained") {
  kernel_tree tree;
  tree.add("good_generic", "generic/generic/x86_64");
  tree.add("high_score", "generic/generic/x86_64");  // a second library in the same directory
  tree.add("other_model", "qwen/qwen2/x86_64");
  const auto set = kernel_set::scan({tree.root});
  REQUIRE(set->libraries().size() == 3);
  auto d = dispatcher::create(set, {"llama", "llama3"}, cpu_target());
  const dispatch_choice& c = d->resolve(rms_signature(d->target()));
  CHECK(c.kernel_name == "rms_norm_high");
  REQUIRE(c.candidates.size() == 4);
  CHECK(c.candidates.front().kernel == "rms_norm_high");
  CHECK(c.candidates.front().score == 90);
  bool saw_lower = false, saw_other = false, saw_builtin = false;
  for (const auto& cand : c.candidates) {
    if (cand.kernel == "rms_norm_fixture" && cand.source == "generic/generic/x86_64") {
      saw_lower = cand.score == 50 && cand.reason == "a higher score wins";
    }
    if (cand.source == "qwen/qwen2/x86_64") saw_other = cand.score == 0 && cand.reason == "for qwen/qwen2, not llama/llama3";
    if (cand.source == "builtin") saw_builtin = cand.reason == "a plug-in wins";
  }
  CHECK(saw_lower);
  CHECK(saw_other);
  CHECK(saw_builtin);
  // Cached: the same object answers the same signature.
  CHECK(&d->resolve(rms_signature(d->target())) == &c);
}

TEST_CASE("a probe returning garbage is refused and the built-in kernel serves") {
  kernel_tree tree;
  tree.add("garbage_probe", "generic/generic/x86_64");
  // The self-test would accept its (correct) rms_norm; only the dispatcher judges the score.
  const auto set = kernel_set::scan({tree.root});
  REQUIRE(set->libraries().size() == 1);
  auto d = dispatcher::create(set, {"llama", "llama3"}, cpu_target());
  const dispatch_choice& c = d->resolve(rms_signature(d->target()));
  CHECK(c.source == "builtin");
  REQUIRE(c.candidates.size() == 2);
  CHECK_THAT(c.candidates[1].reason, Catch::Contains("implausible score 2147483647"));
}

TEST_CASE("the op table runs the chosen plug-in and falls back to the reference when it fails") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(3 * 96), w(96), ref(x.size()), got(x.size(), NAN);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  cpu_reference_ops().rms_norm(x.data(), w.data(), ref.data(), 96, 3, 1e-6f);

  for (const char* name : {"good_generic", "run_fails"}) {
    kernel_tree tree;
    tree.add(name, "generic/generic/x86_64");
    const auto set = kernel_set::scan({tree.root});
    REQUIRE(set->libraries().size() == 1);
    auto d = dispatcher::create(set, {"llama", "llama3"}, cpu_target());
    auto ops = d->ops();
    std::fill(got.begin(), got.end(), NAN);
    ops->rms_norm(x.data(), w.data(), got.data(), 96, 3, 1e-6f);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(name << " element " << i);
      REQUIRE(got[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));
    }
  }
}

namespace {

// A {in, out} matrix of `type` over its own bytes.
struct owned_matrix {
  std::vector<std::byte> bytes;
  weight w;
};

owned_matrix random_matrix(gguf::tensor_type type, std::int64_t in, std::int64_t out, std::mt19937& rng) {
  std::normal_distribution<float> dist;
  owned_matrix m;
  const std::size_t row = *gguf::row_bytes(type, in);
  m.bytes.resize(row * static_cast<std::size_t>(out));
  std::vector<float> values(static_cast<std::size_t>(in));
  for (std::int64_t r = 0; r < out; ++r) {
    for (float& v : values) v = dist(rng);
    REQUIRE(gguf::quantize(type, values.data(), m.bytes.data() + static_cast<std::size_t>(r) * row, in));
  }
  m.w.data = m.bytes.data();
  m.w.type = type;
  m.w.in = in;
  m.w.out = out;
  m.w.row_bytes = row;
  return m;
}

}  // namespace

TEST_CASE("matmul_parts gives every part what matmul gives it, plug-in kernels and parts placed together alike") {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  owned_matrix f32 = random_matrix(gguf::tensor_type::f32, 64, 8, rng), a = random_matrix(gguf::tensor_type::q4_0, 64, 16, rng),
               b = random_matrix(gguf::tensor_type::q4_0, 64, 8, rng);
  // Packed and placed together where this processor's kernels pack Q4_0 (x86 with AVX2).
  (void)pack_for_cpu(a.w, false);
  (void)pack_for_cpu(b.w, false);
  weight* both[] = {&a.w, &b.w};
  if (place_packed_together(both) == 1) CHECK(packed_together(a.w, b.w));

  kernel_tree tree;
  tree.add("matmul_f32", "generic/generic/x86_64");
  const auto with_plugin = kernel_set::scan({tree.root});
  REQUIRE(with_plugin->libraries().size() == 1);
  kernel_tree empty;
  const auto without = kernel_set::scan({empty.root});
  for (const auto& set : {with_plugin, without}) {
    auto d = dispatcher::create(set, {"llama", "llama3"}, cpu_target());
    spite_op_signature f32_sig = make_signature(SPITE_OP_MATMUL, cpu_target());
    f32_sig.weight_dtype = SPITE_DTYPE_F32;
    f32_sig.rows = 3;
    f32_sig.in = 64;
    f32_sig.out = 8;
    const bool plugin = set == with_plugin;
    INFO(std::string(plugin ? "the F32 part goes to the plug-in" : "no plug-in"));
    CHECK((d->resolve(f32_sig).kernel != nullptr) == plugin);
    auto ops = d->ops();
    thread_pool pool(2);
    for (const std::int64_t n : {1, 3}) {
      std::vector<float> x(static_cast<std::size_t>(64 * n));
      for (float& v : x) v = dist(rng);
      const weight* parts[] = {&f32.w, &a.w, &b.w};
      std::vector<std::vector<float>> want, got;
      std::vector<float*> ys;
      for (const weight* w : parts) {
        want.emplace_back(static_cast<std::size_t>(w->out * n));
        got.emplace_back(want.back().size(), NAN);
        ops->matmul(*w, x.data(), n, want.back().data(), pool);
      }
      for (auto& g : got) ys.push_back(g.data());
      ops->matmul_parts(parts, x.data(), n, ys.data(), pool);
      // The Q4_0 parts alone, placed together, through whichever path the table takes for them.
      std::vector<float> qa(static_cast<std::size_t>(16 * n), NAN), qb(static_cast<std::size_t>(8 * n), NAN);
      const weight* quantized[] = {&a.w, &b.w};
      float* qys[] = {qa.data(), qb.data()};
      ops->matmul_parts(quantized, x.data(), n, qys, pool);
      for (std::size_t p = 0; p < want.size(); ++p) {
        INFO("part " << p << ", " << n << " tokens");
        CHECK(std::memcmp(want[p].data(), got[p].data(), want[p].size() * sizeof(float)) == 0);
      }
      CHECK(std::memcmp(want[1].data(), qa.data(), qa.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(want[2].data(), qb.data(), qb.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the default kernel path puts SPITE_KERNEL_PATH first, then the config's kernels/ folder") {
  ::setenv("SPITE_KERNEL_PATH", "/opt/a::/opt/b", 1);
  const auto path = default_kernel_path("/etc/spite");
  ::unsetenv("SPITE_KERNEL_PATH");
  REQUIRE(path.size() == 4);
  CHECK(path[0] == "/opt/a");
  CHECK(path[1] == "/opt/b");
  CHECK(path[2] == "/etc/spite/kernels");
}
