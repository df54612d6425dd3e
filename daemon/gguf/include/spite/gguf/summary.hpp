// What a GGUF file holds, in a few numbers: architecture, tokenizer, parameters, bytes per type.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "spite/gguf/file.hpp"

namespace spite::gguf {

struct type_total {
  std::uint64_t tensors = 0;
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
};

struct file_summary {
  std::string architecture;     // general.architecture, empty if absent
  std::string name;             // general.name
  std::string tokenizer_model;  // tokenizer.ggml.model ("llama", "gpt2", "bert", "t5", ...)
  std::string tokenizer_kind;   // SPM, BPE, WPM, UGM, RWKV, none, or the unknown model name
  std::string tokenizer_pre;    // tokenizer.ggml.pre
  std::uint64_t n_vocab = 0;    // length of tokenizer.ggml.tokens
  std::uint64_t n_params = 0;   // elements of all tensors
  std::uint64_t tensor_bytes = 0;
  std::map<std::string, type_total> per_type;  // by type name
};

file_summary summarize(const file& f);

// The tokenizer family of a tokenizer.ggml.model value: "llama" -> "SPM", "gpt2" -> "BPE", ...
std::string tokenizer_kind(std::string_view model);

}  // namespace spite::gguf
