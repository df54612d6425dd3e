// The sampler registry and the list of built-in samplers.
#include "spite/scheduler/sampler_registry.hpp"

#include <stdexcept>

namespace spite::scheduler {

namespace {

// Adding a sampler: its own source file with a make_<name> factory, and one line here.
void register_builtin(sampler_registry& r) {
  r.add("greedy", [](const sampling_params&) { return make_greedy(); });
  r.add("dist", [](const sampling_params&) { return make_dist(); });
  r.add("temperature", [](const sampling_params& p) { return make_temperature(p.temperature); });
  r.add("top_k", [](const sampling_params& p) { return make_top_k(p.top_k); });
  r.add("top_p", [](const sampling_params& p) { return make_top_p(p.top_p); });
  r.add("min_p", [](const sampling_params& p) { return make_min_p(p.min_p); });
  r.add("typical_p", [](const sampling_params& p) { return make_typical_p(p.typical_p); });
  r.add("penalties", [](const sampling_params& p) {
    return make_penalties({p.penalty_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty});
  });
  r.add("logit_bias", [](const sampling_params& p) { return make_logit_bias(p.logit_bias); });
  r.add("grammar", [](const sampling_params& p) { return make_grammar(p.grammar, p.grammar_vocab); });
}

}  // namespace

const sampler_registry& sampler_registry::builtin() {
  static const sampler_registry registry = [] {
    sampler_registry r;
    register_builtin(r);
    return r;
  }();
  return registry;
}

void sampler_registry::add(std::string name, sampler_factory factory) {
  if (name.empty()) throw std::logic_error("sampler registry: empty sampler name");
  if (!factory) throw std::logic_error("sampler registry: sampler '" + name + "' has no factory");
  if (factories_.contains(name)) throw std::logic_error("sampler registry: sampler '" + name + "' is registered twice");
  factories_.emplace(std::move(name), std::move(factory));
}

bool sampler_registry::contains(std::string_view name) const { return factories_.find(name) != factories_.end(); }

std::vector<std::string> sampler_registry::names() const {
  std::vector<std::string> out;
  out.reserve(factories_.size());
  for (const auto& entry : factories_) out.push_back(entry.first);
  return out;
}

result<std::unique_ptr<sampler>> sampler_registry::create(std::string_view name, const sampling_params& params) const {
  const auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& entry : factories_) known += (known.empty() ? "" : ", ") + entry.first;
    return make_error(errc::not_found, "unknown sampler '" + std::string(name) + "' (known: " + known + ")");
  }
  return it->second(params);
}

result<std::unique_ptr<sampler_chain>> make_chain(const sampling_params& params, std::span<const std::string_view> names,
                                                  const sampler_registry& registry) {
  SPITE_TRY(validate(params));
  auto chain = std::make_unique<sampler_chain>(params.seed);
  for (const auto name : names) {
    auto s = registry.create(name, params);
    if (!s) return std::move(s).err();
    chain->add(std::move(s).value());
  }
  return chain;
}

}  // namespace spite::scheduler
