#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenize.hpp"

#include <pcre2.h>

#include <string>

#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

using sv = std::string_view;

// The patterns are those of the models' own tokenizer.json files (Oniguruma / PCRE syntax), run
// with PCRE2 in UTF + Unicode-property mode.
constexpr sv k_gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr sv k_llama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr sv k_qwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr sv k_qwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr sv k_tekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr sv k_gpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr sv k_deepseek_v3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Cased letters (Lu, Ll, Lt) as DeepSeek LLM's tokenizer lists them.
constexpr sv k_deepseek_llm_letters =
    R"(\s?[A-Za-z\x{b5}\x{c0}-\x{d6}\x{d8}-\x{f6}\x{f8}-\x{1ba}\x{1bc}-\x{1bf}\x{1c4}-\x{293}\x{295}-\x{2af}\x{370}-\x{373}\x{376}\x{377}\x{37b}-\x{37d}\x{37f}\x{386}\x{388}-\x{38a}\x{38c}\x{38e}-\x{3a1}\x{3a3}-\x{3f5}\x{3f7}-\x{481}\x{48a}-\x{52f}\x{531}-\x{556}\x{10a0}-\x{10c5}\x{13a0}-\x{13f5}\x{13f8}-\x{13fd}\x{1c90}-\x{1cba}\x{1cbd}-\x{1cbf}\x{1d00}-\x{1d2b}\x{1d6b}-\x{1d77}\x{1d79}-\x{1d9a}\x{1e00}-\x{1f15}\x{1f18}-\x{1f1d}\x{1f20}-\x{1f45}\x{1f48}-\x{1f4d}\x{1f50}-\x{1f57}\x{1f59}\x{1f5b}\x{1f5d}\x{1f5f}-\x{1f7d}\x{1f80}-\x{1fb4}\x{1fb6}-\x{1fbc}\x{1fbe}\x{1fc2}-\x{1fc4}\x{1fc6}-\x{1fcc}\x{1fd0}-\x{1fd3}\x{1fd6}-\x{1fdb}\x{1fe0}-\x{1fec}\x{1ff2}-\x{1ff4}\x{1ff6}-\x{1ffc}\x{2102}\x{2107}\x{210a}-\x{2113}\x{2115}\x{2119}-\x{211d}\x{2124}\x{2126}\x{2128}\x{212a}-\x{212d}\x{212f}-\x{2134}\x{2139}\x{213c}-\x{213f}\x{2145}-\x{2149}\x{214e}\x{2183}\x{2184}\x{2c00}-\x{2c7b}\x{2c7e}-\x{2ce4}\x{2ceb}-\x{2cee}\x{2cf2}\x{2cf3}\x{a640}-\x{a66d}\x{a680}-\x{a69b}\x{a722}-\x{a76f}\x{a771}-\x{a787}\x{a78b}-\x{a78e}\x{ab70}-\x{abbf}\x{fb00}-\x{fb06}\x{fb13}-\x{fb17}\x{ff21}-\x{ff3a}\x{ff41}-\x{ff5a}\x{10400}-\x{1044f}\x{104b0}-\x{104d3}\x{104d8}-\x{104fb}\x{10c80}-\x{10cb2}\x{10cc0}-\x{10cf2}\x{118a0}-\x{118df}\x{1e900}-\x{1e943}]+)";
constexpr sv k_cjk_hangul = R"([\x{4e00}-\x{9fa5}\x{800}-\x{4e00}\x{ac00}-\x{d7ff}]+)";
constexpr sv k_bloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{ff0c}\x{3001}\x{964}\x{6d4}\x{60c})]+)";

constexpr sv r_default[] = {R"([\p{P}\$\+<=>\^~\|]+)", k_gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
constexpr sv r_gpt2[] = {k_gpt2};
constexpr sv r_llama3[] = {k_llama3};
constexpr sv r_qwen2[] = {k_qwen2};
constexpr sv r_qwen35[] = {k_qwen35};
constexpr sv r_tekken[] = {k_tekken};
constexpr sv r_gpt4o[] = {k_gpt4o};
constexpr sv r_deepseek_llm[] = {"[\r\n]", k_deepseek_llm_letters,
                                 R"(\s?[!-/:-~\x{ff01}-\x{ff0f}\x{ff1a}-\x{ff5e}\x{2018}-\x{201f}\x{3000}-\x{3002}]+)",
                                 R"(\s+$)", k_cjk_hangul, R"(\p{N}+)"};
constexpr sv r_deepseek_coder[] = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", k_cjk_hangul, R"(\p{N})"};
constexpr sv r_deepseek_v3[] = {R"(\p{N}{1,3})", R"([\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+)", k_deepseek_v3};
constexpr sv r_falcon[] = {R"([\p{P}\$\+<=>\^~\|`]+)", k_gpt2, "[0-9][0-9][0-9]"};
constexpr sv r_starcoder[] = {R"(\p{N})", k_gpt2};
constexpr sv r_bloom[] = {k_bloom};
constexpr sv r_viking[] = {k_bloom, R"(\p{N})"};

constexpr sv n_default[] = {"default"};
constexpr sv n_llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"};
constexpr sv n_dbrx[] = {"dbrx", "smaug-bpe"};
constexpr sv n_deepseek_llm[] = {"deepseek-llm"};
constexpr sv n_deepseek_coder[] = {"deepseek-coder"};
constexpr sv n_deepseek_v3[] = {"deepseek-v3", "hunyuan-dense"};
constexpr sv n_falcon[] = {"falcon"};
constexpr sv n_gpt2[] = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                         "mellum", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"};
constexpr sv n_gpt2_sep[] = {"jina-v1-en", "jina-v2-code", "roberta-bpe"};
constexpr sv n_starcoder_clean[] = {"starcoder", "refact", "codeshell", "exaone", "minerva-7b"};
constexpr sv n_starcoder[] = {"command-r", "smollm"};
constexpr sv n_qwen2_clean[] = {"stablelm2"};
constexpr sv n_qwen2[] = {"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "hunyuan", "grok-2"};
constexpr sv n_qwen35[] = {"qwen35"};
constexpr sv n_chatglm4[] = {"glm4", "chatglm-bpe"};
constexpr sv n_tekken[] = {"tekken"};
constexpr sv n_gpt4o[] = {"gpt-4o", "llama4", "minimax-m2"};
constexpr sv n_bloom[] = {"bloom", "gpt3-finnish"};
constexpr sv n_poro[] = {"poro-chat"};
constexpr sv n_viking[] = {"viking"};

constexpr pretokenizer_spec k_specs[] = {
    {.names = n_default, .regexes = r_default},
    {.names = n_llama3, .regexes = r_llama3, .ignore_merges = true, .add_bos = true},
    {.names = n_dbrx, .regexes = r_llama3},
    {.names = n_deepseek_llm, .regexes = r_deepseek_llm, .clean_spaces = false},
    {.names = n_deepseek_coder, .regexes = r_deepseek_coder, .clean_spaces = false},
    {.names = n_deepseek_v3, .regexes = r_deepseek_v3, .clean_spaces = false},
    {.names = n_falcon, .regexes = r_falcon},
    {.names = n_gpt2, .regexes = r_gpt2},
    {.names = n_gpt2_sep, .regexes = r_gpt2, .add_sep = true},
    {.names = n_starcoder_clean, .regexes = r_starcoder},
    {.names = n_starcoder, .regexes = r_starcoder, .clean_spaces = false},
    {.names = n_qwen2_clean, .regexes = r_qwen2},
    {.names = n_qwen2, .regexes = r_qwen2, .clean_spaces = false},
    {.names = n_qwen35, .regexes = r_qwen35, .clean_spaces = false},
    {.names = n_chatglm4, .regexes = r_llama3, .no_bos_token = true},
    {.names = n_tekken, .regexes = r_tekken, .ignore_merges = true, .add_bos = true, .clean_spaces = false},
    {.names = n_gpt4o, .regexes = r_gpt4o, .clean_spaces = false},
    {.names = n_bloom, .regexes = r_bloom},
    {.names = n_poro, .regexes = r_bloom, .clean_spaces = false},
    {.names = n_viking, .regexes = r_viking, .clean_spaces = false},
};

}  // namespace

const pretokenizer_spec* find_pretokenizer(std::string_view name) noexcept {
  for (const auto& spec : k_specs) {
    for (sv n : spec.names) {
      if (n == name) return &spec;
    }
  }
  return nullptr;
}

const pretokenizer_spec& default_pretokenizer() noexcept { return k_specs[0]; }

std::span<const pretokenizer_spec> all_pretokenizers() noexcept { return k_specs; }

// ---- regex_splitter

regex_splitter::~regex_splitter() {
  for (void* c : codes_) pcre2_code_free(static_cast<pcre2_code*>(c));
}

result<std::shared_ptr<const regex_splitter>> regex_splitter::compile(std::span<const std::string_view> patterns) {
  std::shared_ptr<regex_splitter> s(new regex_splitter());
  for (sv pattern : patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      return make_error(errc::internal, "pre-tokenizer pattern does not compile at offset " + std::to_string(offset) +
                                            ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
    s->codes_.push_back(code);
  }
  return std::shared_ptr<const regex_splitter>(std::move(s));
}

namespace {

// Match state of one split() call.
struct match_state {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  match_state() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~match_state() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

result<void> regex_splitter::split(std::span<const std::uint32_t> cpts,
                                   std::vector<std::pair<std::size_t, std::size_t>>& words) const {
  // PCRE2 needs valid UTF-8: encode the code points, turning the few it cannot take (surrogates
  // from lenient decoding) into U+FFFD, and remember where each code point starts.
  std::string text;
  text.reserve(cpts.size() + 8);
  std::vector<std::uint32_t> byte_to_cpt;
  byte_to_cpt.reserve(cpts.size() + 1);
  for (std::size_t i = 0; i < cpts.size(); ++i) {
    std::uint32_t cp = cpts[i];
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = unicode::replacement_char;
    const std::size_t before = text.size();
    unicode::append_utf8(text, cp);
    byte_to_cpt.resize(text.size(), static_cast<std::uint32_t>(i));
    (void)before;
  }
  byte_to_cpt.push_back(static_cast<std::uint32_t>(cpts.size()));
  std::vector<std::size_t> cpt_to_byte(cpts.size() + 1, text.size());
  for (std::size_t b = text.size(); b-- > 0;) cpt_to_byte[byte_to_cpt[b]] = b;

  std::vector<std::pair<std::size_t, std::size_t>> pieces{{0, cpts.size()}}, next;
  if (cpts.empty()) pieces.clear();
  match_state state;
  for (void* c : codes_) {
    auto* code = static_cast<pcre2_code*>(c);
    next.clear();
    for (const auto& [begin, end] : pieces) {
      const std::size_t b0 = cpt_to_byte[begin], b1 = cpt_to_byte[end];
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + b0);
      const std::size_t length = b1 - b0;
      std::size_t pos = 0, emitted = 0;  // byte offsets within the piece
      std::uint32_t options = 0;
      while (pos <= length) {
        const int rc = pcre2_match(code, subject, length, pos, options | PCRE2_NO_UTF_CHECK, state.data, state.context);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (options == 0) break;
          // An empty match was not allowed here: step one character and try again.
          options = 0;
          ++pos;
          while (pos < length && (static_cast<unsigned char>(text[b0 + pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          return make_error(errc::internal, std::string("pre-tokenizer match failed: ") + reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
        const std::size_t ms = ov[0], me = ov[1];
        if (ms > emitted) next.emplace_back(byte_to_cpt[b0 + emitted], byte_to_cpt[b0 + ms]);  // the gap
        if (me > ms) next.emplace_back(byte_to_cpt[b0 + ms], byte_to_cpt[b0 + me]);
        emitted = std::max(emitted, me);
        pos = me;
        options = me == ms ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
        if (me == ms && me == length) break;
      }
      if (emitted < length) next.emplace_back(byte_to_cpt[b0 + emitted], end);
    }
    pieces.swap(next);
  }
  words = std::move(pieces);
  return ok();
}

}  // namespace spite::tokenizer
