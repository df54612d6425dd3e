#include "spite/executor/context.hpp"
#include "spite/executor/memory_estimate.hpp"

#include <algorithm>

namespace spite::executor {

result<std::unique_ptr<context>> context::create(const models::model& m, const context_options& options) {
  std::unique_ptr<context> c(new context(m, options.n_threads));
  const kv_layout layout = kv_layout_for(m, options.n_ctx, options.n_seq_max);
  c->n_ctx_ = layout.n_ctx;
  auto kv = make_kv_memory(options.kv_kind, layout);
  if (!kv) return std::move(kv).err();
  c->kv_ = std::move(*kv);
  // The built-in table lives for the program; it is shared without ownership.
  c->ops_ = std::shared_ptr<const dispatch::op_table>(std::shared_ptr<void>(), &dispatch::cpu_reference_ops());
  if (options.ops) c->ops_ = options.ops;
  return c;
}

void context::set_ops(std::shared_ptr<const dispatch::op_table> ops) {
  std::lock_guard lock(ops_mutex_);
  ops_ = ops ? std::move(ops)
             : std::shared_ptr<const dispatch::op_table>(std::shared_ptr<void>(), &dispatch::cpu_reference_ops());
}

result<std::span<const float>> context::decode(const batch& b, const models::lora_set* loras) {
  const std::size_t n = b.tokens.size();
  if (n == 0) return make_error(errc::invalid_argument, "empty batch");
  if (b.pos.size() != n || b.seq.size() != n || b.logits.size() != n) {
    return make_error(errc::invalid_argument, "batch arrays differ in length");
  }
  const std::int64_t n_vocab = model_.hp().n_vocab;
  std::vector<std::int32_t> outputs;
  for (std::size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab) {
      return make_error(errc::invalid_argument, "token id " + std::to_string(b.tokens[i]) + " is outside the vocabulary (" +
                                                    std::to_string(n_vocab) + " tokens)");
    }
    if (b.logits[i]) outputs.push_back(static_cast<std::int32_t>(i));
  }
  models::batch_view view{b.tokens, b.pos, b.seq, outputs};
  auto plan = kv_->prepare(view);
  if (!plan) return std::move(plan).err();
  kv_->apply(*plan);
  logits_.assign(static_cast<std::size_t>(n_vocab) * outputs.size(), 0.0f);
  // The step keeps the table it started with: a reload in between takes effect at the next one.
  std::shared_ptr<const dispatch::op_table> ops;
  {
    std::lock_guard lock(ops_mutex_);
    ops = ops_;
  }
  models::forward_context ctx{*ops, pool_, view, *kv_, logits_.data(), loras};
  SPITE_TRY(model_.forward(ctx));
  return std::span<const float>(logits_);
}

}  // namespace spite::executor
