// The random source of a sampler chain. Bit-for-bit reproducible: the engine is std::mt19937_64,
// whose output sequence the C++ standard fixes, and the conversion to a uniform double is ours
// (std::uniform_real_distribution is implementation-defined), so the same seed draws the same
// numbers with every compiler, standard library and platform.
#pragma once

#include <cstdint>
#include <random>

namespace spite::scheduler {

class rng {
 public:
  explicit rng(std::uint64_t seed = 0) : seed_(seed), engine_(seed) {}

  std::uint64_t seed() const noexcept { return seed_; }
  // Back to the start of the sequence of `seed`.
  void reseed(std::uint64_t seed) {
    seed_ = seed;
    engine_.seed(seed);
  }

  std::uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1): the top 53 bits of one draw, scaled exactly (every value is a multiple of
  // 2^-53, so no rounding happens anywhere).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace spite::scheduler
