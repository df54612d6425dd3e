#include "spite/executor/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>

#include "spite/core/bytes.hpp"

namespace spite::executor {

kv_layout kv_layout_for(const models::model& m, const context_options& options) {
  const std::int32_t n_ctx = options.n_ctx, n_seq_max = options.n_seq_max;
  const models::hparams& hp = m.hp();
  kv_layout layout;
  layout.n_layer = hp.n_layer;
  for (std::int64_t l = 0; l < hp.n_layer; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const std::int64_t dk = i < hp.head_dim_k_layer.size() ? hp.head_dim_k_layer[i] : hp.head_dim_k;
    const std::int64_t dv = i < hp.head_dim_v_layer.size() ? hp.head_dim_v_layer[i] : hp.head_dim_v;
    layout.k_width.push_back(hp.n_head_kv[i] * dk);
    layout.v_width.push_back(hp.n_head_kv[i] * dv);
  }
  layout.state_width = hp.n_state;
  layout.state_width.resize(static_cast<std::size_t>(hp.n_layer), 0);
  layout.n_ctx = n_ctx > 0 ? n_ctx : static_cast<std::int32_t>(std::min<std::int64_t>(hp.n_ctx_train, 4096));
  layout.n_seq_max = n_seq_max;
  layout.max_batch = std::max(options.max_batch, 1);
  layout.value_in_key = hp.kv_value_in_key;
  if (!options.swa_full) {
    layout.window = hp.kv_window;
    layout.window.resize(static_cast<std::size_t>(hp.n_layer), 0);
  }
  return layout;
}

result<memory_estimate> estimate_memory(const gguf::file& file, const models::model& m, const context_options& options,
                                        std::int32_t n_batch) {
  memory_estimate e;
  for (const auto& t : file.tensors()) e.weights += t.size;
  const kv_layout layout = kv_layout_for(m, options);
  // The memory kind knows its own size; it allocates per sequence on first use, so asking is cheap.
  auto kv = make_kv_memory(kv_kind_for(m, options), layout);
  if (!kv) return std::move(kv).err();
  e.kv = (*kv)->bytes_when_full();
  // One step holds a few residual-sized rows per token, the widest feed-forward, the attention
  // scores of one head against the whole context, and the logits of every sequence.
  const models::hparams& hp = m.hp();
  std::int64_t n_ff = std::max<std::int64_t>(hp.n_ff_exp, hp.n_ff_shexp);
  for (auto f : hp.n_ff) n_ff = std::max(n_ff, f);
  std::int64_t n_head = 1;
  for (auto h : hp.n_head) n_head = std::max(n_head, h);
  const std::int64_t q_width = n_head * std::max(hp.head_dim_k, hp.head_dim_v);
  const std::int64_t per_token = 4 * hp.n_embd + 3 * q_width + 3 * n_ff + static_cast<std::int64_t>(layout.n_ctx);
  const std::int64_t outputs = std::max<std::int64_t>(options.n_seq_max, 1);
  e.scratch = static_cast<std::uint64_t>(std::max(n_batch, 1) * per_token + outputs * hp.n_vocab) * sizeof(float);
  return e;
}

std::string memory_estimate::describe() const {
  return human_bytes(total()) + " (weights " + human_bytes(weights) + " + KV " + human_bytes(kv) + " + scratch " +
         human_bytes(scratch) + ")";
}

}  // namespace spite::executor
