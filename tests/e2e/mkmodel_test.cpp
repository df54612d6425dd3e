// spitectl mkmodel writes random-weight models of real shapes that spite (and any GGUF reader)
// loads: the shape's hyper-parameters, the vocabulary's tokenizer, and llama.cpp's type mixes.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "process.hpp"
#include "shared_data.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/file.hpp"

using spite::test::run_process;
using spite::test::shared_path;
using spite::test::temp_dir;

TEST_CASE("mkmodel writes a loadable model with the Q4_K_M mix and the vocabulary's tokenizer") {
  temp_dir dir;
  const std::string out = (dir.path() / "small.gguf").string();
  const std::string vocab = shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string();
  const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", "llama-small", "--type", "Q4_K_M", "--vocab", vocab, "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = spite::gguf::file::open(out);
  REQUIRE(f.ok());
  CHECK(f->meta().get_uint("llama.embedding_length") == 512u);
  CHECK(f->meta().get_uint("llama.block_count") == 8u);
  const auto* tokens = f->meta().get_array("tokenizer.ggml.tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->size() == 32000);
  const auto type_of = [&](const char* name) { return std::string(spite::gguf::type_name(f->find_tensor(name)->type)); };
  CHECK(type_of("output.weight") == "Q6_K");
  CHECK(type_of("blk.0.attn_q.weight") == "Q4_K");
  CHECK(type_of("blk.0.attn_v.weight") == "Q6_K");    // the first eighth gets more bits
  CHECK(type_of("blk.3.ffn_down.weight") == "Q6_K");  // so does every third layer after it
  CHECK(type_of("blk.2.ffn_down.weight") == "Q4_K");
  CHECK(type_of("blk.7.attn_v.weight") == "Q6_K");    // and the last eighth
  CHECK(type_of("blk.0.attn_norm.weight") == "F32");
  const auto run = run_process({SPITECTL_PATH, "run", "--local", "--model", out, "--prompt", "Hello", "-n", "4", "--temperature", "0"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
}

TEST_CASE("mkmodel writes mixture-of-experts shapes (qwen3moe: 3-D expert stacks, an F32 router, QK-norm) and shorter ones") {
  temp_dir dir;
  const std::string out = (dir.path() / "moe.gguf").string();
  const std::string vocab = shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string();
  const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", "moe-small", "--type", "Q4_K_M", "--vocab", vocab, "--out", out,
                              "--layers", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = spite::gguf::file::open(out);
  REQUIRE(f.ok());
  CHECK(f->meta().get_string("general.architecture") == "qwen3moe");
  CHECK(f->meta().get_uint("qwen3moe.block_count") == 2u);
  CHECK(f->meta().get_uint("qwen3moe.expert_count") == 8u);
  CHECK(f->meta().get_uint("qwen3moe.expert_used_count") == 2u);
  const auto* gate = f->find_tensor("blk.1.ffn_gate_exps.weight");
  REQUIRE(gate != nullptr);
  CHECK(gate->n_dims == 3);
  CHECK((gate->ne[0] == 512 && gate->ne[1] == 256 && gate->ne[2] == 8));
  CHECK(spite::gguf::type_name(gate->type) == "Q4_K");
  CHECK(spite::gguf::type_name(f->find_tensor("blk.0.ffn_gate_inp.weight")->type) == "F32");
  CHECK(spite::gguf::type_name(f->find_tensor("blk.1.ffn_down_exps.weight")->type) == "Q6_K");  // as ffn_down: the last eighth
  CHECK(f->find_tensor("blk.0.attn_q_norm.weight") != nullptr);
  const auto run = run_process({SPITECTL_PATH, "run", "--local", "--model", out, "--prompt", "Hello", "-n", "4", "--temperature", "0"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
  const auto too_many = run_process({SPITECTL_PATH, "mkmodel", "--shape", "moe-small", "--type", "Q4_0", "--vocab", vocab, "--out",
                                     out, "--layers", "9"});
  CHECK(too_many.exit_code != 0);
  CHECK_THAT(too_many.err, Catch::Contains("--layers must be 1..4"));
}

TEST_CASE("mkmodel writes gpt-oss shapes with llama-quantize's MXFP4_MOE mix (MXFP4 experts, Q8_0 elsewhere) that spite runs") {
  temp_dir dir;
  const std::string out = (dir.path() / "oss.gguf").string();
  const std::string vocab = shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string();
  const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", "gpt-oss-small", "--type", "MXFP4_MOE", "--vocab", vocab, "--out", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = spite::gguf::file::open(out);
  REQUIRE(f.ok());
  CHECK(f->meta().get_string("general.architecture") == "gpt-oss");
  CHECK(f->meta().get_uint("gpt-oss.attention.sliding_window") == 128u);
  CHECK(f->meta().get_string("gpt-oss.rope.scaling.type") == "yarn");
  const auto type_of = [&](const char* name) {
    const auto* t = f->find_tensor(name);
    return t == nullptr ? std::string("missing") : std::string(spite::gguf::type_name(t->type));
  };
  CHECK(type_of("blk.1.ffn_gate_exps.weight") == "MXFP4");
  CHECK(type_of("blk.1.ffn_down_exps.weight") == "MXFP4");
  CHECK(type_of("blk.0.attn_q.weight") == "Q8_0");
  CHECK(type_of("output.weight") == "Q8_0");
  CHECK(type_of("blk.0.ffn_gate_inp.weight") == "F32");
  for (const char* extra : {"blk.0.attn_sinks.weight", "blk.0.attn_output.bias", "blk.0.post_attention_norm.weight",
                            "blk.0.ffn_gate_inp.bias", "blk.0.ffn_up_exps.bias", "blk.0.ffn_down_exps.bias"}) {
    CHECK(type_of(extra) == "F32");
  }
  const auto* up_bias = f->find_tensor("blk.1.ffn_up_exps.bias");
  REQUIRE(up_bias != nullptr);
  CHECK((up_bias->n_dims == 2 && up_bias->ne[0] == 512 && up_bias->ne[1] == 8));
  const auto run = run_process({SPITECTL_PATH, "run", "--local", "--model", out, "--prompt", "Hello", "-n", "4", "--temperature", "0"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
}

// A random block's fp16 super-block scale: the block's d (first in IQ2_XXS's block, last in
// TQ1_0's), or IQ1_M's, kept in the top nibbles of its four 16-bit scale words.
float block_scale(const spite::gguf::block_iq2_xxs& b) { return spite::fp16_to_fp32(b.d); }
float block_scale(const spite::gguf::block_tq1_0& b) { return spite::fp16_to_fp32(b.d); }
float block_scale(const spite::gguf::block_iq1_m& b) {
  std::uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  return spite::fp16_to_fp32(static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}

// `largest`: the most a block scale may be (a grid value is some 50 scales, a ternary one 1).
template <class Block>
void check_random_block_model(const std::string& type, float largest) {
  INFO("type " << type);
  temp_dir dir;
  const std::string out = (dir.path() / "iq.gguf").string();
  const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", "llama-small", "--type", type, "--vocab",
                              shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string(), "--out", out, "--layers", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = spite::gguf::file::open(out);
  REQUIRE(f.ok());
  const auto* q = f->find_tensor("blk.0.attn_q.weight");
  REQUIRE(q != nullptr);
  CHECK(spite::gguf::type_name(q->type) == type);
  // Every block's fp16 scale is a small positive number, not random bits.
  const auto* blocks = reinterpret_cast<const Block*>(q->data);
  for (int b = 0; b < 16; ++b) {
    const float d = block_scale(blocks[b]);
    CHECK((d > 1e-5f && d < largest));
  }
  const auto run = run_process({SPITECTL_PATH, "run", "--local", "--model", out, "--prompt", "Hello", "-n", "4", "--temperature", "0"});
  INFO(run.err);
  CHECK(run.exit_code == 0);
}

TEST_CASE("mkmodel writes grid i-quant and ternary models from random blocks that spite runs") {
  check_random_block_model<spite::gguf::block_iq2_xxs>("IQ2_XXS", 1e-3f);
  check_random_block_model<spite::gguf::block_iq1_m>("IQ1_M", 1e-3f);
  check_random_block_model<spite::gguf::block_tq1_0>("TQ1_0", 0.1f);
}

TEST_CASE("mkmodel falls back like llama.cpp where rows do not hold whole k-quant blocks") {
  temp_dir dir;
  const std::string out = (dir.path() / "s15.gguf").string();
  const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", "stories15m", "--type", "Q4_K_M", "--vocab",
                              shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string(), "--out", out});
  REQUIRE(r.exit_code == 0);
  auto f = spite::gguf::file::open(out);
  REQUIRE(f.ok());
  // 288 columns: Q4_K -> Q5_0, Q6_K -> Q8_0; 768-column rows (ffn_down) keep their k-quant.
  CHECK(spite::gguf::type_name(f->find_tensor("blk.0.attn_q.weight")->type) == "Q5_0");
  CHECK(spite::gguf::type_name(f->find_tensor("output.weight")->type) == "Q8_0");
  CHECK(spite::gguf::type_name(f->find_tensor("blk.0.ffn_down.weight")->type) == "Q4_K");
}

TEST_CASE("mkmodel refuses unknown shapes and types with the way out") {
  temp_dir dir;
  const std::string vocab = shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string();
  const auto shape = run_process({SPITECTL_PATH, "mkmodel", "--shape", "gpt-5", "--type", "Q4_0", "--vocab", vocab, "--out",
                                  (dir.path() / "x.gguf").string()});
  CHECK(shape.exit_code == 2);
  CHECK_THAT(shape.err, Catch::Contains("--list"));
  const auto type = run_process({SPITECTL_PATH, "mkmodel", "--shape", "stories15m", "--type", "Q9_X", "--vocab", vocab, "--out",
                                 (dir.path() / "x.gguf").string()});
  CHECK(type.exit_code == 2);
  const auto list = run_process({SPITECTL_PATH, "mkmodel", "--list"});
  CHECK_THAT(list.out, Catch::Contains("tinyllama-1.1b"));
}

TEST_CASE("mkmodel gives a tied embedding table the output head's type, Q8_0 where its rows hold no super-block") {
  temp_dir dir;
  const std::string vocab = shared_path("models/vocab/ggml-vocab-llama-spm.gguf").string();
  const auto table_type = [&](const char* shape, std::string_view other, std::string_view other_type) {
    const std::string out = (dir.path() / (std::string(shape) + ".gguf")).string();
    const auto r = run_process({SPITECTL_PATH, "mkmodel", "--shape", shape, "--type", "Q4_K_M", "--vocab", vocab, "--out", out, "--layers", "1"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    auto f = spite::gguf::file::open(out);
    REQUIRE(f.ok());
    CHECK(f->find_tensor("output.weight") == nullptr);
    const auto* o = f->find_tensor(std::string(other));
    REQUIRE(o != nullptr);
    CHECK(spite::gguf::type_name(o->type) == other_type);
    return std::string(spite::gguf::type_name(f->find_tensor("token_embd.weight")->type));
  };
  CHECK(table_type("llama3.2-1b", "blk.0.attn_q.weight", "Q4_K") == "Q6_K");
  CHECK(table_type("qwen2.5-0.5b", "blk.0.attn_q.weight", "Q5_0") == "Q8_0");  // rows of 896: Q4_K -> Q5_0, Q6_K -> Q8_0
}
