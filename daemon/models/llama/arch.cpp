// llama: Llama 2 / 3.x, Mistral-7B-style, TinyLlama, and Mixtral-style experts. NORM RoPE with
// optional rope_freqs (Llama 3.1 scaling), optional biases, tied output allowed.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  auto hp = load_common_hparams(f.meta());
  if (!hp) return std::move(hp).err();
  const key_reader r(f.meta(), hp->arch);
  SPITE_TRY(r.required_float("attention.layer_norm_rms_epsilon"));
  if (hp->rope.n_dims != hp->head_dim_k) {
    return make_error(errc::malformed, "llama model: rope.dimension_count must equal the head dimension");
  }
  hp->rope.kind = rope_kind::norm;
  auto m = decoder_model::bind(f, std::move(*hp), {});
  if (!m) return std::move(m).err();
  (*m)->config.moe_normalize = true;  // softmax top-K, renormalized (Mixtral)
  return std::unique_ptr<model>(std::move(*m));
}

}  // namespace

// Llama 3 ships a byte-level BPE vocabulary, Llama 2 a SentencePiece one.
static std::string kernel_model(const gguf::file& file) {
  const auto vocab = file.meta().get_string("tokenizer.ggml.model");
  return vocab && *vocab == "gpt2" ? "llama3" : "llama2";
}

const arch_entry& arch_llama() {
  static const arch_entry entry{"llama", load, "llama", kernel_model};
  return entry;
}

}  // namespace spite::models
