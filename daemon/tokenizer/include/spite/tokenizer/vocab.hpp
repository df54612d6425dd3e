// A model's vocabulary, read from the tokenizer.ggml.* metadata of a GGUF file: token texts,
// scores and attributes, merges, special tokens and the flags that steer tokenization. Immutable
// after load; shared by every tokenizer session.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/gguf/file.hpp"

namespace spite::tokenizer {

using token = std::int32_t;
inline constexpr token no_token = -1;

enum class vocab_kind { none, spm, bpe, wpm, ugm };

std::string_view vocab_kind_name(vocab_kind k) noexcept;

// Token attributes (bit flags), as the reference engine derives them from token types.
enum token_attr : std::uint32_t {
  attr_undefined = 0,
  attr_unknown = 1u << 0,
  attr_unused = 1u << 1,
  attr_normal = 1u << 2,
  attr_control = 1u << 3,
  attr_user_defined = 1u << 4,
  attr_byte = 1u << 5,
  attr_normalized = 1u << 6,
  attr_lstrip = 1u << 7,  // swallow whitespace before the token when parsing specials
  attr_rstrip = 1u << 8,  // swallow whitespace after it
};

struct special_ids {
  token bos = no_token, eos = no_token, eot = no_token, eom = no_token, unk = no_token, sep = no_token,
        pad = no_token, mask = no_token, nl = no_token;
  token fim_pre = no_token, fim_suf = no_token, fim_mid = no_token, fim_pad = no_token, fim_rep = no_token,
        fim_sep = no_token;
};

struct pretokenizer_spec;

class vocab {
 public:
  // Reads the vocabulary of `meta`; errors name the key and the problem.
  static result<std::shared_ptr<const vocab>> load(const gguf::metadata& meta);

  vocab_kind kind() const noexcept { return kind_; }
  const std::string& model_name() const noexcept { return model_; }  // tokenizer.ggml.model
  const std::string& pre_name() const noexcept { return pre_; }      // tokenizer.ggml.pre
  const pretokenizer_spec* pretokenizer() const noexcept { return pre_spec_; }

  std::size_t size() const noexcept { return texts_.size(); }
  bool valid(token t) const noexcept { return t >= 0 && static_cast<std::size_t>(t) < texts_.size(); }
  std::string_view text(token t) const { return texts_[static_cast<std::size_t>(t)]; }
  float score(token t) const { return scores_[static_cast<std::size_t>(t)]; }
  std::uint32_t attr(token t) const { return attrs_[static_cast<std::size_t>(t)]; }
  bool has_attr(token t, std::uint32_t a) const { return (attr(t) & a) != 0; }
  token find(std::string_view text) const noexcept;
  std::size_t max_token_bytes() const noexcept { return max_token_bytes_; }

  const special_ids& special() const noexcept { return special_; }
  bool is_eog(token t) const noexcept;
  std::span<const token> eog_tokens() const noexcept { return eog_; }
  // Control, user-defined and unknown tokens, longest text first: the ones matched in raw text.
  std::span<const token> special_tokens() const noexcept { return special_cache_; }
  // The token of one raw byte (SPM/UGM "<0xAB>", byte-level BPE alphabet); no_token if none.
  token byte_token(std::uint8_t byte) const noexcept;
  // The byte a byte token stands for (SPM/UGM "<0xAB>"), or -1.
  int token_byte(token t) const noexcept;

  bool add_bos() const noexcept { return add_bos_; }
  bool add_eos() const noexcept { return add_eos_; }
  bool add_sep() const noexcept { return add_sep_; }
  bool add_space_prefix() const noexcept { return add_space_prefix_; }
  bool remove_extra_whitespaces() const noexcept { return remove_extra_whitespaces_; }
  bool clean_spaces() const noexcept { return clean_spaces_; }
  bool ignore_merges() const noexcept { return ignore_merges_; }

  // BPE merges, interned: every string that appears in a merge has a symbol id; merge() gives
  // the rank and the merged symbol of two adjacent symbols.
  struct merge_result {
    std::int32_t rank = -1;
    std::int32_t merged = -1;
  };
  std::int32_t symbol(std::string_view text) const noexcept;
  merge_result merge(std::int32_t left, std::int32_t right) const noexcept;
  std::string_view symbol_text(std::int32_t s) const { return symbols_[static_cast<std::size_t>(s)]; }
  std::size_t n_merges() const noexcept { return n_merges_; }

  // Precompiled normalization map of UGM (SentencePiece) vocabularies; empty otherwise.
  std::string_view precompiled_charsmap() const noexcept { return charsmap_; }

 private:
  struct sv_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  result<void> load_tokens(const gguf::metadata& meta);
  result<void> load_merges(const gguf::metadata& meta);
  void load_special_ids(const gguf::metadata& meta);
  void detect_special_tokens(const gguf::metadata& meta);

  vocab_kind kind_ = vocab_kind::none;
  std::string model_, pre_;
  const pretokenizer_spec* pre_spec_ = nullptr;
  // Stable storage for token and merge texts: fixed-size blocks that never move, so the views
  // below stay valid however much is added.
  class string_arena {
   public:
    std::string_view store(std::string_view s);

   private:
    std::vector<std::unique_ptr<char[]>> blocks_;
    std::size_t used_ = 0, capacity_ = 0;
  };
  string_arena arena_;
  std::vector<std::string_view> texts_;
  std::vector<float> scores_;
  std::vector<std::uint32_t> attrs_;
  std::unordered_map<std::string_view, token, sv_hash> by_text_;
  std::size_t max_token_bytes_ = 0;
  special_ids special_;
  std::vector<token> eog_;
  std::vector<token> special_cache_;
  std::vector<std::string_view> symbols_;
  std::unordered_map<std::string_view, std::int32_t, sv_hash> symbol_ids_;
  std::unordered_map<std::uint64_t, merge_result> merges_;
  std::size_t n_merges_ = 0;
  std::string charsmap_;
  bool add_bos_ = false, add_eos_ = false, add_sep_ = false, add_space_prefix_ = false,
       remove_extra_whitespaces_ = false, clean_spaces_ = false, ignore_merges_ = false;
};

}  // namespace spite::tokenizer
