// exp and log that give the same bits on every platform: only IEEE-exact operations (+, -, *, /,
// floor, frexp, ldexp) in a fixed order, so sampling does not depend on the libm's last ulp.
// Accuracy is within a few ulp of double, far beyond what the float logits carry.
#pragma once

#include <cmath>
#include <limits>

namespace spite::scheduler::detail {

// Cody-Waite split of ln 2: the high part has enough trailing zero bits that k * ln2_hi is exact.
inline constexpr double ln2_hi = 6.93147180369123816490e-01;
inline constexpr double ln2_lo = 1.90821492927058770002e-10;

inline double det_exp(double x) {
  if (std::isnan(x)) return x;
  if (x < -745.2) return 0.0;
  if (x > 709.78) return std::numeric_limits<double>::infinity();
  // x = k ln2 + r with |r| <= ln2 / 2; exp(x) = 2^k exp(r).
  const double k = std::floor(x * 1.4426950408889634 + 0.5);
  const double r = (x - k * ln2_hi) - k * ln2_lo;
  // Taylor series to r^14/14!: the truncation error is below 1e-17 relative for |r| <= 0.35.
  double poly = 1.0 / 87178291200.0;  // 1/14!
  constexpr double inv_fact[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                 1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0,
                                 1.0,                1.0};
  for (double c : inv_fact) poly = poly * r + c;
  return std::ldexp(poly, static_cast<int>(k));
}

inline double det_log(double x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (std::isinf(x)) return x;
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1).
  int e = 0;
  double m = std::frexp(x, &e);
  if (m < 0.70710678118654752440) {
    m *= 2;
    e -= 1;
  }
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;  // <= 0.0295: the series to s^25 is exact to double precision
  double poly = 1.0 / 25.0;
  for (int n = 23; n >= 1; n -= 2) poly = poly * s2 + 1.0 / n;
  const double ed = static_cast<double>(e);
  return ed * ln2_hi + (ed * ln2_lo + 2.0 * s * poly);
}

}  // namespace spite::scheduler::detail
