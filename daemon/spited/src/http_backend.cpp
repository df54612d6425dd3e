#include "http_backend.hpp"

#include <sys/stat.h>

#include <cmath>

#include "spite/scheduler/logprobs.hpp"

namespace spite::daemon {
using nlohmann::json;

namespace {

class engine_generation final : public server::generation {
 public:
  explicit engine_generation(std::shared_ptr<std::atomic<bool>> flag) : flag_(std::move(flag)) {}
  void cancel() override { *flag_ = true; }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

std::int64_t modified_time(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_mtime) : 0;
}

// The one-sequence context a model's embeddings and scoring run in, made on first use with the
// kernels and attention path its engine uses, so they agree with its completions.
result<executor::context*> side_context(service& svc, loaded_model& m) {
  if (!m.embed_ctx) {
    auto ctx = executor::context::create(*m.model, {.n_ctx = m.engine->n_ctx(), .n_threads = 0, .n_seq_max = 1,
                                                    .ops = svc.ops_of(m), .flash_attn = m.flash_attn});
    if (!ctx) return std::move(ctx).err();
    m.embed_ctx = std::move(*ctx);
  }
  m.embed_ctx->set_ops(svc.ops_of(m));
  return m.embed_ctx.get();
}

// The tokens a completion prompt (not a chat) is evaluated as: its text with the vocabulary's
// special tokens added (special-token text stays plain text), or the ids it gave; with a suffix,
// the prefix-suffix-middle frame of the model's fill-in-the-middle tokens.
result<std::vector<std::int32_t>> completion_tokens(const loaded_model& m, const server::generate_input& input) {
  const tokenizer::vocab& vocab = m.tok->vocabulary();
  if (!input.suffix) {
    if (!input.prompt_tokens.empty()) return input.prompt_tokens;
    auto tokens = m.tok->tokenize(input.prompt, {.add_special = true, .parse_special = false});
    if (!tokens) return make_error(errc::invalid_argument, tokens.err().message);
    return std::vector<std::int32_t>(tokens->begin(), tokens->end());
  }
  const auto& sp = vocab.special();
  if (!vocab.valid(sp.fim_pre) || !vocab.valid(sp.fim_suf) || !vocab.valid(sp.fim_mid)) {
    return make_error(errc::invalid_argument, "suffix: model '" + input.model +
                                                  "' has no fill-in-the-middle tokens (prefix, suffix and middle)");
  }
  std::vector<std::int32_t> out;
  if (vocab.add_bos() && vocab.valid(sp.bos)) out.push_back(sp.bos);
  out.push_back(sp.fim_pre);
  if (!input.prompt_tokens.empty()) {
    out.insert(out.end(), input.prompt_tokens.begin(), input.prompt_tokens.end());
  } else {
    auto prefix = m.tok->tokenize(input.prompt, {.add_special = false, .parse_special = false});
    if (!prefix) return make_error(errc::invalid_argument, prefix.err().message);
    out.insert(out.end(), prefix->begin(), prefix->end());
  }
  out.push_back(sp.fim_suf);
  auto suffix = m.tok->tokenize(*input.suffix, {.add_special = false, .parse_special = false});
  if (!suffix) return make_error(errc::invalid_argument, suffix.err().message);
  out.insert(out.end(), suffix->begin(), suffix->end());
  out.push_back(sp.fim_mid);
  return out;
}

}  // namespace

std::vector<server::model_card> http_backend::models() {
  std::vector<server::model_card> out;
  for (const auto& m : svc_.models_json()) {
    server::model_card c;
    c.id = m.value("name", "");
    c.loaded = m.value("loaded", false);
    c.arch = m.value("arch", "");
    c.n_ctx = m.value("n_ctx", 0);
    c.created = modified_time(m.value("path", ""));
    out.push_back(std::move(c));
  }
  return out;
}

result<std::shared_ptr<server::generation>> http_backend::generate(const server::generate_input& input,
                                                                   server::generate_callbacks callbacks) {
  if (svc_.shutdown_requested()) return make_error(errc::unavailable, "spited is shutting down");
  auto lease_or = svc_.acquire(input.model);
  if (!lease_or) return std::move(lease_or).err();
  auto lease = std::make_shared<model_lease>(std::move(*lease_or));
  loaded_model& m = **lease;
  scheduler::generation_request g;
  if (input.messages) {
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (!input.tools.is_null()) extra["tools"] = input.tools;
    auto rendered = m.chat->render_json(*input.messages, true, extra);
    if (!rendered) return make_error(errc::invalid_argument, "chat template: " + rendered.err().message);
    // The template's own markers are special tokens; templates that write the BOS text
    // themselves must not get a second one.
    const auto& vocab = m.tok->vocabulary();
    const auto bos = vocab.special().bos;
    const bool add_special = !(vocab.valid(bos) && rendered->starts_with(vocab.text(bos)));
    auto tokens = m.tok->tokenize(*rendered, {.add_special = add_special, .parse_special = true});
    if (!tokens) return make_error(errc::invalid_argument, tokens.err().message);
    g.prompt.assign(tokens->begin(), tokens->end());
  } else {
    auto tokens = completion_tokens(m, input);
    if (!tokens) return std::move(tokens).err();
    g.prompt = std::move(*tokens);
  }
  if (g.prompt.empty()) return make_error(errc::invalid_argument, "the prompt has no tokens");
  // Without a limit a request may use the rest of its context; the engine ends it there ("length").
  g.n_predict = input.max_tokens > 0 ? input.max_tokens : m.engine->n_ctx();
  g.sampling = input.sampling;
  g.special_text = input.render_special;
  g.deadline = svc_.request_deadline();
  auto on_token = std::move(callbacks.on_token);
  g.on_text = [on_token](std::string_view text) { on_token({std::string(text), std::nullopt}); };
  g.top_logprobs = input.top_logprobs;
  if (input.top_logprobs >= 0) {
    std::shared_ptr<const tokenizer::tokenizer> tok = m.tok;
    g.on_token = [on_token, tok](const scheduler::token_info& info) {
      server::token_logprob_entry e;
      e.token = std::string(tok->piece(info.id, false));
      e.logprob = info.logprob;
      for (const auto& t : info.top) e.top.emplace_back(std::string(tok->piece(t.id, false)), t.logprob);
      on_token({std::string(), std::move(e)});
    };
  }
  service* svc = &svc_;
  g.on_done = [svc, lease, on_done = std::move(callbacks.on_done)](const scheduler::generation_result& r) mutable {
    server::generate_outcome o;
    o.prompt_tokens = r.prompt_tokens;
    o.cached_tokens = r.cached_tokens;
    o.completion_tokens = r.generated;
    o.stop_reason = r.stop_reason;
    o.failure = r.failure;
    if (r.stop_reason == "timeout") {
      o.failure = make_error(errc::out_of_range, "the request ran past request_timeout_s and was stopped");
    }
    if (svc->cancelling_all() && r.stop_reason == "cancelled") {
      o.failure = make_error(errc::unavailable, "spited stopped before the request finished");
    }
    on_done(o);
    svc->retire(std::move(*lease));
    svc->request_finished();
  };
  auto handle = std::make_shared<engine_generation>(g.cancelled);
  svc_.request_started();
  if (auto r = m.engine->submit(std::move(g)); !r) {
    svc_.request_finished();
    return std::move(r).err();
  }
  return std::shared_ptr<server::generation>(std::move(handle));
}

namespace {

// How the model says its token states become one vector (<arch>.pooling_type); decoder models
// without one are mean-pooled.
std::string pooling_of(const gguf::file& f, const std::string& arch) {
  switch (f.meta().get_uint(arch + ".pooling_type").value_or(1)) {
    case 2: return "cls";
    case 3: return "last";
    default: return "mean";
  }
}

// A turn on the model's side context: at most loaded_model::max_embed_requests running and
// waiting, and no longer than the request timeout; otherwise busy (429 with Retry-After).
class side_context_turn {
 public:
  side_context_turn(loaded_model& m, std::chrono::steady_clock::time_point deadline) : m_(m), lock_(m.embed_mutex, std::defer_lock) {
    if (m_.embed_requests.fetch_add(1) >= loaded_model::max_embed_requests) return;
    got_ = lock_.try_lock_until(deadline);
  }
  ~side_context_turn() {
    if (lock_.owns_lock()) lock_.unlock();
    m_.embed_requests.fetch_sub(1);
  }
  side_context_turn(const side_context_turn&) = delete;
  side_context_turn& operator=(const side_context_turn&) = delete;
  bool ok() const noexcept { return got_; }

 private:
  loaded_model& m_;
  std::unique_lock<std::timed_mutex> lock_;
  bool got_ = false;
};

error side_context_busy(const std::string& model) {
  return make_error(errc::busy, "model '" + model + "' is busy with other embedding or logprob requests; retry shortly");
}

}  // namespace

result<std::vector<server::token_logprob_entry>> http_backend::prompt_logprobs(const server::generate_input& input, int top) {
  if (svc_.shutdown_requested()) return make_error(errc::unavailable, "spited is shutting down");
  const std::string& model = input.model;
  auto lease = svc_.acquire(model);
  if (!lease) return std::move(lease).err();
  loaded_model& m = **lease;
  auto tokens = completion_tokens(m, input);
  if (!tokens) return std::move(tokens).err();
  for (std::int32_t t : *tokens) {
    if (t < 0 || t >= m.model->hp().n_vocab) return make_error(errc::invalid_argument, "token id out of range");
  }
  svc_.request_started();
  struct finished {
    service& s;
    ~finished() { s.request_finished(); }
  } guard{svc_};
  const side_context_turn turn(m, svc_.request_deadline());  // the side context, shared with embeddings
  if (!turn.ok()) return side_context_busy(model);
  auto side = side_context(svc_, m);
  if (!side) return std::move(side).err();
  executor::context& ctx = **side;
  if (static_cast<std::int64_t>(tokens->size()) > ctx.n_ctx()) {
    return make_error(errc::invalid_argument, "the prompt exceeds the context of " + std::to_string(ctx.n_ctx()) + " tokens");
  }
  std::vector<server::token_logprob_entry> out;
  const auto piece = [&](std::int32_t id) { return std::string(m.tok->piece(id, false)); };
  if (tokens->empty()) return out;
  out.push_back({piece((*tokens)[0]), std::nanf(""), {}});
  ctx.memory().clear();
  executor::batch b;
  const std::int64_t n_vocab = m.model->hp().n_vocab;
  constexpr std::size_t chunk = 256;
  for (std::size_t start = 0; start + 1 < tokens->size(); start += chunk) {
    const std::size_t end = std::min(tokens->size() - 1, start + chunk);
    b.clear();
    for (std::size_t i = start; i < end; ++i) b.add((*tokens)[i], static_cast<std::int32_t>(i), 0, true);
    auto logits = ctx.decode(b);
    if (!logits) {
      ctx.memory().clear();
      return std::move(logits).err();
    }
    for (std::size_t i = start; i < end; ++i) {
      const auto row = logits->subspan((i - start) * static_cast<std::size_t>(n_vocab), static_cast<std::size_t>(n_vocab));
      const double lse = scheduler::log_sum_exp(row);
      const std::int32_t next = (*tokens)[i + 1];
      server::token_logprob_entry e{piece(next), static_cast<float>(row[static_cast<std::size_t>(next)] - lse), {}};
      for (const auto& t : scheduler::top_logprobs(row, static_cast<std::size_t>(std::max(top, 0)))) e.top.emplace_back(piece(t.id), t.logprob);
      out.push_back(std::move(e));
    }
  }
  ctx.memory().clear();
  return out;
}

result<std::string> http_backend::chat_template(const std::string& model) {
  auto lease = svc_.acquire(model);
  if (!lease) return std::move(lease).err();
  return (*lease)->chat->source();
}

result<std::string> http_backend::detokenize(const std::string& model, const std::vector<std::int32_t>& tokens) {
  auto lease = svc_.acquire(model);
  if (!lease) return std::move(lease).err();
  const std::int64_t n_vocab = (*lease)->model->hp().n_vocab;
  for (std::int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) return make_error(errc::invalid_argument, "token id " + std::to_string(t) + " out of range");
  }
  // Without its BOS the text reads as the prompt was written (SentencePiece's leading space dropped).
  const auto bos = (*lease)->tok->vocabulary().special().bos;
  const std::size_t skip = !tokens.empty() && tokens[0] == bos ? 1 : 0;
  return (*lease)->tok->detokenize(std::span(tokens).subspan(skip), true, false);
}

result<server::embed_output> http_backend::embed(const server::embed_input& input) {
  if (svc_.shutdown_requested()) return make_error(errc::unavailable, "spited is shutting down");
  auto lease = svc_.acquire(input.model);
  if (!lease) return std::move(lease).err();
  loaded_model& m = **lease;
  std::vector<std::vector<std::int32_t>> inputs = input.tokens;
  for (const auto& text : input.texts) {
    auto t = m.tok->tokenize(text, {.add_special = true, .parse_special = false});
    if (!t) return make_error(errc::invalid_argument, t.err().message);
    inputs.emplace_back(t->begin(), t->end());
  }
  server::embed_output out;
  svc_.request_started();
  struct finished {
    service& s;
    ~finished() { s.request_finished(); }
  } guard{svc_};
  const side_context_turn turn(m, svc_.request_deadline());
  if (!turn.ok()) return side_context_busy(input.model);
  if (auto side = side_context(svc_, m); !side) return std::move(side).err();
  const std::string pooling = pooling_of(m.file, m.model->arch());
  for (const auto& tokens : inputs) {
    for (std::int32_t t : tokens) {
      if (t >= m.model->hp().n_vocab) return make_error(errc::invalid_argument, "token id " + std::to_string(t) + " is outside the vocabulary");
    }
    auto v = m.embed_ctx->embed(tokens, pooling);
    if (!v) return std::move(v).err();
    out.vectors.push_back(std::move(*v));
    out.prompt_tokens += static_cast<std::int32_t>(tokens.size());
  }
  return out;
}

server::readiness http_backend::ready() {
  if (svc_.state() != "running") return {false, "spited is " + svc_.state()};
  for (const auto& m : svc_.models_json()) {
    if (!m.value("loaded", false) && m.value("preload", false)) return {false, "model " + m.value("name", "") + " is not loaded"};
  }
  return {true, ""};
}

std::string http_backend::metrics() {
  const json stats = svc_.engine_stats_json();
  std::string out;
  const auto gauge = [&](const char* name, const char* help, const char* key) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (const auto& s : stats) {
      out += std::string(name) + "{model=\"" + s.value("model", "") + "\"} " + s[key].dump() + "\n";
    }
  };
  gauge("spite_requests_active", "Sequences decoding now.", "active");
  gauge("spite_queue_depth", "Requests waiting for a sequence slot.", "queued");
  gauge("spite_kv_cache_bytes_max", "KV memory when every sequence is full.", "kv_bytes_max");
  gauge("spite_kv_cache_tokens", "Positions held in KV memory, finished sequences kept for the prompt cache included.", "kv_tokens");
  gauge("spite_kv_cache_tokens_max", "Positions the KV memory holds when every sequence is full.", "kv_tokens_max");
  out += "# HELP spite_steps_total Forward steps.\n# TYPE spite_steps_total counter\n";
  for (const auto& s : stats) out += "spite_steps_total{model=\"" + s.value("model", "") + "\"} " + s["steps"].dump() + "\n";
  out += "# HELP spite_step_sequences_total Sequences summed over steps (divide by steps for the mean batch).\n"
         "# TYPE spite_step_sequences_total counter\n";
  for (const auto& s : stats) {
    out += "spite_step_sequences_total{model=\"" + s.value("model", "") + "\"} " + s["sequences_in_steps"].dump() + "\n";
  }
  out += "# HELP spite_kernel_choice The kernel serving each op (value 1).\n# TYPE spite_kernel_choice gauge\n";
  for (const auto& s : stats) {
    for (const auto& k : s["kernels"]) {
      out += "spite_kernel_choice{model=\"" + s.value("model", "") + "\",op=\"" + k.value("op", "") + "\",source=\"" +
             k.value("source", "") + "\",kernel=\"" + k.value("kernel", "") + "\"} 1\n";
    }
  }
  return out;
}

}  // namespace spite::daemon
