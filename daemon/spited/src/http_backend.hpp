// The OpenAI API's view of spited: spite::server::backend over the service that also answers the
// control socket, so both share models, leases, queues and the drain on shutdown.
#pragma once

#include "service.hpp"
#include "spite/server/backend.hpp"

namespace spite::daemon {

class http_backend final : public server::backend {
 public:
  explicit http_backend(service& s) : svc_(s) {}
  std::vector<server::model_card> models() override;
  result<std::shared_ptr<server::generation>> generate(const server::generate_input& input,
                                                       server::generate_callbacks callbacks) override;
  result<std::string> chat_template(const std::string& model) override;
  result<std::string> detokenize(const std::string& model, const std::vector<std::int32_t>& tokens) override;
  result<std::vector<server::token_logprob_entry>> prompt_logprobs(const server::generate_input& input, int top) override;
  result<server::embed_output> embed(const server::embed_input& input) override;
  server::readiness ready() override;
  std::string metrics() override;

 private:
  service& svc_;
};

}  // namespace spite::daemon
