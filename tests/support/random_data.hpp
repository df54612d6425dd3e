// Reproducible random test inputs.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace spite::test {

// n floats drawn from N(0, stddev^2) with a fixed seed.
inline std::vector<float> gaussian(std::size_t n, unsigned seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace spite::test
