#include "spite/scheduler/engine.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "spite/core/log.hpp"

namespace spite::scheduler {

namespace {

struct slot {
  bool busy = false;
  std::int32_t seq = 0;
  generation_request req;
  std::unique_ptr<sampler_chain> chain;
  std::unique_ptr<tokenizer::stream_detokenizer> detok;
  std::size_t prompt_done = 0;  // prompt tokens already in the KV cache
  std::vector<std::int32_t> cached;  // the tokens whose KV the sequence holds, position by position
  std::uint64_t last_used = 0;       // admission counter, for least-recently-used reuse
  std::int32_t next_token = -1;
  std::int32_t pos = 0;
  generation_result result;
};

}  // namespace

struct engine::impl {
  const models::model& model;
  std::shared_ptr<const tokenizer::tokenizer> tok;
  engine_options options;
  std::unique_ptr<executor::context> ctx;
  std::vector<slot> slots;
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<generation_request> queue;
  bool stopping = false;
  std::atomic<int> active{0};  // busy slots (the slots themselves belong to the loop thread)
  std::uint64_t admissions = 0;
  std::atomic<std::int64_t> kv_held{0};

  void count_kv() {
    std::int64_t n = 0;
    for (const slot& s : slots) n += static_cast<std::int64_t>(s.cached.size());
    kv_held = n;
  }
  engine_stats counters;
  std::thread loop;
  std::once_flag grammar_vocab_once;
  std::shared_ptr<const grammar::vocabulary> grammar_vocab_;

  // Built on the first request with a grammar: a vocabulary-sized table most models never need.
  std::shared_ptr<const grammar::vocabulary> grammar_vocab() {
    std::call_once(grammar_vocab_once, [&] { grammar_vocab_ = make_grammar_vocabulary(*tok); });
    return grammar_vocab_;
  }

  impl(const models::model& m, std::shared_ptr<const tokenizer::tokenizer> t, engine_options o)
      : model(m), tok(std::move(t)), options(std::move(o)) {}

  void finish(slot& s, std::string reason, std::optional<error> failure = std::nullopt) {
    if (s.detok) {
      const std::string rest = s.detok->flush();
      if (!rest.empty()) {
        s.result.text += rest;
        if (s.req.on_text) s.req.on_text(rest);
      }
    }
    s.result.stop_reason = std::move(reason);
    s.result.failure = std::move(failure);
    // A failed step leaves the sequence's memory undefined; otherwise it stays for the next request.
    if (!options.prompt_cache || s.result.failure) forget(s);
    if (s.req.on_done) s.req.on_done(s.result);
    s.busy = false;
    active--;
    s.req = {};
    s.chain.reset();
    s.detok.reset();
  }

  void forget(slot& s) {
    [[maybe_unused]] auto r = ctx->memory().seq_rm(s.seq, -1, -1);
    s.cached.clear();
  }

  static std::size_t common_prefix(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
    const std::size_t n = std::min(a.size(), b.size());
    std::size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
  }

  // The free slot for `prompt`: the one sharing the longest prefix with it when that covers at
  // least half the prompt; otherwise an empty slot, else the least recently used, so a short
  // common start (a BOS token, a template header) does not evict another conversation.
  slot* pick_slot(const std::vector<std::int32_t>& prompt) {
    slot* best_hit = nullptr;
    std::size_t best_prefix = 0;
    slot* fallback = nullptr;
    for (slot& s : slots) {
      if (s.busy) continue;
      const std::size_t prefix = common_prefix(s.cached, prompt);
      if (prefix > 0 && prefix * 2 >= prompt.size() && prefix > best_prefix) {
        best_hit = &s;
        best_prefix = prefix;
      }
      const auto rank = [](const slot& x) { return std::pair{!x.cached.empty(), x.last_used}; };
      if (!fallback || rank(s) < rank(*fallback)) fallback = &s;
    }
    return best_hit ? best_hit : fallback;
  }

  // Keeps the reusable prefix of the slot's KV (one prompt token is always evaluated, its logits
  // start the generation) and returns its length. A memory that cannot be cut there (a recurrent
  // state) is cleared instead.
  std::size_t reuse_prefix(slot& s, const std::vector<std::int32_t>& prompt) {
    if (!options.prompt_cache) return 0;
    const std::size_t keep = std::min(common_prefix(s.cached, prompt), prompt.size() - 1);
    if (!ctx->memory().seq_rm(s.seq, static_cast<std::int32_t>(keep), -1)) {
      forget(s);
      return 0;
    }
    s.cached.resize(keep);
    return keep;
  }

  // Moves queued requests into free slots.
  void admit() {
    while (active < static_cast<int>(slots.size())) {
      generation_request r;
      {
        std::lock_guard lock(mutex);
        if (queue.empty()) return;
        r = std::move(queue.front());
        queue.pop_front();
      }
      slot& s = *pick_slot(r.prompt);
      auto chain = make_chain(r.sampling);
      s.busy = true;
      active++;
      s.last_used = ++admissions;
      s.req = std::move(r);
      s.result = {};
      s.result.prompt_tokens = static_cast<std::int32_t>(s.req.prompt.size());
      if (std::chrono::steady_clock::now() > s.req.deadline) {  // it waited in the queue too long
        s.detok.reset();
        finish(s, "timeout");
        continue;
      }
      if (!chain) {
        finish(s, "error", chain.err());
        continue;
      }
      s.chain = std::move(*chain);
      for (std::int32_t t : s.req.prompt) s.chain->accept_prompt(t);
      s.detok = std::make_unique<tokenizer::stream_detokenizer>(tok, s.req.special_text);
      const std::size_t reused = reuse_prefix(s, s.req.prompt);
      s.result.cached_tokens = static_cast<std::int32_t>(reused);
      s.prompt_done = reused;
      s.pos = static_cast<std::int32_t>(reused);
      s.next_token = -1;
      std::lock_guard lock(mutex);
      counters.prompt_tokens += s.req.prompt.size();
      counters.cached_prompt_tokens += reused;
    }
  }

  void run() {
    const tokenizer::vocab& vocab = tok->vocabulary();
    executor::batch b;
    std::vector<slot*> wants_logits;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] {
          if (stopping || !queue.empty()) return true;
          for (const slot& s : slots) {
            if (s.busy) return true;
          }
          return false;
        });
        if (stopping) break;
      }
      admit();
      count_kv();
      b.clear();
      wants_logits.clear();
      int sequences = 0;
      const auto now = std::chrono::steady_clock::now();
      for (slot& s : slots) {
        if (!s.busy) continue;
        if (s.req.cancelled && *s.req.cancelled) {
          finish(s, "cancelled");
          continue;
        }
        if (now > s.req.deadline) {
          finish(s, "timeout");
          continue;
        }
        ++sequences;
        if (s.prompt_done < s.req.prompt.size()) {
          const std::size_t end = std::min(s.req.prompt.size(), s.prompt_done + static_cast<std::size_t>(options.prompt_chunk));
          for (std::size_t i = s.prompt_done; i < end; ++i) {
            const bool last = i + 1 == s.req.prompt.size();
            b.add(s.req.prompt[i], s.pos++, s.seq, last);
            s.cached.push_back(s.req.prompt[i]);
            if (last) wants_logits.push_back(&s);
          }
          s.prompt_done = end;
        } else {
          b.add(s.next_token, s.pos++, s.seq, true);
          s.cached.push_back(s.next_token);
          wants_logits.push_back(&s);
        }
      }
      if (b.size() == 0) continue;
      auto logits = ctx->decode(b, options.loras.get());
      {
        std::lock_guard lock(mutex);
        counters.steps++;
        counters.tokens += b.size();
        counters.sequences_in_steps += static_cast<std::uint64_t>(sequences);
        counters.max_sequences_in_step = std::max(counters.max_sequences_in_step, sequences);
      }
      if (!logits) {
        // A failed step fails the sequences in it; the engine goes on with the others.
        for (slot& s : slots) {
          if (s.busy) finish(s, "error", logits.err());
        }
        continue;
      }
      const std::int64_t n_vocab = model.hp().n_vocab;
      for (std::size_t i = 0; i < wants_logits.size(); ++i) {
        slot& s = *wants_logits[i];
        const std::span<const float> row = logits->subspan(i * static_cast<std::size_t>(n_vocab), static_cast<std::size_t>(n_vocab));
        const std::int32_t next = s.chain->sample(row);
        if (auto failed = s.chain->failure()) {  // a grammar no token can continue, or over its limits
          finish(s, "error", std::move(*failed));
          continue;
        }
        if (vocab.is_eog(next)) {
          finish(s, "stop");
          continue;
        }
        if (s.req.on_token) {
          token_info info;
          info.id = next;
          if (s.req.top_logprobs >= 0) {
            info.logprob = static_cast<float>(static_cast<double>(row[static_cast<std::size_t>(next)]) - log_sum_exp(row));
            if (s.req.top_logprobs > 0) info.top = top_logprobs(row, static_cast<std::size_t>(s.req.top_logprobs));
          }
          s.req.on_token(info);
        }
        const std::string piece = s.detok->push(next);
        s.result.generated++;
        if (!piece.empty()) {
          s.result.text += piece;
          if (s.req.on_text) s.req.on_text(piece);
        }
        if (s.result.generated >= s.req.n_predict || s.pos >= ctx->n_ctx()) {
          finish(s, "length");
          continue;
        }
        s.next_token = next;
      }
      count_kv();
    }
    for (slot& s : slots) {
      if (s.busy) finish(s, "cancelled");
    }
    std::deque<generation_request> left;
    {
      std::lock_guard lock(mutex);
      left.swap(queue);
    }
    for (auto& r : left) {
      generation_result res;
      res.stop_reason = "cancelled";
      if (r.on_done) r.on_done(res);
    }
  }
};

engine::engine(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

engine::~engine() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->loop.joinable()) impl_->loop.join();
}

result<std::unique_ptr<engine>> engine::create(const models::model& model, std::shared_ptr<const tokenizer::tokenizer> tok,
                                               const engine_options& options) {
  if (options.max_concurrent < 1 || options.max_concurrent > 1024 || options.queue_size < 0 || options.prompt_chunk < 1) {
    return make_error(errc::invalid_argument, "engine: max_concurrent 1..1024, queue_size >= 0, prompt_chunk >= 1");
  }
  auto p = std::make_unique<impl>(model, std::move(tok), options);
  auto ctx = executor::context::create(model, {.n_ctx = options.n_ctx, .n_threads = options.threads,
                                               .n_seq_max = options.max_concurrent, .swa_full = options.swa_full,
                                               .ops = options.ops, .flash_attn = options.flash_attn});
  if (!ctx) return std::move(ctx).err();
  p->ctx = std::move(*ctx);
  p->slots.resize(static_cast<std::size_t>(options.max_concurrent));
  for (std::size_t i = 0; i < p->slots.size(); ++i) p->slots[i].seq = static_cast<std::int32_t>(i);
  impl* raw = p.get();
  p->loop = std::thread([raw] { raw->run(); });
  return std::unique_ptr<engine>(new engine(std::move(p)));
}

result<void> engine::submit(generation_request request) {
  if (request.prompt.empty()) return make_error(errc::invalid_argument, "the prompt has no tokens");
  if (request.n_predict < 1) return make_error(errc::invalid_argument, "n_predict must be at least 1");
  for (std::int32_t t : request.prompt) {
    if (t < 0 || t >= impl_->model.hp().n_vocab) return make_error(errc::invalid_argument, "token id out of range");
  }
  if (static_cast<std::int64_t>(request.prompt.size()) >= impl_->ctx->n_ctx()) {
    return make_error(errc::invalid_argument, "the prompt (" + std::to_string(request.prompt.size()) +
                                                  " tokens) does not fit the context of " +
                                                  std::to_string(impl_->ctx->n_ctx()) + " tokens");
  }
  if (request.sampling.grammar && !request.sampling.grammar_vocab) request.sampling.grammar_vocab = impl_->grammar_vocab();
  if (request.top_logprobs < -1 || request.top_logprobs > 20) return make_error(errc::invalid_argument, "top_logprobs must be 0..20");
  if (auto v = validate(request.sampling); !v) return v;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return make_error(errc::busy, "the engine is stopping");
    const int busy = impl_->active;
    if (static_cast<int>(impl_->queue.size()) >= impl_->options.queue_size + (impl_->options.max_concurrent - busy)) {
      return make_error(errc::busy, "busy: " + std::to_string(impl_->queue.size()) + " requests are waiting");
    }
    impl_->queue.push_back(std::move(request));
  }
  impl_->wake.notify_all();
  return ok();
}

void engine::set_ops(std::shared_ptr<const dispatch::op_table> ops) { impl_->ctx->set_ops(std::move(ops)); }

engine_stats engine::stats() const {
  std::lock_guard lock(impl_->mutex);
  engine_stats s = impl_->counters;
  s.queued = static_cast<int>(impl_->queue.size());
  s.active = impl_->active;
  s.kv_tokens = impl_->kv_held;
  s.kv_tokens_max = static_cast<std::int64_t>(impl_->ctx->n_ctx()) * static_cast<std::int64_t>(impl_->slots.size());
  return s;
}

std::int32_t engine::n_ctx() const noexcept { return impl_->ctx->n_ctx(); }

}  // namespace spite::scheduler
