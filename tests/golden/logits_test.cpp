// Forward passes against the reference engine's logits (golden/logits, format in its README):
// prompt tokens, logits at every prompt position, and greedy continuations.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "shared_data.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/executor/context.hpp"
#include "spite/gguf/file.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using spite::executor::batch;

struct figures {
  double max_rel_err = 0;  // float models: max |ours - ref| / max |ref logit| over top-20s
  std::size_t positions = 0, top1_agree = 0;
  double kl_sum = 0;
  std::size_t greedy_checked = 0;
};

bool gguf_quantized(spite::gguf::tensor_type t) { return spite::gguf::traits(t).quantized; }

bool float_weights(const spite::gguf::file& f) {
  for (const auto& t : f.tensors()) {
    if (t.n_dims >= 2 && gguf_quantized(t.type)) return false;
  }
  return true;
}

}  // namespace

static void check_position(const std::vector<float>& ours, const nlohmann::json& ref, bool exact, figures& fig) {
  const auto& top = ref.at("top");
  const double lse = ref.at("lse").get<double>();
  // "max |logit| at that position" is over the whole vocabulary; ours stands in for the
  // reference's (the two agree far more closely than the tolerance).
  double max_abs = 0;
  for (float v : ours) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
  // Our distribution.
  double m = -1e300;
  for (float v : ours) m = std::max(m, static_cast<double>(v));
  double z = 0;
  for (float v : ours) z += std::exp(static_cast<double>(v) - m);
  const double our_lse = m + std::log(z);
  std::size_t our_top = 0;
  for (std::size_t i = 1; i < ours.size(); ++i) {
    if (ours[i] > ours[our_top]) our_top = i;
  }
  fig.positions++;
  if (static_cast<std::int64_t>(our_top) == top[0][0].get<std::int64_t>()) fig.top1_agree++;
  double p_rest = 1, q_rest = 1, kl = 0;
  for (const auto& e : top) {
    const auto id = e[0].get<std::size_t>();
    const double ref_logit = e[1].get<double>();
    const double p = std::exp(ref_logit - lse), q = std::exp(static_cast<double>(ours[id]) - our_lse);
    p_rest -= p;
    q_rest -= q;
    if (p > 0) kl += p * std::log(p / std::max(q, 1e-30));
    if (exact) fig.max_rel_err = std::max(fig.max_rel_err, std::fabs(ours[id] - ref_logit) / max_abs);
  }
  if (p_rest > 1e-12) kl += p_rest * std::log(p_rest / std::max(q_rest, 1e-30));
  fig.kl_sum += kl;
}

// Checks one golden file; `ops` null: the built-in kernels. Returns false when skipped.
static bool check_golden_file(const nlohmann::json& golden, const std::set<std::string>& families,
                              std::shared_ptr<const spite::dispatch::op_table> (*make_ops)(const spite::gguf::file&),
                              bool flash_attn = false) {
  REQUIRE(golden.at("settings").at("flash_attn").get<bool>() == flash_attn);
  if (!families.count(golden.at("arch").get<std::string>())) return false;
  const std::string rel = golden.at("model").get<std::string>();
  fs::path model_path = spite::test::shared_dir() / "models" / rel;
  if (!fs::exists(model_path)) model_path = spite::test::shared_dir() / "models/tiny" / rel;
  INFO("model " << rel << (golden.at("lora").is_null() ? "" : " + LoRA"));
  auto file = spite::gguf::file::open(model_path.string());
  REQUIRE(file.ok());
  std::shared_ptr<const spite::dispatch::op_table> ops;
  if (make_ops != nullptr) {
    ops = make_ops(*file);
    if (!ops) return false;
  }
  auto model = spite::models::load_model(*file, {.n_ctx = 512});
  if (!model.ok()) FAIL(model.err().message);
  auto tok = spite::tokenizer::tokenizer::from_metadata(file->meta());
  REQUIRE(tok.ok());
  spite::models::lora_set loras;
  std::optional<spite::gguf::file> adapter;
  if (!golden.at("lora").is_null()) {
    auto a = spite::gguf::file::open((spite::test::shared_dir() / "models" / golden.at("lora").at("file").get<std::string>()).string());
    REQUIRE(a.ok());
    adapter.emplace(std::move(*a));
    REQUIRE(loras.add(*adapter, *file, golden.at("lora").at("scale").get<float>()).ok());
  }
  const bool exact = float_weights(*file);
  const std::int64_t n_vocab = (*model)->hp().n_vocab;
  figures fig;
  for (const auto& run : golden.at("runs")) {
    auto ctx = spite::executor::context::create(**model, {.n_ctx = 512, .n_threads = 2, .ops = ops, .flash_attn = flash_attn});
    REQUIRE(ctx.ok());
    const auto tokens = run.at("tokens").get<std::vector<std::int32_t>>();
    CHECK(*(*tok)->tokenize(run.at("prompt").get<std::string>(), {.add_special = true, .parse_special = true}) == tokens);
    batch b;
    for (std::size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
    auto logits = (*ctx)->decode(b, loras.empty() ? nullptr : &loras);
    if (!logits.ok()) FAIL(logits.err().message);
    const auto& positions = run.at("positions");
    REQUIRE(positions.size() == tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> row(logits->begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                             logits->begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
      check_position(row, positions[i], exact, fig);
    }
    // Greedy continuation, compared while the reference's top-1 margin is clear.
    const auto greedy = run.at("greedy").get<std::vector<std::int32_t>>();
    std::vector<float> last(logits->end() - n_vocab, logits->end());
    for (std::size_t step = 0; step < greedy.size(); ++step) {
      const auto& ref = step == 0 ? positions.back() : run.at("greedy_steps")[step - 1];
      const double margin = ref.at("top")[0][1].get<double>() - ref.at("top")[1][1].get<double>();
      if (margin <= 1e-3) break;
      const auto ours = static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      INFO("greedy step " << step << " of prompt [" << run.at("prompt").get<std::string>().substr(0, 40) << "]");
      CHECK(ours == greedy[step]);
      if (ours != greedy[step]) break;
      fig.greedy_checked++;
      batch next;
      next.add(greedy[step], static_cast<std::int32_t>(tokens.size() + step), 0, true);
      auto l = (*ctx)->decode(next, loras.empty() ? nullptr : &loras);
      REQUIRE(l.ok());
      last.assign(l->begin(), l->end());
    }
  }
  const double top1 = static_cast<double>(fig.top1_agree) / static_cast<double>(fig.positions);
  const double kl = fig.kl_sum / static_cast<double>(fig.positions);
  std::printf("%s%-62s %s max_rel_err %.2e  top1 %.4f  mean_kl %.2e  greedy %zu\n", flash_attn ? "[fa] " : "", rel.c_str(),
              exact ? "float" : "quant", fig.max_rel_err, top1, kl, fig.greedy_checked);
  if (exact) {
    CHECK(fig.max_rel_err <= 1e-3);
  } else {
    CHECK(top1 >= 0.99);
    CHECK(kl <= 0.01);
  }
  return true;
}

// Every golden file is visited and those of every registered architecture are checked. Each
// architecture folder names, in its tiny_test.json, the golden files it must pass (and how many
// at least), so a folder that stops matching its files fails here instead of being skipped
// quietly; a golden file of an architecture spite does not register fails too.
TEST_CASE("every supported architecture reproduces the reference logits and greedy tokens", "[golden][logits]") {
  std::set<std::string> families;
  for (const spite::models::arch_entry* e : spite::models::architectures()) families.emplace(e->name);
  std::map<std::string, std::size_t> checked;
  std::set<std::string> checked_files, unsupported;
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(spite::test::shared_path("golden/logits"))) {
    const nlohmann::json golden = spite::test::load_json(entry.path());
    if (check_golden_file(golden, families, nullptr)) {
      ++files;
      ++checked[golden.at("arch").get<std::string>()];
      checked_files.insert(golden.at("model").get<std::string>());
    } else {
      unsupported.insert(golden.at("arch").get<std::string>());
    }
  }
  std::string skipped;
  for (const std::string& a : unsupported) skipped += " " + a;
  INFO("architectures in the golden data without support:" << skipped);
  CHECK(unsupported.empty());
  CHECK(files >= 65);

  std::set<std::string> configured;
  for (const auto& dir : fs::directory_iterator(SPITE_MODELS_SOURCE_DIR)) {
    if (!fs::exists(dir.path() / "arch.cpp")) continue;
    INFO("architecture folder " << dir.path().filename().string());
    REQUIRE(fs::exists(dir.path() / "tiny_test.json"));
    const nlohmann::json config = spite::test::load_json(dir.path() / "tiny_test.json");
    const std::string arch = config.at("arch").get<std::string>();
    configured.insert(arch);
    CHECK(families.count(arch) == 1);
    for (const auto& f : config.at("golden")) {
      INFO("golden file " << f.get<std::string>());
      CHECK(checked_files.count(f.get<std::string>()) == 1);
    }
    CHECK(checked[arch] >= config.value("golden_at_least", config.at("golden").size()));
  }
  CHECK(configured == families);
}

// With flash attention on, the dumps made with the reference's flash attention (its default):
// every file there (the float tiny models of every architecture and stories260K) is checked.
TEST_CASE("with flash attention every architecture reproduces the reference's flash-attention logits",
          "[golden][logits][flash]") {
  std::set<std::string> families;
  for (const spite::models::arch_entry* e : spite::models::architectures()) families.emplace(e->name);
  std::size_t files = 0, checked = 0;
  for (const auto& entry : fs::directory_iterator(spite::test::shared_path("golden/logits_fa"))) {
    ++files;
    INFO("golden file " << entry.path().filename().string());
    const bool done = check_golden_file(spite::test::load_json(entry.path()), families, nullptr, true);
    CHECK(done);
    if (done) ++checked;
  }
  CHECK(files >= 20);
  CHECK(checked == files);
}

// The plug-ins this build made for llama/llama3 (AVX-512 rms_norm, swiglu, f32/f16 matmul) in
// place of the built-in kernels: the float models must still meet the reference's tolerance.
static std::shared_ptr<const spite::dispatch::op_table> plugin_ops(const spite::gguf::file& file) {
  if (!float_weights(file)) return nullptr;
  const auto [family, model] = spite::models::kernel_identity_of(file);
  if (family != "llama" || model != "llama3") return nullptr;
  const auto set = spite::dispatch::kernel_set::scan({SPITE_BUILD_KERNEL_DIR});
  auto d = spite::dispatch::dispatcher::create(set, {family, model},
                                               {SPITE_DEVICE_CPU, 0, spite::dispatch::detect_cpu().isa_candidates()});
  spite_op_signature s = spite::dispatch::make_signature(SPITE_OP_RMS_NORM, d->target());
  s.rows = 1;
  s.in = s.out = 64;
  if (d->resolve(s).library == nullptr) return nullptr;
  return d->ops();
}

TEST_CASE("with the llama3 kernel plug-ins in place the float llama3 models still reproduce the reference",
          "[golden][logits][plugins]") {
  if (spite::dispatch::detect_cpu().x86_level < 4) {
    WARN("this CPU cannot run the x86_64_v4 plug-in; nothing to check here");
    return;
  }
  const std::set<std::string> families = {"llama"};
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(spite::test::shared_path("golden/logits"))) {
    if (check_golden_file(spite::test::load_json(entry.path()), families, plugin_ops)) ++files;
  }
  CHECK(files >= 1);
}
