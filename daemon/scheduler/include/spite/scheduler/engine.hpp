// Continuous batching for one model: one loop thread builds every forward step from all active
// sequences (a prompt chunk or one decode token each), samples per sequence and streams the
// text. Requests wait in a bounded queue; cancellation takes effect at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/executor/context.hpp"
#include "spite/scheduler/logprobs.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::scheduler {

struct generation_result {
  std::string text;
  std::int32_t prompt_tokens = 0, generated = 0;
  std::int32_t cached_tokens = 0;  // leading prompt tokens whose KV was reused from an earlier request
  std::string stop_reason;  // "stop" (end of generation token), "length", "cancelled", "timeout", "error"
  std::optional<error> failure;
};

// One generated token, for callers that want ids and log-probabilities (the API's logprobs).
struct token_info {
  std::int32_t id = -1;
  float logprob = 0;                 // of the chosen token under the raw logits
  std::vector<token_logprob> top;    // the most probable alternatives, when asked for
};

struct generation_request {
  std::vector<std::int32_t> prompt;
  int top_logprobs = -1;  // -1: no log-probabilities; 0..20: the chosen token's and this many alternatives
  bool special_text = false;  // the text shows special tokens (a format's control markers) too
  std::int32_t n_predict = 128;
  sampling_params sampling;
  // Called on the engine thread: keep them short and never block.
  std::function<void(std::string_view text)> on_text;
  std::function<void(const token_info&)> on_token;  // before the token's text; end-of-generation tokens excluded
  std::function<void(const generation_result&)> on_done;  // exactly once
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  // Past this the request ends with stop_reason "timeout" (what it generated is kept).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct engine_options {
  int max_concurrent = 4;      // sequences decoding at once
  int queue_size = 64;         // requests waiting beyond those
  std::int32_t n_ctx = 0;      // per sequence; 0: the model's, at most 4096
  int threads = 0;
  std::int32_t prompt_chunk = 64;  // prompt tokens per sequence per step, so decoding never stalls
  // Keep each finished sequence's KV and start a new request on the free slot that shares the
  // longest prefix with it (multi-turn chat, shared system prompts), evaluating only the rest.
  bool prompt_cache = true;
  bool swa_full = false;  // sliding-window layers keep the whole context (else a ring, see executor)
  bool flash_attn = false;  // see executor::context_options
  std::shared_ptr<const dispatch::op_table> ops;
  std::shared_ptr<const models::lora_set> loras;  // applied to every step; null: none
};

struct engine_stats {
  std::uint64_t steps = 0, tokens = 0, sequences_in_steps = 0;
  int max_sequences_in_step = 0;
  std::uint64_t prompt_tokens = 0, cached_prompt_tokens = 0;
  std::int64_t kv_tokens = 0, kv_tokens_max = 0;  // positions held in KV memory (prompt cache included), capacity
  int active = 0, queued = 0;
};

class engine {
 public:
  static result<std::unique_ptr<engine>> create(const models::model& model, std::shared_ptr<const tokenizer::tokenizer> tok,
                                                const engine_options& options);
  ~engine();  // fails whatever is queued or running as "cancelled"
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Queues the request; errc::busy when the queue is full, invalid_argument for a prompt that
  // cannot fit. on_done is called for every accepted request.
  result<void> submit(generation_request request);
  void set_ops(std::shared_ptr<const dispatch::op_table> ops);
  engine_stats stats() const;
  std::int32_t n_ctx() const noexcept;

 private:
  struct impl;
  explicit engine(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace spite::scheduler
