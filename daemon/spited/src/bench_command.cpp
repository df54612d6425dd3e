#include "bench_command.hpp"

#include "spite/bench/bench.hpp"

namespace spite::daemon {

result<nlohmann::json> bench_command(loaded_model& m, const nlohmann::json& request, int default_threads,
                                     std::shared_ptr<const dispatch::op_table> ops, std::function<bool()> cancelled) {
  bench::bench_options o;
  try {
    o.n_prompt = request.value("n_prompt", o.n_prompt);
    o.n_gen = request.value("n_gen", o.n_gen);
    o.depth = request.value("depth", o.depth);
    o.threads = request.value("threads", default_threads);
    o.reps = request.value("reps", o.reps);
    o.parallel = request.value("parallel", o.parallel);
    o.probes = request.value("probes", o.probes);
    o.flash_attn = request.value("flash_attn", m.flash_attn);
    o.profile = request.value("profile", o.profile);
  } catch (const nlohmann::json::exception& e) {
    return make_error(errc::invalid_argument, std::string("bad field type: ") + e.what());
  }
  if (o.threads < 0 || o.threads > 1024) return make_error(errc::invalid_argument, "threads must be 0..1024");
  o.ops = std::move(ops);
  o.cancelled = std::move(cancelled);
  auto r = bench::run_bench(m.file, *m.model, o);
  if (!r) return std::move(r).err();
  r->model = m.spec.name;
  r->load_s = m.load_s;
  return r->to_json();
}

}  // namespace spite::daemon
