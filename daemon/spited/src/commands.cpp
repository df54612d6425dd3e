// The control commands spited answers (see spite/control/protocol.hpp for the framing).
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "bench_command.hpp"
#include "service.hpp"
#include "spite/control/protocol.hpp"
#include "spite/models/kernel_plan.hpp"

#ifndef SPITE_VERSION
#define SPITE_VERSION "0.0.0"
#endif

namespace spite::daemon {
using nlohmann::json;
namespace codes = control::codes;

namespace {

std::string_view code_of(const error& e) {
  switch (e.code) {
    case errc::not_found: return codes::not_found;
    case errc::busy: return codes::busy;
    case errc::invalid_argument:
    case errc::malformed:
    case errc::unsupported: return codes::bad_request;
    default: return codes::failed;
  }
}

// Text the engine produced and this request's thread has not written yet. The engine thread
// never blocks on a client: when a client stops reading and the outbox fills, the request is
// cancelled instead.
struct outbox {
  static constexpr std::size_t max_bytes = 1 << 20;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::string> texts;
  std::size_t bytes = 0;
  bool overflowed = false;
  std::optional<scheduler::generation_result> done;
};

}  // namespace

json service::models_json() {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (const auto& [name, m] : models_) {
    const auto st = m->engine->stats();
    out.push_back({{"name", name}, {"path", m->spec.path}, {"arch", m->model->arch()}, {"loaded", true},
                   {"on_demand", m->on_demand}, {"keep_alive_s", m->spec.keep_alive_s}, {"n_ctx", m->engine->n_ctx()}, {"in_flight", m->in_flight.load()},
                   {"kernels", m->identity.family + "/" + m->identity.model},
                   {"memory", {{"weights", m->memory.weights}, {"kv", m->memory.kv}, {"scratch", m->memory.scratch},
                               {"total", m->memory.total()}}},
                   {"engine", {{"active", st.active}, {"queued", st.queued}, {"steps", st.steps},
                               {"max_sequences_in_step", st.max_sequences_in_step}}}});
  }
  // Configured models that are not in memory now (loaded on first use).
  for (const auto& s : options_.catalogue) {
    if (models_.count(s.name)) continue;
    out.push_back({{"name", s.name}, {"path", s.path}, {"loaded", false}, {"preload", s.preload}, {"keep_alive_s", s.keep_alive_s}});
  }
  return out;
}

json service::engine_stats_json() {
  std::lock_guard lock(mutex_);
  json out = json::array();
  for (const auto& [name, m] : models_) {
    const auto st = m->engine->stats();
    json ops = json::array();
    for (const auto& op : models::plan_ops(m->file, m->model->hp(), m->kernels->target())) {
      const dispatch::dispatch_choice& c = m->kernels->resolve(op.signature);
      ops.push_back({{"op", op.label}, {"source", c.source}, {"kernel", c.kernel_name}});
    }
    out.push_back({{"model", name}, {"active", st.active}, {"queued", st.queued}, {"steps", st.steps},
                   {"tokens", st.tokens}, {"sequences_in_steps", st.sequences_in_steps},
                   {"max_sequences_in_step", st.max_sequences_in_step}, {"kv_bytes_max", m->memory.kv},
                   {"kv_tokens", st.kv_tokens}, {"kv_tokens_max", st.kv_tokens_max},
                   {"prompt_tokens", st.prompt_tokens}, {"cached_prompt_tokens", st.cached_prompt_tokens},
                   {"in_flight", m->in_flight.load()}, {"kernels", ops}});
  }
  return out;
}

json service::status_json() {
  json models = models_json();
  std::lock_guard lock(mutex_);
  json libs = json::array(), refused = json::array();
  for (const auto& l : kernels_->libraries()) libs.push_back({{"id", l->id()}, {"path", l->path().string()}});
  for (const auto& r : kernels_->rejected()) refused.push_back({{"path", r.path.string()}, {"reason", r.reason}});
  json dirs = json::array();
  for (const auto& d : options_.kernel_dirs) dirs.push_back(d.string());
  return {{"version", SPITE_VERSION},
          {"state", state_},
          {"pid", ::getpid()},
          {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
          {"requests_in_flight", in_flight_.load()},
          {"http", http_address_},
          {"memory", {{"limit", options_.memory_limit}, {"available", available_memory()}}},
          {"models", models},
          {"kernels", {{"generation", kernels_->generation()}, {"dirs", dirs}, {"libraries", libs},
                       {"refused", refused}, {"changes", kernel_events_}}}};
}

json service::dispatch_json(loaded_model& m, bool explain) {
  std::shared_ptr<dispatch::dispatcher> d;
  {
    std::lock_guard lock(mutex_);
    d = m.kernels;
  }
  json out{{"model", m.spec.name}, {"model_arch", m.model->arch()}, {"kernel_family", m.identity.family + "/" + m.identity.model},
           {"target", {{"device", "cpu"}, {"arch", cpu_isa_}, {"archs", cpu_target_.archs}}},
           {"generation", d->kernels().generation()}, {"kernels", json::array()}};
  for (const auto& op : models::plan_ops(m.file, m.model->hp(), d->target())) {
    const dispatch::dispatch_choice& c = d->resolve(op.signature);
    json e{{"op", op.label}, {"source", c.source}, {"kernel", c.kernel_name},
           {"where", c.library ? c.library->path().parent_path().string() + " (" + c.kernel_name + ")"
                               : "built-in generic/generic/" + cpu_isa_}};
    if (explain) {
      e["candidates"] = json::array();
      for (const auto& cand : c.candidates) {
        e["candidates"].push_back({{"source", cand.source}, {"kernel", cand.kernel}, {"score", cand.score}, {"reason", cand.reason}});
      }
    }
    out["kernels"].push_back(std::move(e));
  }
  return out;
}

// {"cmd": "run", "model": NAME, "prompt": TEXT | "messages": [...], "n_predict": N, sampling
// fields...}: streams {"event": "token", "text": ...} and ends with the whole text and the
// engine's step counters.
void service::run(const json& request, control::responder& out) {
  if (!request.contains("model") || !request["model"].is_string()) {
    return out.error(codes::bad_request, "\"model\" (a model name) is required");
  }
  auto lease = acquire(request["model"].get<std::string>());
  if (!lease) return out.error(code_of(lease.err()), lease.err().message);
  loaded_model& m = **lease;
  // A prompt is used as it is; messages are rendered with the model's chat template.
  std::string prompt;
  bool parse_special = false;
  if (request.contains("messages")) {
    const json& msgs = request["messages"];
    if (!msgs.is_array() || msgs.empty() || msgs.size() > 4096) {
      return out.error(codes::bad_request, "\"messages\" must be a non-empty array (at most 4096)");
    }
    auto rendered = m.chat->render_json(nlohmann::ordered_json::parse(msgs.dump()), true);
    if (!rendered) return out.error(codes::bad_request, "chat template: " + rendered.err().message);
    prompt = std::move(*rendered);
    parse_special = true;  // the template's own markers are special tokens
  } else if (request.contains("prompt") && request["prompt"].is_string()) {
    prompt = request["prompt"].get<std::string>();
  } else {
    return out.error(codes::bad_request, "\"prompt\" (a string) or \"messages\" is required");
  }
  scheduler::generation_request g;
  std::int32_t max_tokens = 0;
  try {
    g.n_predict = request.value("n_predict", 128);
    std::lock_guard lock(mutex_);
    max_tokens = options_.max_tokens;
    scheduler::sampling_params& sp = g.sampling;
    sp = options_.sampling;
    sp.temperature = request.value("temperature", sp.temperature);
    sp.top_k = request.value("top_k", sp.top_k);
    sp.top_p = request.value("top_p", sp.top_p);
    sp.min_p = request.value("min_p", sp.min_p);
    sp.repeat_penalty = request.value("repeat_penalty", sp.repeat_penalty);
    sp.seed = request.value("seed", sp.seed);
  } catch (const json::exception& e) {
    return out.error(codes::bad_request, std::string("bad field type: ") + e.what());
  }
  if (g.n_predict < 1 || g.n_predict > max_tokens) {
    return out.error(codes::bad_request, "n_predict must be 1.." + std::to_string(max_tokens));
  }
  // Templates that write the BOS text themselves must not get a second one.
  const auto& vocab = m.tok->vocabulary();
  const auto bos = vocab.special().bos;
  const bool add_special = !(parse_special && vocab.valid(bos) && prompt.starts_with(vocab.text(bos)));
  auto tokens = m.tok->tokenize(prompt, {.add_special = add_special, .parse_special = parse_special});
  if (!tokens) return out.error(codes::bad_request, tokens.err().message);
  g.prompt.assign(tokens->begin(), tokens->end());

  g.deadline = request_deadline();
  auto box = std::make_shared<outbox>();
  auto cancelled = g.cancelled;
  g.on_text = [box, cancelled](std::string_view text) {
    std::lock_guard lock(box->mutex);
    if (box->bytes + text.size() > outbox::max_bytes) {
      box->overflowed = true;
      *cancelled = true;  // the client does not read: stop at the next step
      return;
    }
    box->bytes += text.size();
    box->texts.emplace_back(text);
    box->cv.notify_all();
  };
  g.on_done = [box](const scheduler::generation_result& r) {
    std::lock_guard lock(box->mutex);
    box->done = r;
    box->cv.notify_all();
  };
  in_flight_++;
  struct in_flight_guard {
    std::atomic<int>& n;
    ~in_flight_guard() { n--; }
  } guard{in_flight_};
  if (auto r = m.engine->submit(std::move(g)); !r) {
    return out.error(r.err().code == errc::busy ? codes::busy : codes::bad_request, r.err().message);
  }
  // This request's thread writes to its client; only it waits when the client is slow.
  std::deque<std::string> pending;
  for (;;) {
    bool finished = false;
    {
      std::unique_lock lock(box->mutex);
      box->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !box->texts.empty() || box->done.has_value(); });
      pending.swap(box->texts);
      box->bytes = 0;
      finished = box->done.has_value();
    }
    for (const auto& t : pending) out.event({{"event", "token"}, {"text", t}});
    pending.clear();
    if (out.cancelled() || cancel_all_) *cancelled = true;  // stops at the next step
    if (finished) break;
  }
  const scheduler::generation_result& done = *box->done;
  if (box->overflowed) return out.error(codes::cancelled, "the client did not read its tokens; request cancelled");
  if (done.failure) return out.error(codes::failed, done.failure->message);
  if (cancel_all_ && done.stop_reason == "cancelled") {
    return out.error(codes::shutting_down, "spited stopped before the request finished");
  }
  const auto st = m.engine->stats();
  out.result({{"text", done.text},
              {"prompt_tokens", done.prompt_tokens},
              {"cached_tokens", done.cached_tokens},
              {"generated", done.generated},
              {"stop_reason", done.stop_reason},
              {"engine", {{"steps", st.steps}, {"max_sequences_in_step", st.max_sequences_in_step},
                          {"mean_sequences_per_step", st.steps ? double(st.sequences_in_steps) / double(st.steps) : 0.0}}}});
}

// {"cmd": "load", "model": NAME[, "path": FILE][, "keep_alive": S][, "n_ctx": N]}: a catalogued
// model by name, or any GGUF file under a new name.
void service::load_command(const json& request, control::responder& out) {
  if (!request.contains("model") || !request["model"].is_string()) {
    return out.error(codes::bad_request, "\"model\" (a model name) is required");
  }
  const std::string name = request["model"].get<std::string>();
  result<model_spec> spec = make_error(errc::internal, "");
  try {
    spec = spec_for(name, request.contains("path") ? request["path"].get<std::string>() : std::string());
    if (!spec) return out.error(code_of(spec.err()), spec.err().message);
    spec->keep_alive_s = request.value("keep_alive", spec->keep_alive_s);
    spec->n_ctx = request.value("n_ctx", spec->n_ctx);
  } catch (const json::exception& e) {
    return out.error(codes::bad_request, std::string("bad field type: ") + e.what());
  }
  if (spec->keep_alive_s < -1 || spec->n_ctx < 0) return out.error(codes::bad_request, "keep_alive >= -1, n_ctx >= 0");
  auto m = load(*spec, true);
  if (!m) return out.error(code_of(m.err()), m.err().message);
  out.result({{"model", name}, {"path", (*m)->spec.path}, {"arch", (*m)->model->arch()},
              {"memory", {{"weights", (*m)->memory.weights}, {"kv", (*m)->memory.kv}, {"scratch", (*m)->memory.scratch},
                          {"total", (*m)->memory.total()}}}});
}

void service::unload_command(const json& request, control::responder& out) {
  if (!request.contains("model") || !request["model"].is_string()) {
    return out.error(codes::bad_request, "\"model\" (a model name) is required");
  }
  auto r = unload(request["model"].get<std::string>());
  if (!r) return out.error(code_of(r.err()), r.err().message);
  out.result({{"model", request["model"]}, {"requests_finishing", *r}});
}

void service::handle(const json& request, control::responder& out) {
  const std::string cmd = request["cmd"].get<std::string>();
  // While stopping, only questions are answered: nothing new starts.
  if (shutdown_requested_ && cmd != "status" && cmd != "models") {
    return out.error(codes::shutting_down, "spited is shutting down");
  }
  if (cmd == "status") return out.result(status_json());
  if (cmd == "models") return out.result(models_json());
  if (cmd == "dispatch") {
    const json* name = request.contains("model") ? &request["model"] : nullptr;
    if (name == nullptr || !name->is_string()) return out.error(codes::bad_request, "\"model\" (a model name) is required");
    auto lease = acquire(name->get<std::string>());
    if (!lease) return out.error(code_of(lease.err()), lease.err().message);
    return out.result(dispatch_json(**lease, request.value("explain", false)));
  }
  if (cmd == "run") return run(request, out);
  if (cmd == "load") return load_command(request, out);
  if (cmd == "unload") return unload_command(request, out);
  if (cmd == "bench") {
    if (!request.contains("model") || !request["model"].is_string()) {
      return out.error(codes::bad_request, "\"model\" (a model name) is required");
    }
    auto lease = acquire(request["model"].get<std::string>());
    if (!lease) return out.error(code_of(lease.err()), lease.err().message);
    in_flight_++;
    auto r = bench_command(**lease, request, cpu_threads_, ops_of(**lease), [&out] { return out.cancelled(); });
    in_flight_--;
    if (!r) return out.error(code_of(r.err()), r.err().message);
    return out.result(std::move(*r));
  }
  if (cmd == "reload") {
    if (reload_handler_) {
      if (auto r = reload_handler_(); !r) return out.error(codes::failed, r.err().message);
    } else {
      reload_kernels();
    }
    return out.result(status_json()["kernels"]);
  }
  if (cmd == "shutdown") {
    request_shutdown();
    return out.result({{"state", "stopping"}});
  }
  out.error(codes::unknown_command,
            "unknown command '" + cmd + "' (known: status, models, run, load, unload, dispatch, bench, reload, shutdown)");
}

}  // namespace spite::daemon
