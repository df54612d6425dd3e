// The control commands spited answers (see spite/control/protocol.hpp for the framing).
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <optional>

#include "spite/control/protocol.hpp"
#include "service.hpp"
#include "spite/models/kernel_plan.hpp"

#ifndef SPITE_VERSION
#define SPITE_VERSION "0.0.0"
#endif

namespace spite::daemon {
using nlohmann::json;
namespace codes = control::codes;

json service::status_json() {
  std::lock_guard lock(mutex_);
  json models = json::array();
  for (const auto& m : models_) {
    const auto st = m->engine->stats();
    models.push_back({{"name", m->name}, {"path", m->path}, {"arch", m->model->arch()},
                      {"kernels", m->identity.family + "/" + m->identity.model},
                      {"engine", {{"active", st.active}, {"queued", st.queued}, {"steps", st.steps},
                                  {"max_sequences_in_step", st.max_sequences_in_step}}}});
  }
  json libs = json::array(), refused = json::array();
  for (const auto& l : kernels_->libraries()) libs.push_back({{"id", l->id()}, {"path", l->path().string()}});
  for (const auto& r : kernels_->rejected()) refused.push_back({{"path", r.path.string()}, {"reason", r.reason}});
  json dirs = json::array();
  for (const auto& d : kernel_dirs_) dirs.push_back(d.string());
  return {{"version", SPITE_VERSION},
          {"state", state_},
          {"pid", ::getpid()},
          {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
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
  json out{{"model", m.name}, {"model_arch", m.model->arch()}, {"kernel_family", m.identity.family + "/" + m.identity.model},
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

// {"cmd": "run", "model": NAME, "prompt": TEXT, "n_predict": N, sampling fields...}: streams
// {"event": "token", "text": ...} and ends with the whole text and the engine's step counters.
void service::run(const json& request, control::responder& out) {
  const std::string name = request.value("model", "");
  loaded_model* m = find(name);
  if (m == nullptr) {
    // A path names the model loaded from it.
    for (auto& x : models_) {
      std::error_code ec;
      if (!name.empty() && std::filesystem::equivalent(x->path, name, ec)) m = x.get();
    }
  }
  if (m == nullptr) return out.error(codes::not_found, "no model '" + name + "' is loaded");
  // A prompt is used as it is; messages are rendered with the model's chat template.
  std::string prompt;
  bool parse_special = false;
  if (request.contains("messages")) {
    const json& msgs = request["messages"];
    if (!msgs.is_array() || msgs.empty() || msgs.size() > 4096) {
      return out.error(codes::bad_request, "\"messages\" must be a non-empty array (at most 4096)");
    }
    auto rendered = m->chat->render_json(nlohmann::ordered_json::parse(msgs.dump()), true);
    if (!rendered) return out.error(codes::bad_request, "chat template: " + rendered.err().message);
    prompt = std::move(*rendered);
    parse_special = true;  // the template's own markers are special tokens
  } else if (request.contains("prompt") && request["prompt"].is_string()) {
    prompt = request["prompt"].get<std::string>();
  } else {
    return out.error(codes::bad_request, "\"prompt\" (a string) or \"messages\" is required");
  }
  scheduler::generation_request g;
  try {
    g.n_predict = request.value("n_predict", 128);
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
  if (g.n_predict < 1 || g.n_predict > options_.max_tokens) {
    return out.error(codes::bad_request, "n_predict must be 1.." + std::to_string(options_.max_tokens));
  }
  // Templates that write the BOS text themselves must not get a second one.
  const auto& vocab = m->tok->vocabulary();
  const auto bos = vocab.special().bos;
  const bool add_special = !(parse_special && vocab.valid(bos) && prompt.starts_with(vocab.text(bos)));
  auto tokens = m->tok->tokenize(prompt, {.add_special = add_special, .parse_special = parse_special});
  if (!tokens) return out.error(codes::bad_request, tokens.err().message);
  g.prompt.assign(tokens->begin(), tokens->end());

  std::mutex done_mutex;
  std::condition_variable done_cv;
  std::optional<scheduler::generation_result> done;
  g.on_text = [&out](std::string_view text) { out.event({{"event", "token"}, {"text", text}}); };
  g.on_done = [&](const scheduler::generation_result& r) {
    std::lock_guard lock(done_mutex);
    done = r;
    done_cv.notify_all();
  };
  auto cancelled = g.cancelled;
  if (auto r = m->engine->submit(std::move(g)); !r) {
    return out.error(r.err().code == errc::busy ? codes::busy : codes::bad_request, r.err().message);
  }
  std::unique_lock lock(done_mutex);
  while (!done_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done.has_value(); })) {
    if (out.cancelled()) *cancelled = true;  // the client went away: stop at the next step
  }
  if (done->failure) return out.error(codes::failed, done->failure->message);
  const auto st = m->engine->stats();
  out.result({{"text", done->text},
              {"prompt_tokens", done->prompt_tokens},
              {"generated", done->generated},
              {"stop_reason", done->stop_reason},
              {"engine", {{"steps", st.steps}, {"max_sequences_in_step", st.max_sequences_in_step},
                          {"mean_sequences_per_step", st.steps ? double(st.sequences_in_steps) / double(st.steps) : 0.0}}}});
}

void service::handle(const json& request, control::responder& out) {
  const std::string cmd = request["cmd"].get<std::string>();
  if (shutdown_requested_ && cmd != "status") return out.error(codes::shutting_down, "spited is shutting down");
  if (cmd == "status") return out.result(status_json());
  if (cmd == "models") return out.result(status_json()["models"]);
  if (cmd == "dispatch") {
    const json* name = request.contains("model") ? &request["model"] : nullptr;
    if (name == nullptr || !name->is_string()) return out.error(codes::bad_request, "\"model\" (a model name) is required");
    loaded_model* m = find(name->get<std::string>());
    if (m == nullptr) {
      std::string known;
      for (const auto& x : models_) known += (known.empty() ? "" : ", ") + x->name;
      return out.error(codes::not_found, "no model '" + name->get<std::string>() + "' (loaded: " +
                                             (known.empty() ? "none" : known) + ")");
    }
    return out.result(dispatch_json(*m, request.value("explain", false)));
  }
  if (cmd == "run") return run(request, out);
  if (cmd == "reload") {
    reload_kernels();
    return out.result(status_json()["kernels"]);
  }
  if (cmd == "shutdown") {
    request_shutdown();
    return out.result({{"state", "stopping"}});
  }
  out.error(codes::unknown_command, "unknown command '" + cmd + "' (known: status, models, run, dispatch, reload, shutdown)");
}

}  // namespace spite::daemon
