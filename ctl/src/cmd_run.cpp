// spitectl run: generate text with a model in this process (the daemon has its own path).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "spite/control/client.hpp"
#include "spite/dispatch/devices.hpp"
#include "spite/dispatch/dispatcher.hpp"
#include "spite/executor/context.hpp"
#include "spite/gguf/file.hpp"
#include "spite/scheduler/sampler.hpp"
#include "spite/tokenizer/chat.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::ctl {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int fail(const std::string& message) {
  std::fprintf(stderr, "spitectl run: %s\n", message.c_str());
  return exit_failure;
}

template <class T>
bool parse_number(const args& a, const char* name, T& out) {
  const auto v = a.get(name);
  if (!v) return true;
  std::istringstream in(*v);
  T parsed{};
  if (!(in >> parsed) || !in.eof()) return false;
  out = parsed;
  return true;
}

}  // namespace

int run_run(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "GGUF model file")
      .option("--prompt", "P", "prompt text")
      .option("--file", "F", "read the prompt from a file")
      .option("-n", "N", "tokens to generate (default 128)")
      .option("--temperature", "T", "sampling temperature; 0 = greedy (default 0.8)")
      .option("--top-k", "K", "top-k (default 40, 0 = off)")
      .option("--top-p", "P", "top-p (default 0.95)")
      .option("--min-p", "P", "min-p (default 0.05)")
      .option("--repeat-penalty", "R", "repetition penalty (default 1.0 = off)")
      .option("--seed", "S", "random seed (default 0)")
      .flag("--chat", "format the prompt with the model's chat template")
      .option("--system", "S", "system message (with --chat)")
      .option("--lora", "F[:S]", "apply a LoRA adapter at scale S (default 1)")
      .option("--threads", "N", "compute threads (default: all)")
      .option("--ctx", "N", "context length (default: the model's, at most 4096)")
      .option("--kernels", "DIR", "kernel plug-in directories to search first (colon-separated)")
      .flag("--reference-kernels", "use only the built-in reference kernels")
      .flag("--no-flash-attn", "attention without the flash-attention kernel (in this process)")
      .option("--socket", "PATH", "run in the spited on this control socket (default: its usual socket, if it answers)")
      .flag("--local", "run in this process even when spited is reachable")
      .flag("--help", "show this help");
  constexpr const char* synopsis = "--model M (--prompt P | --file F) [-n N] [--temperature T] [--top-k K] [--top-p P] "
                                   "[--min-p P] [--repeat-penalty R] [--seed S] [--chat] [--system S] [--lora F[:S]] "
                                   "[--threads N] [--ctx N] [--kernels DIR] [--reference-kernels] [--no-flash-attn] [--socket PATH | --local]";
  const auto usage = [&](bool help) {
    std::fprintf(help ? stdout : stderr, "usage: spitectl run %s\n%s", synopsis, a.help().c_str());
    return help ? exit_ok : exit_usage;
  };
  if (auto r = a.parse(argv); !r) {
    std::fprintf(stderr, "spitectl run: %s\n", r.err().message.c_str());
    return usage(false);
  }
  if (a.has("--help")) return usage(true);
  if (!a.has("--model") || a.has("--prompt") == a.has("--file") || !a.positional().empty()) return usage(false);

  int n_predict = 128, threads = 0;
  std::int32_t n_ctx = 0;
  scheduler::sampling_params sp;
  if (!parse_number(a, "-n", n_predict) || !parse_number(a, "--threads", threads) || !parse_number(a, "--ctx", n_ctx) ||
      !parse_number(a, "--temperature", sp.temperature) || !parse_number(a, "--top-k", sp.top_k) ||
      !parse_number(a, "--top-p", sp.top_p) || !parse_number(a, "--min-p", sp.min_p) ||
      !parse_number(a, "--repeat-penalty", sp.repeat_penalty) || !parse_number(a, "--seed", sp.seed)) {
    std::fprintf(stderr, "spitectl run: a numeric option has a value that is not a number\n");
    return exit_usage;
  }
  auto chain = scheduler::make_chain(sp);
  if (!chain) return fail(chain.err().message);

  std::string prompt;
  if (const auto p = a.get("--prompt")) {
    prompt = *p;
  } else {
    std::ifstream in(*a.get("--file"), std::ios::binary);
    if (!in) return fail(*a.get("--file") + ": cannot read");
    std::ostringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
  }

  // Through spited when one answers: the model stays loaded and requests are batched there.
  // In-process options that the daemon does not take (a chat template, LoRA, kernel paths)
  // keep the run here.
  const bool daemon_capable = !a.has("--chat") && !a.get("--lora") && !a.get("--kernels") &&
                              !a.has("--reference-kernels") && !a.get("--ctx") && !a.get("--threads") &&
                              !a.has("--no-flash-attn");
  if (!a.has("--local") && (daemon_capable || a.get("--socket"))) {
    const std::filesystem::path socket = a.get("--socket") ? std::filesystem::path(*a.get("--socket"))
                                                           : control::default_socket_path();
    auto c = control::client::connect(socket);
    if (c) {
      nlohmann::json req{{"cmd", "run"}, {"model", *a.get("--model")}, {"prompt", prompt}, {"n_predict", n_predict},
                         {"temperature", sp.temperature}, {"top_k", sp.top_k}, {"top_p", sp.top_p},
                         {"min_p", sp.min_p}, {"repeat_penalty", sp.repeat_penalty}, {"seed", sp.seed}};
      const auto t0 = clock_type::now();
      auto r = (*c)->call(req, [](const nlohmann::json& e) {
        if (e.value("event", "") == "token") std::cout << e.value("text", "") << std::flush;
      });
      if (r) {
        std::cout << std::endl;
        std::fprintf(stderr, "spited %s: prompt %d tokens, generated %d tokens in %.3f s (%s)\n", socket.c_str(),
                     r->value("prompt_tokens", 0), r->value("generated", 0), seconds_since(t0),
                     r->value("stop_reason", "").c_str());
        return exit_ok;
      }
      if (r.err().code != errc::not_found || a.get("--socket")) return fail(r.err().message);
      std::fprintf(stderr, "spitectl run: spited has no model %s; running in-process\n", a.get("--model")->c_str());
    } else if (a.get("--socket")) {
      std::fprintf(stderr, "spitectl run: %s\n", c.err().message.c_str());
      return exit_unreachable;
    } else {
      std::fprintf(stderr, "spitectl run: no spited at %s; running in-process\n", socket.c_str());
    }
  }

  const auto t_load = clock_type::now();
  auto file = gguf::file::open(*a.get("--model"));
  if (!file) return fail(file.err().message);
  auto model = models::load_model(*file, {.n_ctx = n_ctx});
  if (!model) return fail(model.err().message);
  auto tok = tokenizer::tokenizer::from_metadata(file->meta());
  if (!tok) return fail(tok.err().message);
  models::lora_set loras;
  std::optional<gguf::file> adapter;
  if (const auto spec = a.get("--lora")) {
    std::string path = *spec;
    float scale = 1.0f;
    if (const auto colon = spec->rfind(':'); colon != std::string::npos && colon + 1 < spec->size()) {
      path = spec->substr(0, colon);
      scale = std::strtof(spec->c_str() + colon + 1, nullptr);
    }
    auto f = gguf::file::open(path);
    if (!f) return fail(f.err().message);
    adapter.emplace(std::move(*f));
    if (auto r = loras.add(*adapter, *file, scale); !r) return fail(r.err().message);
  }
  // Kernels as spited picks them: plug-ins on the search path, the built-in ones elsewhere.
  std::shared_ptr<const dispatch::op_table> ops;
  if (!a.has("--reference-kernels")) {
    std::vector<std::filesystem::path> path;
    if (const auto dirs = a.get("--kernels")) path = dispatch::parse_path_list(*dirs);
    for (auto& p : dispatch::default_kernel_path()) path.push_back(std::move(p));
    const auto set = dispatch::kernel_set::scan(path, {.cpu_threads = threads > 0 ? threads : 1});
    const auto [family, model_name] = models::kernel_identity_of(*file);
    auto d = dispatch::dispatcher::create(set, {family, model_name},
                                          {SPITE_DEVICE_CPU, 0, dispatch::detect_cpu().isa_candidates()});
    ops = d->ops();
  }
  auto ctx = executor::context::create(**model, {.n_ctx = n_ctx, .n_threads = threads, .ops = ops,
                                                 .flash_attn = !a.has("--no-flash-attn")});
  if (!ctx) return fail(ctx.err().message);
  const double load_s = seconds_since(t_load);
  std::fprintf(stderr, "loaded %s (%s) in %.3f s: %.1f MiB mapped, %.1f MiB KV cache for %d tokens\n",
               a.get("--model")->c_str(), (*model)->arch().c_str(), load_s,
               static_cast<double>(file->total_bytes()) / (1 << 20), static_cast<double>((*ctx)->memory().bytes_when_full()) / (1 << 20),
               (*ctx)->n_ctx());

  const tokenizer::vocab& vocab = (*tok)->vocabulary();
  bool add_special = true;
  if (a.has("--chat")) {
    auto chat = tokenizer::chat_format::from_metadata(file->meta(), vocab);
    if (!chat) return fail(chat.err().message);
    std::vector<tokenizer::chat_message> messages;
    if (const auto s = a.get("--system")) messages.push_back({"system", *s});
    messages.push_back({"user", prompt});
    auto rendered = chat->render(messages, true);
    if (!rendered) return fail("chat template: " + rendered.err().message);
    prompt = *rendered;
    // Templates that write the BOS text themselves must not get a second one.
    const auto bos = vocab.special().bos;
    if (vocab.valid(bos) && prompt.starts_with(vocab.text(bos))) add_special = false;
  }
  auto tokens = (*tok)->tokenize(prompt, {.add_special = add_special, .parse_special = a.has("--chat")});
  if (!tokens) return fail(tokens.err().message);
  if (tokens->empty()) return fail("the prompt has no tokens");
  if (static_cast<std::int64_t>(tokens->size()) + n_predict > (*ctx)->n_ctx()) {
    return fail("prompt (" + std::to_string(tokens->size()) + " tokens) and -n " + std::to_string(n_predict) +
                " do not fit the context of " + std::to_string((*ctx)->n_ctx()) + " tokens (use --ctx)");
  }
  const models::lora_set* active_loras = loras.empty() ? nullptr : &loras;

  // Prompt, in batches of at most 512 tokens; logits only for the last one.
  const auto t_prompt = clock_type::now();
  std::span<const float> logits;
  constexpr std::size_t k_batch = 512;
  for (std::size_t begin = 0; begin < tokens->size(); begin += k_batch) {
    executor::batch b;
    const std::size_t end = std::min(tokens->size(), begin + k_batch);
    for (std::size_t i = begin; i < end; ++i) b.add((*tokens)[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens->size());
    auto l = (*ctx)->decode(b, active_loras);
    if (!l) return fail(l.err().message);
    logits = *l;
  }
  const double prompt_s = seconds_since(t_prompt);
  for (tokenizer::token t : *tokens) (*chain)->accept(t);

  // Generation: sample, print what became complete text, feed the token back.
  tokenizer::stream_detokenizer out(*tok);
  const auto t_gen = clock_type::now();
  int generated = 0;
  std::int32_t pos = static_cast<std::int32_t>(tokens->size());
  for (; generated < n_predict; ++generated) {
    const std::int32_t next = (*chain)->sample(logits);
    if (vocab.is_eog(next)) break;
    std::cout << out.push(next) << std::flush;
    executor::batch b;
    b.add(next, pos++, 0, true);
    auto l = (*ctx)->decode(b, active_loras);
    if (!l) return fail(l.err().message);
    logits = *l;
  }
  std::cout << out.flush() << std::endl;
  const double gen_s = seconds_since(t_gen);
  std::fprintf(stderr, "load %.3f s | prompt %zu tokens, %.1f tokens/s | generation %d tokens, %.1f tokens/s | %d threads\n",
               load_s, tokens->size(), static_cast<double>(tokens->size()) / std::max(prompt_s, 1e-9), generated,
               static_cast<double>(generated) / std::max(gen_s, 1e-9), (*ctx)->n_threads());
  return exit_ok;
}

}  // namespace spite::ctl
