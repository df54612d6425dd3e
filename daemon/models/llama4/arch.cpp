// llama4: Llama 4 Scout / Maverick (text). NORM RoPE (rope_freqs) on three layers of four; the
// fourth is a NoPE layer with full attention and a position temperature on q, the RoPE layers
// attend in chunks and normalize q and k (RMS, unweighted) after RoPE. Dense and MoE layers
// interleave; experts are picked by the top-K logits, weighted by sigmoid(logit) applied to the
// expert's input, plus a shared expert.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

constexpr std::int64_t nope_step = 4;     // every 4th layer has no positions
constexpr std::int32_t chunk = 8192;      // the reference forces the chunk size

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  const key_reader r(f.meta(), "llama4");
  auto step = r.required_int("interleave_moe_layer_step", 1, 4096);
  if (!step) return std::move(step).err();
  SPITE_TRY(r.required_int("expert_feed_forward_length", 1, std::int64_t{1} << 24));
  const std::int64_t moe_step = *step;
  auto m = decoder_model::load(f, rope_kind::norm, {.fused_qkv_allowed = false, .shared_expert = true, .experts_required = true,
                                                    .moe_layer = [moe_step](int il) { return (il + 1) % moe_step == 0; }});
  if (!m) return std::move(m).err();
  decoder_model& d = **m;
  const hparams& hp = d.hp();
  // attention.sliding_window = 0 turns chunking off and leaves only the last layer without RoPE.
  const bool chunked = f.meta().find(r.key("attention.sliding_window")) == nullptr || hp.n_swa > 0;
  const std::int64_t nope_every = chunked ? nope_step : hp.n_layer;
  if (chunked) {
    auto pattern = r.optional_int("attention.sliding_window_pattern", nope_step, 1, 1 << 16);
    if (!pattern) return std::move(pattern).err();
    d.set_sliding_window(*pattern, chunk, true);
  }
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    if ((il + 1) % nope_every != 0) continue;
    attention_layer& a = d.weights.attn[static_cast<std::size_t>(il)];
    a.rope.kind = rope_kind::none;
    a.temperature = true;
  }
  decoder_config& c = d.config;
  c.qk_rms_after_rope = hp.n_expert != 128;  // not on the 128-expert model
  c.temperature_scale = 0.1f;
  c.temperature_offset = 1.0f;
  c.temperature_length = chunk;
  c.gating = moe_gating::sigmoid;
  c.moe_normalize = false;
  c.moe_weight_before = true;
  return as_model(std::move(m));
}

}  // namespace

const arch_entry& arch_llama4() {
  static const arch_entry entry{"llama4", load, "llama"};
  return entry;
}

}  // namespace spite::models
