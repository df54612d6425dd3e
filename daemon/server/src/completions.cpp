// POST /v1/chat/completions and /v1/completions: request fields to generate_input (every field
// checked, errors naming the parameter), n choices as n generations, stop strings applied to the
// text as it streams (held back while they may still match), and the OpenAI response or SSE
// chunk sequence.
#include <chrono>
#include <cmath>
#include <ctime>
#include <mutex>
#include <random>

#include "spite/grammar/json_schema.hpp"
#include "spite/server/openai.hpp"
#include "spite/server/harmony.hpp"
#include "spite/server/tools.hpp"

namespace spite::server {
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t max_stop_strings = 16;
constexpr std::size_t max_stop_bytes = 256;
constexpr std::size_t max_prompts = 64;

struct bad_request {
  std::string message, param;
};

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%016llx%08llx", prefix, static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return buf;
}

double number(const json& body, const char* key, double fallback, double lo, double hi) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number()) throw bad_request{std::string(key) + " must be a number", key};
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    throw bad_request{std::string(key) + " must be between " + json(lo).dump() + " and " + json(hi).dump(), key};
  }
  return x;
}

std::int64_t integer(const json& body, const char* key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number_integer()) throw bad_request{std::string(key) + " must be an integer", key};
  // Huge values arrive as unsigned or out of range: both are refused, never wrapped.
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    throw bad_request{std::string(key) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi), key};
  }
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi) {
    throw bad_request{std::string(key) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi), key};
  }
  return x;
}

bool boolean(const json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean()) throw bad_request{std::string(key) + " must be a boolean", key};
  return body[key].get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  std::vector<std::string> out;
  if (!body.contains("stop") || body["stop"].is_null()) return out;
  const json& s = body["stop"];
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > max_stop_strings) throw bad_request{"stop: at most " + std::to_string(max_stop_strings) + " strings", "stop"};
    for (const auto& x : s) {
      if (!x.is_string()) throw bad_request{"stop must be a string or an array of strings", "stop"};
      out.push_back(x.get<std::string>());
    }
  } else {
    throw bad_request{"stop must be a string or an array of strings", "stop"};
  }
  for (const auto& x : out) {
    if (x.empty() || x.size() > max_stop_bytes) throw bad_request{"stop strings must be 1.." + std::to_string(max_stop_bytes) + " bytes", "stop"};
  }
  return out;
}

// A completion prompt in any of its OpenAI forms: a string, an array of strings, an array of token
// ids, or an array of such arrays. One input per prompt, each a copy of `base`.
std::vector<generate_input> completion_prompts(const json& p, const generate_input& base) {
  constexpr const char* forms = "prompt must be a string, an array of strings, an array of token ids or an array of token-id arrays";
  const auto token_ids = [&](const json& a) {
    if (a.empty()) throw bad_request{"prompt: a token-id array must not be empty", "prompt"};
    std::vector<std::int32_t> ids;
    ids.reserve(a.size());
    for (const auto& t : a) {
      // Range against the model's vocabulary is checked when the prompt is evaluated.
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > INT32_MAX) {
        throw bad_request{"prompt: token ids must be non-negative integers", "prompt"};
      }
      ids.push_back(static_cast<std::int32_t>(t.get<std::int64_t>()));
    }
    return ids;
  };
  std::vector<generate_input> out;
  const auto add = [&](std::string text, std::vector<std::int32_t> ids) {
    generate_input each = base;
    each.prompt = std::move(text);
    each.prompt_tokens = std::move(ids);
    out.push_back(std::move(each));
  };
  if (p.is_string()) {
    add(p.get<std::string>(), {});
    return out;
  }
  if (!p.is_array() || p.empty()) throw bad_request{forms, "prompt"};
  if (p[0].is_number_integer()) {
    add({}, token_ids(p));
    return out;
  }
  if (p.size() > max_prompts) throw bad_request{"prompt: at most " + std::to_string(max_prompts) + " prompts", "prompt"};
  for (const auto& x : p) {
    if (x.is_string() && p[0].is_string()) {
      add(x.get<std::string>(), {});
    } else if (x.is_array() && p[0].is_array()) {
      add({}, token_ids(x));
    } else {
      throw bad_request{forms + std::string(" (not mixed)"), "prompt"};
    }
  }
  return out;
}

// Message content as text: a string, or an array of parts of which only text is understood.
json normalize_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) throw bad_request{"messages must be a non-empty array", "messages"};
  if (messages.size() > 4096) throw bad_request{"messages: at most 4096", "messages"};
  json out = json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      throw bad_request{where + " must be an object with a string role", "messages"};
    }
    json copy = m;
    if (m.contains("content") && m["content"].is_array()) {
      std::string text;
      for (const auto& part : m["content"]) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
          throw bad_request{where + ".content: only text parts are supported (got type '" +
                                (part.is_object() ? part.value("type", "?") : std::string("?")) + "')",
                            "messages"};
        }
        text += part["text"].get<std::string>();
      }
      copy["content"] = text;
    } else if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null()) {
      throw bad_request{where + ".content must be a string or an array of parts", "messages"};
    }
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

struct choice_state {
  std::shared_ptr<generation> gen;
  std::string text;  // everything emitted (non-streaming answer)
  std::string held;  // the end that might still become a stop string
  std::string finish_reason;
  bool done = false, stopped = false, role_sent = false;
  std::int32_t completion_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  clock_type::time_point last_token{};
  std::string raw;  // tool mode without streaming: the whole answer, parsed at the end
  std::optional<tool_call_stream> tool_stream;  // tool mode, streaming
  std::optional<harmony_stream> harmony;        // gpt-oss: its channels split as they stream
  std::string reasoning;                        // gpt-oss: the analysis channel (non-streaming answer)
  json logprobs = json::array();          // every token's entry (non-streaming answer)
  json pending_logprobs = json::array();  // entries not yet sent with a chunk
  json tool_calls;                         // the calls found, when the choice made any
};

struct completion_job : std::enable_shared_from_this<completion_job> {
  std::shared_ptr<openai_api> api;
  std::shared_ptr<http_responder> out;
  std::string endpoint;
  bool chat = true, stream = false, include_usage = false, want_logprobs = false;
  bool tool_mode = false;
  bool harmony = false;  // the model answers in gpt-oss's harmony channels
  bool echo_logprobs = false;  // completions: echo with logprobs gives the prompt's own too
  tool_format tools_format = tool_format::generic;
  std::string id, model, echo_prefix;
  std::int64_t created = 0;
  std::vector<std::string> stop;
  std::mutex mutex;
  std::vector<choice_state> choices;
  int n_per_prompt = 1;
  int finished = 0;
  bool first_token_seen = false, failed = false;
  error failure;
  clock_type::time_point started = clock_type::now();

  json prompt_logprobs = json::array();  // echo: the prompt tokens' entries

  json chunk_base() const {
    return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
            {"model", model}, {"system_fingerprint", "spite-" + api->options_.version}};
  }

  static json bytes_of(const std::string& t) {
    json b = json::array();
    for (unsigned char c : t) b.push_back(c);
    return b;
  }
  json entry(const token_logprob_entry& e) const {
    json top = json::array();
    for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_of(t)}});
    return {{"token", e.token}, {"logprob", std::isnan(e.logprob) ? json(nullptr) : json(e.logprob)}, {"bytes", bytes_of(e.token)},
            {"top_logprobs", top}};
  }
  // The logprobs object of a choice: chat's {"content": [...]}, or the legacy completion form.
  json logprobs_object(const json& entries, std::size_t text_offset) const {
    if (!want_logprobs) return nullptr;
    if (chat) return {{"content", entries}};
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const auto& e : entries) {
      tokens.push_back(e["token"]);
      lps.push_back(e["logprob"]);
      json top = json::object();
      for (const auto& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
      tops.push_back(e["logprob"].is_null() ? json(nullptr) : top);
      offsets.push_back(text_offset);
      text_offset += e["token"].get<std::string>().size();
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }

  void send_chunk(json chunk) {
    if (include_usage) chunk["usage"] = nullptr;
    if (!out->write("data: " + chunk.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n")) cancel_all();
  }

  // Generations are started, cancelled by the client leaving (an I/O thread) and by the
  // stream falling behind; gens_mutex orders those.
  std::mutex gens_mutex;
  bool cancelled = false;
  void cancel_all() {
    std::lock_guard lock(gens_mutex);
    cancelled = true;
    for (auto& c : choices) {
      if (c.gen) c.gen->cancel();
    }
  }
  void attach(std::size_t i, std::shared_ptr<generation> g) {
    std::lock_guard lock(gens_mutex);
    if (cancelled) g->cancel();
    choices[i].gen = std::move(g);
  }

  // Text that is final for choice i. With tools, text that may still become a tool call is
  // held until it is clear.
  void emit(std::size_t i, const std::string& text) {
    choice_state& c = choices[i];
    if (harmony) {
      if (!c.harmony) c.harmony.emplace();
      emit_harmony(i, c.harmony->feed(text));
      return;
    }
    if (tool_mode && !stream) {
      // The whole answer is parsed at the end, so a call after some text (a thinking block, a
      // sentence) is found too.
      c.raw += text;
      return;
    }
    if (tool_mode) {
      if (!c.tool_stream) c.tool_stream.emplace(tools_format);
      const std::string ready = c.tool_stream->feed(text);
      if (!ready.empty()) emit_text(i, ready);
      return;
    }
    emit_text(i, text);
  }

  void emit_harmony(std::size_t i, const harmony_stream::delta& d) {
    if (!d.reasoning.empty()) emit_reasoning(i, d.reasoning);
    if (!d.content.empty()) emit_text(i, d.content);
  }

  // The model's reasoning: `reasoning_content` of the message, or of a delta.
  void emit_reasoning(std::size_t i, const std::string& text) {
    choice_state& c = choices[i];
    if (!stream) {
      c.reasoning += text;
      return;
    }
    if (!c.role_sent) emit_text(i, "");  // the role chunk first
    json ch = chunk_base();
    ch["choices"] = json::array({{{"index", i}, {"delta", {{"reasoning_content", text}}}, {"logprobs", nullptr},
                                  {"finish_reason", nullptr}}});
    send_chunk(std::move(ch));
  }

  // The OpenAI tool_calls of a finished choice.
  static json tool_calls_json(const std::vector<tool_call>& calls) {
    json out = json::array();
    for (std::size_t k = 0; k < calls.size(); ++k) {
      out.push_back({{"index", k}, {"id", random_id("call_")}, {"type", "function"},
                     {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}});
    }
    return out;
  }

  // Into the answer, or out as a chunk.
  void emit_text(std::size_t i, const std::string& text) {
    choice_state& c = choices[i];
    if (!stream) {
      c.text += text;
      return;
    }
    if (chat && !c.role_sent) {
      c.role_sent = true;
      json ch = chunk_base();
      ch["choices"] = json::array({{{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                                    {"finish_reason", nullptr}}});
      send_chunk(std::move(ch));
    }
    if (text.empty()) return;
    json ch = chunk_base();
    json lp = logprobs_object(c.pending_logprobs, c.text.size());
    c.pending_logprobs = json::array();
    c.text += text;  // kept for text offsets
    if (chat) {
      ch["choices"] = json::array({{{"index", i}, {"delta", {{"content", text}}}, {"logprobs", lp}, {"finish_reason", nullptr}}});
    } else {
      ch["choices"] = json::array({{{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", nullptr}}});
    }
    send_chunk(std::move(ch));
  }

  void on_token(std::size_t i, const token_event& t) {
    std::lock_guard lock(mutex);
    choice_state& c = choices[i];
    const auto now = clock_type::now();
    if (!first_token_seen) {
      first_token_seen = true;
      api->metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - started).count());
    } else if (c.last_token != clock_type::time_point{}) {
      api->metrics_.inter_token.observe(std::chrono::duration<double>(now - c.last_token).count());
    }
    if (t.token) {  // log-probabilities come before the token's text
      if (c.stopped) return;
      json e = entry(*t.token);
      c.logprobs.push_back(e);
      c.pending_logprobs.push_back(std::move(e));
      return;
    }
    c.last_token = now;
    if (c.stopped || t.text.empty()) return;
    c.held += t.text;
    // A stop string ends the choice where it starts; it is not part of the answer.
    std::size_t at = std::string::npos;
    for (const auto& s : stop) at = std::min(at, c.held.find(s));
    if (at != std::string::npos) {
      emit(i, c.held.substr(0, at));
      c.held.clear();
      c.stopped = true;
      std::lock_guard g(gens_mutex);
      if (c.gen) c.gen->cancel();
      return;
    }
    std::size_t keep = 0;  // the longest end of `held` that begins a stop string
    for (const auto& s : stop) {
      for (std::size_t k = std::min(s.size() - 1, c.held.size()); k > keep; --k) {
        if (c.held.compare(c.held.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
    emit(i, c.held.substr(0, c.held.size() - keep));
    c.held.erase(0, c.held.size() - keep);
  }

  void on_done(std::size_t i, const generate_outcome& o) {
    std::lock_guard lock(mutex);
    choice_state& c = choices[i];
    c.done = true;
    c.completion_tokens = o.completion_tokens;
    c.prompt_tokens = o.prompt_tokens;
    c.cached_tokens = o.cached_tokens;
    if (o.failure) {
      failed = true;
      failure = *o.failure;
      c.finish_reason = "error";
      if (stream) {
        out->write("data: " + error_body(o.failure->message, "server_error") + "\n\n");
      }
    } else {
      if (!c.stopped) emit(i, c.held);
      c.held.clear();
      c.finish_reason = c.stopped ? "stop" : o.stop_reason == "length" ? "length" : "stop";
      if (c.harmony) {
        // Its content went out as it came; a call is a message of its own in the raw text.
        emit_harmony(i, c.harmony->finish());
        if (tool_mode) c.raw = c.harmony->raw();
      } else if (tool_mode) {
        if (c.tool_stream) {
          auto rest = c.tool_stream->finish();
          if (!rest.content.empty()) emit_text(i, rest.content);
          c.raw = std::move(rest.call);
        }
      }
      if (tool_mode && !c.raw.empty()) {
        std::string content;
        auto calls = parse_tool_calls(tools_format, c.raw, content);
        if (calls) {
          c.finish_reason = "tool_calls";
          c.tool_calls = tool_calls_json(*calls);
          if (!content.empty() && !c.harmony) emit_text(i, content);
          if (stream) {
            if (chat && !c.role_sent) emit_text(i, "");
            for (const auto& call : c.tool_calls) {
              // The call's head first, then its arguments, as OpenAI streams them.
              json head = call;
              head["function"]["arguments"] = "";
              json ch = chunk_base();
              ch["choices"] = json::array({{{"index", i}, {"delta", {{"tool_calls", json::array({head})}}}, {"logprobs", nullptr},
                                            {"finish_reason", nullptr}}});
              send_chunk(std::move(ch));
              json args{{"index", call["index"]}, {"function", {{"arguments", call["function"]["arguments"]}}}};
              ch = chunk_base();
              ch["choices"] = json::array({{{"index", i}, {"delta", {{"tool_calls", json::array({args})}}}, {"logprobs", nullptr},
                                            {"finish_reason", nullptr}}});
              send_chunk(std::move(ch));
            }
          }
        } else if (!c.harmony) {
          emit_text(i, c.raw);
        }
        c.raw.clear();
      }
      if (stream) {
        json ch = chunk_base();
        ch["choices"] = json::array({chat ? json{{"index", i}, {"delta", json::object()}, {"logprobs", nullptr},
                                                 {"finish_reason", c.finish_reason}}
                                          : json{{"index", i}, {"text", ""}, {"logprobs", nullptr},
                                                 {"finish_reason", c.finish_reason}}});
        send_chunk(std::move(ch));
      }
    }
    if (++finished < static_cast<int>(choices.size())) return;
    complete();
  }

  json usage() const {
    // Each prompt counts once, however many choices it has; every choice's tokens count.
    // cached: the prompt's tokens that no choice had to evaluate (the fewest over its choices).
    std::int32_t completion = 0, prompt_tokens = 0, cached = 0;
    const auto per_prompt = static_cast<std::size_t>(n_per_prompt);
    for (std::size_t i = 0; i < choices.size(); ++i) {
      completion += choices[i].completion_tokens;
      if (i % per_prompt != 0) continue;
      prompt_tokens += choices[i].prompt_tokens;
      std::int32_t least = choices[i].cached_tokens;
      for (std::size_t j = i + 1; j < std::min(choices.size(), i + per_prompt); ++j) least = std::min(least, choices[j].cached_tokens);
      cached += least;
    }
    return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion}, {"total_tokens", prompt_tokens + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  void complete() {
    const json u = usage();
    api->metrics_.tokens(u["prompt_tokens"].get<std::int64_t>(), u["completion_tokens"].get<std::int64_t>(),
                         u["prompt_tokens_details"]["cached_tokens"].get<std::int64_t>());
    if (stream) {
      if (include_usage && !failed) {
        json ch = chunk_base();
        ch["choices"] = json::array();
        ch["usage"] = u;
        out->write("data: " + ch.dump() + "\n\n");
      }
      out->write("data: [DONE]\n\n");
      out->end_stream();
      api->metrics_.request(endpoint, 200);
      return;
    }
    if (failed) {
      // A request over request_timeout_s is 408 (clients may retry); anything else 500/503.
      const int status = failure.code == errc::out_of_range ? 408 : failure.code == errc::unavailable ? 503 : 500;
      return api->answer(endpoint, *out, status,
                         error_body(failure.message.empty() ? "generation failed" : failure.message, "server_error"));
    }
    json body{{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created}, {"model", model},
              {"system_fingerprint", "spite-" + api->options_.version}, {"choices", json::array()}, {"usage", u}};
    for (std::size_t i = 0; i < choices.size(); ++i) {
      const choice_state& c = choices[i];
      if (chat) {
        json message{{"role", "assistant"}, {"content", c.text}};
        if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
        if (!c.tool_calls.is_null()) {
          if (c.text.empty()) message["content"] = nullptr;
          message["tool_calls"] = c.tool_calls;
        }
        body["choices"].push_back({{"index", i}, {"message", message}, {"logprobs", logprobs_object(c.logprobs, 0)},
                                   {"finish_reason", c.finish_reason}});
      } else {
        json entries = prompt_logprobs;
        for (const auto& e : c.logprobs) entries.push_back(e);
        body["choices"].push_back({{"index", i}, {"text", echo_prefix + c.text},
                                   {"logprobs", logprobs_object(entries, 0)}, {"finish_reason", c.finish_reason}});
      }
    }
    api->answer(endpoint, *out, 200, body.dump(-1, ' ', false, json::error_handler_t::replace));
  }
};

void openai_api::completions(const http_request& r, std::shared_ptr<http_responder> out, bool chat) {
  const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  if (stopping_) {
    return answer(endpoint, *out, 503, error_body("spited is shutting down", "server_error"), {{"Retry-After", "5"}});
  }
  json body;
  try {
    body = json::parse(r.body);
  } catch (const json::exception& e) {
    return answer(endpoint, *out, 400, error_body(std::string("the body is not valid JSON: ") + e.what()));
  }
  auto job = std::make_shared<completion_job>();
  job->api = shared_from_this();
  job->out = out;
  job->endpoint = endpoint;
  job->chat = chat;
  job->created = static_cast<std::int64_t>(std::time(nullptr));
  job->id = random_id(chat ? "chatcmpl-" : "cmpl-");
  std::vector<generate_input> inputs;  // one per prompt; each runs n times
  int n = 1;
  try {
    if (!body.is_object()) throw bad_request{"the body must be a JSON object", ""};
    if (!body.contains("model") || !body["model"].is_string()) throw bad_request{"model (a string) is required", "model"};
    job->model = body["model"].get<std::string>();
    generate_input in;
    in.model = job->model;
    job->stream = boolean(body, "stream", false);
    if (body.contains("stream_options") && body["stream_options"].is_object()) {
      job->include_usage = boolean(body["stream_options"], "include_usage", false);
    }
    n = static_cast<int>(integer(body, "n", 1, 1, options_.max_choices));
    const std::int64_t max_tokens = integer(body, "max_tokens", options_.max_tokens, 1, options_.max_tokens);
    in.max_tokens = static_cast<std::int32_t>(integer(body, "max_completion_tokens", max_tokens, 1, options_.max_tokens));
    scheduler::sampling_params& sp = in.sampling;
    sp = options_.defaults;
    sp.temperature = static_cast<float>(number(body, "temperature", sp.temperature, 0, 2));
    sp.top_p = static_cast<float>(number(body, "top_p", sp.top_p, 0, 1));
    if (sp.top_p <= 0) throw bad_request{"top_p must be greater than 0", "top_p"};
    sp.top_k = static_cast<int>(integer(body, "top_k", sp.top_k, 0, 1 << 20));
    sp.min_p = static_cast<float>(number(body, "min_p", sp.min_p, 0, 1));
    sp.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", sp.repeat_penalty, 0.01, 10));
    sp.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0, -2, 2));
    sp.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0, -2, 2));
    const bool seeded = body.contains("seed") && !body["seed"].is_null();
    sp.seed = static_cast<std::uint64_t>(integer(body, "seed", 0, INT64_MIN, INT64_MAX));
    if (!seeded && !options_.default_seed_fixed) sp.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
    if (!seeded && options_.default_seed_fixed) sp.seed = options_.defaults.seed;
    if (body.contains("logit_bias") && !body["logit_bias"].is_null()) {
      const json& lb = body["logit_bias"];
      if (!lb.is_object() || lb.size() > 1024) throw bad_request{"logit_bias must be an object of at most 1024 token ids", "logit_bias"};
      for (const auto& [k, v] : lb.items()) {
        std::size_t used = 0;
        long id = -1;
        try {
          id = std::stol(k, &used);
        } catch (...) {
        }
        if (used != k.size() || id < 0 || id > INT32_MAX) throw bad_request{"logit_bias keys must be token ids", "logit_bias"};
        if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100) {
          throw bad_request{"logit_bias values must be -100..100", "logit_bias"};
        }
        // OpenAI: -100 bans the token, 100 all but forces it.
        const double b = v.get<double>();
        sp.logit_bias.emplace_back(static_cast<std::int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b));
      }
    }
    // Chat: logprobs (bool) + top_logprobs 0..20. Completions: logprobs as the number of alternatives 0..5.
    if (chat) {
      job->want_logprobs = boolean(body, "logprobs", false);
      const std::int64_t top = integer(body, "top_logprobs", -1, 0, 20);
      if (top >= 0 && !job->want_logprobs) throw bad_request{"top_logprobs needs logprobs: true", "top_logprobs"};
      if (job->want_logprobs) in.top_logprobs = static_cast<int>(std::max<std::int64_t>(top, 0));
    } else if (body.contains("logprobs") && !body["logprobs"].is_null()) {
      in.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, 0, 5));
      job->want_logprobs = true;
    }
    // Structured output is enforced while sampling; what cannot be enforced is refused.
    if (body.contains("response_format") && !body["response_format"].is_null()) {
      const json& rf = body["response_format"];
      if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
        throw bad_request{"response_format must be an object with a type", "response_format"};
      }
      const std::string type = rf["type"].get<std::string>();
      if (type == "json_object") {
        auto g = grammar::json_object_grammar();
        if (!g) throw bad_request{g.err().message, "response_format"};
        sp.grammar = std::move(*g);
      } else if (type == "json_schema") {
        if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema")) {
          throw bad_request{"response_format.json_schema.schema is required", "response_format"};
        }
        auto g = grammar::json_schema_grammar(nlohmann::ordered_json::parse(rf["json_schema"]["schema"].dump()));
        if (!g) throw bad_request{"response_format.json_schema: " + g.err().message, "response_format"};
        sp.grammar = std::move(*g);
      } else if (type != "text") {
        throw bad_request{"response_format type must be text, json_object or json_schema", "response_format"};
      }
    }
    if (body.contains("grammar") && !body["grammar"].is_null()) {
      if (!body["grammar"].is_string()) throw bad_request{"grammar must be a GBNF string", "grammar"};
      if (sp.grammar) throw bad_request{"grammar and response_format cannot be combined", "grammar"};
      auto g = grammar::grammar::parse(body["grammar"].get<std::string>());
      if (!g) throw bad_request{g.err().message, "grammar"};
      sp.grammar = std::move(*g);
    }
    std::vector<tool_spec> tools;
    std::string tool_choice = "auto", named_tool;
    bool parallel_tools = boolean(body, "parallel_tool_calls", true);
    if (body.contains("tools") && !body["tools"].is_null() && !body["tools"].empty()) {
      if (!chat) throw bad_request{"tools need /v1/chat/completions", "tools"};
      auto parsed = parse_tools(body["tools"]);
      if (!parsed) throw bad_request{parsed.err().message, "tools"};
      tools = std::move(*parsed);
      if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
        const json& tc = body["tool_choice"];
        if (tc.is_string()) {
          tool_choice = tc.get<std::string>();
          if (tool_choice != "none" && tool_choice != "auto" && tool_choice != "required") {
            throw bad_request{"tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice"};
          }
        } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
                   tc["function"].is_object() && tc["function"].contains("name") && tc["function"]["name"].is_string()) {
          tool_choice = "named";
          named_tool = tc["function"]["name"].get<std::string>();
          bool known = false;
          for (const auto& t : tools) known = known || t.name == named_tool;
          if (!known) throw bad_request{"tool_choice names '" + named_tool + "', which is not in tools", "tool_choice"};
        } else {
          throw bad_request{"tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice"};
        }
      }
    } else if (body.contains("tool_choice") && !body["tool_choice"].is_null() && body["tool_choice"] != "none" &&
               body["tool_choice"] != "auto") {
      throw bad_request{"tool_choice needs tools", "tool_choice"};
    }
    if (!tools.empty() && tool_choice != "none") {
      auto source = backend_->chat_template(job->model);
      if (!source) {
        const int status = source.err().code == errc::not_found ? 404 : 400;
        return answer(endpoint, *out, status, error_body(source.err().message, "invalid_request_error", "model",
                                                         status == 404 ? "model_not_found" : ""));
      }
      job->tool_mode = true;
      job->tools_format = detect_tool_format(*source);
      job->harmony = job->tools_format == tool_format::gpt_oss;
      if (tool_choice == "required" || tool_choice == "named") {
        if (sp.grammar) throw bad_request{"a forced tool call cannot be combined with response_format or grammar", "tool_choice"};
        std::vector<tool_spec> allowed;
        for (const auto& t : tools) {
          if (tool_choice == "required" || t.name == named_tool) allowed.push_back(t);
        }
        auto gbnf = tool_call_gbnf(job->tools_format, allowed, parallel_tools && tool_choice == "required");
        if (!gbnf) throw bad_request{gbnf.err().message, "tools"};
        auto g = grammar::grammar::parse(*gbnf);
        if (!g) throw bad_request{"tools: " + g.err().message, "tools"};
        sp.grammar = std::move(*g);
      }
    }
    if (chat && !job->tool_mode) {
      // gpt-oss answers in channels whatever the request; an unknown model fails later, with 404.
      auto source = backend_->chat_template(job->model);
      job->harmony = source && detect_tool_format(*source) == tool_format::gpt_oss;
    }
    // gpt-oss writes its channels and calls with special tokens: the text must show them.
    in.render_special = job->harmony;
    job->stop = stop_strings(body);
    if (chat) {
      if (!body.contains("messages")) throw bad_request{"messages is required", "messages"};
      json messages = normalize_messages(body["messages"]);
      if (job->tool_mode) {
        if (job->tools_format == tool_format::generic) {
          // The template knows no tools: they are described in a system message.
          const std::string prompt = generic_tool_prompt(tools);
          if (!messages.empty() && messages[0].value("role", "") == "system" && messages[0]["content"].is_string()) {
            messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + prompt;
          } else {
            messages.insert(messages.begin(), json{{"role", "system"}, {"content", prompt}});
          }
        } else {
          in.tools = nlohmann::ordered_json::parse(body["tools"].dump());
        }
      }
      in.messages = nlohmann::ordered_json::parse(messages.dump());
      inputs.push_back(std::move(in));
    } else {
      if (!body.contains("prompt")) throw bad_request{"prompt is required", "prompt"};
      std::optional<std::string> suffix;
      if (body.contains("suffix") && !body["suffix"].is_null()) {
        if (!body["suffix"].is_string()) throw bad_request{"suffix must be a string", "suffix"};
        if (!body["suffix"].get<std::string>().empty()) suffix = body["suffix"].get<std::string>();
      }
      std::vector<generate_input> prompts = completion_prompts(body["prompt"], in);
      for (auto& each : prompts) each.suffix = suffix;
      if (boolean(body, "echo", false)) {
        if (prompts.size() != 1) throw bad_request{"echo works with one prompt", "echo"};
        if (suffix) throw bad_request{"echo cannot be combined with suffix", "echo"};
        job->echo_logprobs = job->want_logprobs;
        if (prompts[0].prompt_tokens.empty()) {
          job->echo_prefix = prompts[0].prompt;
        } else {
          auto text = backend_->detokenize(job->model, prompts[0].prompt_tokens);
          if (!text) {
            const int status = text.err().code == errc::not_found ? 404 : 400;
            return answer(endpoint, *out, status, error_body(text.err().message, "invalid_request_error", "model",
                                                             status == 404 ? "model_not_found" : ""));
          }
          job->echo_prefix = std::move(*text);
        }
      }
      for (auto& each : prompts) inputs.push_back(std::move(each));
    }
  } catch (const bad_request& e) {
    return answer(endpoint, *out, 400, error_body(e.message, "invalid_request_error", e.param));
  } catch (const json::exception& e) {
    return answer(endpoint, *out, 400, error_body(std::string("bad field: ") + e.what()));
  }

  // echo + logprobs: the prompt's tokens come first in every choice's logprobs.
  if (job->echo_logprobs) {
    auto entries = backend_->prompt_logprobs(inputs[0], inputs[0].top_logprobs);
    if (!entries) {
      const int status = entries.err().code == errc::not_found ? 404 : entries.err().code == errc::unavailable ? 503 : 400;
      return answer(endpoint, *out, status, error_body(entries.err().message, status >= 500 ? "server_error" : "invalid_request_error"));
    }
    json prompt_entries = json::array();
    for (const auto& e : *entries) prompt_entries.push_back(job->entry(e));
    job->prompt_logprobs = std::move(prompt_entries);
  }
  // Every choice is its own generation, started together so they batch.
  const std::size_t total = inputs.size() * static_cast<std::size_t>(n);
  job->choices.resize(total);
  job->n_per_prompt = n;
  out->on_close([weak = std::weak_ptr<completion_job>(job)] {
    if (auto j = weak.lock()) j->cancel_all();  // the client left: stop at the next step
  });
  std::lock_guard lock(job->mutex);  // callbacks wait until every choice is started
  for (std::size_t i = 0; i < total; ++i) {
    generate_input in = inputs[i / static_cast<std::size_t>(n)];
    in.sampling.seed += i % static_cast<std::size_t>(n);  // the choices of one prompt differ
    auto g = backend_->generate(in, {.on_token = [job, i](const token_event& t) { job->on_token(i, t); },
                                     .on_done = [job, i](const generate_outcome& o) { job->on_done(i, o); }});
    if (!g) {
      job->cancel_all();
      const error& e = g.err();
      const int status = e.code == errc::not_found     ? 404
                         : e.code == errc::busy        ? 429
                         : e.code == errc::unavailable ? 503
                         : e.code == errc::internal    ? 500
                                                       : 400;
      const std::string type = status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
      const std::string code = status == 404 ? "model_not_found" : "";
      header_list headers;
      if (status == 429 || status == 503) headers.emplace_back("Retry-After", "1");
      if (i == 0) {  // nothing started: a plain HTTP error, streaming or not
        return answer(endpoint, *out, status, error_body(e.message, type, status == 404 ? "model" : "", code), headers);
      }
      // Later choices failing (the queue filled up): the started ones end, the missing ones fail.
      for (std::size_t k = i; k < total; ++k) {
        job->choices[k].done = true;
        job->choices[k].finish_reason = "error";
      }
      job->failed = true;
      job->finished += static_cast<int>(total - i);
      break;
    }
    job->attach(i, std::move(*g));
    // The stream begins once the first generation is accepted (callbacks wait for the lock).
    if (i == 0 && job->stream) {
      out->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
      for (std::size_t k = 0; k < total && !job->echo_prefix.empty(); ++k) {
        job->choices[k].pending_logprobs = job->prompt_logprobs;
        job->emit_text(k, job->echo_prefix);
      }
    }
  }
}

}  // namespace spite::server
