// POST /v1/embeddings: input as a string, an array of strings, an array of token ids or an array
// of arrays of ids; encoding_format float or base64 (little-endian float32, what the official
// Python client asks for by default).
#include <cstring>

#include "spite/server/openai.hpp"

namespace spite::server {
using nlohmann::json;

namespace {

constexpr std::size_t max_inputs = 2048;

std::string base64_floats(const std::vector<float>& v) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &v[i], sizeof u);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<std::size_t>(b)] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const auto byte = [&](std::size_t k) { return k < bytes.size() ? static_cast<unsigned char>(bytes[k]) : 0u; };
    const std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
  }
  return out;
}

std::vector<std::int32_t> token_array(const json& a) {
  std::vector<std::int32_t> out;
  for (const auto& t : a) {
    if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > INT32_MAX) {
      throw std::invalid_argument("input: token ids must be non-negative integers");
    }
    out.push_back(static_cast<std::int32_t>(t.get<std::int64_t>()));
  }
  if (out.empty()) throw std::invalid_argument("input: an empty token array");
  return out;
}

}  // namespace

void openai_api::embeddings(const http_request& r, std::shared_ptr<http_responder> out) {
  const std::string endpoint = "/v1/embeddings";
  if (stopping_) return answer(endpoint, *out, 503, error_body("spited is shutting down", "server_error"), {{"Retry-After", "5"}});
  json body;
  try {
    body = json::parse(r.body);
  } catch (const json::exception& e) {
    return answer(endpoint, *out, 400, error_body(std::string("the body is not valid JSON: ") + e.what()));
  }
  embed_input in;
  bool base64 = false;
  try {
    if (!body.is_object() || !body.contains("model") || !body["model"].is_string()) {
      return answer(endpoint, *out, 400, error_body("model (a string) is required", "invalid_request_error", "model"));
    }
    in.model = body["model"].get<std::string>();
    const std::string format = body.value("encoding_format", "float");
    if (format != "float" && format != "base64") {
      return answer(endpoint, *out, 400, error_body("encoding_format must be float or base64", "invalid_request_error", "encoding_format"));
    }
    base64 = format == "base64";
    if (!body.contains("input")) return answer(endpoint, *out, 400, error_body("input is required", "invalid_request_error", "input"));
    const json& input = body["input"];
    if (input.is_string()) {
      in.texts.push_back(input.get<std::string>());
    } else if (input.is_array() && !input.empty() && input.size() <= max_inputs) {
      if (input[0].is_string()) {
        for (const auto& x : input) {
          if (!x.is_string()) throw std::invalid_argument("input: an array must hold only strings");
          in.texts.push_back(x.get<std::string>());
        }
      } else if (input[0].is_number()) {
        in.tokens.push_back(token_array(input));
      } else if (input[0].is_array()) {
        for (const auto& x : input) {
          if (!x.is_array()) throw std::invalid_argument("input: an array of token arrays must hold only arrays");
          in.tokens.push_back(token_array(x));
        }
      } else {
        throw std::invalid_argument("input must be a string, an array of strings, or token ids");
      }
    } else {
      throw std::invalid_argument("input must be a string or a non-empty array of at most " + std::to_string(max_inputs));
    }
    for (const auto& t : in.texts) {
      if (t.empty()) throw std::invalid_argument("input: empty strings cannot be embedded");
    }
  } catch (const std::invalid_argument& e) {
    return answer(endpoint, *out, 400, error_body(e.what(), "invalid_request_error", "input"));
  } catch (const json::exception& e) {
    return answer(endpoint, *out, 400, error_body(std::string("bad field: ") + e.what()));
  }
  auto result = backend_->embed(in);
  if (!result) {
    const error& e = result.err();
    const int status = e.code == errc::not_found ? 404 : e.code == errc::unavailable ? 503 : e.code == errc::busy ? 429 : 400;
    header_list headers;
    if (status == 429 || status == 503) headers.emplace_back("Retry-After", "1");
    return answer(endpoint, *out, status,
                  error_body(e.message, status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error",
                             status == 404 ? "model" : status == 429 ? "" : "input", status == 404 ? "model_not_found" : ""),
                  headers);
  }
  json data = json::array();
  for (std::size_t i = 0; i < result->vectors.size(); ++i) {
    json e{{"object", "embedding"}, {"index", i}};
    if (base64) e["embedding"] = base64_floats(result->vectors[i]);
    else e["embedding"] = result->vectors[i];
    data.push_back(std::move(e));
  }
  metrics_.tokens(result->prompt_tokens, 0);
  answer(endpoint, *out, 200,
         json{{"object", "list"}, {"data", data}, {"model", in.model},
              {"usage", {{"prompt_tokens", result->prompt_tokens}, {"total_tokens", result->prompt_tokens}}}}
             .dump());
}

}  // namespace spite::server
