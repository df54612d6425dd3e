// spitectl tokenize / detokenize / bench-tokenize: the model's tokenizer from the command line.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "spite/gguf/file.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace spite::ctl {
namespace {

result<std::shared_ptr<const tokenizer::tokenizer>> open_tokenizer(const std::string& path) {
  auto f = gguf::file::open(path);
  if (!f) return std::move(f).err();
  auto t = tokenizer::tokenizer::from_metadata(f->meta());
  if (!t) return std::move(t).err().with_context(path);
  return std::move(*t);
}

result<std::string> read_text(const args& a) {
  if (const auto text = a.get("--text")) return *text;
  const std::string path = *a.get("--file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::io, path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int fail(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "spitectl %s: %s\n", cmd, message.c_str());
  return exit_failure;
}

int usage(const char* cmd, const args& a, const char* synopsis, bool help) {
  std::fprintf(help ? stdout : stderr, "usage: spitectl %s %s\n%s", cmd, synopsis, a.help().c_str());
  return help ? exit_ok : exit_usage;
}

}  // namespace

int run_tokenize(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "GGUF file whose vocabulary to use")
      .option("--text", "T", "text to tokenize")
      .option("--file", "F", "read the text from a file")
      .flag("--no-bos", "do not add BOS/EOS/SEP")
      .flag("--special", "match special tokens written in the text")
      .flag("--json", "print a JSON object")
      .flag("--help", "show this help");
  constexpr const char* synopsis = "--model M (--text T | --file F) [--no-bos] [--special] [--json]";
  if (auto r = a.parse(argv); !r) return usage("tokenize", a, synopsis, false);
  if (a.has("--help")) return usage("tokenize", a, synopsis, true);
  if (!a.has("--model") || a.has("--text") == a.has("--file") || !a.positional().empty()) {
    return usage("tokenize", a, synopsis, false);
  }
  auto tok = open_tokenizer(*a.get("--model"));
  if (!tok) return fail("tokenize", tok.err().message);
  auto text = read_text(a);
  if (!text) return fail("tokenize", text.err().message);
  auto ids = (*tok)->tokenize(*text, {.add_special = !a.has("--no-bos"), .parse_special = a.has("--special")});
  if (!ids) return fail("tokenize", ids.err().message);
  if (a.has("--json")) {
    nlohmann::json pieces = nlohmann::json::array();
    for (auto id : *ids) pieces.push_back(std::string((*tok)->piece(id)));
    const nlohmann::json out = {{"tokens", *ids}, {"pieces", pieces}, {"count", ids->size()}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return exit_ok;
  }
  for (auto id : *ids) std::printf("%8d -> %s\n", id, quoted((*tok)->piece(id)).c_str());
  std::printf("%zu tokens\n", ids->size());
  return exit_ok;
}

int run_detokenize(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "GGUF file whose vocabulary to use")
      .flag("--special", "print control tokens as text")
      .flag("--help", "show this help");
  constexpr const char* synopsis = "--model M [--special] IDS...";
  if (auto r = a.parse(argv); !r) return usage("detokenize", a, synopsis, false);
  if (a.has("--help")) return usage("detokenize", a, synopsis, true);
  if (!a.has("--model") || a.positional().empty()) return usage("detokenize", a, synopsis, false);
  auto tok = open_tokenizer(*a.get("--model"));
  if (!tok) return fail("detokenize", tok.err().message);
  std::vector<tokenizer::token> ids;
  for (const auto& s : a.positional()) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || !(*tok)->vocabulary().valid(static_cast<tokenizer::token>(v)) ||
        v > INT32_MAX) {
      return fail("detokenize", "'" + s + "' is not a token id of this vocabulary (0.." +
                                    std::to_string((*tok)->vocabulary().size() - 1) + ")");
    }
    ids.push_back(static_cast<tokenizer::token>(v));
  }
  std::cout << (*tok)->detokenize(ids, false, a.has("--special")) << "\n";
  return exit_ok;
}

int run_bench_tokenize(const std::vector<std::string>& argv) {
  args a;
  a.option("--model", "M", "GGUF file whose vocabulary to use")
      .option("--file", "F", "text to tokenize")
      .option("-r", "REPS", "repetitions (default 3)")
      .flag("--json", "print a JSON object")
      .flag("--help", "show this help");
  constexpr const char* synopsis = "--model M --file F [-r REPS] [--json]";
  if (auto r = a.parse(argv); !r) return usage("bench-tokenize", a, synopsis, false);
  if (a.has("--help")) return usage("bench-tokenize", a, synopsis, true);
  if (!a.has("--model") || !a.has("--file")) return usage("bench-tokenize", a, synopsis, false);
  auto tok = open_tokenizer(*a.get("--model"));
  if (!tok) return fail("bench-tokenize", tok.err().message);
  auto text = read_text(a);
  if (!text) return fail("bench-tokenize", text.err().message);
  const int reps = std::max(1, std::atoi(a.get("-r").value_or("3").c_str()));
  double best = 1e300;
  std::size_t n_tokens = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto ids = (*tok)->tokenize(*text, {.add_special = false, .parse_special = false});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ids) return fail("bench-tokenize", ids.err().message);
    n_tokens = ids->size();
    best = std::min(best, s);
  }
  const double mb_per_s = static_cast<double>(text->size()) / 1e6 / best;
  if (a.has("--json")) {
    std::cout << nlohmann::json{{"bytes", text->size()}, {"tokens", n_tokens}, {"seconds", best},
                                {"mb_per_s", mb_per_s}, {"tokens_per_s", static_cast<double>(n_tokens) / best},
                                {"threads", 1}}
                     .dump()
              << "\n";
  } else {
    std::printf("%zu bytes -> %zu tokens in %.3f s (best of %d): %.2f MB/s, %.0f tokens/s, one thread\n", text->size(),
                n_tokens, best, reps, mb_per_s, static_cast<double>(n_tokens) / best);
  }
  return exit_ok;
}

}  // namespace spite::ctl
