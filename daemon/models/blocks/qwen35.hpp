// Qwen3.5 (qwen35, qwen35moe): the hybrid decoder shared by both folders.
#pragma once

#include "decoder_model.hpp"

namespace spite::models {

// Gated DeltaNet layers and every full_attention_interval-th layer gated attention (QK-norm,
// partial NEOX RoPE, sigmoid output gate); dense SwiGLU or softmax experts with a
// sigmoid-gated shared expert. Runs on the hybrid KV memory.
result<std::unique_ptr<decoder_model>> load_qwen35(const gguf::file& f, bool moe);

}  // namespace spite::models
