#include "spite/tokenizer/vocab.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "pretokenize.hpp"
#include "spite/core/log.hpp"
#include "unicode.hpp"

namespace spite::tokenizer {
namespace {

// Token types as stored in tokenizer.ggml.token_type.
enum file_token_type : std::int64_t {
  type_undefined = 0, type_normal = 1, type_unknown = 2, type_control = 3,
  type_user_defined = 4, type_unused = 5, type_byte = 6,
};

std::uint32_t attr_of_type(std::int64_t type) {
  switch (type) {
    case type_normal: return attr_normal;
    case type_unknown: return attr_unknown;
    case type_control: return attr_control;
    case type_user_defined: return attr_user_defined;
    case type_unused: return attr_unused;
    case type_byte: return attr_byte;
    default: return attr_undefined;
  }
}

constexpr std::size_t k_max_tokens = 1u << 24;  // far above any real vocabulary

}  // namespace

std::string_view vocab_kind_name(vocab_kind k) noexcept {
  switch (k) {
    case vocab_kind::none: return "none";
    case vocab_kind::spm: return "SPM";
    case vocab_kind::bpe: return "BPE";
    case vocab_kind::wpm: return "WPM";
    case vocab_kind::ugm: return "UGM";
  }
  return "?";
}

std::string_view vocab::string_arena::store(std::string_view s) {
  if (s.size() > capacity_ - used_) {
    capacity_ = std::max<std::size_t>(s.size(), 1 << 20);
    blocks_.push_back(std::make_unique<char[]>(capacity_));
    used_ = 0;
  }
  char* at = blocks_.back().get() + used_;
  if (!s.empty()) std::memcpy(at, s.data(), s.size());
  used_ += s.size();
  return {at, s.size()};
}

token vocab::find(std::string_view text) const noexcept {
  const auto it = by_text_.find(text);
  return it == by_text_.end() ? no_token : it->second;
}

bool vocab::is_eog(token t) const noexcept { return std::find(eog_.begin(), eog_.end(), t) != eog_.end(); }

token vocab::byte_token(std::uint8_t byte) const noexcept {
  if (kind_ == vocab_kind::spm || kind_ == vocab_kind::ugm) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const char buf[6] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>'};
    const token t = find({buf, 6});
    if (t != no_token) return t;
    const char raw = static_cast<char>(byte);
    return find({&raw, 1});
  }
  return find(unicode::byte_to_symbol(byte));
}

int vocab::token_byte(token t) const noexcept {
  if (!valid(t) || !has_attr(t, attr_byte)) return -1;
  const std::string_view s = text(t);
  if (s.size() != 6 || !s.starts_with("<0x") || s[5] != '>') return -1;
  const auto hexval = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::toupper(static_cast<unsigned char>(c)) - 'A' + 10; };
  return hexval(s[3]) * 16 + hexval(s[4]);
}

std::int32_t vocab::symbol(std::string_view text) const noexcept {
  const auto it = symbol_ids_.find(text);
  return it == symbol_ids_.end() ? -1 : it->second;
}

vocab::merge_result vocab::merge(std::int32_t left, std::int32_t right) const noexcept {
  if (left < 0 || right < 0) return {};
  const auto it = merges_.find((static_cast<std::uint64_t>(left) << 32) | static_cast<std::uint32_t>(right));
  return it == merges_.end() ? merge_result{} : it->second;
}

result<void> vocab::load_tokens(const gguf::metadata& meta) {
  const gguf::array_value* tokens = meta.get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->element_type() != gguf::value_type::string) {
    return make_error(errc::malformed, "tokenizer.ggml.tokens is missing or not an array of strings");
  }
  const std::size_t n = tokens->size();
  if (n == 0 || n > k_max_tokens) {
    return make_error(errc::malformed, "tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
  }
  const gguf::array_value* scores = meta.get_array("tokenizer.ggml.scores");
  if (scores != nullptr && (scores->size() != n || scores->element_type() != gguf::value_type::f32)) {
    return make_error(errc::malformed, "tokenizer.ggml.scores must hold one f32 per token (" + std::to_string(n) + ")");
  }
  const gguf::array_value* types = meta.get_array("tokenizer.ggml.token_type");
  if (types != nullptr && (types->size() != n || !types->int_at(0))) {
    return make_error(errc::malformed, "tokenizer.ggml.token_type must hold one integer per token (" + std::to_string(n) + ")");
  }

  texts_.resize(n);
  scores_.assign(n, 0.0f);
  attrs_.assign(n, attr_normal);
  by_text_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string_view word = tokens->string_at(i);
    std::string placeholder;
    if (word.empty()) {
      placeholder = "[EMPTY_" + std::to_string(i) + "]";
      word = placeholder;
    }
    texts_[i] = arena_.store(word);
    if (!by_text_.emplace(texts_[i], static_cast<token>(i)).second) {
      return make_error(errc::malformed, "tokenizer.ggml.tokens: token " + std::to_string(i) + " repeats the text of token " +
                                             std::to_string(by_text_[texts_[i]]));
    }
    max_token_bytes_ = std::max(max_token_bytes_, word.size());
    if (scores != nullptr) scores_[i] = static_cast<float>(*scores->float_at(i));
    if (types != nullptr) attrs_[i] = attr_of_type(types->int_at(i).value_or(0));
  }
  return ok();
}

result<void> vocab::load_merges(const gguf::metadata& meta) {
  const gguf::array_value* merges = meta.get_array("tokenizer.ggml.merges");
  if (merges == nullptr || merges->element_type() != gguf::value_type::string) {
    return make_error(errc::malformed, "BPE vocabulary without tokenizer.ggml.merges");
  }
  n_merges_ = merges->size();
  const auto intern = [&](std::string_view s) -> std::int32_t {
    const auto it = symbol_ids_.find(s);
    if (it != symbol_ids_.end()) return it->second;
    const std::string_view stored = arena_.store(s);
    const auto id = static_cast<std::int32_t>(symbols_.size());
    symbols_.push_back(stored);
    symbol_ids_.emplace(stored, id);
    return id;
  };
  // Every token is a symbol, so that single characters of the alphabet can start merging.
  symbols_.reserve(texts_.size() + n_merges_);
  symbol_ids_.reserve(texts_.size() + n_merges_);
  for (std::string_view t : texts_) {
    const auto id = static_cast<std::int32_t>(symbols_.size());
    if (symbol_ids_.emplace(t, id).second) symbols_.push_back(t);
  }
  merges_.reserve(n_merges_);
  std::string joined;
  for (std::size_t rank = 0; rank < n_merges_; ++rank) {
    const std::string_view m = merges->string_at(rank);
    // "left right"; the separator is the first space after the first byte (a side may be " ").
    const std::size_t sep = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (sep == std::string_view::npos) continue;  // the reference skips malformed merges the same way
    const std::string_view left = m.substr(0, sep), right = m.substr(sep + 1);
    const std::int32_t l = intern(left), r = intern(right);
    joined.assign(left).append(right);
    const std::int32_t merged = intern(joined);
    const std::uint64_t key = (static_cast<std::uint64_t>(l) << 32) | static_cast<std::uint32_t>(r);
    merges_.emplace(key, merge_result{static_cast<std::int32_t>(rank), merged});  // first rank wins
  }
  return ok();
}

void vocab::load_special_ids(const gguf::metadata& meta) {
  struct key_ref {
    const char* key;
    token special_ids::*field;
  };
  static constexpr key_ref keys[] = {
      {"tokenizer.ggml.bos_token_id", &special_ids::bos},
      {"tokenizer.ggml.eos_token_id", &special_ids::eos},
      {"tokenizer.ggml.eot_token_id", &special_ids::eot},
      {"tokenizer.ggml.eom_token_id", &special_ids::eom},
      {"tokenizer.ggml.unknown_token_id", &special_ids::unk},
      {"tokenizer.ggml.seperator_token_id", &special_ids::sep},  // sic: the GGUF key is misspelt
      {"tokenizer.ggml.padding_token_id", &special_ids::pad},
      {"tokenizer.ggml.mask_token_id", &special_ids::mask},
      {"tokenizer.ggml.fim_pre_token_id", &special_ids::fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &special_ids::fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &special_ids::fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &special_ids::fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &special_ids::fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &special_ids::fim_sep},
      {"tokenizer.ggml.prefix_token_id", &special_ids::fim_pre},
      {"tokenizer.ggml.suffix_token_id", &special_ids::fim_suf},
      {"tokenizer.ggml.middle_token_id", &special_ids::fim_mid},
  };
  for (const auto& k : keys) {
    const auto v = meta.get_uint(k.key);
    if (!v) continue;
    if (*v == 0xffffffffu) continue;  // the converters write -1 for "none": keep the default
    if (*v >= texts_.size()) {
      log::warn("vocabulary: ", k.key, " = ", *v, " is not a token id; keeping the default");
      continue;
    }
    special_.*k.field = static_cast<token>(*v);
  }
  if (const auto b = meta.get_bool("tokenizer.ggml.add_bos_token")) add_bos_ = *b;
  if (const auto b = meta.get_bool("tokenizer.ggml.add_eos_token")) add_eos_ = *b;
  if (const auto b = meta.get_bool("tokenizer.ggml.add_sep_token")) add_sep_ = *b;
}

void vocab::detect_special_tokens(const gguf::metadata& meta) {
  // Older converters did not record these ids; the reference finds them by text, marks them as
  // control tokens, and we do the same so that both engines stop and split identically.
  const auto mark = [&](token& id, std::initializer_list<std::string_view> names) {
    if (id != no_token) return;
    for (std::string_view n : names) {
      const token t = find(n);
      if (t == no_token) continue;
      id = t;
      auto& a = attrs_[static_cast<std::size_t>(t)];
      if ((a & attr_control) == 0) a = attr_control;
      return;
    }
  };
  mark(special_.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                      "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"});
  mark(special_.eom, {"<|eom_id|>"});
  mark(special_.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
                              "\xe2\x96\x81<PRE>", "<|code_prefix|>"});
  mark(special_.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>",
                              "\xe2\x96\x81<SUF>", "<|code_suffix|>"});
  mark(special_.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
                              "\xe2\x96\x81<MID>", "<|code_middle|>"});
  mark(special_.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<PAD>"});
  mark(special_.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"});
  mark(special_.fim_sep, {"<|file_sep|>"});

  const auto add_eog = [&](token t) {
    if (t != no_token && !is_eog(t)) eog_.push_back(t);
  };
  add_eog(special_.fim_pad);
  add_eog(special_.fim_rep);
  add_eog(special_.fim_sep);
  for (std::string_view n : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    const token t = find(n);
    if (t == no_token) continue;
    add_eog(t);
    auto& a = attrs_[static_cast<std::size_t>(t)];
    if ((a & attr_control) == 0) a = attr_control;
  }
  add_eog(special_.eos);
  add_eog(special_.eot);
  add_eog(special_.eom);
  std::sort(eog_.begin(), eog_.end());

  for (std::size_t i = 0; i < texts_.size(); ++i) {
    if (attrs_[i] & (attr_control | attr_user_defined | attr_unknown)) special_cache_.push_back(static_cast<token>(i));
  }
  std::stable_sort(special_cache_.begin(), special_cache_.end(),
                   [&](token a, token b) { return text(a).size() > text(b).size(); });

  // Whitespace handling around specials that some model families rely on.
  std::string name(meta.get_string("general.name").value_or(""));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto set_attr = [&](std::string_view t, std::uint32_t a, bool on) {
    const token id = find(t);
    if (id == no_token) return;
    auto& v = attrs_[static_cast<std::size_t>(id)];
    v = on ? (v | a) : (v & ~a);
  };
  if (pre_.find("jina-v2-de") != std::string::npos || pre_.find("jina-v2-es") != std::string::npos ||
      pre_.find("jina-v2-code") != std::string::npos) {
    set_attr("<mask>", attr_lstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (token t : special_cache_) attrs_[static_cast<std::size_t>(t)] |= attr_rstrip;
    set_attr("</s>", attr_rstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, attr_rstrip, false);
  }
}

result<std::shared_ptr<const vocab>> vocab::load(const gguf::metadata& meta) {
  auto v = std::make_shared<vocab>();
  const auto model = meta.get_string("tokenizer.ggml.model");
  if (!model) return make_error(errc::malformed, "no tokenizer: tokenizer.ggml.model is missing");
  v->model_ = std::string(*model);
  v->pre_ = std::string(meta.get_string("tokenizer.ggml.pre").value_or(""));
  special_ids& s = v->special_;
  if (v->model_ == "no_vocab" || v->model_ == "none") {
    v->kind_ = vocab_kind::none;
    return std::shared_ptr<const vocab>(std::move(v));
  }
  if (v->model_ == "llama") {
    v->kind_ = vocab_kind::spm;
    s.bos = 1, s.eos = 2, s.unk = 0;
    v->add_space_prefix_ = true, v->add_bos_ = true;
  } else if (v->model_ == "bert") {
    v->kind_ = vocab_kind::wpm;
    s.bos = 101, s.unk = 100, s.sep = 102, s.pad = 0, s.mask = 103;
    v->clean_spaces_ = true, v->add_bos_ = true, v->add_sep_ = true;
  } else if (v->model_ == "gpt2") {
    v->kind_ = vocab_kind::bpe;
    s.bos = 11, s.eos = 11;
    v->clean_spaces_ = true;
  } else if (v->model_ == "t5") {
    v->kind_ = vocab_kind::ugm;
    s.eos = 1, s.unk = 2, s.pad = 0;
    v->add_eos_ = true;
    if (const gguf::array_value* map = meta.get_array("tokenizer.ggml.precompiled_charsmap")) {
      v->charsmap_.assign(reinterpret_cast<const char*>(map->raw().data()), map->raw().size());
    }
  } else {
    return make_error(errc::unsupported, "tokenizer model '" + v->model_ + "' is not supported (supported: llama/SPM, "
                                         "gpt2/BPE, bert/WPM, t5/UGM, none)");
  }
  if (v->kind_ == vocab_kind::bpe) {
    v->pre_spec_ = find_pretokenizer(v->pre_);
    if (v->pre_spec_ == nullptr) {
      log::warn("vocabulary: pre-tokenizer '", v->pre_, "' is unknown; using the default (tokenization may differ)");
      v->pre_spec_ = &default_pretokenizer();
    }
    v->ignore_merges_ = v->pre_spec_->ignore_merges;
    v->add_bos_ = v->pre_spec_->add_bos;
    v->clean_spaces_ = v->pre_spec_->clean_spaces;
    v->add_sep_ = v->pre_spec_->add_sep;
  }
  if (const auto b = meta.get_bool("tokenizer.ggml.add_space_prefix")) v->add_space_prefix_ = *b;
  if (const auto b = meta.get_bool("tokenizer.ggml.remove_extra_whitespaces")) v->remove_extra_whitespaces_ = *b;

  SPITE_TRY(v->load_tokens(meta));
  if (v->kind_ == vocab_kind::bpe) SPITE_TRY(v->load_merges(meta));
  v->load_special_ids(meta);
  if (v->pre_spec_ != nullptr && v->pre_spec_->no_bos_token) s.bos = no_token;

  // The newline token.
  if (v->kind_ == vocab_kind::spm) s.nl = v->byte_token('\n');
  else if (v->kind_ == vocab_kind::wpm) s.nl = s.pad;
  else s.nl = v->find(v->kind_ == vocab_kind::bpe ? unicode::byte_to_symbol('\n') : "\n");

  v->detect_special_tokens(meta);
  return std::shared_ptr<const vocab>(std::move(v));
}

}  // namespace spite::tokenizer
