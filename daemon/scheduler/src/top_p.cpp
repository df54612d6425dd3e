// top_p (nucleus): the smallest most-probable prefix whose probability reaches p.
#include <stdexcept>
#include <string>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class top_p final : public sampler {
 public:
  top_p(float p, std::size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string_view name() const override { return "top_p"; }

  void apply(candidates& c) override {
    if (p_ >= 1.0f || c.empty()) return;
    c.sort();
    c.normalize();
    const double p = static_cast<double>(p_);
    double cum = 0.0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      cum += static_cast<double>(c.data[i].p);
      if (cum >= p && i + 1 >= min_keep_) {
        c.truncate(i + 1);
        return;
      }
    }
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<top_p>(*this); }

 private:
  float p_;
  std::size_t min_keep_;
};

}  // namespace

std::unique_ptr<sampler> make_top_p(float p, std::size_t min_keep) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("top_p must be in (0, 1], got " + detail::show(p));
  return std::make_unique<top_p>(p, min_keep);
}

}  // namespace spite::scheduler
