// top_k: the k highest logits.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "show.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

namespace {

class top_k final : public sampler {
 public:
  top_k(std::size_t k, std::size_t min_keep) : k_(k), min_keep_(min_keep) {}
  std::string_view name() const override { return "top_k"; }

  void apply(candidates& c) override {
    if (k_ == 0) return;
    c.keep_best(std::max(k_, min_keep_));
  }

  std::unique_ptr<sampler> clone() const override { return std::make_unique<top_k>(*this); }

 private:
  std::size_t k_;
  std::size_t min_keep_;
};

}  // namespace

std::unique_ptr<sampler> make_top_k(std::int32_t k, std::size_t min_keep) {
  if (k < 0) throw std::invalid_argument("top_k must be >= 0, got " + detail::show(k));
  return std::make_unique<top_k>(static_cast<std::size_t>(k), min_keep);
}

}  // namespace spite::scheduler
