// typical_p (locally typical sampling, Meister et al. 2022): prefers tokens whose surprisal
// -log p is close to the entropy of the distribution, i.e. the "expected" amount of surprise.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "detmath.hpp"
#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class typical_p final : public sampler {
 public:
  typical_p(float p, std::size_t min_keep) : p_(p), min_keep_(min_keep) {}
  std::string_view name() const override { return "typical_p"; }

  void apply(candidates& c) override {
    if (p_ >= 1.0f || c.empty()) return;
    c.normalize();

    // Entropy in nats; tokens with p = 0 contribute nothing.
    double entropy = 0.0;
    for (const auto& t : c.data) {
      if (t.p > 0.0f) entropy -= static_cast<double>(t.p) * detail::det_log(static_cast<double>(t.p));
    }

    struct scored {
      double distance;  // |surprisal - entropy|
      token_prob tok;
    };
    std::vector<scored> order;
    order.reserve(c.size());
    for (const auto& t : c.data) {
      const double distance = t.p > 0.0f ? std::abs(-detail::det_log(static_cast<double>(t.p)) - entropy)
                                         : std::numeric_limits<double>::infinity();
      order.push_back({distance, t});
    }
    // Most typical first; ties as the candidates' own order (higher logit, then lower id).
    std::sort(order.begin(), order.end(), [](const scored& a, const scored& b) {
      if (a.distance != b.distance) return a.distance < b.distance;
      if (a.tok.logit != b.tok.logit) return a.tok.logit > b.tok.logit;
      return a.tok.id < b.tok.id;
    });

    std::size_t keep = order.size();
    double cum = 0.0;
    for (std::size_t i = 0; i < order.size(); ++i) {
      cum += static_cast<double>(order[i].tok.p);
      if (cum > static_cast<double>(p_) && i + 1 >= min_keep_) {
        keep = i + 1;
        break;
      }
    }

    c.data.clear();
    for (std::size_t i = 0; i < keep; ++i) c.data.push_back(order[i].tok);
    c.sorted = false;
    c.normalized = false;
    c.selected.reset();
    c.sort();  // later samplers expect the usual logit order
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<typical_p>(*this); }

 private:
  float p_;
  std::size_t min_keep_;
};

}  // namespace

std::unique_ptr<sampler> make_typical_p(float p, std::size_t min_keep) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("typical_p must be in (0, 1], got " + detail::show(p));
  return std::make_unique<typical_p>(p, min_keep);
}

}  // namespace spite::scheduler
