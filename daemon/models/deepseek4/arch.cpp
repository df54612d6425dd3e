// deepseek4: DeepSeek-V4. The residual stream is four hyper-connection copies: before each
// sub-block a learned mix (sigmoid weights) of the copies is its input, after it each copy
// becomes post_j * output + sum_i comb[j, i] copy_i, comb a Sinkhorn-normalized 4 x 4 matrix;
// the head pools the copies the same way. Attention in attention.cpp (sliding-window raw keys
// plus compressed keys, sinks, grouped low-rank output); experts gated by sqrt(softplus), the
// first layers routed by a token-id table instead, SwiGLU inputs clamped, plus a shared expert.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../blocks/decoder_model.hpp"
#include "../blocks/dsa_indexer.hpp"
#include "deepseek4.hpp"

namespace spite::models {
namespace {

constexpr std::int64_t hc_copies = 4;  // the only count the reference accepts

// One sub-block's (or the head's) hyper-connection mix: fn {4E, mixes}, base [mixes], scale [3 or 1].
struct hc_mix {
  linear fn;
  std::vector<float> base, scale;
};

struct mix_weights {
  std::vector<float> pre, post, comb;  // [n, 4], [n, 4], [n, 4 x 4] (comb[j + 4 i]: copy i into copy j)
};

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

class deepseek4_model final : public model {
 public:
  decoder_weights weights;  // token_embd, output_norm, output, ffn
  decoder_config config;
  std::vector<dsv4::layer> layers;
  std::vector<hc_mix> hc_attn, hc_ffn;
  hc_mix hc_head;
  dsv4::dims dims;
  float hc_eps = 1e-6f;
  std::int64_t sinkhorn_iterations = 1;

  result<void> forward(forward_context& ctx) const override;
  static result<std::unique_ptr<model>> load(const gguf::file& f, const load_options& options);

 private:
  mix_weights weigh(forward_context& ctx, const hc_mix& m, const float* copies, bool with_comb) const;
  void sinkhorn(float* c) const;
};

// comb: softmax over the destinations of each source, + eps, the destinations' rows normalized,
// then (iterations - 1) times the sources' columns and the rows again, each sum + eps.
void deepseek4_model::sinkhorn(float* c) const {
  constexpr std::int64_t n = hc_copies;
  for (std::int64_t i = 0; i < n; ++i) softmax(c + i * n, n);
  for (std::int64_t k = 0; k < n * n; ++k) c[k] += hc_eps;
  // Divides each line by its sum + eps: `across` steps along a line, `between` from one to the next.
  const auto normalize = [&](std::int64_t across, std::int64_t between) {
    for (std::int64_t a = 0; a < n; ++a) {
      double s = 0.0;
      for (std::int64_t b = 0; b < n; ++b) s += c[a * between + b * across];
      const float d = static_cast<float>(s) + hc_eps;
      for (std::int64_t b = 0; b < n; ++b) c[a * between + b * across] /= d;
    }
  };
  normalize(n, 1);  // each destination over its sources
  for (std::int64_t it = 1; it < sinkhorn_iterations; ++it) {
    normalize(1, n);  // each source over its destinations
    normalize(n, 1);
  }
}

mix_weights deepseek4_model::weigh(forward_context& ctx, const hc_mix& m, const float* copies, bool with_comb) const {
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  const std::int64_t E = hp_.n_embd, flat = hc_copies * E, M = m.fn.w.out;
  std::vector<float> normed(static_cast<std::size_t>(n * flat)), mixes(static_cast<std::size_t>(n * M));
  rms_norm_rows(ctx, copies, nullptr, normed.data(), flat, n, config.rms_eps);
  m.fn.apply(ctx, normed.data(), n, mixes.data());
  mix_weights w;
  w.pre.resize(static_cast<std::size_t>(n * hc_copies));
  if (with_comb) {
    w.post.resize(w.pre.size());
    w.comb.resize(static_cast<std::size_t>(n * hc_copies * hc_copies));
  }
  for (std::int64_t t = 0; t < n; ++t) {
    const float* x = mixes.data() + t * M;
    for (std::int64_t i = 0; i < hc_copies; ++i) {
      w.pre[static_cast<std::size_t>(t * hc_copies + i)] = sigmoid(x[i] * m.scale[0] + m.base[static_cast<std::size_t>(i)]) + hc_eps;
    }
    if (!with_comb) continue;
    for (std::int64_t j = 0; j < hc_copies; ++j) {
      const float s = sigmoid(x[hc_copies + j] * m.scale[1] + m.base[static_cast<std::size_t>(hc_copies + j)]);
      w.post[static_cast<std::size_t>(t * hc_copies + j)] = s * 2.0f;
    }
    float* c = w.comb.data() + t * hc_copies * hc_copies;
    for (std::int64_t k = 0; k < hc_copies * hc_copies; ++k) {
      c[k] = x[2 * hc_copies + k] * m.scale[2] + m.base[static_cast<std::size_t>(2 * hc_copies + k)];
    }
    sinkhorn(c);
  }
  return w;
}

// out [E, n] = sum_i pre_i copy_i
void mix_copies(const float* copies, const std::vector<float>& pre, std::int64_t E, std::int64_t n, float* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    float* o = out + t * E;
    for (std::int64_t i = 0; i < hc_copies; ++i) {
      const float* x = copies + (t * hc_copies + i) * E;
      const float p = pre[static_cast<std::size_t>(t * hc_copies + i)];
      for (std::int64_t e = 0; e < E; ++e) o[e] = i == 0 ? x[e] * p : o[e] + x[e] * p;
    }
  }
}

// copies_j = post_j y + sum_i comb[j, i] copies_i
void spread(std::vector<float>& copies, const float* y, const mix_weights& w, std::int64_t E, std::int64_t n) {
  std::vector<float> next(copies.size());
  for (std::int64_t t = 0; t < n; ++t) {
    const float* c = w.comb.data() + t * hc_copies * hc_copies;
    for (std::int64_t j = 0; j < hc_copies; ++j) {
      float* o = next.data() + (t * hc_copies + j) * E;
      const float post = w.post[static_cast<std::size_t>(t * hc_copies + j)];
      for (std::int64_t e = 0; e < E; ++e) o[e] = y[t * E + e] * post;
      for (std::int64_t i = 0; i < hc_copies; ++i) {
        const float* x = copies.data() + (t * hc_copies + i) * E;
        const float k = c[j + hc_copies * i];
        for (std::int64_t e = 0; e < E; ++e) o[e] += x[e] * k;
      }
    }
  }
  copies.swap(next);
}

result<void> deepseek4_model::forward(forward_context& ctx) const {
  const std::int64_t E = hp_.n_embd;
  const auto n = static_cast<std::int64_t>(ctx.batch.tokens.size());
  std::vector<float> x(static_cast<std::size_t>(E * n)), cur(x.size()), delta(x.size());
  embed_tokens(ctx, weights, config, E, x.data());
  std::vector<float> copies(static_cast<std::size_t>(hc_copies * E * n));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t i = 0; i < hc_copies; ++i) std::copy_n(x.data() + t * E, E, copies.data() + (t * hc_copies + i) * E);
  }
  for (int il = 0; il < static_cast<int>(layers.size()); ++il) {
    const auto l = static_cast<std::size_t>(il);
    mix_weights w = weigh(ctx, hc_attn[l], copies.data(), true);
    mix_copies(copies.data(), w.pre, E, n, cur.data());
    rms_norm_rows(ctx, cur.data(), layers[l].attn_norm.data(), cur.data(), E, n, config.rms_eps);
    SPITE_TRY(dsv4::attention(ctx, layers[l], dims, il, cur.data(), delta.data()));
    spread(copies, delta.data(), w, E, n);

    const ffn_layer& f = weights.ffn[l];
    w = weigh(ctx, hc_ffn[l], copies.data(), true);
    mix_copies(copies.data(), w.pre, E, n, cur.data());
    rms_norm_rows(ctx, cur.data(), f.norm.data(), cur.data(), E, n, config.rms_eps);
    ffn_block(ctx, f, config, cur.data(), delta.data());
    spread(copies, delta.data(), w, E, n);
  }
  const mix_weights head = weigh(ctx, hc_head, copies.data(), false);
  mix_copies(copies.data(), head.pre, E, n, x.data());
  output_head(ctx, weights, config, E, x.data());
  return ok();
}

result<std::unique_ptr<model>> deepseek4_model::load(const gguf::file& f, const load_options& options) {
  auto hpr = load_common_hparams(f.meta());
  if (!hpr) return std::move(hpr).err();
  hparams hp = std::move(*hpr);
  const key_reader r(f.meta(), hp.arch);
  constexpr std::int64_t big = std::int64_t{1} << 24;
  const std::int64_t L = hp.n_layer, E = hp.n_embd, V = hp.n_vocab;
  SPITE_TRY(r.required_float("attention.layer_norm_rms_epsilon"));
  auto q_lora = r.required_int("attention.q_lora_rank", 1, big);
  auto window = r.required_int("attention.sliding_window", 1, std::int64_t{1} << 30);
  auto n_ff_exp = r.required_int("expert_feed_forward_length", 1, big);
  auto n_shared = r.required_int("expert_shared_count", 0, 64);
  auto ix_heads = r.required_int("attention.indexer.head_count", 1, 1024);
  auto ix_dim = r.required_int("attention.indexer.key_length", 1, 1 << 16);
  auto ix_top = r.required_int("attention.indexer.top_k", 1, std::int64_t{1} << 30);
  auto groups = r.required_int("attention.output_group_count", 1, 1024);
  auto o_rank = r.required_int("attention.output_lora_rank", 1, big);
  auto copies = r.required_int("hyper_connection.count", hc_copies, hc_copies);
  auto iterations = r.required_int("hyper_connection.sinkhorn_iterations", 1, 1000);
  auto hash_layers = r.required_int("hash_layer_count", 0, L);
  auto gating = r.required_int("expert_gating_func", 4, 4);
  auto ratios = r.per_layer("attention.compress_ratios", L, std::nullopt, 0, 128);
  for (const auto* v : {&q_lora, &window, &n_ff_exp, &n_shared, &ix_heads, &ix_dim, &ix_top, &groups, &o_rank, &copies, &iterations,
                        &hash_layers, &gating}) {
    if (!*v) return v->err();
  }
  if (!ratios) return std::move(ratios).err();
  auto clamp_exp = r.per_layer_float("swiglu_clamp_exp", L, std::nullopt);
  if (!clamp_exp) return std::move(clamp_exp).err();
  auto clamp_shexp = r.per_layer_float("swiglu_clamp_shexp", L, 0.0f);
  if (!clamp_shexp) return std::move(clamp_shexp).err();
  if (f.meta().find(r.key("swiglu_clamp_shexp")) == nullptr) *clamp_shexp = *clamp_exp;
  const auto hc_eps = f.meta().get_float(r.key("hyper_connection.epsilon"));
  const auto compress_base = f.meta().get_float(r.key("attention.compress_rope_freq_base"));
  if (!hc_eps || !compress_base) return make_error(errc::malformed, hp.arch + " model: hyper_connection.epsilon or compress_rope_freq_base is missing");

  const std::int64_t H = hp.n_head[0], D = hp.head_dim_k, R = hp.rope.n_dims, Hi = *ix_heads, Di = *ix_dim;
  if (hp.head_dim_v != D || R <= 0 || R > D || R > Di || H % *groups != 0 || (Di & (Di - 1)) != 0) {
    return make_error(errc::malformed, hp.arch + " model: inconsistent head, rotary, indexer or output group sizes");
  }
  for (std::int64_t il = 0; il < L; ++il) {
    const std::int64_t ratio = (*ratios)[static_cast<std::size_t>(il)];
    if (ratio != 0 && ratio != 4 && ratio != 128) {
      return make_error(errc::unsupported, hp.arch + " model: compress ratio " + std::to_string(ratio) + " (layer " +
                                               std::to_string(il) + "); only 0, 4 and 128 exist");
    }
    if (hp.n_head[static_cast<std::size_t>(il)] != H || hp.n_head_kv[static_cast<std::size_t>(il)] != 1) {
      return make_error(errc::malformed, hp.arch + " model: every layer has the same heads and one KV head");
    }
  }
  hp.rope.kind = rope_kind::norm;
  hp.n_ff_exp = *n_ff_exp;
  hp.n_ff_shexp = *n_ff_exp * *n_shared;
  hp.kv_value_in_key = true;  // K = V
  hp.kv_window.assign(static_cast<std::size_t>(L), static_cast<std::int32_t>(*window));
  hp.memory_kind = "hybrid_f16";
  hp.n_state.assign(static_cast<std::size_t>(L), 0);

  auto m = std::make_unique<deepseek4_model>();
  m->hc_eps = static_cast<float>(*hc_eps);
  m->sinkhorn_iterations = *iterations;
  m->dims = {.n_head = H, .head_dim = D, .rope_dim = R, .groups = *groups, .o_rank = *o_rank,
             .window = static_cast<std::int32_t>(*window), .rms_eps = hp.rms_eps};
  decoder_config& c = m->config;
  c.rms_eps = hp.rms_eps;
  c.n_expert_used = hp.n_expert_used;
  c.gating = moe_gating::sqrt_softplus;
  c.moe_normalize = f.meta().get_bool(r.key("expert_weights_norm")).value_or(false);
  c.expert_weights_scale = r.optional_float("expert_weights_scale", 0.0f);

  binder b(f, hp.arch);
  decoder_weights& w = m->weights;
  w.file = &f;
  w.token_embd = b.tensor("token_embd.weight", {E, V});
  w.output_norm = b.vec("output_norm.weight", E);
  w.output = b.matrix("output", E, V);
  const auto bind_mix = [&](const std::string& prefix, std::int64_t mixes, std::int64_t scales) {
    return hc_mix{b.matrix(prefix + "_fn", hc_copies * E, mixes), b.vec(prefix + "_base.weight", mixes),
                  b.vec(prefix + "_scale.weight", scales)};
  };
  m->hc_head = bind_mix("output_hc", hc_copies, 1);
  const std::int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<std::int64_t>(hp.n_ctx_train, 4096);
  const std::vector<float> hadamard = walsh_hadamard(Di);
  const bind_options ffn_options{.shared_expert = true, .experts_required = true};
  for (int il = 0; il < static_cast<int>(L); ++il) {
    const auto li = static_cast<std::size_t>(il);
    dsv4::layer& l = m->layers.emplace_back();
    l.attn_norm = b.vec(layer_tensor(il, "attn_norm.weight"), E);
    l.sinks = b.vec(layer_tensor(il, "attn_sinks.weight"), H);
    l.q_a = b.matrix(layer_tensor(il, "attn_q_a"), E, *q_lora);
    l.q_a_norm = b.vec(layer_tensor(il, "attn_q_a_norm.weight"), *q_lora);
    l.q_b = b.matrix(layer_tensor(il, "attn_q_b"), *q_lora, H * D);
    l.kv = b.matrix(layer_tensor(il, "attn_kv"), E, D);
    l.kv_norm = b.vec(layer_tensor(il, "attn_kv_a_norm.weight"), D);
    if (const gguf::tensor_info* oa = b.tensor(layer_tensor(il, "attn_output_a.weight"), {H * D / *groups, *o_rank * *groups})) {
      l.o_a = dispatch::weight_of(*oa);
    }
    l.o_b = b.matrix(layer_tensor(il, "attn_output_b"), *groups * *o_rank, E);
    m->hc_attn.push_back(bind_mix(layer_tensor(il, "hc_attn"), (2 + hc_copies) * hc_copies, 3));
    m->hc_ffn.push_back(bind_mix(layer_tensor(il, "hc_ffn"), (2 + hc_copies) * hc_copies, 3));
    l.ratio = (*ratios)[li];
    // Compressed layers rotate with compress_rope_freq_base and the model's YaRN; the others plainly.
    l.rope = hp.rope;
    l.rope.n_dims = R;
    if (l.ratio != 0) {
      l.rope.freq_base = static_cast<float>(*compress_base);
      l.rope.attn_factor = l.rope.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * std::log(1.0f / l.rope.freq_scale)) : 1.0f;
    } else {
      l.rope.freq_scale = 1.0f;
      l.rope.ext_factor = 0.0f;
      l.rope.attn_factor = 1.0f;
      l.rope.beta_fast = l.rope.beta_slow = 0.0f;
      l.rope.n_ctx_orig = 0;
    }
    if (l.ratio != 0) {
      const auto bind_compressor = [&](const char* prefix, std::int64_t dim) {
        auto comp = std::make_shared<dsv4::compressor>();
        comp->ratio = l.ratio;
        comp->dim = dim;
        comp->overlap = l.ratio == 4;
        const std::string p = prefix;
        comp->kv = b.matrix(layer_tensor(il, (p + "_kv").c_str()), E, comp->width());
        comp->gate = b.matrix(layer_tensor(il, (p + "_gate").c_str()), E, comp->width());
        comp->ape = b.values(layer_tensor(il, (p + "_ape.weight").c_str()), {comp->width(), l.ratio});
        comp->norm = b.vec(layer_tensor(il, (p + "_norm.weight").c_str()), dim);
        return comp;
      };
      l.comp = bind_compressor("attn_compressor", D);
      dsv4::state_layout& s = l.state;
      s.capacity = (n_ctx + l.ratio - 1) / l.ratio;
      const std::int64_t ring = l.comp->ring_rows() * l.comp->width();
      s.ring_kv = 0;
      s.ring_score = ring;
      s.keys = 2 * ring;
      s.total = s.keys + s.capacity * D;
      if (l.ratio == 4) {
        auto ix = std::make_shared<dsv4::indexer>();
        ix->q_b = b.matrix(layer_tensor(il, "indexer.attn_q_b"), *q_lora, Hi * Di);
        ix->proj = b.matrix(layer_tensor(il, "indexer.proj"), E, Hi);
        ix->keys = *bind_compressor("indexer_compressor", Di);
        ix->hadamard = hadamard;
        ix->n_head = Hi;
        ix->head_dim = Di;
        ix->top_k = *ix_top;
        const std::int64_t ix_ring = ix->keys.ring_rows() * ix->keys.width();
        s.ix_ring_kv = s.total;
        s.ix_ring_score = s.ix_ring_kv + ix_ring;
        s.ix_keys = s.ix_ring_score + ix_ring;
        s.total = s.ix_keys + s.capacity * Di;
        l.index = std::move(ix);
      }
      hp.n_state[li] = s.total;
    }
    ffn_layer fl = bind_ffn(b, f, hp, il, ffn_options);
    fl.swiglu_limit = (*clamp_exp)[li];
    fl.shared_swiglu_limit = (*clamp_shexp)[li];
    if (il < *hash_layers) {
      // Hash routing: the experts of each token id, an I32 table {K, V}.
      const gguf::tensor_info* table = b.tensor(layer_tensor(il, "ffn_gate_tid2eid.weight"), {hp.n_expert_used, V});
      if (table != nullptr) {
        if (table->type != gguf::tensor_type::i32) return make_error(errc::malformed, hp.arch + " model: ffn_gate_tid2eid is not I32");
        fl.fixed_experts.resize(static_cast<std::size_t>(hp.n_expert_used * V));
        std::memcpy(fl.fixed_experts.data(), dispatch::weight_of(*table).data, fl.fixed_experts.size() * sizeof(std::int32_t));
        for (const std::int32_t e : fl.fixed_experts) {
          if (e < 0 || e >= hp.n_expert) return make_error(errc::malformed, hp.arch + " model: ffn_gate_tid2eid names expert " + std::to_string(e));
        }
      }
      fl.select_bias.clear();
    }
    w.ffn.push_back(std::move(fl));
  }
  SPITE_TRY(b.status());
  if (hp.n_expert <= 0 || hp.n_expert_used <= 0) return make_error(errc::malformed, hp.arch + " model: no experts");
  m->hp_ = std::move(hp);
  return std::unique_ptr<model>(std::move(m));
}

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options& options) { return deepseek4_model::load(f, options); }

}  // namespace

const arch_entry& arch_deepseek4() {
  static const arch_entry entry{"deepseek4", load, "deepseek"};
  return entry;
}

}  // namespace spite::models
