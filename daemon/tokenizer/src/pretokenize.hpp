// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that split text into
// words before merging, selected by tokenizer.ggml.pre. A family is one entry of the table in
// pretokenize.cpp: adding a family means adding an entry.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "spite/core/result.hpp"

namespace spite::tokenizer {

struct pretokenizer_spec {
  std::span<const std::string_view> names;    // tokenizer.ggml.pre values of this family
  std::span<const std::string_view> regexes;  // applied in order; each splits the previous pieces
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  bool add_bos = false;        // the family adds BOS unless the file says otherwise
  bool clean_spaces = true;    // detokenize removes spaces before punctuation (" ," -> ",")
  bool no_bos_token = false;   // the family has no BOS token at all
  bool add_sep = false;
};

// The spec for a tokenizer.ggml.pre value; nullptr when unknown (the caller uses the default).
const pretokenizer_spec* find_pretokenizer(std::string_view name) noexcept;
const pretokenizer_spec& default_pretokenizer() noexcept;
std::span<const pretokenizer_spec> all_pretokenizers() noexcept;

// The compiled expressions of one spec. Immutable and safe to share between threads; each call
// allocates its own match state.
class regex_splitter {
 public:
  static result<std::shared_ptr<const regex_splitter>> compile(std::span<const std::string_view> patterns);
  ~regex_splitter();
  regex_splitter(const regex_splitter&) = delete;
  regex_splitter& operator=(const regex_splitter&) = delete;

  // Splits `cpts` into words: [begin, end) code point ranges covering the input in order.
  result<void> split(std::span<const std::uint32_t> cpts, std::vector<std::pair<std::size_t, std::size_t>>& words) const;

 private:
  regex_splitter() = default;
  std::vector<void*> codes_;  // pcre2_code_8*
};

}  // namespace spite::tokenizer
