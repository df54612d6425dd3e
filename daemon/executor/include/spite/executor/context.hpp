// An inference context: a model, its KV memory, the compute threads and the op table, and the
// forward step over one batch that mixes tokens of several sequences.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "spite/core/thread_pool.hpp"
#include "spite/executor/kv_memory.hpp"
#include "spite/models/model.hpp"

namespace spite::executor {

struct batch {
  std::vector<std::int32_t> tokens, pos, seq;
  std::vector<std::uint8_t> logits;  // 1 where the token's logits are wanted

  void add(std::int32_t token, std::int32_t position, std::int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(sequence);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    pos.clear();
    seq.clear();
    logits.clear();
  }
  std::size_t size() const noexcept { return tokens.size(); }
};

struct context_options {
  std::int32_t n_ctx = 0;        // 0: the model's training context, at most 4096
  int n_threads = 0;             // 0: every hardware thread
  std::int32_t n_seq_max = 1;
  std::string kv_kind;           // empty: the kind the model asks for (hparams::memory_kind)
  // Sliding-window layers keep the whole context too (as the reference engine's default),
  // instead of a ring of window + max_batch cells.
  bool swa_full = false;
  std::int32_t max_batch = 512;  // tokens of one sequence per decode call
  std::shared_ptr<const dispatch::op_table> ops;  // null: the built-in CPU kernels
  // Flash attention (an online softmax over tiles of keys) in place of the full score rows.
  bool flash_attn = false;
};

class context {
 public:
  static result<std::unique_ptr<context>> create(const models::model& m, const context_options& options);

  // Runs one step. Returns the logits of the tokens flagged in `b`, in batch order:
  // [n_vocab] per flagged token.
  // `hidden`, when given, receives the final-normed state of every token of `b` ([n_embd] each).
  result<std::span<const float>> decode(const batch& b, const models::lora_set* loras = nullptr,
                                        float* hidden = nullptr);

  // An embedding of `tokens` (one sequence, from an empty memory): the token states pooled as
  // `pooling` says ("mean", "cls" = the first token, "last"), L2-normalised. Uses sequence 0 and
  // clears the memory: give embeddings a context of their own.
  result<std::vector<float>> embed(std::span<const std::int32_t> tokens, std::string_view pooling);

  // Replaces the kernels (a new plug-in generation); steps already running finish with the old
  // table. Null restores the built-in kernels.
  void set_ops(std::shared_ptr<const dispatch::op_table> ops);

  const models::model& model() const noexcept { return model_; }
  kv_memory& memory() noexcept { return *kv_; }
  std::int32_t n_ctx() const noexcept { return n_ctx_; }
  int n_threads() const noexcept { return pool_.size(); }
  std::size_t allocated_bytes() const noexcept { return kv_->bytes() + logits_.capacity() * sizeof(float); }

 private:
  context(const models::model& m, int n_threads) : model_(m), pool_(n_threads) {}
  const models::model& model_;
  thread_pool pool_;
  std::unique_ptr<kv_memory> kv_;
  std::int32_t n_ctx_ = 0;
  bool flash_attn_ = false;
  std::vector<float> logits_;
  std::mutex ops_mutex_;
  std::shared_ptr<const dispatch::op_table> ops_;
};

}  // namespace spite::executor
