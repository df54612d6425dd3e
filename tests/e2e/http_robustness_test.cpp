// spited's OpenAI HTTP API under pressure and abuse: API keys, body limits, 429 on a full queue,
// 503 while draining; a client leaving mid-stream cancels its generation; hostile clients
// (slowloris, a flood of idle connections, garbage instead of HTTP); request timeouts.
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
