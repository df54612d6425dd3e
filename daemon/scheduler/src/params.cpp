// Request parameters: validation, and the standard chain built from them.
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/scheduler/sampler_registry.hpp"

namespace spite::scheduler {

namespace {

error invalid(std::string_view field, std::string_view rule, const std::string& got) {
  return make_error(errc::invalid_argument, std::string(field) + " " + std::string(rule) + ", got " + got);
}

}  // namespace

result<void> validate(const sampling_params& p) {
  using detail::show;
  if (!std::isfinite(p.temperature)) {
    return invalid("temperature", "must be a finite number (<= 0 means greedy)", show(p.temperature));
  }
  if (p.top_k < 0) return invalid("top_k", "must be >= 0 (0 disables it)", show(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return invalid("top_p", "must be in (0, 1] (1 disables it)", show(p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return invalid("min_p", "must be in [0, 1] (0 disables it)", show(p.min_p));
  }
  if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f)) {
    return invalid("typical_p", "must be in (0, 1] (1 disables it)", show(p.typical_p));
  }
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f)) {
    return invalid("repeat_penalty", "must be a finite number > 0 (1 disables it)", show(p.repeat_penalty));
  }
  if (!std::isfinite(p.presence_penalty)) {
    return invalid("presence_penalty", "must be a finite number", show(p.presence_penalty));
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return invalid("frequency_penalty", "must be a finite number", show(p.frequency_penalty));
  }
  if (p.penalty_last_n < -1) {
    return invalid("penalty_last_n", "must be >= -1 (0 disables penalties, -1 covers every token)", show(p.penalty_last_n));
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0) return invalid("logit_bias", "token ids must be >= 0", show(id));
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return invalid("logit_bias", "bias for token " + show(id) + " must be a finite number or -inf", show(bias));
    }
  }
  if (p.grammar && !p.grammar_vocab) {
    return make_error(errc::invalid_argument, "grammar: the request has a grammar but no vocabulary for it");
  }
  return ok();
}

result<std::unique_ptr<sampler_chain>> make_chain(const sampling_params& p) {
  std::vector<std::string_view> names;
  if (!p.logit_bias.empty()) names.push_back("logit_bias");
  const bool penalizes = p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (penalizes && p.penalty_last_n != 0) names.push_back("penalties");
  const std::size_t before_grammar = names.size();
  if (p.temperature <= 0.0f) {
    names.push_back("greedy");
  } else {
    if (p.top_k > 0) names.push_back("top_k");
    if (p.typical_p < 1.0f) names.push_back("typical_p");
    if (p.top_p < 1.0f) names.push_back("top_p");
    if (p.min_p > 0.0f) names.push_back("min_p");
    names.push_back("temperature");
    names.push_back("dist");
  }
  if (!p.grammar) return make_chain(p, names, sampler_registry::builtin());
  // The grammar goes between the per-token transforms and the narrowing samplers (see the
  // header), told how many allowed tokens the next sampler keeps.
  const std::span<const std::string_view> all(names);
  auto chain = make_chain(p, all.first(before_grammar), sampler_registry::builtin());
  if (!chain) return chain;
  const std::size_t best_of = p.temperature <= 0.0f ? 1 : static_cast<std::size_t>(p.top_k);
  (*chain)->add(make_grammar(p.grammar, p.grammar_vocab, best_of));
  for (const auto name : all.subspan(before_grammar)) {
    auto s = sampler_registry::builtin().create(name, p);
    if (!s) return std::move(s).err();
    (*chain)->add(std::move(s).value());
  }
  return chain;
}

}  // namespace spite::scheduler
