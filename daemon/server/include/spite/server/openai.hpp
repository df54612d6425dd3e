// The OpenAI-compatible API over the HTTP transport: /v1/models, /v1/chat/completions,
// /v1/completions, /health, /health/ready and /metrics, with API keys and OpenAI's error objects.
// Requests become spite's own generate_input and go to the backend; nothing here runs a model.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "spite/server/backend.hpp"
#include "spite/server/http_server.hpp"
#include "spite/server/metrics.hpp"

namespace spite::server {

struct api_options {
  std::vector<std::string> api_keys;  // empty: no key needed
  std::int32_t max_tokens = 4096;     // per request
  int max_choices = 16;               // n
  std::string version = "0.0.0";
  scheduler::sampling_params defaults;  // for fields a request does not set
  bool default_seed_fixed = false;      // defaults.seed comes from the configuration
};

// An OpenAI error body: {"error": {"message", "type", "param", "code"}}.
std::string error_body(const std::string& message, const std::string& type = "invalid_request_error",
                       const std::string& param = "", const std::string& code = "");

class openai_api : public std::enable_shared_from_this<openai_api> {
 public:
  openai_api(std::shared_ptr<backend> b, api_options options);
  void handle(const http_request& request, std::shared_ptr<http_responder> out);
  // New generations get 503 from now on.
  void set_stopping() { stopping_ = true; }
  void set_transport(std::function<http_stats()> stats) { transport_ = std::move(stats); }
  api_metrics& metrics() { return metrics_; }

 private:
  friend struct completion_job;
  bool authorized(const http_request& r) const;
  void answer(const std::string& endpoint, http_responder& out, int status, const std::string& body,
              header_list headers = {});
  void completions(const http_request& r, std::shared_ptr<http_responder> out, bool chat);
  void embeddings(const http_request& r, std::shared_ptr<http_responder> out);

  std::shared_ptr<backend> backend_;
  api_options options_;
  api_metrics metrics_;
  std::atomic<bool> stopping_{false};
  std::function<http_stats()> transport_;
};

}  // namespace spite::server
