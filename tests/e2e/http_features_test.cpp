// The OpenAI API's richer features against a real spited: embeddings, structured output
// (response_format, grammar), tool calls forced by tool_choice, and logprobs, the prompt's
// own (echo) compared with the reference engine's logits.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "models_daemon.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using namespace spite::test;

namespace {

// spited with stories260K as "stories", on a free port.
struct feature_daemon : models_daemon {
  feature_daemon() : models_daemon({"stories=" + fs::absolute(shared_path("models/stories260K.gguf")).string()}) {}
};

std::vector<float> decode_base64_floats(const std::string& b64) {
  auto val = [](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
  };
  std::string bytes;
  int acc = 0, bits = 0;
  for (char ch : b64) {
    const int v = val(ch);
    if (v < 0) continue;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian, like the machine
  return out;
}

json golden_run(const std::string& prompt) {
  std::ifstream in(shared_path("golden/logits/stories260K.gguf.json"));
  const json g = json::parse(in);
  for (const auto& r : g.at("runs")) {
    if (r.at("prompt") == prompt) return r;
  }
  FAIL("no golden run for " << prompt);
  return {};
}

// log p(token) at a golden position: its logit (if among the top ones) minus the log-sum-exp.
std::optional<double> golden_logprob(const json& position, int token) {
  for (const auto& t : position.at("top")) {
    if (t[0].get<int>() == token) return t[1].get<double>() - position.at("lse").get<double>();
  }
  return std::nullopt;
}

const json weather_tools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
                  "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])");

}  // namespace

TEST_CASE("embeddings: strings and token arrays, float and base64, normalised and deterministic") {
  feature_daemon d;
  http_client c(d.port, "127.0.0.1", 120s);  // generous: CI machines may be loaded
  const json a = post_ok(c, "/v1/embeddings", {{"model", "stories"}, {"input", {"Once upon a time", "The cat sat"}}});
  CHECK(a.at("object") == "list");
  REQUIRE(a.at("data").size() == 2);
  const auto v0 = a["data"][0]["embedding"].get<std::vector<float>>();
  const auto v1 = a["data"][1]["embedding"].get<std::vector<float>>();
  REQUIRE(v0.size() == 64);  // stories260K's embedding_length
  double norm = 0, dot = 0;
  for (std::size_t i = 0; i < v0.size(); ++i) {
    norm += double(v0[i]) * v0[i];
    dot += double(v0[i]) * v1[i];
  }
  CHECK(std::abs(norm - 1.0) < 1e-5);
  CHECK(dot < 0.999);  // different texts, different vectors
  CHECK(a.at("usage").at("prompt_tokens").get<int>() > 5);

  // The same text as the token ids it tokenizes to (BOS included), and as base64.
  const json golden = golden_run("Once upon a time");
  const json t = post_ok(c, "/v1/embeddings", {{"model", "stories"}, {"input", golden.at("tokens")}, {"encoding_format", "base64"}});
  const auto vb = decode_base64_floats(t["data"][0]["embedding"].get<std::string>());
  REQUIRE(vb.size() == v0.size());
  for (std::size_t i = 0; i < v0.size(); ++i) CHECK(vb[i] == Approx(v0[i]).margin(1e-6));

  const auto bad = c.post("/v1/embeddings", {{"model", "stories"}, {"input", json::array()}});
  CHECK(bad.status == 400);
  CHECK(bad.json().at("error").at("param") == "input");
  CHECK(c.post("/v1/embeddings", {{"model", "nope"}, {"input", "x"}}).status == 404);
}

TEST_CASE("embedding requests beyond the model's bound get 429 at once, and other requests go on") {
  feature_daemon d;
  // Two large requests: one runs, one waits (the bound); a third gets 429 with Retry-After
  // instead of taking one more of the server's handler threads.
  const std::string sentence = "Once upon a time there was a little girl who lived in a village near the forest, and every day";
  // Enough work that both are still running 150 ms later on a fast machine (each input is a
  // forward pass of its own).
  const json large = {{"model", "stories"}, {"input", json(std::vector<std::string>(600, sentence))}};
  http_response first, second;
  std::atomic<int> finished{0};
  const auto started = std::chrono::steady_clock::now();
  std::jthread a([&] {
    first = http_client(d.port, "127.0.0.1", 120s).post("/v1/embeddings", large);
    finished++;
  });
  std::jthread b([&] {
    second = http_client(d.port, "127.0.0.1", 120s).post("/v1/embeddings", large);
    finished++;
  });
  std::this_thread::sleep_for(150ms);
  http_client c(d.port, "127.0.0.1", 120s);
  const auto third = c.post("/v1/embeddings", {{"model", "stories"}, {"input", "The cat sat"}});
  const auto models = c.get("/v1/models");
  const bool overlapped = finished == 0;  // both still running then
  a.join();
  b.join();
  INFO("the large requests took " << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s");
  CHECK(first.status == 200);
  CHECK(second.status == 200);
  CHECK(models.status == 200);
  REQUIRE(overlapped);  // else the machine was too fast for this check to mean anything
  INFO(third.body);
  CHECK(third.status == 429);
  CHECK_FALSE(third.header("retry-after").empty());
  CHECK(third.json().at("error").at("type") == "rate_limit_error");
}

TEST_CASE("response_format json_schema output validates against its schema, and unenforceable schemas get 400") {
  feature_daemon d;
  http_client c(d.port, "127.0.0.1", 120s);  // generous: CI machines may be loaded
  const json schema = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 3}},
      "required": ["name", "age", "pets"], "additionalProperties": false})");
  for (int seed = 1; seed <= 4; ++seed) {
    const json r = post_ok(c, "/v1/chat/completions",
                           {{"model", "stories"}, {"messages", {{{"role", "user"}, {"content", "Describe a person."}}}},
                            {"max_tokens", 200}, {"seed", seed}, {"temperature", 1.0},
                            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}}}}}});
    const std::string content = r["choices"][0]["message"]["content"].get<std::string>();
    INFO("seed " << seed << ": " << content);
    CHECK(r["choices"][0]["finish_reason"] == "stop");
    const json v = json::parse(content);
    REQUIRE(v.is_object());
    CHECK(v.size() == 3);
    CHECK(v.at("name").is_string());
    CHECK(v.at("name").get<std::string>().size() <= 16);
    CHECK(v.at("age").is_number_integer());
    CHECK(v.at("age").get<int>() >= 0);
    CHECK(v.at("age").get<int>() <= 120);
    REQUIRE(v.at("pets").is_array());
    CHECK(v.at("pets").size() <= 3);
    for (const auto& p : v.at("pets")) CHECK((p == "cat" || p == "dog"));
  }
  // json_object: any object; a finished one parses, one cut by max_tokens is still an object's start.
  const json obj = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", "Data:"}, {"max_tokens", 300}, {"seed", 3},
                                                  {"response_format", {{"type", "json_object"}}}});
  const std::string text = obj["choices"][0]["text"].get<std::string>();
  INFO(text);
  if (obj["choices"][0]["finish_reason"] == "stop") {
    CHECK(json::parse(text).is_object());
  } else {
    CHECK(text.rfind("{", 0) == 0);
  }
  const json yes_no = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", "Answer:"}, {"max_tokens", 8},
                                                     {"grammar", "root ::= \"yes\" | \"no\""}});
  const std::string answer = yes_no["choices"][0]["text"].get<std::string>();
  CHECK((answer == "yes" || answer == "no"));

  const auto refused = c.post("/v1/chat/completions",
                              {{"model", "stories"}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
                               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"},
                                 {"schema", {{"type", "object"}, {"patternProperties", {{"^a", {{"type", "string"}}}}}}}}}}}});
  REQUIRE(refused.status == 400);
  CHECK_THAT(refused.json().at("error").at("message").get<std::string>(), Catch::Contains("patternProperties"));
  CHECK(refused.json().at("error").at("param") == "response_format");
  const auto bad_gbnf = c.post("/v1/completions", {{"model", "stories"}, {"prompt", "x"}, {"grammar", "root ::= missing"}});
  CHECK(bad_gbnf.status == 400);
}

TEST_CASE("tool_choice required and named force valid calls, streamed as tool_call deltas") {
  feature_daemon d;
  http_client c(d.port, "127.0.0.1", 120s);  // generous: CI machines may be loaded
  const json messages = {{{"role", "user"}, {"content", "What is the weather in Paris?"}}};
  const json named = post_ok(c, "/v1/chat/completions",
                             {{"model", "stories"}, {"messages", messages}, {"tools", weather_tools}, {"max_tokens", 400},
                              {"seed", 11}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  const json& choice = named["choices"][0];
  INFO(choice.dump());
  CHECK(choice.at("finish_reason") == "tool_calls");
  REQUIRE(choice["message"]["tool_calls"].size() == 1);
  const json& call = choice["message"]["tool_calls"][0];
  CHECK(call.at("type") == "function");
  CHECK(call.at("id").get<std::string>().rfind("call_", 0) == 0);
  CHECK(call["function"]["name"] == "get_weather");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  CHECK(args.at("city").is_string());
  CHECK((args.at("unit") == "celsius" || args.at("unit") == "fahrenheit"));
  CHECK(choice["message"]["content"].is_null());

  // required, not parallel: exactly one call of one of the tools.
  const json required = post_ok(c, "/v1/chat/completions",
                                {{"model", "stories"}, {"messages", messages}, {"tools", weather_tools}, {"max_tokens", 400},
                                 {"tool_choice", "required"}, {"parallel_tool_calls", false}, {"seed", 5}});
  INFO(required.dump());
  CHECK(required["choices"][0]["finish_reason"] == "tool_calls");
  REQUIRE(required["choices"][0]["message"]["tool_calls"].size() == 1);

  // Streaming: the call's head (id, type, name, empty arguments), then its arguments.
  auto s = c.stream_post("/v1/chat/completions",
                         {{"model", "stories"}, {"messages", messages}, {"tools", weather_tools}, {"max_tokens", 400},
                          {"seed", 11}, {"stream", true}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  REQUIRE(s.status() == 200);
  std::vector<json> deltas;
  std::string finish;
  for (auto e = s.next(); e && *e != "[DONE]"; e = s.next()) {
    const json j = json::parse(*e);
    const json& ch = j["choices"][0];
    if (ch["delta"].contains("tool_calls")) deltas.push_back(ch["delta"]["tool_calls"][0]);
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"].get<std::string>();
  }
  REQUIRE(deltas.size() == 2);
  CHECK(deltas[0]["function"]["name"] == "get_weather");
  CHECK(deltas[0]["function"]["arguments"] == "");
  CHECK(deltas[0]["type"] == "function");
  CHECK(json::parse(deltas[1]["function"]["arguments"].get<std::string>()).contains("city"));
  CHECK(finish == "tool_calls");

  const auto unknown = c.post("/v1/chat/completions", {{"model", "stories"}, {"messages", messages}, {"tools", weather_tools},
                                                       {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}});
  CHECK(unknown.status == 400);
  CHECK(unknown.json().at("error").at("param") == "tool_choice");
}

TEST_CASE("logprobs: generated tokens' and, with echo, the prompt's match the reference logits") {
  feature_daemon d;
  http_client c(d.port, "127.0.0.1", 120s);  // generous: CI machines may be loaded
  const json golden = golden_run("Once upon a time");
  const auto& positions = golden.at("positions");
  const auto& tokens = golden.at("tokens");
  const json r = post_ok(c, "/v1/completions", {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 1},
                                                {"temperature", 0}, {"echo", true}, {"logprobs", 3}});
  const json& lp = r["choices"][0]["logprobs"];
  INFO(lp.dump());
  REQUIRE(lp.at("token_logprobs").size() == tokens.size() + 1);
  CHECK(lp["token_logprobs"][0].is_null());  // nothing comes before the first token
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    const auto want = golden_logprob(positions[i - 1], tokens[i].get<int>());
    REQUIRE(want.has_value());
    CHECK(lp["token_logprobs"][i].get<double>() == Approx(*want).margin(1e-4));
  }
  // The generated token is the greedy one: its logprob is the top logit at the last position.
  const auto& last = positions[tokens.size() - 1];
  const auto want = golden_logprob(last, last.at("top")[0][0].get<int>());
  CHECK(lp["token_logprobs"][tokens.size()].get<double>() == Approx(*want).margin(1e-4));
  CHECK(lp["top_logprobs"][tokens.size()].size() == 3);

  const json chat = post_ok(c, "/v1/chat/completions", {{"model", "stories"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                        {"max_tokens", 4}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}});
  const json& content = chat["choices"][0]["logprobs"]["content"];
  REQUIRE(content.size() == 4);
  for (const auto& e : content) {
    CHECK(e.at("logprob").get<double>() <= 0.0);
    REQUIRE(e.at("top_logprobs").size() == 2);
    // Greedy: the chosen token is the most probable one.
    CHECK(e.at("logprob").get<double>() == Approx(e["top_logprobs"][0]["logprob"].get<double>()));
    CHECK(e.at("bytes").is_array());
  }
  const auto bad = c.post("/v1/chat/completions", {{"model", "stories"}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                                   {"top_logprobs", 3}});
  CHECK(bad.status == 400);
  CHECK(bad.json().at("error").at("param") == "top_logprobs");
}

TEST_CASE("CORS: listed origins are named back, and a preflight allows the headers the browser asks for") {
  const std::string model = "stories=" + fs::absolute(shared_path("models/stories260K.gguf")).string();
  models_daemon d({model}, "cors_origins = [\"http://app.example\"]\napi_keys = [\"k\"]");
  http_client c(d.port);
  // The official JS SDK in a browser sends X-Stainless-* headers: the preflight must allow them.
  const auto pre = c.request("OPTIONS", "/v1/chat/completions",
                             {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                              {"Access-Control-Request-Headers", "authorization,content-type,x-stainless-lang"}});
  CHECK(pre.status == 204);  // no API key needed
  CHECK(pre.header("access-control-allow-origin") == "http://app.example");
  CHECK_THAT(pre.header("access-control-allow-methods"), Catch::Contains("POST"));
  CHECK_THAT(pre.header("access-control-allow-headers"), Catch::Contains("x-stainless-lang"));
  const http_headers key{{"Authorization", "Bearer k"}};
  http_headers from_app = key;
  from_app.emplace_back("Origin", "http://app.example");
  const auto listed = c.get("/v1/models", from_app);
  CHECK(listed.status == 200);
  CHECK(listed.header("access-control-allow-origin") == "http://app.example");
  CHECK_THAT(listed.header("vary"), Catch::Contains("Origin"));
  http_headers from_other = key;
  from_other.emplace_back("Origin", "http://evil.example");
  const auto other = c.get("/v1/models", from_other);
  CHECK(other.status == 200);  // answered, but the browser may not show it to the page
  CHECK(other.header("access-control-allow-origin").empty());
}
