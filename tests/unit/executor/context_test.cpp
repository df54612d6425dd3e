// The inference context: batches that mix sequences, KV memory bookkeeping, refusals.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "shared_data.hpp"
#include "spite/dispatch/ops.hpp"
#include "spite/executor/context.hpp"
#include "spite/gguf/file.hpp"

namespace {

using spite::executor::batch;
using spite::executor::context;

struct loaded {
  spite::gguf::file file;
  std::unique_ptr<spite::models::model> model;
};

loaded load_stories() {
  auto f = spite::gguf::file::open(spite::test::shared_path("models/stories260K.gguf").string());
  REQUIRE(f.ok());
  loaded l{std::move(*f), nullptr};
  auto m = spite::models::load_model(l.file);
  REQUIRE(m.ok());
  l.model = std::move(*m);
  return l;
}

std::vector<float> last_logits(context& ctx, const std::vector<std::int32_t>& tokens, std::int32_t seq, std::int32_t start = 0) {
  batch b;
  for (std::size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], start + static_cast<std::int32_t>(i), seq, i + 1 == tokens.size());
  auto l = ctx.decode(b);
  REQUIRE(l.ok());
  return {l->begin(), l->end()};
}

const std::vector<std::int32_t> k_a = {1, 432, 383, 286, 261};
const std::vector<std::int32_t> k_b = {1, 297, 289, 360, 260, 316, 306};

}  // namespace

TEST_CASE("a batch mixing two sequences gives each the logits it gets alone", "[executor]") {
  auto m = load_stories();
  auto alone_a = context::create(*m.model, {.n_ctx = 64, .n_threads = 2});
  auto alone_b = context::create(*m.model, {.n_ctx = 64, .n_threads = 2});
  REQUIRE(alone_a.ok());
  REQUIRE(alone_b.ok());
  const auto a = last_logits(**alone_a, k_a, 0);
  const auto b = last_logits(**alone_b, k_b, 0);

  auto mixed = context::create(*m.model, {.n_ctx = 64, .n_threads = 2, .n_seq_max = 2});
  REQUIRE(mixed.ok());
  batch both;
  // Interleaved on purpose: sequence order inside a batch does not matter.
  for (std::size_t i = 0; i < std::max(k_a.size(), k_b.size()); ++i) {
    if (i < k_a.size()) both.add(k_a[i], static_cast<std::int32_t>(i), 0, i + 1 == k_a.size());
    if (i < k_b.size()) both.add(k_b[i], static_cast<std::int32_t>(i), 1, i + 1 == k_b.size());
  }
  auto l = (*mixed)->decode(both);
  REQUIRE(l.ok());
  const std::size_t V = static_cast<std::size_t>(m.model->hp().n_vocab);
  REQUIRE(l->size() == 2 * V);
  CHECK(std::vector<float>(l->begin(), l->begin() + V) == a);
  CHECK(std::vector<float>(l->begin() + V, l->end()) == b);
}

TEST_CASE("removing the end of a sequence and decoding again reproduces the first result", "[executor]") {
  auto m = load_stories();
  auto ctx = context::create(*m.model, {.n_ctx = 64, .n_threads = 1});
  REQUIRE(ctx.ok());
  const auto first = last_logits(**ctx, k_a, 0);
  REQUIRE((*ctx)->memory().seq_rm(0, 3, -1).ok());
  CHECK((*ctx)->memory().seq_pos_max(0) == 2);
  const auto again = last_logits(**ctx, {k_a[3], k_a[4]}, 0, 3);
  CHECK(again == first);
  // A prefix copied to another sequence continues like the original.
  auto two = context::create(*m.model, {.n_ctx = 64, .n_threads = 1, .n_seq_max = 2});
  REQUIRE(two.ok());
  (void)last_logits(**two, {k_a[0], k_a[1], k_a[2]}, 0);
  REQUIRE((*two)->memory().seq_cp(0, 1, 0, -1).ok());
  CHECK(last_logits(**two, {k_a[3], k_a[4]}, 1, 3) == first);
}

TEST_CASE("bad batches are refused without changing the memory", "[executor]") {
  auto m = load_stories();
  auto ctx = context::create(*m.model, {.n_ctx = 8, .n_threads = 1});
  REQUIRE(ctx.ok());
  batch gap;
  gap.add(1, 0, 0, true);
  gap.add(2, 5, 0, true);
  auto r = (*ctx)->decode(gap);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("position 5"));
  CHECK((*ctx)->memory().seq_pos_max(0) == -1);

  batch vocab;
  vocab.add(100000, 0, 0, true);
  CHECK_THAT((*ctx)->decode(vocab).err().message, Catch::Contains("outside the vocabulary"));
  batch seq;
  seq.add(1, 0, 3, true);
  CHECK_FALSE((*ctx)->decode(seq).ok());
  CHECK_FALSE((*ctx)->decode(batch{}).ok());

  batch full;
  for (int i = 0; i < 9; ++i) full.add(1, i, 0, false);
  auto f = (*ctx)->decode(full);
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.err().message, Catch::Contains("full"));
}

TEST_CASE("an unknown KV memory kind is refused and names the known ones", "[executor]") {
  auto m = load_stories();
  auto ctx = context::create(*m.model, {.kv_kind = "paged_q4"});
  REQUIRE_FALSE(ctx.ok());
  CHECK_THAT(ctx.err().message, Catch::Contains("contiguous_f16"));
}

// A hybrid model (gated DeltaNet layers + attention): the model asks for the hybrid memory,
// whose recurrent state cannot be rewound.
TEST_CASE("a recurrent model runs on the hybrid memory, which refuses to rewind its state", "[executor]") {
  auto f = spite::gguf::file::open(spite::test::shared_path("models/tiny/tiny-qwen35.f32.gguf").string());
  REQUIRE(f.ok());
  auto m = spite::models::load_model(*f);
  REQUIRE(m.ok());
  auto ctx = context::create(**m, {.n_ctx = 64, .n_threads = 1, .n_seq_max = 2});
  REQUIRE(ctx.ok());
  CHECK((*ctx)->memory().kind() == "hybrid_f16");
  const std::vector<std::int32_t> a = {10, 200, 33, 400, 5}, b = {7, 8, 900};
  const auto first = last_logits(**ctx, a, 0);
  CHECK(last_logits(**ctx, b, 1) != first);

  // Cutting the end off would leave a state that still remembers it.
  auto cut = (*ctx)->memory().seq_rm(0, 3, -1);
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.err().message, Catch::Contains("recurrent state"));
  CHECK((*ctx)->memory().seq_pos_max(0) == 4);
  CHECK_FALSE((*ctx)->memory().seq_cp(0, 1, 0, 3).ok());
  CHECK((*ctx)->memory().seq_rm(0, 5, -1).ok());  // nothing held there

  // The whole sequence goes, and the state with it: the same prompt gives the same logits.
  REQUIRE((*ctx)->memory().seq_rm(0, -1, -1).ok());
  CHECK((*ctx)->memory().seq_pos_max(0) == -1);
  CHECK(last_logits(**ctx, a, 0) == first);

  // A whole sequence copied (state included) continues like the original.
  REQUIRE((*ctx)->memory().seq_cp(0, 1, 0, -1).ok());
  CHECK(last_logits(**ctx, {11}, 1, 5) == last_logits(**ctx, {11}, 0, 5));

  // Token by token gives the logits of the whole batch.
  REQUIRE((*ctx)->memory().seq_rm(1, -1, -1).ok());
  std::vector<float> stepped;
  for (std::size_t i = 0; i < a.size(); ++i) stepped = last_logits(**ctx, {a[i]}, 1, static_cast<std::int32_t>(i));
  REQUIRE(stepped.size() == first.size());
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(stepped[i] == Approx(first[i]).margin(1e-4));
}

TEST_CASE("a decode step's experts side by side give the logits they give one after the other", "[executor]") {
  // Qwen3-MoE: 2 of 4 experts per token, so on 2 threads each expert of a one-token step runs on
  // a thread of its own (models/blocks/ffn.cpp); Q8_0 experts in the packed layout where the
  // processor has one. Four sequences decoding together route to up to 8 experts.
  auto f = spite::gguf::file::open(spite::test::shared_path("models/tiny/tiny-qwen3moe.q8_0.gguf").string());
  REQUIRE(f.ok());
  auto m = spite::models::load_model(*f);
  REQUIRE(m.ok());
  auto one_by_one = std::make_shared<spite::dispatch::op_table>(spite::dispatch::cpu_reference_ops());
  REQUIRE(one_by_one->concurrent);
  one_by_one->concurrent = false;
  const std::vector<std::vector<std::int32_t>> prompts = {k_a, k_b, {1, 400, 20, 77}, {1, 9, 310}};
  std::vector<std::vector<float>> logits[2];
  for (int side_by_side = 0; side_by_side < 2; ++side_by_side) {
    auto ctx = context::create(**m, {.n_ctx = 64, .n_threads = 2, .n_seq_max = 4,
                                     .ops = side_by_side ? nullptr : one_by_one});
    REQUIRE(ctx.ok());
    for (std::int32_t s = 0; s < 4; ++s) (void)last_logits(**ctx, prompts[static_cast<std::size_t>(s)], s);
    // Steps of one sequence, then of all four together.
    for (int step = 0; step < 3; ++step) {
      logits[side_by_side].push_back(last_logits(**ctx, {5 + step}, 0, static_cast<std::int32_t>(k_a.size()) + step));
    }
    batch all;
    for (std::int32_t s = 0; s < 4; ++s) {
      all.add(42, static_cast<std::int32_t>(prompts[static_cast<std::size_t>(s)].size()) + (s == 0 ? 3 : 0), s, true);
    }
    auto l = (*ctx)->decode(all);
    REQUIRE(l.ok());
    logits[side_by_side].emplace_back(l->begin(), l->end());
  }
  REQUIRE(logits[0].size() == logits[1].size());
  for (std::size_t i = 0; i < logits[0].size(); ++i) {
    INFO("step " << i);
    CHECK(logits[0][i] == logits[1][i]);
  }
}
