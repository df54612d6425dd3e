// spited's OpenAI HTTP API as a real process on loopback: models, health, readiness and metrics;
// completions and chat against the golden greedy continuations; the exact SSE chunk sequences;
// errors with the parameter they name; API keys, body limits, 429 on a full queue, 503 while
// draining; a client leaving mid-stream cancels its generation; and hostile clients (slowloris,
// a flood of idle connections, garbage instead of HTTP).
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

#include "daemon_support.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using namespace spite::test;

namespace {

using clock_type = std::chrono::steady_clock;

// The end-of-sequence token of both models: banned so that random weights never stop early.
const json no_eos = {{"2", -100}};

std::string model_path(const std::string& rel) { return fs::absolute(shared_path(rel)).string(); }

// spited from a spite.toml: `stories` (trained, for golden text) and `tiny` (random weights, so a
// long generation stays long), both preloaded. READY before the test goes on; the HTTP port is
// the one spitectl status reports.
struct api_daemon {
  temp_dir dir;
  fs::path socket = dir.path() / "ctl.sock";
  notify_socket notify{dir.path() / "notify"};
  // After READY the notify socket is still read: spited's sd_notify blocks on a full one.
  std::jthread drain;
  std::unique_ptr<background_process> process;
  std::uint16_t port = 0;

  explicit api_daemon(const std::string& server = "") {
    {
      std::ofstream f(dir.path() / "spite.toml");
      f << "[server]\n" << server << "\n[control]\nsocket = \"" << socket.string() << "\"\n\n[inference]\nthreads = 1\n\n"
        << "[[model]]\nname = \"stories\"\npath = \"" << model_path("models/stories260K.gguf") << "\"\n\n"
        << "[[model]]\nname = \"tiny\"\npath = \"" << model_path("models/llama-2-tiny-random.gguf") << "\"\n";
    }
    process = std::make_unique<background_process>(
        std::vector<std::string>{SPITED_PATH, "--port", "0", "--config", (dir.path() / "spite.toml").string()},
        (dir.path() / "log").string(), std::vector<std::string>{"NOTIFY_SOCKET=" + notify.path.string()});
    const bool ready = notify.wait_for("READY=1", 30s);
    INFO(log());
    REQUIRE(ready);
    drain = std::jthread([this](const std::stop_token& stop) {
      while (!stop.stop_requested()) notify.wait_for(std::string(1, '\0'), 50ms);
    });
    const std::string http = status().at("http").get<std::string>();
    port = static_cast<std::uint16_t>(std::stoi(http.substr(http.rfind(':') + 1)));
    REQUIRE(port != 0);
  }

  json status() const {
    const auto r = run_process({SPITECTL_PATH, "status", "--socket", socket.string(), "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
  }

  int active(const std::string& model) const {
    const json s = status();
    for (const auto& m : s.at("models")) {
      if (m.at("name") == model) return m.at("engine").at("active").get<int>();
    }
    return -1;
  }

  std::string log() const {
    std::ifstream in(dir.path() / "log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  http_client client(std::chrono::milliseconds timeout = 60s) const { return http_client(port, "127.0.0.1", timeout); }
};

json ok_json(const http_response& r) {
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == 200);
  return r.json();
}

// An OpenAI error object with this status, type and param (empty: null).
void check_error(const http_response& r, int status, const std::string& param,
                 const std::string& type = "invalid_request_error") {
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == status);
  CHECK(r.header("content-type") == "application/json");
  const json j = r.json();
  REQUIRE(j.contains("error"));
  const json& e = j["error"];
  CHECK(e.at("message").is_string());
  CHECK_FALSE(e.at("message").get<std::string>().empty());
  CHECK(e.at("type") == type);
  if (param.empty()) {
    CHECK(e.at("param").is_null());
  } else {
    CHECK(e.at("param") == param);
  }
  CHECK(e.contains("code"));
}

std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

// A whole streamed response: its chunks (parsed), and whether `data: [DONE]` ended it.
struct sse_result {
  int status = 0;
  std::string content_type, transfer_encoding;
  std::vector<json> chunks;
  bool done = false;
};

sse_result read_stream(sse_stream& s) {
  sse_result out;
  out.status = s.status();
  out.content_type = s.header("content-type");
  out.transfer_encoding = s.header("transfer-encoding");
  while (auto e = s.next()) {
    INFO(s.raw());
    REQUIRE_FALSE(out.done);  // nothing after [DONE]
    if (*e == "[DONE]") {
      out.done = true;
      continue;
    }
    out.chunks.push_back(json::parse(*e));
  }
  return out;
}

sse_result stream_post(http_client& c, const std::string& path, const json& body) {
  auto s = c.stream_post(path, body);
  return read_stream(s);
}

// Concatenated text of choice `index`: chat deltas or completion texts.
std::string streamed_text(const std::vector<json>& chunks, int index = 0) {
  std::string text;
  for (const auto& ch : chunks) {
    for (const auto& c : ch.at("choices")) {
      if (c.at("index") != index) continue;
      if (c.contains("delta")) {
        text += c["delta"].value("content", "");
      } else {
        text += c.value("text", "");
      }
    }
  }
  return text;
}

// The golden greedy text of a run as token pieces concatenate. The reference's detokenizer
// drops the leading space of a SentencePiece continuation's first token (golden/README.md), so
// that one space is the only difference allowed.
void check_golden(const std::string& text, const json& run) {
  const std::string golden = run.at("greedy_text").get<std::string>();
  INFO("prompt: " << run.at("prompt").get<std::string>());
  if (text.size() == golden.size() + 1 && text[0] == ' ') {
    CHECK(text.substr(1) == golden);
  } else {
    CHECK(text == golden);
  }
}

// A value of an unlabelled Prometheus line, or -1.
double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace

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
          CHECK(ch.at("usage") == plain.at("usage"));
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
    CHECK(s.chunks.back().at("usage") == plain.at("usage"));
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

TEST_CASE("API keys: missing and wrong keys get 401, health stays open") {
  api_daemon d("api_keys = [\"k1\"]\n");
  http_client c = d.client();
  const auto none = c.get("/v1/models");
  check_error(none, 401, "");
  CHECK(none.header("www-authenticate") == "Bearer");
  check_error(c.get("/v1/models", {{"Authorization", "Bearer k2"}}), 401, "");
  check_error(c.get("/v1/models", {{"Authorization", "Bearer k1x"}}), 401, "");
  check_error(c.get("/v1/models", {{"Authorization", "Basic k1"}}), 401, "");
  check_error(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "x"}}), 401, "");
  CHECK(ok_json(c.get("/health")).at("status") == "ok");
  CHECK(ok_json(c.get("/health/ready")).at("status") == "ready");
  CHECK(ok_json(c.get("/v1/models", {{"Authorization", "Bearer k1"}})).at("data").size() == 2);
  const json r = ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "x"}, {"max_tokens", 2}},
                                {{"Authorization", "Bearer k1"}}));
  CHECK(r.at("usage").at("completion_tokens") == 2);

  // Refused requests to made-up paths are counted under a fixed label, not one series each.
  for (int i = 0; i < 20; ++i) check_error(c.get("/v1/made-up-" + std::to_string(i)), 401, "");
  const auto m = c.get("/metrics");
  REQUIRE(m.status == 200);
  CHECK_THAT(m.body, !Catch::Contains("made-up"));
  CHECK_THAT(m.body, Catch::Contains("spite_http_requests_total{endpoint=\"other\",status=\"401\"} 20"));
}

TEST_CASE("bodies over max_request_bytes get 413, even when only announced") {
  api_daemon d("max_request_bytes = 4096\n");
  http_client c = d.client();
  // `user` is accepted and ignored: a body of any size with a short prompt.
  const json big = {{"model", "stories"}, {"prompt", "x"}, {"max_tokens", 1}, {"user", std::string(5000, 'u')}};
  const auto r = c.post("/v1/completions", big);
  check_error(r, 413, "");
  CHECK(r.header("connection") == "close");
  // Under the limit is fine.
  ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "x"}, {"max_tokens", 1}, {"user", std::string(3000, 'u')}}));

  // 100 MB announced, a few bytes sent: refused at once, without waiting for the rest.
  tcp_connection raw("127.0.0.1", d.port, 5s);
  const auto start = clock_type::now();
  raw.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{\"model\"");
  const std::string status_line = raw.read_line();
  CHECK_THAT(status_line, Catch::StartsWith("HTTP/1.1 413"));
  CHECK(raw.closed_within(5s));
  CHECK(clock_type::now() - start < 3s);
  // The daemon serves on.
  CHECK(ok_json(d.client().get("/health")).at("status") == "ok");
}

TEST_CASE("a full queue answers 429 with Retry-After") {
  api_daemon d("max_concurrent = 1\nqueue_size = 0\n");
  http_client long_client = d.client();
  auto running = long_client.stream_post("/v1/completions", {{"model", "tiny"}, {"prompt", "Once upon a time"},
                                                              {"max_tokens", 4000}, {"temperature", 1}, {"seed", 1},
                                                              {"logit_bias", no_eos}, {"stream", true}});
  REQUIRE(running.status() == 200);
  REQUIRE(running.next());  // generating now
  http_client c = d.client();
  const auto busy = c.post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}});
  check_error(busy, 429, "", "rate_limit_error");
  CHECK_FALSE(busy.header("retry-after").empty());
  // Each model's engine has its own slots: the other model still answers.
  ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "x"}, {"max_tokens", 2}}));
  CHECK(ok_json(c.get("/health")).at("status") == "ok");
  running.disconnect();
  // The slot frees once the first request is cancelled.
  http_response after;
  for (int i = 0; i < 100; ++i) {
    after = c.post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}});
    if (after.status != 429) break;
    std::this_thread::sleep_for(20ms);
  }
  CHECK(after.status == 200);
}

TEST_CASE("errors found before a stream starts keep their HTTP status") {
  // A streamed request that cannot start (unknown model, full queue) is answered like an
  // unstreamed one, so that clients raise the right error (and retry a 429).
  api_daemon d("max_concurrent = 1\nqueue_size = 0\n");
  http_client c = d.client();
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const auto unknown = c.post("/v1/chat/completions", {{"model", "nope"}, {"stream", true}, {"messages", messages}});
  check_error(unknown, 404, "model");

  http_client long_client = d.client();
  auto running = long_client.stream_post("/v1/completions", {{"model", "tiny"}, {"prompt", "Once upon a time"},
                                                              {"max_tokens", 4000}, {"temperature", 1}, {"seed", 1},
                                                              {"logit_bias", no_eos}, {"stream", true}});
  REQUIRE(running.status() == 200);
  REQUIRE(running.next());
  const auto busy = c.post("/v1/chat/completions", {{"model", "tiny"}, {"stream", true}, {"messages", messages}});
  check_error(busy, 429, "", "rate_limit_error");
  CHECK_FALSE(busy.header("retry-after").empty());
}

TEST_CASE("after SIGTERM new requests get 503 while a long one drains to its end") {
  api_daemon d("shutdown_timeout_s = 300\n");
  constexpr int n = 1500;
  http_client long_client = d.client();
  auto running = long_client.stream_post("/v1/completions", {{"model", "tiny"}, {"prompt", "Once upon a time"},
                                                              {"max_tokens", n}, {"temperature", 1}, {"seed", 2},
                                                              {"logit_bias", no_eos}, {"stream", true},
                                                              {"stream_options", {{"include_usage", true}}}});
  REQUIRE(running.status() == 200);
  const auto first = running.next();
  REQUIRE(first);
  d.process->signal(SIGTERM);

  http_client c = d.client();
  http_response ready;
  for (int i = 0; i < 500; ++i) {
    ready = c.get("/health/ready");
    if (ready.status != 200) break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK(ready.status == 503);
  const auto refused = c.post("/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}});
  check_error(refused, 503, "", "server_error");
  CHECK_FALSE(refused.header("retry-after").empty());
  check_error(c.post("/v1/chat/completions", {{"model", "stories"}, {"stream", true},
                                              {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}),
              503, "", "server_error");
  CHECK(ok_json(c.get("/health")).at("status") == "ok");  // alive while draining

  // The long one goes on to its last token.
  const auto rest = read_stream(running);
  CHECK(rest.done);
  REQUIRE(rest.chunks.size() >= 2);
  const json& finish = rest.chunks[rest.chunks.size() - 2];
  CHECK(finish["choices"][0].at("finish_reason") == "length");
  CHECK(rest.chunks.back().at("usage").at("completion_tokens") == n);
  CHECK(d.process->wait(30000) == 0);
}

TEST_CASE("a client that disconnects mid-stream cancels its generation") {
  api_daemon d;
  constexpr int max_tokens = 4000;
  http_client c = d.client();
  auto s = c.stream_post("/v1/chat/completions", {{"model", "tiny"}, {"max_tokens", max_tokens}, {"temperature", 1},
                                                  {"seed", 3}, {"logit_bias", no_eos}, {"stream", true},
                                                  {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  REQUIRE(s.status() == 200);
  for (int i = 0; i < 3; ++i) REQUIRE(s.next());
  CHECK(d.active("tiny") == 1);
  const auto left = clock_type::now();
  s.disconnect();
  int active = 1;
  while (active != 0 && clock_type::now() - left < 10s) {
    std::this_thread::sleep_for(10ms);
    active = d.active("tiny");
  }
  const double took = std::chrono::duration<double>(clock_type::now() - left).count();
  INFO("the engine was idle " << took << " s after the client left");
  CHECK(active == 0);
  CHECK(took < 2.0);
  // The cancelled request's tokens are counted once it ended: a fraction of max_tokens.
  http_client m = d.client();
  double generated = -1;
  for (int i = 0; i < 100 && generated <= 0; ++i) {
    generated = metric(m.get("/metrics").body, "spite_generated_tokens_total");
    if (generated <= 0) std::this_thread::sleep_for(10ms);
  }
  CHECK(generated >= 3);
  CHECK(generated < max_tokens / 2);
}

TEST_CASE("slow clients do not hold up the others") {
  api_daemon d;
  std::vector<std::unique_ptr<tcp_connection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<tcp_connection>("127.0.0.1", d.port, 5s));
    slow.back()->send(i % 2 ? "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " : "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  }
  http_client c = d.client(5s);
  for (int i = 0; i < 5; ++i) CHECK(ok_json(c.get("/health")).at("status") == "ok");
  ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once upon a time"}, {"max_tokens", 8}}));
  for (auto& s : slow) CHECK(s->open());  // still waiting for the rest of their requests
}

TEST_CASE("a partial request is closed by the header timeout", "[slow]") {
  api_daemon d;
  const auto start = clock_type::now();
  // A fresh connection with half a header line, and a kept-alive one that starts a second request.
  tcp_connection fresh("127.0.0.1", d.port, 5s);
  fresh.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  tcp_connection kept("127.0.0.1", d.port, 5s);
  kept.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK_THAT(kept.read_line(), Catch::StartsWith("HTTP/1.1 200"));
  kept.send("GET /health HTTP/1.1\r\nHo");
  CHECK(fresh.closed_within(40s));
  const double fresh_s = std::chrono::duration<double>(clock_type::now() - start).count();
  CHECK(kept.closed_within(10s));
  const double kept_s = std::chrono::duration<double>(clock_type::now() - start).count();
  INFO("closed after " << fresh_s << " s and " << kept_s << " s; the header timeout is 15 s");
  CHECK(fresh_s > 13.0);
  CHECK(fresh_s < 20.0);
  CHECK(kept_s < 20.0);
}

TEST_CASE("connection floods: idle connections make room for new clients, half-sent requests get 503 beyond the bound") {
  // max_concurrent 1 and queue_size 0 give the smallest connection bound, 64.
  api_daemon d("max_concurrent = 1\nqueue_size = 0\n");
  constexpr int bound = 64;

  // 1000 idle connections: the oldest idle ones are closed to let the newest in, and a new
  // client is served at once.
  constexpr int total = 1000;
  std::vector<std::unique_ptr<tcp_connection>> idle;
  for (int i = 0; i < total; ++i) idle.push_back(std::make_unique<tcp_connection>("127.0.0.1", d.port, 10s));
  http_client c = d.client(10s);
  CHECK(ok_json(c.get("/health")).at("status") == "ok");
  CHECK(ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once"}, {"max_tokens", 4}})).at("choices").size() == 1);
  int open = 0;
  for (auto& conn : idle) open += conn->closed_within(0ms) ? 0 : 1;
  INFO(open << " of " << total << " idle connections still open");
  CHECK(open <= bound);
  idle.clear();
  c.close();

  // Connections that have sent part of a request are not idle: beyond the bound, new ones get a
  // complete 503 answer (and the header timeout ends the half-sent ones).
  std::vector<std::unique_ptr<tcp_connection>> partial;
  for (int i = 0; i < bound + 8; ++i) {
    partial.push_back(std::make_unique<tcp_connection>("127.0.0.1", d.port, 10s));
    partial.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n");
  }
  std::this_thread::sleep_for(200ms);  // every one is read once: none is idle any more
  tcp_connection over("127.0.0.1", d.port, 10s);
  const std::string sample = over.read_to_end();
  INFO(sample);
  REQUIRE_THAT(sample, Catch::StartsWith("HTTP/1.1 503"));
  // The refusal is a whole HTTP response: its Content-Length matches its JSON body.
  const auto split = sample.find("\r\n\r\n");
  REQUIRE(split != std::string::npos);
  const std::string head = sample.substr(0, split), body = sample.substr(split + 4);
  CHECK_THAT(head + "\r\n", Catch::Contains("Content-Length: " + std::to_string(body.size()) + "\r\n"));
  CHECK_THAT(head, Catch::Contains("Retry-After:"));
  CHECK(json::parse(body).at("error").at("type") == "server_error");
  partial.clear();  // they go; a new client is served again
  http_client again = d.client(5s);
  http_response r;
  for (int i = 0; i < 200; ++i) {
    r = again.get("/metrics");
    if (r.status == 200) break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(r.status == 200);
  CHECK(metric(r.body, "spite_http_connections_refused_total") >= 1);
}

TEST_CASE("garbage instead of HTTP gets 400 and a close") {
  api_daemon d;
  for (const std::string& junk : {std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 not http\r\n\r\n", 24),
                                  std::string("HELLO THERE\r\n\r\n"), std::string("GET / HTTP/9.9\r\n\r\n"),
                                  std::string("GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n")}) {
    tcp_connection raw("127.0.0.1", d.port, 5s);
    raw.send(junk);
    const std::string text = raw.read_to_end();
    INFO(text);
    CHECK_THAT(text, Catch::StartsWith("HTTP/1.1 400"));
  }
  CHECK(ok_json(d.client().get("/health")).at("status") == "ok");
}

TEST_CASE("a request running past request_timeout_s is stopped with 408, and the daemon goes on") {
  api_daemon d("request_timeout_s = 1\n");
  http_client c = d.client(30s);
  const auto t0 = clock_type::now();
  const auto r = c.post("/v1/completions", {{"model", "tiny"}, {"prompt", "Once"}, {"max_tokens", 4000}, {"logit_bias", no_eos}});
  const auto took = clock_type::now() - t0;
  INFO(r.status << " " << r.body);
  if (r.status == 200) {
    // A machine fast enough to write 4000 tokens in a second: nothing to stop.
    CHECK(took < 1500ms);
  } else {
    check_error(r, 408, "", "server_error");
    CHECK_THAT(r.json().at("error").at("message").get<std::string>(), Catch::Contains("request_timeout_s"));
    CHECK(took < 10s);
  }
  CHECK(ok_json(c.post("/v1/completions", {{"model", "stories"}, {"prompt", "Once"}, {"max_tokens", 2}})).at("choices").size() == 1);
}
