// What the HTTP API needs from the daemon, in spite's own types: the model list, readiness,
// generations started without blocking (tokens arrive through callbacks on the engine's thread),
// and metrics. spited implements it over the same service the control socket uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::server {

struct model_card {
  std::string id;
  std::int64_t created = 0;  // unix seconds (file modification time)
  bool loaded = false;
  std::string arch;
  std::int32_t n_ctx = 0;
};

struct generate_input {
  std::string model;
  // Chat: rendered with the model's chat template (tools passed to it). Otherwise `prompt`.
  std::optional<nlohmann::ordered_json> messages;
  nlohmann::ordered_json tools;  // null when none
  std::string prompt;
  std::vector<std::int32_t> prompt_tokens;  // used instead of `prompt` when not empty
  // Fill-in-the-middle: the text after the insertion point; the model's FIM tokens frame prompt
  // and suffix (prefix-suffix-middle order). A model without them refuses (invalid_argument).
  std::optional<std::string> suffix;
  std::int32_t max_tokens = 0;  // 0: the server's limit
  bool render_special = false;  // the text shows special tokens (control markers) too
  scheduler::sampling_params sampling;
  int top_logprobs = -1;  // -1: none; else each token's log-probability and this many alternatives
};

struct token_logprob_entry {
  std::string token;  // the token's own text (bytes, possibly a partial character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

// Either a generated token's log-probabilities (before its text), or text.
struct token_event {
  std::string text;
  std::optional<token_logprob_entry> token;
};

struct generate_outcome {
  std::int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  std::string stop_reason;  // "stop", "length", "cancelled"
  std::optional<error> failure;
};

struct generate_callbacks {
  std::function<void(const token_event&)> on_token;      // engine thread: short, never blocking
  std::function<void(const generate_outcome&)> on_done;  // exactly once
};

class generation {
 public:
  virtual ~generation() = default;
  virtual void cancel() = 0;  // takes effect at the next step
};

struct embed_input {
  std::string model;
  std::vector<std::string> texts;                 // either texts
  std::vector<std::vector<std::int32_t>> tokens;  // or token ids
};

struct embed_output {
  std::vector<std::vector<float>> vectors;  // one per input, L2-normalised
  std::int32_t prompt_tokens = 0;
};

struct readiness {
  bool ready = false;
  std::string reason;  // when not ready
};

class backend {
 public:
  virtual ~backend() = default;
  virtual std::vector<model_card> models() = 0;
  // errc::not_found (unknown model), busy (queue full), invalid_argument (prompt too long, bad
  // template input), unavailable (shutting down).
  virtual result<std::shared_ptr<generation>> generate(const generate_input& input, generate_callbacks callbacks) = 0;
  // The prompt's own tokens (input.prompt or input.prompt_tokens, as generate() evaluates them)
  // with their log-probabilities (each under the logits of the position before it; the first
  // token has none: logprob NaN), and `top` alternatives. Blocks the caller.
  virtual result<std::vector<token_logprob_entry>> prompt_logprobs(const generate_input& input, int top) = 0;
  // The text of token ids (special tokens left out), as echo shows a prompt given as ids.
  virtual result<std::string> detokenize(const std::string& model, const std::vector<std::int32_t>& tokens) = 0;
  // The model's chat template source (loads the model on demand): tool formats follow it.
  virtual result<std::string> chat_template(const std::string& model) = 0;
  // Runs on the calling (worker) thread until the vectors are there.
  virtual result<embed_output> embed(const embed_input& input) = 0;
  virtual readiness ready() = 0;
  // Prometheus text lines of the engine side (queue depth, batch sizes, KV use, kernels).
  virtual std::string metrics() = 0;
};

}  // namespace spite::server
