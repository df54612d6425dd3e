#include "spite/models/hparams.hpp"

#include <cmath>

namespace spite::models {

namespace {
std::string range_text(std::int64_t min, std::int64_t max) {
  std::string s = "[";  // built piecewise: GCC 12 warns falsely on "literal" + std::string chains
  s += std::to_string(min);
  s += ", ";
  s += std::to_string(max);
  s += "]";
  return s;
}
}  // namespace

result<std::int64_t> key_reader::required_int(std::string_view k, std::int64_t min, std::int64_t max) const {
  const auto v = meta_.get_int(key(k));
  if (!v) return make_error(errc::malformed, "missing or non-integer key " + key(k));
  if (*v < min || *v > max) {
    return make_error(errc::malformed, key(k) + " = " + std::to_string(*v) + " is outside " + range_text(min, max));
  }
  return *v;
}

result<std::int64_t> key_reader::optional_int(std::string_view k, std::int64_t fallback, std::int64_t min,
                                              std::int64_t max) const {
  if (meta_.find(key(k)) == nullptr) return fallback;
  return required_int(k, min, max);
}

result<float> key_reader::required_float(std::string_view k) const {
  const auto v = meta_.get_float(key(k));
  if (!v || !std::isfinite(*v)) return make_error(errc::malformed, "missing or non-numeric key " + key(k));
  return static_cast<float>(*v);
}

float key_reader::optional_float(std::string_view k, float fallback) const {
  const auto v = meta_.get_float(key(k));
  return v && std::isfinite(*v) ? static_cast<float>(*v) : fallback;
}

std::optional<std::string> key_reader::optional_string(std::string_view k) const {
  const auto v = meta_.get_string(key(k));
  if (!v) return std::nullopt;
  return std::string(*v);
}

result<std::vector<std::int64_t>> key_reader::per_layer(std::string_view k, std::int64_t n_layer,
                                                        std::optional<std::int64_t> fallback, std::int64_t min,
                                                        std::int64_t max) const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n_layer), fallback.value_or(0));
  const gguf::value* v = meta_.find(key(k));
  if (v == nullptr) {
    if (!fallback) return make_error(errc::malformed, "missing key " + key(k));
    return out;
  }
  if (const gguf::array_value* a = v->as_array()) {
    if (static_cast<std::int64_t>(a->size()) != n_layer) {
      return make_error(errc::malformed, key(k) + " has " + std::to_string(a->size()) + " entries for " +
                                             std::to_string(n_layer) + " layers");
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto e = a->int_at(i);
      if (!e || *e < min || *e > max) return make_error(errc::malformed, key(k) + "[" + std::to_string(i) + "] is outside " + range_text(min, max));
      out[i] = *e;
    }
    return out;
  }
  const auto e = v->as_int();
  if (!e || *e < min || *e > max) return make_error(errc::malformed, key(k) + " is outside " + range_text(min, max));
  std::fill(out.begin(), out.end(), *e);
  return out;
}

result<std::vector<float>> key_reader::per_layer_float(std::string_view k, std::int64_t n_layer, std::optional<float> fallback) const {
  std::vector<float> out(static_cast<std::size_t>(n_layer), fallback.value_or(0.0f));
  const gguf::value* v = meta_.find(key(k));
  if (v == nullptr) {
    if (!fallback) return make_error(errc::malformed, "missing key " + key(k));
    return out;
  }
  if (const gguf::array_value* a = v->as_array()) {
    if (static_cast<std::int64_t>(a->size()) < n_layer) return make_error(errc::malformed, key(k) + " has fewer entries than layers");
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto e = a->float_at(i);
      if (!e || !std::isfinite(*e)) return make_error(errc::malformed, key(k) + "[" + std::to_string(i) + "] is not a number");
      out[i] = static_cast<float>(*e);
    }
    return out;
  }
  const auto e = v->as_float();
  if (!e || !std::isfinite(*e)) return make_error(errc::malformed, key(k) + " is not a number");
  std::fill(out.begin(), out.end(), static_cast<float>(*e));
  return out;
}

float yarn_attn_factor(float freq_scale, float log_mul, float mscale, float model_attn_factor) {
  const float factor = 1.0f / freq_scale;
  // (the reference's compiler contracts a * b + 1 into fused multiply-adds)
  const auto get_mscale = [factor](float m) { return factor <= 1.0f ? 1.0f : std::fma(0.1f * m, std::log(factor), 1.0f); };
  float f = log_mul != 0.0f ? get_mscale(mscale) / get_mscale(log_mul) : get_mscale(1.0f);
  f *= 1.0f / std::fma(0.1f, std::log(factor), 1.0f);
  return f * model_attn_factor;
}

result<hparams> load_common_hparams(const gguf::metadata& meta) {
  hparams hp;
  const auto arch = meta.get_string("general.architecture");
  if (!arch) return make_error(errc::malformed, "general.architecture is missing");
  hp.arch = std::string(*arch);
  const key_reader r(meta, hp.arch);
  constexpr std::int64_t big = std::int64_t{1} << 24;

  auto ctx = r.required_int("context_length", 1, std::int64_t{1} << 30);
  if (!ctx) return std::move(ctx).err();
  hp.n_ctx_train = *ctx;
  auto embd = r.required_int("embedding_length", 1, big);
  if (!embd) return std::move(embd).err();
  hp.n_embd = *embd;
  auto layers = r.required_int("block_count", 1, 4096);
  if (!layers) return std::move(layers).err();
  hp.n_layer = *layers;

  auto heads = r.per_layer("attention.head_count", hp.n_layer, std::nullopt, 0, 1 << 16);
  if (!heads) return std::move(heads).err();
  hp.n_head = std::move(*heads);
  auto heads_kv = r.per_layer("attention.head_count_kv", hp.n_layer, hp.n_head[0], 0, 1 << 16);
  if (!heads_kv) return std::move(heads_kv).err();
  hp.n_head_kv = std::move(*heads_kv);
  if (meta.find(r.key("attention.head_count_kv")) == nullptr) hp.n_head_kv = hp.n_head;
  auto ff = r.per_layer("feed_forward_length", hp.n_layer, 0, 0, big);
  if (!ff) return std::move(ff).err();
  hp.n_ff = std::move(*ff);

  const std::int64_t default_head_dim = hp.n_head[0] > 0 ? hp.n_embd / hp.n_head[0] : 0;
  auto dk = r.optional_int("attention.key_length", default_head_dim, 1, 1 << 16);
  if (!dk) return std::move(dk).err();
  hp.head_dim_k = *dk;
  auto dv = r.optional_int("attention.value_length", default_head_dim, 1, 1 << 16);
  if (!dv) return std::move(dv).err();
  hp.head_dim_v = *dv;

  for (auto [key, field] : {std::pair{"expert_count", &hparams::n_expert}, std::pair{"expert_used_count", &hparams::n_expert_used},
                            std::pair{"expert_feed_forward_length", &hparams::n_ff_exp},
                            std::pair{"expert_shared_feed_forward_length", &hparams::n_ff_shexp}}) {
    auto v = r.optional_int(key, 0, 0, big);
    if (!v) return std::move(v).err();
    hp.*field = *v;
  }
  if (hp.n_expert_used > hp.n_expert) {
    return make_error(errc::malformed, r.key("expert_used_count") + " exceeds " + r.key("expert_count"));
  }
  hp.rms_eps = r.optional_float("attention.layer_norm_rms_epsilon", 1e-5f);
  if (meta.find(r.key("attention.scale")) != nullptr) hp.attention_scale = r.optional_float("attention.scale", 1.0f);

  rope_params& rope = hp.rope;
  auto n_rot = r.optional_int("rope.dimension_count", hp.head_dim_k, 0, hp.head_dim_k);
  if (!n_rot) return std::move(n_rot).err();
  rope.n_dims = *n_rot;
  rope.freq_base = r.optional_float("rope.freq_base", 10000.0f);
  rope.scaling_type = r.optional_string("rope.scaling.type").value_or("linear");
  float factor = r.optional_float("rope.scaling.factor", r.optional_float("rope.scale_linear", 0.0f));
  rope.freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
  rope.attn_factor = r.optional_float("rope.scaling.attn_factor", 1.0f);
  auto orig = r.optional_int("rope.scaling.original_context_length", hp.n_ctx_train, 1, std::int64_t{1} << 30);
  if (!orig) return std::move(orig).err();
  rope.n_ctx_orig = static_cast<std::int32_t>(*orig);
  rope.beta_fast = r.optional_float("rope.scaling.yarn_beta_fast", 32.0f);
  rope.beta_slow = r.optional_float("rope.scaling.yarn_beta_slow", 1.0f);
  hp.yarn_log_mul = r.optional_float("rope.scaling.yarn_log_multiplier", 0.0f);
  if (rope.scaling_type == "yarn") {
    rope.ext_factor = 1.0f;
    rope.attn_factor = yarn_attn_factor(rope.freq_scale, hp.yarn_log_mul, 1.0f, rope.attn_factor);
  }
  hp.rope_freq_base_swa = r.optional_float("rope.freq_base_swa", rope.freq_base);
  auto swa = r.optional_int("attention.sliding_window", 0, 0, std::int64_t{1} << 30);
  if (!swa) return std::move(swa).err();
  hp.n_swa = static_cast<std::int32_t>(*swa);

  if (const gguf::array_value* tokens = meta.get_array("tokenizer.ggml.tokens")) hp.n_vocab = static_cast<std::int64_t>(tokens->size());
  auto vocab = r.optional_int("vocab_size", hp.n_vocab, 1, big);
  if (!vocab) return std::move(vocab).err();
  hp.n_vocab = *vocab;
  return hp;
}

}  // namespace spite::models
