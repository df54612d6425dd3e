// The control commands spited answers (see spite/control/protocol.hpp for the framing).
#include <unistd.h>

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
    models.push_back({{"name", m->name}, {"path", m->path}, {"arch", m->model->arch()},
                      {"kernels", m->identity.family + "/" + m->identity.model}});
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
  if (cmd == "reload") {
    reload_kernels();
    return out.result(status_json()["kernels"]);
  }
  if (cmd == "shutdown") {
    request_shutdown();
    return out.result({{"state", "stopping"}});
  }
  out.error(codes::unknown_command, "unknown command '" + cmd + "' (known: status, models, dispatch, reload, shutdown)");
}

}  // namespace spite::daemon
