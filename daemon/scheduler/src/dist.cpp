// dist: a random draw from the normalized probabilities, with the chain's random source.
#include <stdexcept>

#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class dist final : public sampler {
 public:
  std::string_view name() const override { return "dist"; }

  void apply(candidates& c) override {
    c.selected.reset();
    if (c.empty()) return;
    if (c.random == nullptr) throw std::logic_error("dist sampler applied outside a sampler chain (no random source)");
    // Exactly one draw per step, whatever happens next, so the position in the random sequence
    // depends only on the number of steps.
    const double u = c.random->uniform();
    c.normalize();
    double total = 0.0;
    for (const auto& t : c.data) total += static_cast<double>(t.p);
    if (!(total > 0.0)) {  // every token banned: the best logit, deterministically
      c.selected = c.argmax();
      return;
    }
    // Inverse transform sampling over the current order.
    const double target = u * total;
    double cum = 0.0;
    std::size_t last_positive = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const double p = static_cast<double>(c.data[i].p);
      if (p <= 0.0) continue;
      last_positive = i;
      cum += p;
      if (target < cum) {
        c.selected = i;
        return;
      }
    }
    c.selected = last_positive;  // target fell into the rounding gap at the very end
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<dist>(*this); }
};

}  // namespace

std::unique_ptr<sampler> make_dist() { return std::make_unique<dist>(); }

}  // namespace spite::scheduler
