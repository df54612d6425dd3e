// What the Gemma generations share on top of the decoder.
#pragma once

#include <cmath>

#include "decoder_model.hpp"

namespace spite::models {

// GeGLU, embeddings scaled by sqrt(E), q scaled by 1 / sqrt(head width) before attention and
// q.k left unscaled. The 27B size (`wide_layers` layers) scales q by 1 / sqrt(E / H) instead.
inline void gemma_common(decoder_model& d, std::int64_t wide_layers) {
  const hparams& hp = d.hp();
  decoder_config& c = d.config;
  c.activation = ffn_activation::gelu;
  c.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));
  const std::int64_t width = hp.n_layer == wide_layers ? hp.n_embd / hp.n_head[0] : c.head_dim;
  c.q_prescale = 1.0f / std::sqrt(static_cast<float>(width));
  c.kq_scale = 1.0f;
}

}  // namespace spite::models
