// Sliding-window layers in a ring of window + max_batch cells: the models that slide (gemma2,
// gemma3, gemma4, gpt-oss; llama4's tiny model chunks by 8192, more than a test context) still give the reference engine's logits and greedy
// tokens when the prompt streams through rings much shorter than it, take a fraction of the
// memory, and refuse to be cut back past what a ring still holds. Latent attention keeps its
// latent once (the values are read inside the key rows); sparse attention (GLM-5) keeps its
// indexer keys in the same rows; DeepSeek-V4 keeps a window ring plus compressed keys in its
// per-sequence state.
#include <catch2/catch.hpp>
#include <cmath>

#include "shared_data.hpp"
#include "spite/core/half.hpp"
#include "spite/executor/context.hpp"
#include "spite/executor/memory_estimate.hpp"
#include "spite/gguf/file.hpp"

using namespace spite;
using executor::batch;

namespace {

struct loaded {
  gguf::file file;
  std::unique_ptr<models::model> model;
};

loaded load(const std::string& name) {
  auto f = gguf::file::open(test::shared_path("models/tiny/" + name).string());
  REQUIRE(f.ok());
  loaded l{std::move(*f), nullptr};
  auto m = models::load_model(l.file, {.n_ctx = 512});
  if (!m) FAIL(m.err().message);
  l.model = std::move(*m);
  return l;
}

// The relative error of our logits at the reference's top 20, as the golden logits test
// measures it (against the largest |logit| at that position).
double position_error(std::span<const float> ours, const nlohmann::json& ref) {
  double max_abs = 0;
  for (float v : ours) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
  double err = 0;
  for (const auto& e : ref.at("top")) {
    err = std::max(err, std::fabs(ours[e[0].get<std::size_t>()] - e[1].get<double>()) / max_abs);
  }
  return err;
}

// Evaluates `tokens` in pieces of `piece` and returns the largest position error against the
// run's golden logits.
double stream_in_pieces(executor::context& ctx, const std::vector<std::int32_t>& tokens, const nlohmann::json& run, std::size_t piece,
                        std::size_t n_vocab) {
  double max_err = 0;
  for (std::size_t start = 0; start < tokens.size(); start += piece) {
    const std::size_t end = std::min(tokens.size(), start + piece);
    batch b;
    for (std::size_t i = start; i < end; ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
    auto logits = ctx.decode(b);
    REQUIRE(logits.ok());
    for (std::size_t i = start; i < end; ++i) {
      max_err = std::max(max_err, position_error(logits->subspan((i - start) * n_vocab, n_vocab), run.at("positions")[i]));
    }
  }
  return max_err;
}

std::size_t argmax(std::span<const float> v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

TEST_CASE("sliding-window rings: the sliding models keep the golden logits with rings shorter than the prompt",
          "[executor][kv]") {
  for (const std::string name : {"tiny-gemma2.f32.gguf", "tiny-gemma3.f32.gguf", "tiny-gemma4.f32.gguf", "tiny-gpt-oss.f32.gguf"}) {
    INFO(name);
    const loaded l = load(name);
    const auto golden = test::load_json(test::shared_path("golden/logits/" + name + ".json"));
    const auto& run = golden.at("runs")[2];  // the long prompt
    const auto tokens = run.at("tokens").get<std::vector<std::int32_t>>();
    const executor::context_options ring_options{.n_ctx = 512, .n_threads = 2, .max_batch = 8};
    const executor::kv_layout layout = executor::kv_layout_for(*l.model, ring_options);
    std::int32_t smallest_window = 0;
    for (auto w : layout.window) {
      if (w > 0) smallest_window = smallest_window == 0 ? w : std::min(smallest_window, w);
    }
    REQUIRE(smallest_window > 0);  // the model slides somewhere
    INFO("window " << smallest_window << ", prompt " << tokens.size() << " tokens");

    auto ctx = executor::context::create(*l.model, ring_options);
    REQUIRE(ctx.ok());
    // Memory: the ring layers hold window + 8 cells instead of 512.
    auto full = executor::context::create(*l.model, {.n_ctx = 512, .n_threads = 1, .swa_full = true});
    REQUIRE(full.ok());
    CHECK((*ctx)->memory().bytes_when_full() < (*full)->memory().bytes_when_full());

    // A step of more tokens than the rings' slack is refused with the reason.
    batch too_many;
    for (std::int32_t i = 0; i < 9; ++i) too_many.add(tokens[static_cast<std::size_t>(i)], i, 0, false);
    auto refused = (*ctx)->decode(too_many);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.err().message, Catch::Contains("at most 8"));

    // The prompt 8 tokens at a time, every position's logits against the reference's.
    const std::int64_t n_vocab = l.model->hp().n_vocab;
    double max_err = 0;
    std::size_t agree = 0, compared = 0;
    std::vector<float> last;
    for (std::size_t start = 0; start < tokens.size(); start += 8) {
      batch b;
      const std::size_t end = std::min(tokens.size(), start + 8);
      for (std::size_t i = start; i < end; ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
      auto logits = (*ctx)->decode(b);
      REQUIRE(logits.ok());
      for (std::size_t i = start; i < end; ++i) {
        const auto row = logits->subspan((i - start) * static_cast<std::size_t>(n_vocab), static_cast<std::size_t>(n_vocab));
        const auto& ref = run.at("positions")[i];
        max_err = std::max(max_err, position_error(row, ref));
        ++compared;
        agree += static_cast<std::int64_t>(argmax(row)) == ref.at("top")[0][0].get<std::int64_t>();
        if (i + 1 == tokens.size()) last.assign(row.begin(), row.end());
      }
    }
    CHECK(max_err <= 1e-3);  // the golden logits test's tolerance for float models
    CHECK(agree >= compared * 99 / 100);

    // Greedy continuation while the reference's margin is clear.
    const auto greedy = run.at("greedy").get<std::vector<std::int32_t>>();
    for (std::size_t step = 0; step < greedy.size(); ++step) {
      const auto& ref = step == 0 ? run.at("positions").back() : run.at("greedy_steps")[step - 1];
      if (ref.at("top")[0][1].get<double>() - ref.at("top")[1][1].get<double>() <= 1e-3) break;
      INFO("greedy step " << step);
      REQUIRE(static_cast<std::int32_t>(argmax(last)) == greedy[step]);
      batch next;
      next.add(greedy[step], static_cast<std::int32_t>(tokens.size() + step), 0, true);
      auto l2 = (*ctx)->decode(next);
      REQUIRE(l2.ok());
      last.assign(l2->begin(), l2->end());
    }

    // Cutting back: a few positions is fine, past the ring's oldest cells is refused.
    auto& mem = (*ctx)->memory();
    const std::int32_t length = mem.seq_pos_max(0) + 1;
    CHECK(mem.seq_rm(0, length - 2, -1).ok());
    CHECK(mem.seq_pos_max(0) == length - 3);
    auto too_far = mem.seq_rm(0, length - 3 - smallest_window - 8, -1);
    REQUIRE_FALSE(too_far.ok());
    CHECK_THAT(too_far.err().message, Catch::Contains("sliding-window"));
    CHECK(mem.seq_rm(0, -1, -1).ok());  // the whole sequence always goes
    CHECK(mem.seq_pos_max(0) == -1);
  }
}

TEST_CASE("latent attention memory: the latent is stored once, and the golden logits hold", "[executor][kv]") {
  for (const std::string name : {"tiny-deepseek2.f32.gguf", "tiny-mistral4.f32.gguf"}) {
    INFO(name);
    const loaded l = load(name);
    const executor::context_options options{.n_ctx = 512, .n_threads = 2};
    executor::kv_layout layout = executor::kv_layout_for(*l.model, options);
    REQUIRE(layout.value_in_key);
    auto once = executor::make_kv_memory("contiguous_f16", layout);
    layout.value_in_key = false;
    auto twice = executor::make_kv_memory("contiguous_f16", layout);
    REQUIRE((once.ok() && twice.ok()));
    std::size_t keys = 0;
    for (auto w : layout.k_width) keys += static_cast<std::size_t>(w) * 512 * 2;
    CHECK((*once)->bytes_when_full() == keys);
    CHECK((*once)->bytes_when_full() < (*twice)->bytes_when_full());

    const auto golden = test::load_json(test::shared_path("golden/logits/" + name + ".json"));
    const auto& run = golden.at("runs")[2];
    const auto tokens = run.at("tokens").get<std::vector<std::int32_t>>();
    auto ctx = executor::context::create(*l.model, options);
    REQUIRE(ctx.ok());
    batch b;
    for (std::size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, true);
    auto logits = (*ctx)->decode(b);
    REQUIRE(logits.ok());
    const auto n_vocab = static_cast<std::size_t>(l.model->hp().n_vocab);
    double max_err = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) max_err = std::max(max_err, position_error(logits->subspan(i * n_vocab, n_vocab), run.at("positions")[i]));
    CHECK(max_err <= 1e-3);
    // And one decode step reading the latent from the key rows.
    batch next;
    next.add(run.at("greedy")[0].get<std::int32_t>(), static_cast<std::int32_t>(tokens.size()), 0, true);
    auto step = (*ctx)->decode(next);
    REQUIRE(step.ok());
    CHECK(position_error(*step, run.at("greedy_steps")[0]) <= 1e-3);
  }
}

TEST_CASE("sparse attention: the indexer's keys ride in the KV rows, and pieces and mixed batches keep the golden logits",
          "[executor][kv]") {
  const loaded l = load("tiny-glm-dsa.f32.gguf");
  const executor::context_options options{.n_ctx = 512, .n_threads = 2};
  const executor::kv_layout layout = executor::kv_layout_for(*l.model, options);
  // Layer 0 has the indexer (its 64-wide key after [c | k_pe] = 64 + 32); layer 1 reuses its choice.
  REQUIRE(layout.k_width == std::vector<std::int64_t>{96 + 64, 96});
  REQUIRE(layout.value_in_key);

  const auto golden = test::load_json(test::shared_path("golden/logits/tiny-glm-dsa.f32.gguf.json"));
  const auto n_vocab = static_cast<std::size_t>(l.model->hp().n_vocab);
  // The long prompt in pieces of 7: every query ranks keys stored by earlier steps (the indexer
  // keeps 8, so from position 8 on most keys are masked).
  {
    const auto& run = golden.at("runs")[2];
    const auto tokens = run.at("tokens").get<std::vector<std::int32_t>>();
    auto ctx = executor::context::create(*l.model, options);
    REQUIRE(ctx.ok());
    CHECK(stream_in_pieces(**ctx, tokens, run, 7, n_vocab) <= 1e-3);
  }
  // Two prompts in one batch: each sequence's queries choose among its own keys only.
  {
    const auto a = golden.at("runs")[1].at("tokens").get<std::vector<std::int32_t>>();
    const auto b_tokens = golden.at("runs")[2].at("tokens").get<std::vector<std::int32_t>>();
    auto ctx = executor::context::create(*l.model, {.n_ctx = 512, .n_threads = 2, .n_seq_max = 2});
    REQUIRE(ctx.ok());
    batch b;
    for (std::size_t i = 0; i < b_tokens.size(); ++i) {
      b.add(b_tokens[i], static_cast<std::int32_t>(i), 1, true);
      if (i < a.size()) b.add(a[i], static_cast<std::int32_t>(i), 0, true);
    }
    auto logits = (*ctx)->decode(b);
    REQUIRE(logits.ok());
    double max_err = 0;
    std::size_t row = 0;
    for (std::size_t i = 0; i < b_tokens.size(); ++i) {
      max_err = std::max(max_err, position_error(logits->subspan(row++ * n_vocab, n_vocab), golden.at("runs")[2].at("positions")[i]));
      if (i < a.size()) max_err = std::max(max_err, position_error(logits->subspan(row++ * n_vocab, n_vocab), golden.at("runs")[1].at("positions")[i]));
    }
    CHECK(max_err <= 1e-3);
  }
}

TEST_CASE("deepseek4: window keys in a ring and compressed keys built across steps keep the golden logits", "[executor][kv]") {
  const loaded l = load("tiny-deepseek4.f32.gguf");
  const executor::context_options options{.n_ctx = 512, .n_threads = 2, .max_batch = 8};
  const executor::kv_layout layout = executor::kv_layout_for(*l.model, options);
  // Every layer slides (window 16); the compressed layers (ratios 4 and 128) keep a state.
  REQUIRE(layout.window == std::vector<std::int32_t>{16, 16, 16});
  CHECK(layout.state_width[0] == 0);
  CHECK(layout.state_width[1] > 0);
  CHECK(layout.state_width[2] > 0);

  const auto golden = test::load_json(test::shared_path("golden/logits/tiny-deepseek4.f32.gguf.json"));
  const auto& run = golden.at("runs")[2];
  const auto tokens = run.at("tokens").get<std::vector<std::int32_t>>();
  const auto n_vocab = static_cast<std::size_t>(l.model->hp().n_vocab);
  auto ctx = executor::context::create(*l.model, options);
  REQUIRE(ctx.ok());
  // Pieces of 7: blocks of 4 complete inside and across steps, the rings carry the rest.
  CHECK(stream_in_pieces(**ctx, tokens, run, 7, n_vocab) <= 1e-3);
  // Greedy steps past position 127, where the ratio-128 layer makes its first block.
  const auto greedy = run.at("greedy").get<std::vector<std::int32_t>>();
  REQUIRE(tokens.size() + greedy.size() > 128);
  for (std::size_t step = 0; step + 1 < greedy.size(); ++step) {
    batch next;
    next.add(greedy[step], static_cast<std::int32_t>(tokens.size() + step), 0, true);
    auto logits = (*ctx)->decode(next);
    REQUIRE(logits.ok());
    CHECK(position_error(*logits, run.at("greedy_steps")[step]) <= 1e-3);
  }
  // The compressor state summarizes the sequence: cutting its end off is refused.
  auto& mem = (*ctx)->memory();
  CHECK_FALSE(mem.seq_rm(0, 100, -1).ok());
  CHECK(mem.seq_rm(0, -1, -1).ok());
}

TEST_CASE("contiguous memory: a sequence's layers lie in one mapping of their own, allocated on first use", "[executor][kv]") {
  executor::kv_layout layout;
  layout.n_layer = 3;
  layout.k_width = {256, 256, 256};
  layout.v_width = {256, 256, 256};
  layout.state_width = {0, 0, 0};
  layout.n_ctx = 2048;  // 1 MiB of keys per layer: 6 MiB per sequence
  layout.n_seq_max = 2;
  auto made = executor::make_kv_memory("contiguous_f16", layout);
  REQUIRE(made.ok());
  executor::kv_memory& mem = **made;
  CHECK(mem.bytes() == 0);
  CHECK(mem.bytes_when_full() == 2 * 6 * (std::size_t{1} << 20));
  // Copying from a sequence that holds nothing yet gives an empty sequence.
  REQUIRE(mem.seq_cp(0, 1, 0, -1).ok());
  CHECK(mem.seq_pos_max(1) == -1);

  const std::vector<std::int32_t> tokens{5, 6}, pos{0, 1}, seq{1, 1}, outputs{1};
  const models::batch_view b{tokens, pos, seq, outputs};
  auto plan = mem.prepare(b);
  REQUIRE(plan.ok());
  mem.apply(*plan);
  CHECK(mem.bytes() == mem.bytes_when_full() / 2);
  std::vector<float> k(256), v(256);
  for (int layer = 0; layer < 3; ++layer) {
    for (std::int64_t i = 0; i < 2; ++i) {
      for (std::size_t e = 0; e < 256; ++e) {
        k[e] = static_cast<float>(layer * 500 + i * 200 + static_cast<std::int64_t>(e));
        v[e] = -k[e];
      }
      mem.store(layer, i, k.data(), v.data());
    }
  }
  const auto first = reinterpret_cast<std::uintptr_t>(mem.view(0, 1).k);
  CHECK(first % (std::uintptr_t{2} << 20) == 0);  // on a huge page's boundary
  for (int layer = 0; layer < 3; ++layer) {
    const models::kv_view view = mem.view(layer, 1);
    REQUIRE(view.n == 2);
    // Every layer's rows inside the sequence's 6 MiB, the values after the keys.
    CHECK(reinterpret_cast<std::uintptr_t>(view.k) - first < (std::uintptr_t{6} << 20));
    CHECK(reinterpret_cast<std::uintptr_t>(view.v) - first < (std::uintptr_t{6} << 20));
    CHECK(view.v > view.k);
    for (std::int64_t i = 0; i < 2; ++i) {
      const float key = static_cast<float>(layer * 500 + i * 200 + 255);
      CHECK(fp16_to_fp32(view.k[i * 256 + 255]) == key);
      CHECK(fp16_to_fp32(view.v[i * 256 + 255]) == -key);
    }
  }
  CHECK(mem.view(0, 0).k == nullptr);  // sequence 0 never used: nothing mapped for it
}

TEST_CASE("contiguous memory: copying an empty sequence over a used one empties it, ring layers too", "[executor][kv]") {
  executor::kv_layout layout;
  layout.n_layer = 2;
  layout.k_width = {64, 64};
  layout.v_width = {64, 64};
  layout.state_width = {0, 0};
  layout.n_ctx = 64;
  layout.n_seq_max = 2;
  layout.window = {4, 0};  // layer 0: a ring of 4 + max_batch cells
  layout.max_batch = 4;
  auto made = executor::make_kv_memory("contiguous_f16", layout);
  REQUIRE(made.ok());
  executor::kv_memory& mem = **made;
  const std::vector<std::int32_t> tokens{1, 2, 3}, pos{0, 1, 2}, seq{1, 1, 1}, outputs{2};
  auto plan = mem.prepare(models::batch_view{tokens, pos, seq, outputs});
  REQUIRE(plan.ok());
  mem.apply(*plan);
  REQUIRE(mem.view(0, 1).n == 3);  // the ring layer's cells in use
  REQUIRE(mem.view(1, 1).n == 3);
  REQUIRE(mem.seq_cp(0, 1, 0, -1).ok());  // sequence 0 holds nothing
  CHECK(mem.seq_pos_max(1) == -1);
  CHECK(mem.view(0, 1).n == 0);
  CHECK(mem.view(1, 1).n == 0);
}
