// The HTTP API's own Prometheus metrics: requests by endpoint and status, tokens, and latency
// histograms (time to first token, inter-token). Thread-safe; rendered in the text format.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace spite::server {

class histogram {
 public:
  static constexpr std::array<double, 12> bounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  void observe(double seconds);
  std::string render(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mutex_;
  std::array<std::uint64_t, bounds.size() + 1> counts_{};
  double sum_ = 0;
  std::uint64_t n_ = 0;
};

class api_metrics {
 public:
  void request(const std::string& endpoint, int status);
  void tokens(std::int64_t prompt, std::int64_t generated, std::int64_t cached_prompt = 0);
  histogram time_to_first_token, inter_token;
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_prompt_tokens_ = 0;
};

}  // namespace spite::server
