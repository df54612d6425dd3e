// Hyper-parameters shared by the decoder architectures, read from "<arch>.*" keys with the
// defaults of the reference loader. Every value is bounded before use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/gguf/file.hpp"

namespace spite::models {

enum class rope_kind { none, norm, neox };

struct rope_params {
  rope_kind kind = rope_kind::norm;
  std::int64_t n_dims = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  std::int32_t n_ctx_orig = 0;
  std::string scaling_type = "none";
};

struct hparams {
  std::string arch;
  std::int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0;
  std::vector<std::int64_t> n_head, n_head_kv, n_ff;  // per layer
  std::int64_t head_dim_k = 0, head_dim_v = 0;
  std::int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
  float rms_eps = 1e-5f;
  std::optional<float> attention_scale;
  rope_params rope;
  float rope_freq_base_swa = 10000.0f;  // rope.freq_base_swa (default: rope.freq_base)
  std::int32_t n_swa = 0;               // attention.sliding_window (0: none)
  // Per layer: the keys its attention can reach back (sliding window or chunk length; 0: all),
  // so that the KV memory keeps only those.
  std::vector<std::int32_t> kv_window;
  // The values are the first head_dim_v elements of each key row (latent attention's
  // compressed KV, [c | k_pe] with V = c): the memory stores them once.
  bool kv_value_in_key = false;
  float yarn_log_mul = 0.0f;            // rope.scaling.yarn_log_multiplier
  // Set by the architecture, not read from keys: the KV memory kind its forward pass needs (the
  // executor's registry), and per layer the floats of recurrent state a sequence keeps there
  // (empty or 0: none; such a layer may have no KV heads).
  std::string memory_kind = "contiguous_f16";
  std::vector<std::int64_t> n_state;
  // Per-layer key / value head widths where layers differ (empty: head_dim_k / head_dim_v).
  std::vector<std::int64_t> head_dim_k_layer, head_dim_v_layer;
};

// Reads "<arch>.<key>" values with bounds.
class key_reader {
 public:
  key_reader(const gguf::metadata& meta, std::string arch) : meta_(meta), arch_(std::move(arch)) {}
  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }
  result<std::int64_t> required_int(std::string_view k, std::int64_t min, std::int64_t max) const;
  result<std::int64_t> optional_int(std::string_view k, std::int64_t fallback, std::int64_t min, std::int64_t max) const;
  result<float> required_float(std::string_view k) const;
  float optional_float(std::string_view k, float fallback) const;
  std::optional<std::string> optional_string(std::string_view k) const;
  // A u32 or a per-layer array of u32 (some models vary head counts per layer).
  result<std::vector<std::int64_t>> per_layer(std::string_view k, std::int64_t n_layer, std::optional<std::int64_t> fallback,
                                             std::int64_t min, std::int64_t max) const;
  // The same for an f32 key (finite values; an array may hold more entries than layers).
  result<std::vector<float>> per_layer_float(std::string_view k, std::int64_t n_layer, std::optional<float> fallback) const;
  const gguf::metadata& meta() const noexcept { return meta_; }

 private:
  const gguf::metadata& meta_;
  std::string arch_;
};

// The keys every decoder reads (section 0.1 of the architecture checklist). With YaRN scaling
// rope.attn_factor is the factor the reference's context derives (see yarn_attn_factor).
result<hparams> load_common_hparams(const gguf::metadata& meta);

// The cos / sin magnitude the reference's context passes to YaRN RoPE: the model's
// rope.scaling.attn_factor times get_mscale(factor, mscale) / get_mscale(factor, log_mul) (or
// get_mscale(factor, 1) without a log multiplier), divided by the 1 + 0.1 ln(factor) the RoPE
// kernel multiplies back. `mscale` is 1 except for DeepSeek-2 style models (pass log_mul).
float yarn_attn_factor(float freq_scale, float log_mul, float mscale, float model_attn_factor);

}  // namespace spite::models
