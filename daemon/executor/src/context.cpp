#include "spite/executor/context.hpp"
#include "spite/executor/memory_estimate.hpp"

#include <algorithm>
#include <cmath>

namespace spite::executor {

result<std::unique_ptr<context>> context::create(const models::model& m, const context_options& options) {
  std::unique_ptr<context> c(new context(m, options.n_threads));
  const kv_layout layout = kv_layout_for(m, options);
  c->n_ctx_ = layout.n_ctx;
  c->flash_attn_ = options.flash_attn;
  auto kv = make_kv_memory(kv_kind_for(m, options), layout);
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

result<std::span<const float>> context::decode(const batch& b, const models::lora_set* loras, float* hidden) {
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
  models::forward_context ctx{*ops, pool_, view, *kv_, logits_.data(), loras, hidden};
  ctx.flash_attn = flash_attn_;
  SPITE_TRY(model_.forward(ctx));
  return std::span<const float>(logits_);
}

result<std::vector<float>> context::embed(std::span<const std::int32_t> tokens, std::string_view pooling) {
  if (tokens.empty()) return make_error(errc::invalid_argument, "nothing to embed");
  if (static_cast<std::int64_t>(tokens.size()) > n_ctx_) {
    return make_error(errc::invalid_argument, "the input (" + std::to_string(tokens.size()) + " tokens) exceeds the context of " +
                                                  std::to_string(n_ctx_) + " tokens");
  }
  if (pooling != "mean" && pooling != "cls" && pooling != "last") {
    return make_error(errc::unsupported, "pooling '" + std::string(pooling) + "' is not supported (mean, cls, last)");
  }
  const std::int64_t E = model_.hp().n_embd;
  std::vector<float> pooled(static_cast<std::size_t>(E), 0.0f), states;
  kv_->clear();
  batch b;
  constexpr std::size_t chunk = 512;  // later chunks attend to earlier ones through the memory
  for (std::size_t start = 0; start < tokens.size(); start += chunk) {
    const std::size_t end = std::min(tokens.size(), start + chunk);
    b.clear();
    for (std::size_t i = start; i < end; ++i) b.add(tokens[i], static_cast<std::int32_t>(i), 0, false);
    states.assign(static_cast<std::size_t>(E) * (end - start), 0.0f);
    auto r = decode(b, nullptr, states.data());
    if (!r) {
      kv_->clear();
      return std::move(r).err();
    }
    for (std::size_t i = start; i < end; ++i) {
      const bool take = pooling == "mean" || (pooling == "cls" && i == 0) || (pooling == "last" && i + 1 == tokens.size());
      if (!take) continue;
      const float* row = states.data() + static_cast<std::size_t>(E) * (i - start);
      for (std::int64_t e = 0; e < E; ++e) pooled[static_cast<std::size_t>(e)] += row[e];
    }
  }
  kv_->clear();
  if (pooling == "mean") {
    for (float& v : pooled) v /= static_cast<float>(tokens.size());
  }
  double norm = 0;
  for (float v : pooled) norm += static_cast<double>(v) * v;
  if (norm > 0) {
    const auto inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (float& v : pooled) v *= inv;
  }
  return pooled;
}

}  // namespace spite::executor
