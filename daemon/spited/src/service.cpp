#include "spite/core/bytes.hpp"
#include "service.hpp"

#include <fstream>
#include <sstream>

#include "spite/core/log.hpp"

namespace spite::daemon {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A number from the first line of a cgroup file; nullopt for "max" or a missing file.
std::optional<std::uint64_t> read_cgroup_number(const fs::path& p) {
  std::ifstream in(p);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::uint64_t available_memory() {
  std::uint64_t available = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        available = kib * 1024;
        break;
      }
    }
  }
  // A service limited by its cgroup (MemoryMax=) must stay under that, whatever the host has.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    if (!line.starts_with("0::")) continue;
    const fs::path dir = fs::path("/sys/fs/cgroup") / fs::path(line.substr(3)).relative_path();
    const auto max = read_cgroup_number(dir / "memory.max");
    const auto current = read_cgroup_number(dir / "memory.current");
    if (max && current) available = std::min<std::uint64_t>(available, *max > *current ? *max - *current : 0);
  }
  return available;
}

model_lease::model_lease(std::shared_ptr<loaded_model> m) : m_(std::move(m)) {
  if (m_) m_->in_flight++;
}

model_lease& model_lease::operator=(model_lease&& o) noexcept {
  if (this != &o) {
    release();
    m_ = std::move(o.m_);
  }
  return *this;
}

model_lease::~model_lease() { release(); }

void model_lease::release() noexcept {
  if (!m_) return;
  m_->last_used_ms = now_ms();
  m_->in_flight--;
  m_.reset();  // the last lease of an unloaded model frees it here, on the request's thread
}

service::~service() {
  watcher_.reset();  // no kernel change arrives while the models go
  {
    std::lock_guard lock(retired_mutex_);
    retired_.clear();
  }
  std::lock_guard lock(mutex_);
  models_.clear();
}

void service::set_events(service_events events) {
  std::lock_guard lock(events_mutex_);
  events_ = std::move(events);
}

service_events service::events() {
  std::lock_guard lock(events_mutex_);
  return events_;
}

std::vector<std::string> service::loaded_models() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, m] : models_) names.push_back(name);
  return names;
}

std::string service::state() {
  std::lock_guard lock(mutex_);
  return state_;
}

void service::set_state(std::string s) {
  {
    std::lock_guard lock(mutex_);
    state_ = std::move(s);
  }
  if (auto e = events(); e.state_changed) e.state_changed();
}

void service::request_shutdown() { shutdown_requested_ = true; }

result<void> service::start(const service_options& options) {
  {
    std::lock_guard lock(mutex_);
    options_ = options;
  }
  const dispatch::cpu_features cpu = dispatch::detect_cpu();
  cpu_target_.device = SPITE_DEVICE_CPU;
  cpu_target_.archs = cpu.isa_candidates();
  cpu_isa_ = cpu.isa();
  cpu_threads_ = options.threads > 0 ? options.threads : cpu.threads;
  // Kernels first, so that models load with the dispatcher they will run with.
  dispatch::plugin_options po;
  po.cpu_threads = cpu_threads_;
  auto w = dispatch::kernel_watcher::start(
      options.kernel_dirs, po, [this](std::shared_ptr<const dispatch::kernel_set> next, const dispatch::kernel_change& c) {
        use_generation(std::move(next), &c);
      });
  if (!w) return std::move(w).err();
  watcher_ = std::move(*w);
  use_generation(watcher_->current(), nullptr);
  for (const auto& spec : options.catalogue) {
    if (!spec.preload) continue;
    if (auto m = load(spec, false); !m) return std::move(m).err();
  }
  return ok();
}

result<std::shared_ptr<loaded_model>> service::load(const model_spec& spec, bool on_demand) {
  std::lock_guard load_lock(load_mutex_);
  if (auto m = find_loaded(spec.name)) {
    std::error_code ec;
    if (fs::equivalent(m->spec.path, spec.path, ec)) return m;
    return make_error(errc::invalid_argument, "a model named '" + spec.name + "' is already loaded from " + m->spec.path);
  }
  service_options opts;
  {
    std::lock_guard lock(mutex_);
    opts = options_;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto file = gguf::file::open(spec.path);
  if (!file) return std::move(file).err();
  auto m = std::make_shared<loaded_model>();
  m->spec = spec;
  m->on_demand = on_demand;
  m->flash_attn = opts.flash_attn;
  m->file = std::move(*file);
  const std::int32_t n_ctx = spec.n_ctx > 0 ? spec.n_ctx : opts.n_ctx;
  auto model = models::load_model(m->file, {.n_ctx = n_ctx});
  if (!model) return std::move(model).err().with_context(spec.path);
  m->model = std::move(*model);

  // Does it fit? Weights are mapped, KV memory grows as sequences fill: count both in full.
  const executor::context_options copts{.n_ctx = n_ctx, .n_threads = cpu_threads_, .n_seq_max = opts.max_concurrent,
                                        .swa_full = opts.swa_full};
  auto estimate = executor::estimate_memory(m->file, *m->model, copts, opts.max_concurrent * 64);
  if (!estimate) return std::move(estimate).err().with_context(spec.path);
  m->memory = *estimate;
  const std::uint64_t in_use = memory_in_use();
  const std::uint64_t budget = opts.memory_limit > 0 ? (opts.memory_limit > in_use ? opts.memory_limit - in_use : 0)
                                                     : available_memory();
  if (m->memory.total() > budget) {
    return make_error(errc::out_of_range,
                      "model '" + spec.name + "' needs " + m->memory.describe() + " but only " +
                          human_bytes(budget) + " is available" +
                          (opts.memory_limit > 0 ? " under memory_limit_mib (" + human_bytes(in_use) +
                                                       " used by loaded models)"
                                                 : "") +
                          "; unload a model, lower n_ctx or max_concurrent, or pick a smaller quantization");
  }

  for (const auto& l : spec.lora) {
    auto f = gguf::file::open(l.path.string());
    if (!f) return std::move(f).err().with_context("lora");
    m->lora_files.push_back(std::move(*f));
  }
  if (!m->lora_files.empty()) {
    m->loras = std::make_shared<models::lora_set>();
    for (std::size_t i = 0; i < m->lora_files.size(); ++i) {
      if (auto r = m->loras->add(m->lora_files[i], m->file, spec.lora[i].scale); !r) {
        return std::move(r).err().with_context(spec.lora[i].path.string());
      }
    }
  }
  auto [family, model_name] = models::kernel_identity_of(m->file);
  m->identity = {family, model_name};
  auto tok = tokenizer::tokenizer::from_metadata(m->file.meta());
  if (!tok) return std::move(tok).err().with_context(spec.path);
  m->tok = std::move(*tok);
  // The chat template is tried at load: a model whose template cannot render is refused here
  // with the reason, unless the configuration chose the ChatML fallback.
  const std::string& which = spec.chat_template;
  auto chat = which == "chatml" ? tokenizer::chat_format::chatml(m->tok->vocabulary())
                                : tokenizer::chat_format::from_metadata(m->file.meta(), m->tok->vocabulary(),
                                                                        which == "auto" ? std::string_view() : which);
  if (!chat) {
    return make_error(chat.err().code, spec.path + ": chat template: " + chat.err().message +
                                           " (set chat_template = \"chatml\" for this model to use ChatML)");
  }
  m->chat.emplace(std::move(*chat));
  std::shared_ptr<const dispatch::op_table> ops;
  {
    std::lock_guard lock(mutex_);
    m->kernels = dispatch::dispatcher::create(kernels_, m->identity, cpu_target_);
    ops = m->kernels->ops();
  }
  auto engine = scheduler::engine::create(*m->model, m->tok,
                                          {.max_concurrent = opts.max_concurrent, .queue_size = opts.queue_size,
                                           .n_ctx = n_ctx, .threads = opts.threads, .prompt_cache = opts.prompt_cache,
                                           .swa_full = opts.swa_full, .flash_attn = opts.flash_attn,
                                           .ops = ops, .loras = m->loras});
  if (!engine) return std::move(engine).err().with_context(spec.path);
  m->engine = std::move(*engine);
  m->last_used_ms = now_ms();
  m->load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard lock(mutex_);
    // A kernel generation that arrived during the load: take it now.
    if (m->kernels->kernels().generation() != kernels_->generation()) {
      m->kernels = dispatch::dispatcher::create(kernels_, m->identity, cpu_target_);
      m->engine->set_ops(m->kernels->ops());
    }
    models_[spec.name] = m;
  }
  log::info("model ", spec.name, " loaded from ", spec.path, " (", m->model->arch(), ", kernels ", family, "/", model_name,
            ", memory ", m->memory.describe(), on_demand ? ", on demand" : "", ")");
  if (auto e = events(); e.model_loaded) e.model_loaded(spec.name);
  return m;
}

result<int> service::unload(const std::string& name) {
  std::shared_ptr<loaded_model> m;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) return make_error(errc::not_found, "no model '" + name + "' is loaded");
    m = std::move(it->second);
    models_.erase(it);
  }
  const int running = m->in_flight.load();
  log::info("model ", name, " unloaded", running > 0 ? " (" + std::to_string(running) + " requests finish first)" : "");
  if (auto e = events(); e.model_unloaded) e.model_unloaded(name);
  return running;
}

result<model_spec> service::spec_for(const std::string& name, const std::string& path) {
  std::optional<model_spec> spec = find_spec(name);
  if (!path.empty()) {
    if (!config::valid_model_name(name)) {
      return make_error(errc::invalid_argument, "'" + name + "' is not a valid model name ([A-Za-z0-9._:-], 1 to 64)");
    }
    if (!spec) spec = model_spec{.name = name};
    spec->path = path;
  }
  if (!spec) return make_error(errc::not_found, "no model '" + name + "' is configured; give \"path\" to load a file");
  return *spec;
}

result<model_lease> service::acquire(const std::string& name) {
  if (auto m = find_loaded(name)) return model_lease(std::move(m));
  // A path names the model loaded from it.
  {
    std::lock_guard lock(mutex_);
    for (auto& [n, m] : models_) {
      std::error_code ec;
      if (!name.empty() && fs::equivalent(m->spec.path, name, ec)) return model_lease(m);
    }
  }
  const std::optional<model_spec> spec = find_spec(name);
  if (!spec) {
    std::string known;
    {
      std::lock_guard lock(mutex_);
      for (const auto& s : options_.catalogue) known += (known.empty() ? "" : ", ") + s.name;
      for (const auto& [n, m] : models_) {
        if (known.find(n) == std::string::npos) known += (known.empty() ? "" : ", ") + n;
      }
    }
    return make_error(errc::not_found, "no model '" + name + "' (known: " + (known.empty() ? "none" : known) + ")");
  }
  auto m = load(*spec, true);
  if (!m) return std::move(m).err();
  return model_lease(std::move(*m));
}

void service::retire(model_lease lease) {
  std::lock_guard lock(retired_mutex_);
  retired_.push_back(std::move(lease));
}

void service::expire_idle() {
  {
    std::vector<model_lease> done;
    {
      std::lock_guard lock(retired_mutex_);
      done.swap(retired_);
    }
  }  // leases dropped here, on the main thread
  std::vector<std::string> idle;
  const std::int64_t now = now_ms();
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, m] : models_) {
      const std::int64_t keep = m->spec.keep_alive_s;
      if (!m->on_demand || keep < 0 || m->in_flight.load() > 0) continue;
      if (now - m->last_used_ms.load() >= keep * 1000) idle.push_back(name);
    }
  }
  for (const auto& name : idle) {
    log::info("model ", name, " idle past its keep_alive");
    (void)unload(name);
  }
}

result<void> service::reload(const service_options& next) {
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, m] : models_) {
      bool kept = false;
      for (const auto& s : next.catalogue) {
        std::error_code ec;
        kept = kept || (s.name == name && fs::equivalent(s.path, m->spec.path, ec));
      }
      // Models loaded by command stay; configured ones that left the file (or moved) go.
      if (!kept && !m->on_demand) gone.push_back(name);
    }
    // The watcher watches the directories it started with; new ones need a restart.
    if (next.kernel_dirs != options_.kernel_dirs) log::warn("[kernels] dirs changed: takes effect at the next restart");
    const auto dirs = options_.kernel_dirs;
    options_ = next;
    options_.kernel_dirs = dirs;
  }
  for (const auto& name : gone) (void)unload(name);
  std::string failures;
  for (const auto& spec : next.catalogue) {
    if (!spec.preload || find_loaded(spec.name)) continue;
    if (auto m = load(spec, false); !m) failures += (failures.empty() ? "" : "; ") + m.err().message;
  }
  reload_kernels();
  if (!failures.empty()) return make_error(errc::io, failures);
  return ok();
}

void service::use_generation(std::shared_ptr<const dispatch::kernel_set> set, const dispatch::kernel_change* change) {
  {
    std::lock_guard lock(mutex_);
    kernels_ = set;
    // Steps already running keep the dispatcher (and libraries) they started with.
    for (auto& [name, m] : models_) attach_kernels(*m);
    if (change != nullptr) {
      json e{{"generation", change->generation}, {"added", change->added}, {"replaced", change->replaced},
             {"removed", change->removed}, {"refused", json::array()}};
      for (const auto& r : change->refused) e["refused"].push_back({{"path", r.path.string()}, {"reason", r.reason}});
      kernel_events_.push_back(std::move(e));
      if (kernel_events_.size() > 32) kernel_events_.erase(kernel_events_.begin());
    }
  }
  if (change == nullptr || change->empty()) return;
  if (auto e = events(); e.kernels_changed) e.kernels_changed(*change);
}

void service::attach_kernels(loaded_model& m) {
  m.kernels = dispatch::dispatcher::create(kernels_, m.identity, cpu_target_);
  m.engine->set_ops(m.kernels->ops());  // taken between two steps
}

void service::reload_kernels() {
  std::shared_ptr<const dispatch::kernel_set> before;
  std::vector<fs::path> dirs;
  {
    std::lock_guard lock(mutex_);
    before = kernels_;
    dirs = options_.kernel_dirs;
  }
  dispatch::plugin_options po;
  po.cpu_threads = cpu_threads_;
  auto next = dispatch::kernel_set::scan(dirs, po, before.get());
  const auto change = dispatch::diff_generations(before.get(), *next);
  log::info(change.summary());
  use_generation(std::move(next), &change);
}

std::shared_ptr<loaded_model> service::find_loaded(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::optional<model_spec> service::find_spec(const std::string& name) {
  std::lock_guard lock(mutex_);
  for (const auto& s : options_.catalogue) {
    if (s.name == name) return s;
  }
  return std::nullopt;
}

std::uint64_t service::memory_in_use() {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const auto& [name, m] : models_) total += m->memory.total();
  return total;
}

}  // namespace spite::daemon
