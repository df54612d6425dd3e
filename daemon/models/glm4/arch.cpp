// glm4: GLM-4-0414 / GLM-4.x dense. Sandwich norms around attention and FFN, Q/K/V biases,
// partial NORM RoPE (rope.dimension_count, usually half the head), fused [gate | up] SwiGLU.
#include "../blocks/decoder_model.hpp"

namespace spite::models {
namespace {

result<std::unique_ptr<model>> load(const gguf::file& f, const load_options&) {
  return as_model(decoder_model::load(f, rope_kind::norm, {.fused_gate_up = true, .sandwich_norms = true}));
}

}  // namespace

const arch_entry& arch_glm4() {
  static const arch_entry entry{"glm4", load, "glm"};
  return entry;
}

}  // namespace spite::models
