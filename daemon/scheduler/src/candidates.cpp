#include "spite/scheduler/candidates.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "detmath.hpp"

namespace spite::scheduler {

namespace {

constexpr float neg_inf = -std::numeric_limits<float>::infinity();

constexpr auto before = ranks_before;

}  // namespace

void candidates::assign(std::span<const float> logits) {
  data.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    data[i] = {static_cast<std::int32_t>(i), std::isnan(l) ? neg_inf : l, 0.0f};
  }
  sorted = false;
  normalized = false;
  selected.reset();
}

void candidates::sort() {
  if (sorted) return;
  std::sort(data.begin(), data.end(), before);
  sorted = true;
}

void candidates::normalize() {
  if (normalized) return;
  normalized = true;
  if (data.empty()) return;
  float max = neg_inf;
  for (const auto& t : data) max = std::max(max, t.logit);
  if (max == neg_inf) {
    for (auto& t : data) t.p = 0.0f;
    return;
  }
  if (std::isinf(max)) {  // +inf: the tokens at +inf share everything
    std::size_t n_inf = 0;
    for (const auto& t : data) n_inf += t.logit == max ? 1 : 0;
    for (auto& t : data) t.p = t.logit == max ? static_cast<float>(1.0 / static_cast<double>(n_inf)) : 0.0f;
    return;
  }
  double sum = 0.0;
  for (auto& t : data) {
    const double e = detail::det_exp(static_cast<double>(t.logit) - static_cast<double>(max));
    t.p = static_cast<float>(e);  // the unnormalized weight for now, in [0, 1]
    sum += static_cast<double>(t.p);
  }
  for (auto& t : data) t.p = static_cast<float>(static_cast<double>(t.p) / sum);
}

void candidates::keep_best(std::size_t n) {
  if (sorted || n >= data.size()) {
    sort();
    truncate(n);
    return;
  }
  const auto mid = data.begin() + static_cast<std::ptrdiff_t>(n);
  std::partial_sort(data.begin(), mid, data.end(), before);
  truncate(n);
  sorted = true;
}

void candidates::truncate(std::size_t n) {
  if (n >= data.size()) return;
  data.resize(n);
  normalized = false;
  selected.reset();
}

void candidates::logits_changed(bool order_kept) noexcept {
  sorted = sorted && order_kept;
  normalized = false;
}

std::size_t candidates::argmax() const noexcept {
  if (data.empty()) return 0;
  std::size_t best = 0;
  for (std::size_t i = 1; i < data.size(); ++i) {
    if (before(data[i], data[best])) best = i;
  }
  return best;
}

bool candidates::in_id_order() const noexcept {
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i].id != static_cast<std::int32_t>(i)) return false;
  }
  return true;
}

std::optional<std::size_t> candidates::find(std::int32_t id) const noexcept {
  if (id < 0) return std::nullopt;
  const auto direct = static_cast<std::size_t>(id);
  if (direct < data.size() && data[direct].id == id) return direct;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i].id == id) return i;
  }
  return std::nullopt;
}

}  // namespace spite::scheduler
