// logit_bias: fixed additive biases per token id; -inf bans a token.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class logit_bias final : public sampler {
 public:
  explicit logit_bias(std::vector<std::pair<std::int32_t, float>> bias) : bias_(std::move(bias)) {}
  std::string_view name() const override { return "logit_bias"; }

  void apply(candidates& c) override {
    if (bias_.empty()) return;
    for (const auto& [id, b] : bias_) {
      if (const auto i = c.find(id)) c.data[*i].logit += b;
    }
    c.logits_changed(/*order_kept=*/false);
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<logit_bias>(*this); }

 private:
  std::vector<std::pair<std::int32_t, float>> bias_;  // one entry per id, ascending
};

}  // namespace

std::unique_ptr<sampler> make_logit_bias(std::span<const std::pair<std::int32_t, float>> bias) {
  std::vector<std::pair<std::int32_t, float>> merged(bias.begin(), bias.end());
  for (const auto& [id, b] : merged) {
    if (id < 0) throw std::invalid_argument("logit_bias: token id must be >= 0, got " + detail::show(id));
    if (std::isnan(b) || b == std::numeric_limits<float>::infinity()) {
      throw std::invalid_argument("logit_bias: bias for token " + detail::show(id) + " must be finite or -inf, got " +
                                  detail::show(b));
    }
  }
  // A repeated id adds up; a stable sort keeps the sum's order, and with it the result, fixed.
  std::stable_sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::int32_t, float>> out;
  for (const auto& [id, b] : merged) {
    if (!out.empty() && out.back().first == id) {
      out.back().second += b;
    } else {
      out.emplace_back(id, b);
    }
  }
  return std::make_unique<logit_bias>(std::move(out));
}

}  // namespace spite::scheduler
