#include "spite/scheduler/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "detmath.hpp"

namespace spite::scheduler {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

double clean(float logit) { return std::isnan(logit) ? -inf : static_cast<double>(logit); }

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  double max = -inf;
  for (const float l : logits) max = std::max(max, clean(l));
  if (std::isinf(max)) return max;
  double sum = 0.0;
  for (const float l : logits) sum += detail::det_exp(clean(l) - max);
  return max + detail::det_log(sum);
}

std::vector<float> log_softmax(std::span<const float> logits) {
  const double lse = log_sum_exp(logits);
  std::vector<float> out(logits.size(), -std::numeric_limits<float>::infinity());
  if (lse == -inf) return out;  // no token is possible
  if (lse == inf) {             // logits at +inf share all the probability
    double n_inf = 0;
    for (const float l : logits) n_inf += l == inf ? 1 : 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] == inf) out[i] = static_cast<float>(-detail::det_log(n_inf));
    }
    return out;
  }
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(clean(logits[i]) - lse);
  return out;
}

std::vector<token_logprob> top_logprobs(std::span<const float> logits, std::size_t n) {
  n = std::min(n, logits.size());
  if (n == 0) return {};
  const std::vector<float> lp = log_softmax(logits);
  std::vector<token_logprob> all(lp.size());
  for (std::size_t i = 0; i < lp.size(); ++i) all[i] = {static_cast<std::int32_t>(i), lp[i]};
  const auto mid = all.begin() + static_cast<std::ptrdiff_t>(n);
  std::partial_sort(all.begin(), mid, all.end(), [](const token_logprob& a, const token_logprob& b) {
    if (a.logprob != b.logprob) return a.logprob > b.logprob;
    return a.id < b.id;
  });
  all.resize(n);
  return all;
}

}  // namespace spite::scheduler
