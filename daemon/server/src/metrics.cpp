#include "spite/server/metrics.hpp"

#include <cstdio>

namespace spite::server {

void histogram::observe(double seconds) {
  std::lock_guard lock(mutex_);
  std::size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i]) ++i;
  counts_[i]++;
  sum_ += seconds;
  n_++;
}

std::string histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mutex_);
  std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  std::uint64_t cumulative = 0;
  char buf[512];
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += counts_[i];
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), bounds[i],
                  static_cast<unsigned long long>(cumulative));
    out += buf;
  }
  cumulative += counts_[bounds.size()];
  std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name.c_str(),
                static_cast<unsigned long long>(cumulative), name.c_str(), sum_, name.c_str(),
                static_cast<unsigned long long>(n_));
  return out + buf;
}

void api_metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  requests_[{endpoint, status}]++;
}

void api_metrics::tokens(std::int64_t prompt, std::int64_t generated, std::int64_t cached_prompt) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += static_cast<std::uint64_t>(prompt);
  cached_prompt_tokens_ += static_cast<std::uint64_t>(cached_prompt);
  generated_tokens_ += static_cast<std::uint64_t>(generated);
}

std::string api_metrics::render() const {
  std::string out = "# HELP spite_http_requests_total HTTP requests by endpoint and status.\n"
                    "# TYPE spite_http_requests_total counter\n";
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, n] : requests_) {
      out += "spite_http_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
    }
    out += "# HELP spite_prompt_tokens_total Prompt tokens processed.\n# TYPE spite_prompt_tokens_total counter\n"
           "spite_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
    out += "# HELP spite_prompt_cached_tokens_total Prompt tokens served from the prompt cache (not evaluated).\n"
           "# TYPE spite_prompt_cached_tokens_total counter\nspite_prompt_cached_tokens_total " +
           std::to_string(cached_prompt_tokens_) + "\n";
    out += "# HELP spite_generated_tokens_total Tokens generated.\n# TYPE spite_generated_tokens_total counter\n"
           "spite_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  }
  out += time_to_first_token.render("spite_time_to_first_token_seconds", "Time from request to the first token.");
  out += inter_token.render("spite_inter_token_latency_seconds", "Time between two tokens of one stream.");
  return out;
}

}  // namespace spite::server
