// Token samplers, in the shape of llama.cpp's: a sampler is a small object that narrows or
// reshapes the candidates of one step (apply), learns from the tokens that were generated
// (accept), and can be reset and cloned. A chain is itself a sampler; its last member selects
// the token (greedy or dist).
//
// Typical use, one chain per sequence (samplers hold state and are not thread-safe):
//   auto chain = make_chain(params);              // result<std::unique_ptr<sampler_chain>>
//   if (!chain) return chain.err();
//   for (...) { token t = (*chain)->sample(logits_of_last_position); ... }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/scheduler/candidates.hpp"
#include "spite/scheduler/rng.hpp"

namespace spite::grammar {
class grammar;
class vocabulary;
}  // namespace spite::grammar

namespace spite::tokenizer {
class tokenizer;
}  // namespace spite::tokenizer

namespace spite::scheduler {

class sampler {
 public:
  virtual ~sampler() = default;

  // Stable, lower-case, as registered ("top_k").
  virtual std::string_view name() const = 0;
  // A token became part of the sequence (generated, or a prompt token the caller wants counted).
  virtual void accept(std::int32_t /*token*/) {}
  // A prompt token, counted by samplers that look at the whole sequence (penalties); samplers
  // that constrain only the generated text (grammar) ignore it.
  virtual void accept_prompt(std::int32_t token) { accept(token); }
  // Narrows or reshapes the candidates; a selecting sampler sets c.selected.
  virtual void apply(candidates& c) = 0;
  // Forgets everything accepted so far.
  virtual void reset() {}
  // An independent copy with the same state (history, random position).
  virtual std::unique_ptr<sampler> clone() const = 0;
  // Why this sampler cannot go on (a grammar that no token can continue, or that crossed one of
  // its limits): the request must end with this error. The step that set it still selected a
  // token, which the caller must not use.
  virtual std::optional<error> failure() const { return std::nullopt; }
};

class sampler_chain final : public sampler {
 public:
  explicit sampler_chain(std::uint64_t seed = 0) : rng_(seed) {}

  void add(std::unique_ptr<sampler> s);  // s must not be null
  std::size_t size() const noexcept { return samplers_.size(); }
  const sampler& at(std::size_t i) const { return *samplers_.at(i); }
  // "logit_bias -> penalties -> top_k -> temperature -> dist".
  std::string describe() const;
  std::uint64_t seed() const noexcept { return rng_.seed(); }

  std::string_view name() const override { return "chain"; }
  void accept(std::int32_t token) override;
  void accept_prompt(std::int32_t token) override;
  // Applies every member in order, with this chain's random source.
  void apply(candidates& c) override;
  // Resets every member and restarts the random sequence from the seed.
  void reset() override;
  std::unique_ptr<sampler> clone() const override;
  std::unique_ptr<sampler_chain> clone_chain() const;
  // The first member's failure.
  std::optional<error> failure() const override;

  // One step: builds the candidates from the logits (one per token id), applies the chain, and
  // accepts and returns the selected token. Do not accept() the returned token again.
  // Throws std::invalid_argument for empty logits and std::logic_error when no member selected a
  // token (a chain built without greedy/dist at the end): both are programmer errors.
  std::int32_t sample(std::span<const float> logits);

 private:
  std::vector<std::unique_ptr<sampler>> samplers_;
  rng rng_;
  candidates scratch_;  // reused between steps to avoid a vocabulary-sized allocation per token
};

// ---- Built-in samplers. Arguments out of range are programmer errors (std::invalid_argument);
// ---- user input goes through validate()/make_chain, which answer with a result.

// Selects the highest logit; ties go to the lowest id.
std::unique_ptr<sampler> make_greedy();
// Selects at random with the normalized probabilities, using the chain's random source.
std::unique_ptr<sampler> make_dist();
// Divides logits by t. t <= 0 keeps only the greedy choice. t must not be NaN or infinite.
std::unique_ptr<sampler> make_temperature(float t);
// Keeps the k highest logits (at least min_keep); k == 0 keeps all. k >= 0.
std::unique_ptr<sampler> make_top_k(std::int32_t k, std::size_t min_keep = 1);
// Nucleus: keeps the smallest most-probable prefix whose probability reaches p (at least
// min_keep); p >= 1 keeps all. p in (0, 1].
std::unique_ptr<sampler> make_top_p(float p, std::size_t min_keep = 1);
// Keeps tokens whose probability is at least p times the most probable one's (at least
// min_keep); p == 0 keeps all. p in [0, 1].
std::unique_ptr<sampler> make_min_p(float p, std::size_t min_keep = 1);
// Locally typical sampling (Meister et al. 2022): keeps the tokens whose surprisal is closest to
// the entropy of the distribution until their probability exceeds p (at least min_keep);
// p >= 1 keeps all. p in (0, 1].
std::unique_ptr<sampler> make_typical_p(float p, std::size_t min_keep = 1);

struct penalty_params {
  std::int32_t last_n = 64;  // window of accepted tokens; 0 disables, -1 = every accepted token
  float repeat = 1.0f;       // llama.cpp: a seen token's logit > 0 is divided by it, else multiplied
  float frequency = 0.0f;    // OpenAI: logit -= frequency * count
  float presence = 0.0f;     // OpenAI: logit -= presence if count > 0
};
// Penalizes tokens by how often they occur among the last `last_n` accepted tokens: repetition
// first, then frequency and presence. repeat > 0; all finite.
std::unique_ptr<sampler> make_penalties(const penalty_params& params);

// Adds a bias to the logits of the listed ids (a repeated id adds up); -inf bans a token. Ids not
// among the candidates are ignored. Ids >= 0; biases not NaN and not +inf.
std::unique_ptr<sampler> make_logit_bias(std::span<const std::pair<std::int32_t, float>> bias);

// Grammar-constrained sampling: removes the candidates whose text cannot continue the grammar
// from what was generated so far; end-of-generation tokens stay only where the grammar can end.
// accept() follows the generated tokens; prompt tokens are ignored. When no token can continue,
// or a limit of the matcher is crossed, every candidate is banned and failure() says why.
// `best_of` > 0 promises that only the best `best_of` allowed tokens matter (a top_k of that
// size, or greedy with 1, comes next): candidates are then checked best first until that many
// pass, which spares checking the whole vocabulary; it falls back to a full check when few pass.
// A null grammar gives a sampler that changes nothing. vocab must not be null with a grammar.
std::unique_ptr<sampler> make_grammar(std::shared_ptr<const grammar::grammar> g,
                                      std::shared_ptr<const grammar::vocabulary> vocab, std::size_t best_of = 0);
// The vocabulary as a grammar sees it: each token's bytes as the tokenizer writes them in
// generated text (control tokens: none), and the end-of-generation ids. Build once per model.
std::shared_ptr<const grammar::vocabulary> make_grammar_vocabulary(const tokenizer::tokenizer& tok);

// ---- A chain from request parameters.

struct sampling_params {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float typical_p = 1.0f;    // 1: off
  float repeat_penalty = 1.0f;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  int penalty_last_n = 64;   // 0: off, -1: every accepted token
  std::uint64_t seed = 0;    // taken literally: 0 is a seed like any other
  std::vector<std::pair<std::int32_t, float>> logit_bias;
  // Structured output: a compiled grammar the generated text must follow, and the model's
  // vocabulary for it (make_grammar_vocabulary; the engine fills it in when left empty).
  std::shared_ptr<const ::spite::grammar::grammar> grammar;
  std::shared_ptr<const ::spite::grammar::vocabulary> grammar_vocab;
};

// Checks every field; the error (errc::invalid_argument) names the field and the bad value.
result<void> validate(const sampling_params& params);

// The standard chain: logit_bias -> penalties -> greedy (temperature <= 0), or
// logit_bias -> penalties -> top_k -> typical_p -> top_p -> min_p -> temperature -> dist.
// Samplers whose settings make them no-ops are left out. With a grammar, "grammar" comes right
// after penalties: everything after it sees allowed tokens only, and since bias and penalties
// change each token's logit on its own, this equals putting the grammar first, while letting it
// check only as many of the best candidates as top_k (or greedy) will look at. Validates first.
result<std::unique_ptr<sampler_chain>> make_chain(const sampling_params& params);

}  // namespace spite::scheduler
