// temperature: logits / t. Below 1 sharpens the distribution, above 1 flattens it; t <= 0 leaves
// only the greedy choice.
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class temperature final : public sampler {
 public:
  explicit temperature(float t) : t_(t) {}
  std::string_view name() const override { return "temperature"; }

  void apply(candidates& c) override {
    if (c.empty()) return;
    if (t_ <= 0.0f) {
      std::swap(c.data[0], c.data[c.argmax()]);
      c.truncate(1);
      c.sorted = true;
      return;
    }
    if (t_ == 1.0f) return;
    for (auto& tok : c.data) tok.logit /= t_;
    c.logits_changed(/*order_kept=*/true);
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<temperature>(*this); }

 private:
  float t_;
};

}  // namespace

std::unique_ptr<sampler> make_temperature(float t) {
  if (!std::isfinite(t)) throw std::invalid_argument("temperature must be finite, got " + detail::show(t));
  return std::make_unique<temperature>(t);
}

}  // namespace spite::scheduler
