// glm-dsa: GLM-5.x. The DeepSeek-2 graph (latent attention, sigmoid experts with a selection
// bias, shared experts, leading dense layers) with DeepSeek sparse attention: on "full" layers a
// lightning indexer (blocks/dsa_indexer.cpp) picks the top_k cached positions each query may
// attend; "shared" layers reuse the choice of the last full layer.
#include "../blocks/deepseek2.hpp"
#include "../blocks/dsa_indexer.hpp"

namespace spite::models {
namespace {

// GLM-5.2's layout when the file does not say: full indexers on layers 0, 1, then every fourth.
bool glm52_full_indexer(std::int64_t il) { return il < 2 || (il - 2) % 4 == 0; }

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  const std::string arch = "glm-dsa";
  const key_reader r(f.meta(), arch);
  auto n_head = r.required_int("attention.indexer.head_count", 1, 1024);
  auto head_dim = r.required_int("attention.indexer.key_length", 1, 1 << 16);
  auto top_k = r.required_int("attention.indexer.top_k", 1, std::int64_t{1} << 30);
  for (const auto* v : {&n_head, &head_dim, &top_k}) {
    if (!*v) return v->err();
  }
  const std::int64_t Hi = *n_head, Di = *head_dim;
  if ((Di & (Di - 1)) != 0) return make_error(errc::malformed, arch + " model: the indexer key length " + std::to_string(Di) + " is not a power of two");

  std::vector<std::int64_t> full;
  const deepseek2_options options{
      .default_gating = 2,
      .yarn_log_multiplier = false,
      .adjust = [&](hparams& hp) -> result<void> {
        if (hp.rope.n_dims > Di) return make_error(errc::malformed, arch + " model: the indexer key is narrower than the rotated part");
        // GLM-5 / 5.1 (contexts under 1M) have an indexer on every layer.
        std::vector<std::int64_t> fallback(static_cast<std::size_t>(hp.n_layer));
        for (std::int64_t il = 0; il < hp.n_layer; ++il) fallback[static_cast<std::size_t>(il)] = hp.n_ctx_train < 1048576 || glm52_full_indexer(il);
        auto types = r.per_layer("attention.indexer.types", hp.n_layer, 1, 0, 1);
        if (!types) return std::move(types).err();
        full = f.meta().find(r.key("attention.indexer.types")) != nullptr ? *types : fallback;
        if (!full.empty() && full[0] == 0) return make_error(errc::malformed, arch + " model: layer 0 shares an indexer no earlier layer has");
        // An indexer layer's KV row carries its key after [c | k_pe].
        hp.head_dim_k_layer.assign(static_cast<std::size_t>(hp.n_layer), hp.head_dim_k);
        for (std::size_t il = 0; il < full.size(); ++il) {
          if (full[il] != 0) hp.head_dim_k_layer[il] += Di;
        }
        return ok();
      }};
  auto m = load_deepseek2(f, options);
  if (!m) return std::move(m).err();
  decoder_model& dm = **m;
  const std::int64_t E = dm.hp().n_embd;
  binder b(f, arch);
  const std::vector<float> hadamard = walsh_hadamard(Di);
  for (std::size_t il = 0; il < dm.weights.attn.size(); ++il) {
    attention_layer& a = dm.weights.attn[il];
    if (!a.mla || a.mla->q_a.empty()) return make_error(errc::malformed, arch + " model: sparse attention needs the low-rank query (attn_q_a)");
    auto mla = std::make_shared<mla_layer>(*a.mla);
    if (full[il] != 0) {
      const int l = static_cast<int>(il);
      auto ix = std::make_shared<dsa_indexer>();
      ix->q_b = b.matrix(layer_tensor(l, "indexer.attn_q_b"), mla->q_a.w.out, Hi * Di);
      ix->k = b.matrix(layer_tensor(l, "indexer.attn_k"), E, Di);
      ix->k_norm = b.vec(layer_tensor(l, "indexer.k_norm.weight"), Di, true);
      ix->k_norm_b = b.vec(layer_tensor(l, "indexer.k_norm.bias"), Di, true);
      ix->proj = b.matrix(layer_tensor(l, "indexer.proj"), E, Hi);
      ix->hadamard = hadamard;
      ix->n_head = Hi;
      ix->head_dim = Di;
      ix->top_k = *top_k;
      mla->indexer = std::move(ix);
    } else {
      mla->reuses_selection = true;
    }
    a.mla = std::move(mla);
  }
  SPITE_TRY(b.status());
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace

const arch_entry& arch_glm_dsa() {
  static const arch_entry entry{"glm-dsa", load, "glm"};
  return entry;
}

}  // namespace spite::models
