#include "commands.hpp"

namespace spite::ctl {

std::span<const command> all_commands() {
  static constexpr command table[] = {
      {"run", "generate text with a model, in this process", run_run},
      {"inspect", "print a GGUF file's format, metadata, tensors and totals", run_inspect},
      {"tokenize", "text to token ids with a model's tokenizer", run_tokenize},
      {"detokenize", "token ids to text", run_detokenize},
      {"bench-tokenize", "tokenizer throughput on a text file (MB/s)", run_bench_tokenize},
  };
  return table;
}

}  // namespace spite::ctl
