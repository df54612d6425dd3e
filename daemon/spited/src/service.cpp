#include "service.hpp"

#include "spite/core/log.hpp"

namespace spite::daemon {
namespace fs = std::filesystem;
using nlohmann::json;

result<void> service::start(const service_options& options) {
  options_ = options;
  const dispatch::cpu_features cpu = dispatch::detect_cpu();
  cpu_target_.device = SPITE_DEVICE_CPU;
  cpu_target_.archs = cpu.isa_candidates();
  cpu_isa_ = cpu.isa();
  for (const auto& [name, path] : options.models) {
    auto file = gguf::file::open(path);
    if (!file) return std::move(file).err();
    auto m = std::make_unique<loaded_model>(loaded_model{name, path, std::move(*file), nullptr, {}, nullptr});
    auto model = models::load_model(m->file);
    if (!model) return std::move(model).err();
    m->model = std::move(*model);
    auto [family, model_name] = models::kernel_identity_of(m->file);
    m->identity = {family, model_name};
    auto tok = tokenizer::tokenizer::from_metadata(m->file.meta());
    if (!tok) return std::move(tok).err().with_context(path);
    m->tok = std::move(*tok);
    // The chat template is tried at load: a model whose template cannot render is refused here
    // with the reason, unless the configuration chose the ChatML fallback.
    const auto which = options.chat_templates.count(name) ? options.chat_templates.at(name) : std::string("auto");
    auto chat = which == "chatml" ? tokenizer::chat_format::chatml(m->tok->vocabulary())
                                  : tokenizer::chat_format::from_metadata(m->file.meta(), m->tok->vocabulary(),
                                                                          which == "auto" ? std::string_view() : which);
    if (!chat) {
      return make_error(chat.err().code, path + ": chat template: " + chat.err().message +
                                             " (set chat_template = \"chatml\" for this model to use ChatML)");
    }
    m->chat.emplace(std::move(*chat));
    auto engine = scheduler::engine::create(*m->model, m->tok,
                                            {.max_concurrent = options.max_concurrent, .queue_size = options.queue_size,
                                             .n_ctx = options.n_ctx, .threads = options.threads});
    if (!engine) return std::move(engine).err().with_context(path);
    m->engine = std::move(*engine);
    log::info("model ", name, " loaded from ", path, " (", m->model->arch(), ", kernels ", family, "/", model_name, ")");
    models_.push_back(std::move(m));
  }
  kernel_dirs_ = options.kernel_dirs;
  dispatch::plugin_options po;
  po.cpu_threads = options.threads > 0 ? options.threads : cpu.threads;
  auto w = dispatch::kernel_watcher::start(
      kernel_dirs_, po, [this](std::shared_ptr<const dispatch::kernel_set> next, const dispatch::kernel_change& c) {
        use_generation(std::move(next), &c);
      });
  if (!w) return std::move(w).err();
  watcher_ = std::move(*w);
  use_generation(watcher_->current(), nullptr);
  return ok();
}

void service::use_generation(std::shared_ptr<const dispatch::kernel_set> set, const dispatch::kernel_change* change) {
  std::lock_guard lock(mutex_);
  kernels_ = set;
  // Steps already running keep the dispatcher (and libraries) they started with.
  for (auto& m : models_) {
    m->kernels = dispatch::dispatcher::create(set, m->identity, cpu_target_);
    m->engine->set_ops(m->kernels->ops());  // taken between two steps
  }
  if (change != nullptr) {
    json e{{"generation", change->generation}, {"added", change->added}, {"replaced", change->replaced},
           {"removed", change->removed}, {"refused", json::array()}};
    for (const auto& r : change->refused) e["refused"].push_back({{"path", r.path.string()}, {"reason", r.reason}});
    kernel_events_.push_back(std::move(e));
    if (kernel_events_.size() > 32) kernel_events_.erase(kernel_events_.begin());
  }
}

void service::reload_kernels() {
  std::shared_ptr<const dispatch::kernel_set> before;
  {
    std::lock_guard lock(mutex_);
    before = kernels_;
  }
  auto next = dispatch::kernel_set::scan(kernel_dirs_, {}, before.get());
  const auto change = dispatch::diff_generations(before.get(), *next);
  log::info(change.summary());
  use_generation(std::move(next), &change);
}

loaded_model* service::find(const std::string& name) {
  for (auto& m : models_) {
    if (m->name == name) return m.get();
  }
  return nullptr;
}

}  // namespace spite::daemon
