#include <stdexcept>

#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

void sampler_chain::add(std::unique_ptr<sampler> s) {
  if (!s) throw std::invalid_argument("sampler_chain::add: null sampler");
  samplers_.push_back(std::move(s));
}

std::string sampler_chain::describe() const {
  std::string out;
  for (const auto& s : samplers_) {
    if (!out.empty()) out += " -> ";
    out += s->name();
  }
  return out;
}

void sampler_chain::accept(std::int32_t token) {
  for (auto& s : samplers_) s->accept(token);
}

void sampler_chain::accept_prompt(std::int32_t token) {
  for (auto& s : samplers_) s->accept_prompt(token);
}

std::optional<error> sampler_chain::failure() const {
  for (const auto& s : samplers_) {
    if (auto f = s->failure()) return f;
  }
  return std::nullopt;
}

void sampler_chain::apply(candidates& c) {
  rng* const outer = c.random;
  c.random = &rng_;
  for (auto& s : samplers_) s->apply(c);
  c.random = outer;
}

void sampler_chain::reset() {
  for (auto& s : samplers_) s->reset();
  rng_.reseed(rng_.seed());
}

std::unique_ptr<sampler_chain> sampler_chain::clone_chain() const {
  auto copy = std::make_unique<sampler_chain>(rng_.seed());
  copy->rng_ = rng_;  // same position in the random sequence, not just the same seed
  for (const auto& s : samplers_) copy->samplers_.push_back(s->clone());
  return copy;
}

std::unique_ptr<sampler> sampler_chain::clone() const { return clone_chain(); }

std::int32_t sampler_chain::sample(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sampler_chain::sample: no logits");
  scratch_.assign(logits);
  apply(scratch_);
  if (!scratch_.selected || *scratch_.selected >= scratch_.size()) {
    throw std::logic_error("sampler chain '" + describe() + "' selected no token (it must end with greedy or dist)");
  }
  const std::int32_t token = scratch_.data[*scratch_.selected].id;
  accept(token);
  return token;
}

}  // namespace spite::scheduler
