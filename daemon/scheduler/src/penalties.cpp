// penalties: discourage tokens that occur among the last N accepted ones. Repetition penalty with
// llama.cpp semantics (a positive logit is divided by it, a negative one multiplied, so both move
// down), then OpenAI's frequency and presence penalties (logit -= frequency * count + presence).
#include <cmath>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class penalties final : public sampler {
 public:
  explicit penalties(const penalty_params& params) : params_(params) {}
  std::string_view name() const override { return "penalties"; }

  void accept(std::int32_t token) override {
    if (params_.last_n == 0) return;
    ++counts_[token];
    if (params_.last_n < 0) return;  // unbounded: the counts are the whole history
    window_.push_back(token);
    if (window_.size() > static_cast<std::size_t>(params_.last_n)) {
      const std::int32_t old = window_.front();
      window_.pop_front();
      if (--counts_[old] == 0) counts_.erase(old);
    }
  }

  void apply(candidates& c) override {
    if (counts_.empty() || neutral()) return;
    if (c.in_id_order()) {  // the usual case, right after the logits: index by id
      for (const auto& [token, count] : counts_) {
        const auto i = static_cast<std::size_t>(token);
        if (token >= 0 && i < c.size()) penalize(c.data[i], count);
      }
    } else {
      for (auto& t : c.data) {
        if (const auto it = counts_.find(t.id); it != counts_.end()) penalize(t, it->second);
      }
    }
    c.logits_changed(/*order_kept=*/false);
  }

  void reset() override {
    window_.clear();
    counts_.clear();
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<penalties>(*this); }

 private:
  bool neutral() const {
    return params_.repeat == 1.0f && params_.frequency == 0.0f && params_.presence == 0.0f;
  }

  void penalize(token_prob& t, int count) const {
    if (t.logit > 0.0f) {
      t.logit /= params_.repeat;
    } else {
      t.logit *= params_.repeat;
    }
    t.logit -= static_cast<float>(count) * params_.frequency + params_.presence;
  }

  penalty_params params_;
  std::deque<std::int32_t> window_;                // the last last_n accepted tokens, oldest first
  std::unordered_map<std::int32_t, int> counts_;   // occurrences within the window (never 0)
};

}  // namespace

std::unique_ptr<sampler> make_penalties(const penalty_params& params) {
  if (params.last_n < -1) {
    throw std::invalid_argument("penalty_last_n must be >= -1, got " + detail::show(params.last_n));
  }
  if (!(std::isfinite(params.repeat) && params.repeat > 0.0f)) {
    throw std::invalid_argument("repeat_penalty must be finite and > 0, got " + detail::show(params.repeat));
  }
  if (!std::isfinite(params.frequency)) {
    throw std::invalid_argument("frequency_penalty must be finite, got " + detail::show(params.frequency));
  }
  if (!std::isfinite(params.presence)) {
    throw std::invalid_argument("presence_penalty must be finite, got " + detail::show(params.presence));
  }
  return std::make_unique<penalties>(params);
}

}  // namespace spite::scheduler
