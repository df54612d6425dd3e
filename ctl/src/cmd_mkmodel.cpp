// spitectl mkmodel: a random-weight GGUF model of a real model's shape, quantized by spite's own
// quantizers with llama.cpp's type mixes for the _S/_M/_L types, so that benchmarks run on
// realistic sizes without downloads. The vocabulary (and tokenizer) comes from a vocab GGUF.
//
//   spitectl mkmodel --shape tinyllama-1.1b --type Q4_K_M --vocab ggml-vocab-llama-spm.gguf --out F
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "spite/core/bytes.hpp"
#include "spite/core/half.hpp"
#include "spite/gguf/blocks.hpp"
#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"

namespace spite::ctl {
namespace {

struct shape {
  std::string_view name, arch;
  std::int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  float rope_base;
  bool tied_output, qkv_bias;
  // Mixture of experts (n_expert > 0: every layer's FFN is n_expert experts of n_ff_exp, n_used
  // per token, routed by ffn_gate_inp), a head width apart from n_embd / n_head, QK-norm.
  std::int64_t n_expert = 0, n_used = 0, n_ff_exp = 0, head_dim = 0;
  bool qk_norm = false;
  // gpt-oss's extras: attention output bias and per-head sinks, biased router and experts, the FFN
  // norm stored as post_attention_norm, sliding-window layers, YaRN.
  bool oss_extras = false;
  std::int64_t sliding_window = 0, yarn_context = 0;
  float yarn_factor = 0.0f;
};

constexpr shape shapes[] = {
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 2048, 10000.0f, false, false},
    {"llama2-7b", "llama", 4096, 32, 32, 32, 11008, 4096, 10000.0f, false, false},
    {"llama3-8b", "llama", 4096, 32, 32, 8, 14336, 8192, 500000.0f, false, false},
    {"llama3.2-1b", "llama", 2048, 16, 32, 8, 8192, 8192, 500000.0f, true, false},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 32768, 1000000.0f, true, true},
    {"qwen2.5-1.5b", "qwen2", 1536, 28, 12, 2, 8960, 32768, 1000000.0f, true, true},
    {"stories15m", "llama", 288, 6, 6, 6, 768, 256, 10000.0f, false, false},
    {"llama-small", "llama", 512, 8, 8, 4, 1536, 2048, 10000.0f, false, false},  // fast, k-quant friendly
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 40960, 1000000.0f, false, false, 128, 8, 768, 128, true},
    {"moe-small", "qwen3moe", 512, 4, 8, 4, 1536, 2048, 1000000.0f, false, false, 8, 2, 256, 64, true},  // fast
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 40960, 1000000.0f, true, false, 0, 0, 0, 128, true},
    {.name = "gpt-oss-20b", .arch = "gpt-oss", .n_embd = 2880, .n_layer = 24, .n_head = 64, .n_head_kv = 8, .n_ff = 2880,
     .n_ctx = 131072, .rope_base = 150000.0f, .tied_output = false, .qkv_bias = true, .n_expert = 32, .n_used = 4,
     .n_ff_exp = 2880, .head_dim = 64, .qk_norm = false, .oss_extras = true, .sliding_window = 128, .yarn_context = 4096,
     .yarn_factor = 32.0f},
    {.name = "gpt-oss-small", .arch = "gpt-oss", .n_embd = 512, .n_layer = 2, .n_head = 8, .n_head_kv = 2, .n_ff = 512,
     .n_ctx = 4096, .rope_base = 150000.0f, .tied_output = false, .qkv_bias = true, .n_expert = 8, .n_used = 2, .n_ff_exp = 512,
     .head_dim = 64, .qk_norm = false, .oss_extras = true, .sliding_window = 128, .yarn_context = 4096, .yarn_factor = 32.0f},  // fast
};

// llama.cpp's rule for the layers that get more bits in the _M mixes: the first and last eighth
// and every third layer between.
bool use_more_bits(std::int64_t i, std::int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

using gguf::tensor_type;

// The grid i-quants have no quantizer here (theirs needs an importance matrix), nor have the
// ternary types, but every grid index, sign, sub-block scale and digit byte of theirs is valid:
// their tensors are random bits with each block's fp16 scale set so that values come out near
// the requested size.
bool random_blocks_of(tensor_type t) {
  return t == tensor_type::iq1_s || t == tensor_type::iq1_m || t == tensor_type::iq2_xxs || t == tensor_type::iq2_xs || t == tensor_type::iq2_s ||
         t == tensor_type::iq3_xxs || t == tensor_type::iq3_s || t == tensor_type::tq1_0 || t == tensor_type::tq2_0;
}

void random_blocks(tensor_type type, std::byte* row, std::uint64_t row_size, float stddev, std::mt19937_64& rng) {
  for (std::uint64_t i = 0; i < row_size; i += 8) {
    const std::uint64_t bits = rng();
    std::memcpy(row + i, &bits, std::min<std::uint64_t>(8, row_size - i));
  }
  // A grid value times its sub-block scale is some 50x the block scale on average; a ternary
  // weight is +-1 (TQ2_0's random fields now and then 2) times it.
  const bool ternary = type == tensor_type::tq1_0 || type == tensor_type::tq2_0;
  const std::uint16_t d = fp32_to_fp16(ternary ? stddev : stddev / 50.0f);
  const std::size_t block = gguf::traits(type).block_bytes;
  // Where the scale lies: first in the grid i-quants' blocks, last in the ternary ones'.
  const std::size_t at = type == tensor_type::tq1_0 ? offsetof(gguf::block_tq1_0, d) : type == tensor_type::tq2_0 ? offsetof(gguf::block_tq2_0, d) : 0;
  for (std::uint64_t b = 0; b + block <= row_size; b += block) {
    if (type != tensor_type::iq1_m) {
      std::memcpy(row + b + at, &d, sizeof d);
      continue;
    }
    // IQ1_M keeps its fp16 scale in the top nibbles of its four 16-bit scale words, nibble k in
    // word k.
    std::byte* top = row + b + offsetof(gguf::block_iq1_m, scales) + 1;
    for (int k = 0; k < 4; ++k) top[2 * k] = (top[2 * k] & std::byte{0x0F}) | static_cast<std::byte>(((d >> (4 * k)) & 0xF) << 4);
  }
}

// The type of one tensor under a mix (or the plain type).
tensor_type type_for(std::string_view mix, tensor_type base, std::string_view tensor, std::int64_t layer, std::int64_t n_layer) {
  if (tensor == "ffn_gate_inp") return tensor_type::f32;  // routers stay F32, as llama-quantize keeps them
  // llama-quantize's MXFP4_MOE: the experts in MXFP4, everything else Q8_0 (the output too).
  if (mix == "MXFP4_MOE") return tensor.ends_with("_exps") ? tensor_type::mxfp4 : tensor_type::q8_0;
  const bool plain_float = base == tensor_type::f32 || base == tensor_type::f16 || base == tensor_type::bf16;
  if (tensor == "output") return plain_float || base == tensor_type::q8_0 ? base : tensor_type::q6_K;
  if (tensor == "ffn_down_exps") tensor = "ffn_down";
  if (mix == "Q4_K_M" || mix == "Q5_K_M") {
    if ((tensor == "attn_v" || tensor == "ffn_down") && use_more_bits(layer, n_layer)) return tensor_type::q6_K;
  } else if (mix == "Q4_K_S") {
    if (tensor == "ffn_down" && layer < n_layer / 8) return tensor_type::q5_K;
  } else if (mix == "Q3_K_M") {
    if (tensor == "attn_v") return layer < 2 ? tensor_type::q5_K : tensor_type::q4_K;
    if (tensor == "attn_output") return tensor_type::q4_K;
    if (tensor == "ffn_down") return layer < n_layer / 16 ? tensor_type::q5_K : use_more_bits(layer, n_layer) ? tensor_type::q4_K : base;
  } else if (mix == "Q3_K_L") {
    if (tensor == "attn_v" || tensor == "attn_output" || tensor == "ffn_down") return tensor_type::q5_K;
  } else if (mix == "Q3_K_S" || mix == "Q2_K_S") {
    // the base type throughout
  }
  return base;
}

struct type_choice {
  std::string mix;  // "" for a plain type
  tensor_type base;
};

std::optional<type_choice> parse_type(std::string name) {
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<std::string_view, std::string_view> mixes[] = {
      {"Q4_K_M", "Q4_K"}, {"Q4_K_S", "Q4_K"}, {"Q5_K_M", "Q5_K"}, {"Q5_K_S", "Q5_K"},
      {"Q3_K_M", "Q3_K"}, {"Q3_K_S", "Q3_K"}, {"Q3_K_L", "Q3_K"}, {"Q2_K_S", "Q2_K"}, {"MXFP4_MOE", "MXFP4"}};
  for (const auto& [mix, base] : mixes) {
    if (name == mix) return type_choice{std::string(mix), gguf::find_type_by_name(base)->type};
  }
  const gguf::type_traits* t = gguf::find_type_by_name(name);
  if (t == nullptr || (t->from_float == nullptr && !random_blocks_of(t->type))) return std::nullopt;
  return type_choice{"", t->type};
}

// Random N(0, std) weights of [rows, cols] in `type`, rows quantized on all cores; for the
// random-block types random bits with each block's fp16 scale set (random_blocks_of).
std::vector<std::byte> random_tensor(tensor_type type, std::int64_t cols, std::int64_t rows, float stddev, std::uint64_t seed) {
  const std::uint64_t row_size = *gguf::row_bytes(type, cols);
  std::vector<std::byte> out(row_size * static_cast<std::uint64_t>(rows));
  const int n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(t));
      std::normal_distribution<float> dist(0.0f, stddev);
      std::vector<float> row(static_cast<std::size_t>(cols));
      for (std::int64_t r = t; r < rows; r += n_threads) {
        std::byte* dst = out.data() + row_size * static_cast<std::uint64_t>(r);
        if (gguf::traits(type).from_float == nullptr) {
          random_blocks(type, dst, row_size, stddev, rng);
          continue;
        }
        for (float& x : row) x = dist(rng);
        gguf::traits(type).from_float(row.data(), dst, cols);
      }
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

std::vector<std::byte> ones(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
  std::vector<std::byte> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

int run_mkmodel(const std::vector<std::string>& argv) {
  args a;
  a.option("--shape", "NAME", "the model shape (see --list)")
      .option("--type", "TYPE", "weight type: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K IQ4_NL IQ4_XS MXFP4, IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S TQ1_0 TQ2_0 (random blocks), or a mix Q4_K_M ... MXFP4_MOE")
      .option("--vocab", "FILE", "a GGUF whose tokenizer (tokenizer.*) the model takes")
      .option("--out", "FILE", "where to write the model")
      .option("--seed", "S", "random seed (default 1)")
      .option("--layers", "N", "write only the first N layers (a shorter model of the same layer shape)")
      .flag("--list", "list the shapes")
      .flag("--help", "show this help");
  auto parsed = a.parse(argv);
  if (a.has("--list")) {
    for (const auto& s : shapes) {
      std::printf("%-16s %-8s E=%lld L=%lld heads=%lld/%lld ff=%lld ctx=%lld%s", std::string(s.name).c_str(),
                  std::string(s.arch).c_str(), (long long)s.n_embd, (long long)s.n_layer, (long long)s.n_head,
                  (long long)s.n_head_kv, (long long)s.n_ff, (long long)s.n_ctx, s.tied_output ? " tied" : "");
      if (s.n_expert > 0) std::printf(" experts=%lld/%lld x %lld", (long long)s.n_used, (long long)s.n_expert, (long long)s.n_ff_exp);
      std::printf("\n");
    }
    return exit_ok;
  }
  if (!parsed || a.has("--help") || !a.get("--shape") || !a.get("--type") || !a.get("--vocab") || !a.get("--out")) {
    if (!parsed) std::fprintf(stderr, "spitectl mkmodel: %s\n", parsed.err().message.c_str());
    std::fprintf(a.has("--help") ? stdout : stderr,
                 "usage: spitectl mkmodel --shape NAME --type TYPE --vocab VOCAB.gguf --out FILE [--seed S] [--layers N]\n%s",
                 a.help().c_str());
    return a.has("--help") && parsed ? exit_ok : exit_usage;
  }
  const shape* sh = nullptr;
  for (const auto& s : shapes) {
    if (s.name == *a.get("--shape")) sh = &s;
  }
  if (sh == nullptr) {
    std::fprintf(stderr, "spitectl mkmodel: unknown shape '%s' (spitectl mkmodel --list)\n", a.get("--shape")->c_str());
    return exit_usage;
  }
  const auto choice = parse_type(*a.get("--type"));
  if (!choice) {
    std::fprintf(stderr, "spitectl mkmodel: '%s' is not a type spite can quantize to\n", a.get("--type")->c_str());
    return exit_usage;
  }
  const std::uint64_t seed = a.get("--seed") ? std::stoull(*a.get("--seed")) : 1;
  auto vocab = gguf::file::open(*a.get("--vocab"));
  if (!vocab) {
    std::fprintf(stderr, "spitectl mkmodel: %s\n", vocab.err().message.c_str());
    return exit_failure;
  }
  const gguf::array_value* tokens = vocab->meta().get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr) {
    std::fprintf(stderr, "spitectl mkmodel: %s has no tokenizer.ggml.tokens\n", a.get("--vocab")->c_str());
    return exit_failure;
  }
  const std::int64_t n_vocab = static_cast<std::int64_t>(tokens->size());
  const std::string arch(sh->arch);
  const std::int64_t head_dim = sh->head_dim > 0 ? sh->head_dim : sh->n_embd / sh->n_head;
  std::int64_t n_layer = sh->n_layer;
  if (a.get("--layers")) {
    const long long n = std::atoll(a.get("--layers")->c_str());
    if (n < 1 || n > sh->n_layer) {
      std::fprintf(stderr, "spitectl mkmodel: --layers must be 1..%lld\n", static_cast<long long>(sh->n_layer));
      return exit_usage;
    }
    n_layer = n;
  }

  gguf::writer w;
  w.set("general.architecture", gguf::value::string(arch));
  w.set("general.name", gguf::value::string(std::string(sh->name) + " (random weights, " + *a.get("--type") + ")"));
  w.set("general.file_type", gguf::value::u32(static_cast<std::uint32_t>(choice->base)));
  w.set(arch + ".context_length", gguf::value::u32(static_cast<std::uint32_t>(sh->n_ctx)));
  w.set(arch + ".embedding_length", gguf::value::u32(static_cast<std::uint32_t>(sh->n_embd)));
  w.set(arch + ".block_count", gguf::value::u32(static_cast<std::uint32_t>(n_layer)));
  w.set(arch + ".feed_forward_length", gguf::value::u32(static_cast<std::uint32_t>(sh->n_ff)));
  w.set(arch + ".attention.head_count", gguf::value::u32(static_cast<std::uint32_t>(sh->n_head)));
  w.set(arch + ".attention.head_count_kv", gguf::value::u32(static_cast<std::uint32_t>(sh->n_head_kv)));
  w.set(arch + ".attention.layer_norm_rms_epsilon", gguf::value::f32(1e-5f));
  w.set(arch + ".rope.freq_base", gguf::value::f32(sh->rope_base));
  w.set(arch + ".rope.dimension_count", gguf::value::u32(static_cast<std::uint32_t>(head_dim)));
  w.set(arch + ".attention.key_length", gguf::value::u32(static_cast<std::uint32_t>(head_dim)));
  w.set(arch + ".attention.value_length", gguf::value::u32(static_cast<std::uint32_t>(head_dim)));
  if (sh->n_expert > 0) {
    w.set(arch + ".expert_count", gguf::value::u32(static_cast<std::uint32_t>(sh->n_expert)));
    w.set(arch + ".expert_used_count", gguf::value::u32(static_cast<std::uint32_t>(sh->n_used)));
    w.set(arch + ".expert_feed_forward_length", gguf::value::u32(static_cast<std::uint32_t>(sh->n_ff_exp)));
  }
  if (sh->sliding_window > 0) w.set(arch + ".attention.sliding_window", gguf::value::u32(static_cast<std::uint32_t>(sh->sliding_window)));
  if (sh->yarn_factor > 0.0f) {
    w.set(arch + ".rope.scaling.type", gguf::value::string("yarn"));
    w.set(arch + ".rope.scaling.factor", gguf::value::f32(sh->yarn_factor));
    w.set(arch + ".rope.scaling.original_context_length", gguf::value::u32(static_cast<std::uint32_t>(sh->yarn_context)));
  }
  for (const auto& kv : vocab->meta().entries()) {
    if (kv.key.starts_with("tokenizer.")) w.set(std::string(kv.key), kv.val);
  }

  const float stddev = 0.02f;
  std::uint64_t tensor_seed = seed;
  const auto add = [&](const std::string& name, tensor_type t, std::int64_t cols, std::int64_t rows) -> bool {
    // A row must hold whole blocks: k-quants fall back as llama.cpp's do, anything else to F16.
    if (!gguf::row_bytes(t, cols)) {
      switch (t) {
        case tensor_type::q2_K:
        case tensor_type::q3_K: t = tensor_type::iq4_nl; break;
        case tensor_type::q4_K: t = tensor_type::q5_0; break;
        case tensor_type::q5_K: t = tensor_type::q5_1; break;
        case tensor_type::q6_K: t = tensor_type::q8_0; break;
        default: break;
      }
      if (!gguf::row_bytes(t, cols)) t = tensor_type::f16;
    }
    const std::int64_t shape2[] = {cols, rows};
    auto r = w.add_tensor(name, t, shape2, random_tensor(t, cols, rows, stddev, ++tensor_seed));
    if (!r) std::fprintf(stderr, "spitectl mkmodel: %s: %s\n", name.c_str(), r.err().message.c_str());
    return r.ok();
  };
  // {cols, rows, n} stacks (expert weights): n matrices of rows x cols, one after the other.
  const auto add3 = [&](const std::string& name, tensor_type t, std::int64_t cols, std::int64_t rows, std::int64_t n) -> bool {
    if (!gguf::row_bytes(t, cols)) t = tensor_type::q8_0;
    if (!gguf::row_bytes(t, cols)) t = tensor_type::f16;
    const std::int64_t shape3[] = {cols, rows, n};
    auto r = w.add_tensor(name, t, shape3, random_tensor(t, cols, rows * n, stddev, ++tensor_seed));
    if (!r) std::fprintf(stderr, "spitectl mkmodel: %s: %s\n", name.c_str(), r.err().message.c_str());
    return r.ok();
  };
  const auto add_norm = [&](const std::string& name, std::int64_t n) {
    const std::int64_t shape1[] = {n};
    return w.add_tensor(name, tensor_type::f32, shape1, ones(n)).ok();
  };
  // F32 biases: one vector of n, or (experts) `count` of them as an [n, count] matrix.
  const auto add_bias = [&](const std::string& name, std::int64_t n, std::int64_t count = 1) {
    const std::int64_t shape2[] = {n, count};
    const std::span<const std::int64_t> dims(shape2, count > 1 ? 2 : 1);
    return w.add_tensor(name, tensor_type::f32, dims, random_tensor(tensor_type::f32, n, count, stddev, ++tensor_seed)).ok();
  };
  const auto t = [&](std::string_view tensor, std::int64_t layer) {
    return type_for(choice->mix, choice->base, tensor, layer, n_layer);
  };
  // A table that is also the output head gets the head's type, as llama-quantize gives it (Q6_K
  // in the K mixes: Q8_0 where its rows hold no whole super-block, as Qwen2.5-0.5B's of 896).
  bool ok = add("token_embd.weight", t(sh->tied_output ? "output" : "token_embd", 0), sh->n_embd, n_vocab) &&
            add_norm("output_norm.weight", sh->n_embd);
  if (!sh->tied_output) ok = ok && add("output.weight", t("output", 0), sh->n_embd, n_vocab);
  for (std::int64_t l = 0; ok && l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const std::int64_t q = sh->n_head * head_dim, kv = sh->n_head_kv * head_dim;
    ok = add_norm(p + "attn_norm.weight", sh->n_embd) && add(p + "attn_q.weight", t("attn_q", l), sh->n_embd, q) &&
         add(p + "attn_k.weight", t("attn_k", l), sh->n_embd, kv) && add(p + "attn_v.weight", t("attn_v", l), sh->n_embd, kv) &&
         add(p + "attn_output.weight", t("attn_output", l), q, sh->n_embd) &&
         add_norm(p + (sh->oss_extras ? "post_attention_norm.weight" : "ffn_norm.weight"), sh->n_embd);
    if (ok && sh->oss_extras) {
      const std::int64_t shape1[] = {sh->n_head};
      ok = add_bias(p + "attn_output.bias", sh->n_embd) &&
           w.add_tensor(p + "attn_sinks.weight", tensor_type::f32, shape1, ones(sh->n_head)).ok() &&
           add_bias(p + "ffn_gate_inp.bias", sh->n_expert) && add_bias(p + "ffn_gate_exps.bias", sh->n_ff_exp, sh->n_expert) &&
           add_bias(p + "ffn_up_exps.bias", sh->n_ff_exp, sh->n_expert) &&
           add_bias(p + "ffn_down_exps.bias", sh->n_embd, sh->n_expert);
    }
    if (ok && sh->qk_norm) ok = add_norm(p + "attn_q_norm.weight", head_dim) && add_norm(p + "attn_k_norm.weight", head_dim);
    if (ok && sh->n_expert > 0) {
      const std::int64_t X = sh->n_expert, F = sh->n_ff_exp;
      ok = add(p + "ffn_gate_inp.weight", t("ffn_gate_inp", l), sh->n_embd, X) &&
           add3(p + "ffn_gate_exps.weight", t("ffn_gate_exps", l), sh->n_embd, F, X) &&
           add3(p + "ffn_up_exps.weight", t("ffn_up_exps", l), sh->n_embd, F, X) &&
           add3(p + "ffn_down_exps.weight", t("ffn_down_exps", l), F, sh->n_embd, X);
    } else if (ok) {
      ok = add(p + "ffn_gate.weight", t("ffn_gate", l), sh->n_embd, sh->n_ff) &&
           add(p + "ffn_up.weight", t("ffn_up", l), sh->n_embd, sh->n_ff) &&
           add(p + "ffn_down.weight", t("ffn_down", l), sh->n_ff, sh->n_embd);
    }
    if (ok && sh->qkv_bias) {
      ok = add_bias(p + "attn_q.bias", q) && add_bias(p + "attn_k.bias", kv) && add_bias(p + "attn_v.bias", kv);
    }
    std::fprintf(stderr, "\rspitectl mkmodel: layer %lld/%lld", static_cast<long long>(l + 1), static_cast<long long>(n_layer));
  }
  std::fprintf(stderr, "\n");
  if (!ok) return exit_failure;
  if (auto r = w.write_file(*a.get("--out")); !r) {
    std::fprintf(stderr, "spitectl mkmodel: %s\n", r.err().message.c_str());
    return exit_failure;
  }
  auto written = gguf::file::open(*a.get("--out"));
  std::printf("%s: %s %s, %zu tensors, %s\n", a.get("--out")->c_str(), std::string(sh->name).c_str(), a.get("--type")->c_str(),
              w.n_tensors(), written ? human_bytes(written->total_bytes()).c_str() : "?");
  return exit_ok;
}

}  // namespace spite::ctl
