// Text to token ids and back, exactly as the reference engine does it, for every GGUF tokenizer
// family (SPM, byte-level BPE with its pre-tokenizers, WPM, UGM). A tokenizer is immutable and
// shared by all threads; each call keeps its own state.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spite/core/result.hpp"
#include "spite/tokenizer/vocab.hpp"

namespace spite::tokenizer {

class regex_splitter;
class ugm_model;

struct tokenize_options {
  bool add_special = true;     // BOS / EOS / SEP as the vocabulary asks
  bool parse_special = false;  // match control tokens written in the text ("<|im_end|>")
};

class tokenizer {
 public:
  static result<std::shared_ptr<const tokenizer>> create(std::shared_ptr<const vocab> v);
  static result<std::shared_ptr<const tokenizer>> from_metadata(const gguf::metadata& meta);

  const vocab& vocabulary() const noexcept { return *vocab_; }

  // Fails only on an internal limit of the regex engine; any byte string is accepted.
  result<std::vector<token>> tokenize(std::string_view text, const tokenize_options& options = {}) const;

  // The bytes of one token. Control and unknown tokens give their text only with `special`.
  std::string_view piece(token t, bool special = true) const;
  // Concatenated pieces with the vocabulary's decoding rules (leading-space removal for SPM,
  // space cleanup for some BPE families). `remove_special` drops a leading BOS / trailing EOS.
  std::string detokenize(std::span<const token> tokens, bool remove_special = false, bool unparse_special = false) const;

 private:
  tokenizer() = default;
  struct fragment {
    token special = no_token;  // a matched special token, or raw text [begin, end)
    std::size_t begin = 0, end = 0;
  };
  std::vector<fragment> partition(std::string_view text, bool parse_special) const;
  result<void> tokenize_fragment(std::string_view text, std::vector<token>& out) const;

  std::shared_ptr<const vocab> vocab_;
  std::shared_ptr<const regex_splitter> splitter_;  // BPE only
  std::shared_ptr<const ugm_model> ugm_;            // UGM only
  std::vector<std::string> pieces_;                 // token_to_piece, precomputed (special = true)
  std::vector<std::string> pieces_plain_;           // the same with special = false
  struct special_matcher;
  std::shared_ptr<const special_matcher> matcher_;
};

// Turns a stream of tokens into text without ever emitting part of a UTF-8 character, for
// streaming output: bytes of a character split across tokens are held until it is complete.
class stream_detokenizer {
 public:
  // `at_text_start`: the stream begins the text (decode rules for a first token apply: SPM drops
  // the space it prefixed). Leave it false for generated tokens that continue a prompt.
  explicit stream_detokenizer(std::shared_ptr<const tokenizer> tok, bool special = false, bool at_text_start = false)
      : tok_(std::move(tok)), special_(special), first_(at_text_start) {}
  // The text that became complete with this token (may be empty).
  std::string push(token t);
  // Whatever is still held back (an incomplete character at the end of the stream).
  std::string flush();

 private:
  std::shared_ptr<const tokenizer> tok_;
  bool special_;
  bool first_;
  std::string pending_;
};

}  // namespace spite::tokenizer
