// spited's OpenAI HTTP API as a real process on loopback: models, health, readiness and metrics;
// completions and chat against the golden greedy continuations; the exact SSE chunk sequences;
// errors with the parameter they name. The abuse cases are in http_robustness_test.cpp.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "http_api_support.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using namespace spite::test;
using namespace spite::test::api;


TEST_CASE("models, health, readiness and metrics, all on one kept-alive connection") {
  api_daemon d;
  http_client c = d.client();

  const json models = ok_json(c.get("/v1/models"));
  CHECK(models.at("object") == "list");
  std::set<std::string> ids;
  for (const auto& m : models.at("data")) {
    ids.insert(m.at("id").get<std::string>());
    CHECK(m.at("object") == "model");
    CHECK(m.at("created").get<std::int64_t>() > 0);
    CHECK(m.at("owned_by").is_string());
  }
  CHECK(ids == std::set<std::string>{"stories", "tiny"});

  const json one = ok_json(c.get("/v1/models/stories"));
  CHECK(one.at("id") == "stories");
  CHECK(one.at("object") == "model");
  const auto missing = c.get("/v1/models/nope");
  check_error(missing, 404, "model");
  CHECK(missing.json()["error"].at("code") == "model_not_found");

  CHECK(ok_json(c.get("/health")).at("status") == "ok");
  CHECK(ok_json(c.get("/health/ready")).at("status") == "ready");

  // A generation first, so that the latency histograms and kernel choices have something.
  ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}}));
  const auto m = c.get("/metrics");
  REQUIRE(m.status == 200);
  CHECK_THAT(m.header("content-type"), Catch::StartsWith("text/plain"));
  for (const char* name : {"spite_http_requests_total{", "spite_time_to_first_token_seconds_bucket{",
                           "spite_time_to_first_token_seconds_count ", "spite_queue_depth{", "spite_kernel_choice{",
                           "spite_inter_token_latency_seconds_count ", "spite_generated_tokens_total "}) {
    CHECK_THAT(m.body, Catch::Contains(name));
  }
  CHECK_THAT(m.body, Catch::Contains("spite_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1"));
  CHECK(metric(m.body, "spite_time_to_first_token_seconds_count") == 1);
  CHECK(metric(m.body, "spite_generated_tokens_total") == 4);
  CHECK(c.connections_opened() == 1);  // keep-alive held for every request above
}

TEST_CASE("completions at temperature 0 reproduce the golden greedy continuations") {
  const auto golden = load_json(shared_path("golden/logits/stories260K.gguf.json"));
  const json& runs = golden.at("runs");
  api_daemon d;
  http_client c = d.client();

  SECTION("one prompt, 16 and 64 tokens") {
    const json r16 = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", runs[0].at("prompt")},
                                                         {"max_tokens", 16}, {"temperature", 0}}));
    CHECK(r16.at("object") == "text_completion");
    CHECK_THAT(r16.at("id").get<std::string>(), Catch::StartsWith("cmpl-"));
    REQUIRE(r16.at("choices").size() == 1);
    check_golden(r16["choices"][0].at("text").get<std::string>(), runs[0]);
    CHECK(r16["choices"][0].at("finish_reason") == "length");
    CHECK(r16.at("usage").at("prompt_tokens") == runs[0].at("tokens").size());
    CHECK(r16.at("usage").at("completion_tokens") == 16);

    // 64 tokens go on from the same 16, as the in-process engine does.
    const json r64 = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", runs[0].at("prompt")},
                                                         {"max_tokens", 64}, {"temperature", 0}}));
    const std::string text64 = r64["choices"][0].at("text").get<std::string>();
    CHECK_THAT(text64, Catch::StartsWith(r16["choices"][0].at("text").get<std::string>()));
    const auto local = run_process({SPITECTL_PATH, "run", "--local", "--model", model_path("models/stories260K.gguf"),
                                    "--prompt", runs[0].at("prompt").get<std::string>(), "-n", "64", "--temperature", "0"});
    REQUIRE(local.exit_code == 0);
    CHECK(text64 + "\n" == local.out);
  }

  SECTION("a repeated or extended prompt is served from the prompt cache, with the same golden text") {
    const std::string prompt = runs[2].at("prompt").get<std::string>();
    const std::size_t n_tokens = runs[2].at("tokens").size();
    const json body = {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
    const json first = ok_json(c.post("/v1/completions", body));
    check_golden(first["choices"][0].at("text").get<std::string>(), runs[2]);
    const json again = ok_json(c.post("/v1/completions", body));
    check_golden(again["choices"][0].at("text").get<std::string>(), runs[2]);
    CHECK(again.at("usage").at("prompt_tokens") == n_tokens);
    CHECK(again.at("usage").at("prompt_tokens_details").at("cached_tokens") == n_tokens - 1);

    // The first answer appended: everything the sequence evaluated is reused.
    const std::string extended = prompt + first["choices"][0].at("text").get<std::string>() + " The end.";
    const json next = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", extended}, {"max_tokens", 4},
                                                          {"temperature", 0}}));
    CHECK(next.at("usage").at("prompt_tokens_details").at("cached_tokens").get<std::size_t>() >= n_tokens);
    const std::string m = c.get("/metrics").body;
    CHECK(metric(m, "spite_prompt_cached_tokens_total") >= double(2 * n_tokens - 1));
    // The finished sequences stay in KV memory, counted as held.
    const std::string held = "\nspite_kv_cache_tokens{model=\"stories\"} ";
    const auto at = m.find(held);
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(m.substr(at + held.size())) >= double(n_tokens));
  }

  SECTION("an array of prompts gives one choice per prompt, in order") {
    json prompts = json::array();
    for (const auto& r : runs) prompts.push_back(r.at("prompt"));
    const json r = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", prompts}, {"max_tokens", 16},
                                                       {"temperature", 0}}));
    REQUIRE(r.at("choices").size() == runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
      CHECK(r["choices"][i].at("index") == i);
      check_golden(r["choices"][i].at("text").get<std::string>(), runs[i]);
    }
    CHECK(r.at("usage").at("completion_tokens") == 16 * runs.size());
    std::size_t prompt_tokens = 0;  // every prompt counts (OpenAI, vLLM)
    for (const auto& run : runs) prompt_tokens += run.at("tokens").size();
    CHECK(r.at("usage").at("prompt_tokens") == prompt_tokens);
  }

  SECTION("echo prepends the prompt") {
    const std::string prompt = runs[0].at("prompt").get<std::string>();
    const json r = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", 16},
                                                       {"temperature", 0}, {"echo", true}}));
    const std::string text = r["choices"][0].at("text").get<std::string>();
    REQUIRE_THAT(text, Catch::StartsWith(prompt));
    check_golden(text.substr(prompt.size()), runs[0]);
  }

  SECTION("n gives that many choices, each from its own seed") {
    const json greedy = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", runs[0].at("prompt")},
                                                            {"max_tokens", 16}, {"temperature", 0}, {"n", 3}}));
    REQUIRE(greedy.at("choices").size() == 3);
    for (int i = 0; i < 3; ++i) {
      CHECK(greedy["choices"][i].at("index") == i);
      check_golden(greedy["choices"][i].at("text").get<std::string>(), runs[0]);
    }
    CHECK(greedy.at("usage").at("completion_tokens") == 48);
    CHECK(greedy.at("usage").at("prompt_tokens") == runs[0].at("tokens").size());  // one prompt, counted once

    const json body = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1},
                       {"seed", 42}, {"n", 3}};
    const json sampled = ok_json(c.post("/v1/completions", body));
    REQUIRE(sampled.at("choices").size() == 3);
    std::set<std::string> texts;
    for (int i = 0; i < 3; ++i) {
      CHECK(sampled["choices"][i].at("index") == i);
      texts.insert(sampled["choices"][i].at("text").get<std::string>());
    }
    CHECK(texts.size() > 1);  // the choices differ
    const json again = ok_json(c.post("/v1/completions", body));
    CHECK(again.at("choices") == sampled.at("choices"));  // and a seed repeats them
  }
}

TEST_CASE("completions: stop strings and token limits") {
  const auto golden = load_json(shared_path("golden/logits/stories260K.gguf.json"));
  const std::string prompt = golden.at("runs")[0].at("prompt").get<std::string>();
  const std::string full = golden.at("runs")[0].at("greedy_text").get<std::string>();  // ", there was a little girl named Lily. ..."
  api_daemon d;
  http_client c = d.client();
  const json base = {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};

  SECTION("a stop string cuts the text before it, also across tokens and while streaming") {
    // "tle gi" spans the tokens of "little" and " girl"; the earliest of several stops wins.
    for (const json& stop : {json("tle gi"), json::array({"Lily", "tle gi"}), json::array({"named", "zzz"})}) {
      json body = base;
      body["stop"] = stop;
      const std::string first = stop.is_string() ? stop.get<std::string>() : stop[0].get<std::string>() == "Lily" ? "tle gi" : "named";
      const std::string expected = full.substr(0, full.find(first));
      INFO("stop " << stop.dump());
      const json r = ok_json(c.post("/v1/completions", body));
      CHECK(r["choices"][0].at("text") == expected);
      CHECK(r["choices"][0].at("finish_reason") == "stop");
      CHECK(r.at("usage").at("completion_tokens").get<int>() < 16);

      body["stream"] = true;
      const auto s = stream_post(c, "/v1/completions", body);
      REQUIRE(s.status == 200);
      CHECK(streamed_text(s.chunks) == expected);
      CHECK(s.chunks.back()["choices"][0].at("finish_reason") == "stop");
      CHECK(s.done);
    }
  }

  SECTION("max_tokens and max_completion_tokens end with finish_reason length") {
    for (const char* field : {"max_tokens", "max_completion_tokens"}) {
      json body = base;
      body.erase("max_tokens");
      body[field] = 5;
      INFO(field);
      const json r = ok_json(c.post("/v1/completions", body));
      CHECK(r["choices"][0].at("finish_reason") == "length");
      CHECK(r.at("usage").at("completion_tokens") == 5);
      CHECK(r.at("usage").at("total_tokens") == 5 + r.at("usage").at("prompt_tokens").get<int>());
      const json chat = ok_json(c.post("/v1/chat/completions", {{"model", "stories"}, {"temperature", 0}, {field, 7},
                                                                {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}));
      CHECK(chat["choices"][0].at("finish_reason") == "length");
      CHECK(chat.at("usage").at("completion_tokens") == 7);
    }
  }
}

TEST_CASE("chat completions: the response shape, text parts, and parts that are not text") {
  api_daemon d;
  http_client c = d.client();
  const json messages = {{{"role", "system"}, {"content", "You tell stories."}}, {{"role", "user"}, {"content", "Tell me one."}}};
  const auto before = static_cast<std::int64_t>(std::time(nullptr));
  const json r = ok_json(c.post("/v1/chat/completions", {{"model", "stories"}, {"messages", messages}, {"max_tokens", 20},
                                                          {"temperature", 0}}));
  CHECK(keys(r) == std::set<std::string>{"id", "object", "created", "model", "system_fingerprint", "choices", "usage"});
  CHECK_THAT(r.at("id").get<std::string>(), Catch::StartsWith("chatcmpl-"));
  CHECK(r.at("object") == "chat.completion");
  CHECK(r.at("created").get<std::int64_t>() >= before);
  CHECK(r.at("created").get<std::int64_t>() <= static_cast<std::int64_t>(std::time(nullptr)));
  CHECK(r.at("model") == "stories");
  CHECK(r.at("system_fingerprint").is_string());
  REQUIRE(r.at("choices").size() == 1);
  const json& choice = r["choices"][0];
  CHECK(keys(choice) == std::set<std::string>{"index", "message", "logprobs", "finish_reason"});
  CHECK(choice.at("index") == 0);
  CHECK(choice.at("message").at("role") == "assistant");
  CHECK(choice.at("message").at("content").is_string());
  CHECK_FALSE(choice.at("message").at("content").get<std::string>().empty());
  CHECK(choice.at("logprobs").is_null());
  CHECK(choice.at("finish_reason") == "length");
  const json& u = r.at("usage");
  CHECK(u.at("prompt_tokens").get<int>() > 5);  // the rendered conversation, not the bare text
  CHECK(u.at("completion_tokens") == 20);
  CHECK(u.at("total_tokens") == u.at("prompt_tokens").get<int>() + 20);
  CHECK(u.at("prompt_tokens_details").at("cached_tokens").is_number_integer());

  // Content as an array of text parts is the same conversation.
  json parts = messages;
  parts[1]["content"] = {{{"type", "text"}, {"text", "Tell me "}}, {{"type", "text"}, {"text", "one."}}};
  const json same = ok_json(c.post("/v1/chat/completions", {{"model", "stories"}, {"messages", parts}, {"max_tokens", 20},
                                                             {"temperature", 0}}));
  CHECK(same["choices"][0].at("message").at("content") == choice.at("message").at("content"));
  CHECK(same.at("usage").at("prompt_tokens") == u.at("prompt_tokens"));

  // An image part is refused, naming it.
  parts[1]["content"].push_back({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}});
  const auto image = c.post("/v1/chat/completions", {{"model", "stories"}, {"messages", parts}});
  check_error(image, 400, "messages");
  CHECK_THAT(image.json()["error"].at("message").get<std::string>(), Catch::Contains("image_url"));
}

// The same request a second time: the same counts, all but the last prompt token from the cache.
void check_same_usage_from_cache(const json& again, const json& first) {
  CHECK(again.at("prompt_tokens") == first.at("prompt_tokens"));
  CHECK(again.at("completion_tokens") == first.at("completion_tokens"));
  CHECK(again.at("total_tokens") == first.at("total_tokens"));
  CHECK(again.at("prompt_tokens_details").at("cached_tokens") == first.at("prompt_tokens").get<int>() - 1);
}

TEST_CASE("streaming: the exact chunk sequence, equal to the answer without streaming") {
  api_daemon d;
  http_client c = d.client();
  const json messages = {{{"role", "user"}, {"content", "Tell me a story."}}};

  SECTION("chat, with and without include_usage") {
    const json body = {{"model", "stories"}, {"messages", messages}, {"max_tokens", 24}, {"temperature", 0}};
    const json plain = ok_json(c.post("/v1/chat/completions", body));
    for (const bool include_usage : {true, false}) {
      INFO("include_usage " << include_usage);
      json sbody = body;
      sbody["stream"] = true;
      if (include_usage) sbody["stream_options"] = {{"include_usage", true}};
      const auto s = stream_post(c, "/v1/chat/completions", sbody);
      REQUIRE(s.status == 200);
      CHECK(s.content_type == "text/event-stream");
      CHECK(s.transfer_encoding == "chunked");
      CHECK(s.done);
      REQUIRE(s.chunks.size() >= (include_usage ? 4u : 3u));
      const std::size_t n = s.chunks.size();
      const std::size_t finish = include_usage ? n - 2 : n - 1;  // the chunk with finish_reason
      for (std::size_t i = 0; i < n; ++i) {
        const json& ch = s.chunks[i];
        INFO("chunk " << i << ": " << ch.dump());
        CHECK(ch.at("object") == "chat.completion.chunk");
        CHECK(ch.at("id") == s.chunks[0].at("id"));
        CHECK_THAT(ch.at("id").get<std::string>(), Catch::StartsWith("chatcmpl-"));
        CHECK(ch.at("created") == s.chunks[0].at("created"));
        CHECK(ch.at("model") == "stories");
        CHECK(ch.at("system_fingerprint").is_string());
        if (include_usage && i + 1 == n) {
          CHECK(ch.at("choices") == json::array());
          check_same_usage_from_cache(ch.at("usage"), plain.at("usage"));
          continue;
        }
        if (include_usage) {
          CHECK((ch.contains("usage") && ch["usage"].is_null()));
        } else {
          CHECK((!ch.contains("usage") || ch["usage"].is_null()));
        }
        REQUIRE(ch.at("choices").size() == 1);
        const json& choice = ch["choices"][0];
        CHECK(choice.at("index") == 0);
        if (i == 0) {
          CHECK(choice.at("delta") == json{{"role", "assistant"}, {"content", ""}});
          CHECK(choice.at("finish_reason").is_null());
        } else if (i < finish) {
          CHECK(keys(choice.at("delta")) == std::set<std::string>{"content"});
          CHECK_FALSE(choice["delta"]["content"].get<std::string>().empty());
          CHECK(choice.at("finish_reason").is_null());
        } else {
          CHECK(choice.at("delta") == json::object());
          CHECK(choice.at("finish_reason") == "length");
        }
      }
      CHECK(streamed_text(s.chunks) == plain["choices"][0]["message"]["content"].get<std::string>());
    }
  }

  SECTION("completions, with echo and with n") {
    const json body = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"n", 2}};
    const json plain = ok_json(c.post("/v1/completions", body));
    json sbody = body;
    sbody["stream"] = true;
    sbody["stream_options"] = {{"include_usage", true}};
    const auto s = stream_post(c, "/v1/completions", sbody);
    REQUIRE(s.status == 200);
    CHECK(s.done);
    REQUIRE(s.chunks.size() >= 3);
    for (std::size_t i = 0; i + 1 < s.chunks.size(); ++i) {
      const json& ch = s.chunks[i];
      INFO(ch.dump());
      CHECK(ch.at("object") == "text_completion");
      CHECK_THAT(ch.at("id").get<std::string>(), Catch::StartsWith("cmpl-"));
      CHECK((ch.contains("usage") && ch["usage"].is_null()));
      REQUIRE(ch.at("choices").size() == 1);
      CHECK(ch["choices"][0].at("text").is_string());
    }
    CHECK(s.chunks.back().at("choices") == json::array());
    check_same_usage_from_cache(s.chunks.back().at("usage"), plain.at("usage"));
    for (int i = 0; i < 2; ++i) {
      CHECK(streamed_text(s.chunks, i) == plain["choices"][i]["text"].get<std::string>());
      int finishes = 0;
      for (const auto& ch : s.chunks) {
        for (const auto& choice : ch["choices"]) {
          if (choice["index"] == i && !choice["finish_reason"].is_null()) {
            ++finishes;
            CHECK(choice["finish_reason"] == "length");
            CHECK(choice["text"] == "");
          }
        }
      }
      CHECK(finishes == 1);
    }

    json echo = {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"echo", true}};
    const json echo_plain = ok_json(c.post("/v1/completions", echo));
    echo["stream"] = true;
    const auto es = stream_post(c, "/v1/completions", echo);
    CHECK(streamed_text(es.chunks) == echo_plain["choices"][0]["text"].get<std::string>());
    CHECK_THAT(streamed_text(es.chunks), Catch::StartsWith("Once upon a time"));
  }
}

TEST_CASE("bad requests are answered with OpenAI errors naming the parameter") {
  api_daemon d;
  http_client c = d.client();
  const json chat = {{"model", "stories"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};

  const auto malformed = c.request("POST", "/v1/chat/completions", {{"Content-Type", "application/json"}}, "{\"model\": ");
  check_error(malformed, 400, "");

  const std::vector<std::pair<std::string, json>> bad = {
      {"temperature", "hot"},
      {"temperature", -1},
      {"n", 0},
      {"n", 1000},
      {"max_tokens", 1e30},
      {"max_tokens", 0},
      {"max_completion_tokens", "many"},
      {"top_p", 0},
      {"top_k", -1},
      {"seed", "x"},
      {"presence_penalty", 3},
      {"logit_bias", {{"abc", 1}}},
      {"logit_bias", {{"5", 1000}}},
      {"stop", 7},
      {"stream", "yes"},
      {"messages", "Hi"},
      {"messages", json::array()},
  };
  for (const auto& [field, value] : bad) {
    json body = chat;
    body[field] = value;
    INFO(field << " = " << value.dump());
    check_error(c.post("/v1/chat/completions", body), 400, field);
  }
  json no_model = chat;
  no_model.erase("model");
  check_error(c.post("/v1/chat/completions", no_model), 400, "model");
  check_error(c.post("/v1/completions", {{"model", "stories"}, {"prompt", 5}}), 400, "prompt");

  json unknown = chat;
  unknown["model"] = "nope";
  const auto missing = c.post("/v1/chat/completions", unknown);
  check_error(missing, 404, "model");
  CHECK(missing.json()["error"].at("code") == "model_not_found");

  check_error(c.get("/nowhere"), 404, "");
  check_error(c.get("/v1/nowhere"), 404, "");
  check_error(c.get("/v1/chat/completions"), 405, "");
  check_error(c.get("/v1/completions"), 405, "");
  check_error(c.request("POST", "/v1/models", {}, "{}"), 405, "");
  // The connection survived every error.
  CHECK(c.connections_opened() == 1);
  CHECK(ok_json(c.get("/health")).at("status") == "ok");
}
