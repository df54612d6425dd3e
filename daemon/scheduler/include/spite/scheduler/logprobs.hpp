// Log-probabilities of the raw logits (before any sampler), for the API's "logprobs" answers.
// NaN logits count as -inf, as in sampling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spite::scheduler {

struct token_logprob {
  std::int32_t id;
  float logprob;
};

// log(sum(exp(logits))), computed stably; -inf for no logits or all -inf.
double log_sum_exp(std::span<const float> logits);
// logprob[i] = logits[i] - log_sum_exp(logits).
std::vector<float> log_softmax(std::span<const float> logits);
// The n most probable tokens (fewer if there are fewer logits), most probable first, ties by
// ascending id.
std::vector<token_logprob> top_logprobs(std::span<const float> logits, std::size_t n);

}  // namespace spite::scheduler
