// greedy: the highest logit, ties to the lowest id.
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class greedy final : public sampler {
 public:
  std::string_view name() const override { return "greedy"; }
  void apply(candidates& c) override {
    c.selected.reset();
    if (!c.empty()) c.selected = c.argmax();
  }
  std::unique_ptr<sampler> clone() const override { return std::make_unique<greedy>(*this); }
};

}  // namespace

std::unique_ptr<sampler> make_greedy() { return std::make_unique<greedy>(); }

}  // namespace spite::scheduler
