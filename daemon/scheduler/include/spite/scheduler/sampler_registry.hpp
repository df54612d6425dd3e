// Samplers by name, for configurable chains ("samplers": ["top_k", "min_p", "dist"]). A built-in
// sampler is one source file plus one registration line in registry.cpp; duplicates fail loudly.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/scheduler/sampler.hpp"

namespace spite::scheduler {

// Builds a sampler from the fields of the request it needs. Params arrive validated.
using sampler_factory = std::function<std::unique_ptr<sampler>(const sampling_params&)>;

class sampler_registry {
 public:
  // Every built-in sampler, registered explicitly (no static-initialization tricks).
  static const sampler_registry& builtin();

  // Throws std::logic_error if the name is empty or already taken, or the factory is empty:
  // registration mistakes are programmer errors and must not pass silently.
  void add(std::string name, sampler_factory factory);

  bool contains(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  // errc::not_found naming the unknown sampler and the known ones.
  result<std::unique_ptr<sampler>> create(std::string_view name, const sampling_params& params) const;

 private:
  std::map<std::string, sampler_factory, std::less<>> factories_;
};

// A chain of exactly the named samplers, in order, seeded with params.seed. The last one must
// select a token (greedy or dist) for sampler_chain::sample to work. Validates params first.
result<std::unique_ptr<sampler_chain>> make_chain(const sampling_params& params,
                                                  std::span<const std::string_view> names,
                                                  const sampler_registry& registry = sampler_registry::builtin());

}  // namespace spite::scheduler
