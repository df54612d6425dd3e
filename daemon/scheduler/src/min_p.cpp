// min_p: tokens at least p times as probable as the most probable one.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "detmath.hpp"
#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class min_p final : public sampler {
 public:
  min_p(float p, std::size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string_view name() const override { return "min_p"; }

  void apply(candidates& c) override {
    if (p_ <= 0.0f || c.empty()) return;
    c.sort();
    const float max = c.data[0].logit;
    if (max == -std::numeric_limits<float>::infinity()) return;
    // p_i / p_max = exp(logit_i - logit_max): no normalization needed.
    std::size_t keep = 0;
    while (keep < c.size()) {
      const float l = c.data[keep].logit;
      const double ratio = l == max ? 1.0 : detail::det_exp(static_cast<double>(l) - static_cast<double>(max));
      if (ratio < static_cast<double>(p_)) break;
      ++keep;
    }
    c.truncate(std::max(keep, min_keep_));
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<min_p>(*this); }

 private:
  float p_;
  std::size_t min_keep_;
};

}  // namespace

std::unique_ptr<sampler> make_min_p(float p, std::size_t min_keep) {
  if (!(p >= 0.0f && p <= 1.0f)) throw std::invalid_argument("min_p must be in [0, 1], got " + detail::show(p));
  return std::make_unique<min_p>(p, min_keep);
}

}  // namespace spite::scheduler
