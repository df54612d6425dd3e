#include "spite/server/openai.hpp"

#include <ctime>

namespace spite::server {
using nlohmann::json;

std::string error_body(const std::string& message, const std::string& type, const std::string& param,
                       const std::string& code) {
  return json{{"error",
               {{"message", message}, {"type", type}, {"param", param.empty() ? json() : json(param)},
                {"code", code.empty() ? json() : json(code)}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

openai_api::openai_api(std::shared_ptr<backend> b, api_options options)
    : backend_(std::move(b)), options_(std::move(options)) {}

bool openai_api::authorized(const http_request& r) const {
  if (options_.api_keys.empty()) return true;
  const std::string h = r.header("authorization");
  if (h.size() < 7 || h.compare(0, 7, "Bearer ") != 0) return false;
  const std::string_view key = std::string_view(h).substr(7);
  // Compared in time that does not depend on where the keys differ.
  bool match = false;
  for (const auto& k : options_.api_keys) {
    unsigned diff = k.size() == key.size() ? 0u : 1u;
    for (std::size_t i = 0; i < k.size(); ++i) diff |= static_cast<unsigned char>(k[i]) ^ static_cast<unsigned char>(i < key.size() ? key[i] : 0);
    match |= diff == 0;
  }
  return match;
}

void openai_api::answer(const std::string& endpoint, http_responder& out, int status, const std::string& body,
                        header_list headers) {
  metrics_.request(endpoint, status);
  out.respond(status, "application/json", body, std::move(headers));
}

void openai_api::handle(const http_request& r, std::shared_ptr<http_responder> out) {
  const std::string& path = r.path;
  if (r.method == "OPTIONS") {  // CORS preflight: the allowed origin comes from the server options
    // The headers a browser asks for are allowed (the official JS SDK sends X-Stainless-* ones);
    // the origin is what the configuration restricts.
    const std::string asked = r.header("access-control-request-headers");
    return out->respond(204, "", "", {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                                      {"Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked},
                                      {"Access-Control-Max-Age", "600"}});
  }
  if (path == "/health") return answer("/health", *out, 200, R"({"status":"ok"})");
  if (path == "/health/ready") {
    const readiness rd = stopping_ ? readiness{false, "shutting down"} : backend_->ready();
    return answer("/health/ready", *out, rd.ready ? 200 : 503,
                  rd.ready ? std::string(R"({"status":"ready"})") : json{{"status", "not ready"}, {"reason", rd.reason}}.dump());
  }
  if (path == "/metrics") {
    std::string text = metrics_.render() + backend_->metrics();
    if (transport_) {
      const http_stats s = transport_();
      text += "# HELP spite_http_connections_open Open HTTP connections.\n# TYPE spite_http_connections_open gauge\n"
              "spite_http_connections_open " + std::to_string(s.connections_open) + "\n"
              "# HELP spite_http_connections_refused_total Connections refused over the bound.\n"
              "# TYPE spite_http_connections_refused_total counter\n"
              "spite_http_connections_refused_total " + std::to_string(s.connections_refused) + "\n";
    }
    metrics_.request("/metrics", 200);
    return out->respond(200, "text/plain; version=0.0.4", text);
  }
  if (!path.starts_with("/v1/")) return answer("other", *out, 404, error_body("no route " + path, "invalid_request_error", "", "not_found"));
  if (!authorized(r)) {
    // The metric label is a known route, never the raw path: unauthenticated clients must not
    // be able to grow the metrics without bound.
    const bool known = path == "/v1/models" || path == "/v1/chat/completions" || path == "/v1/completions" ||
                       path == "/v1/embeddings";
    const std::string label = known ? path : path.starts_with("/v1/models/") ? "/v1/models/{id}" : "other";
    return answer(label, *out, 401, error_body("missing or invalid API key (Authorization: Bearer KEY)", "invalid_request_error", "", "invalid_api_key"),
                  {{"WWW-Authenticate", "Bearer"}});
  }
  if (path == "/v1/models" || path.starts_with("/v1/models/")) {
    if (r.method != "GET") return answer("/v1/models", *out, 405, error_body("use GET"));
    const auto cards = backend_->models();
    const auto card_json = [](const model_card& c) {
      return json{{"id", c.id}, {"object", "model"}, {"created", c.created}, {"owned_by", "spite"},
                  {"spite", {{"loaded", c.loaded}, {"arch", c.arch}, {"n_ctx", c.n_ctx}}}};
    };
    if (path == "/v1/models") {
      json data = json::array();
      for (const auto& c : cards) data.push_back(card_json(c));
      return answer("/v1/models", *out, 200, json{{"object", "list"}, {"data", data}}.dump());
    }
    const std::string id = path.substr(std::string("/v1/models/").size());
    for (const auto& c : cards) {
      if (c.id == id) return answer("/v1/models/{id}", *out, 200, card_json(c).dump());
    }
    return answer("/v1/models/{id}", *out, 404, error_body("no model '" + id + "'", "invalid_request_error", "model", "model_not_found"));
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (r.method != "POST") return answer(path, *out, 405, error_body("use POST"));
    return completions(r, std::move(out), path == "/v1/chat/completions");
  }
  if (path == "/v1/embeddings") {
    if (r.method != "POST") return answer(path, *out, 405, error_body("use POST"));
    return embeddings(r, std::move(out));
  }
  answer("other", *out, 404, error_body("no route " + path, "invalid_request_error", "", "not_found"));
}

}  // namespace spite::server
