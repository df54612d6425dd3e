#include "commands.hpp"

namespace spite::ctl {

std::span<const command> all_commands() {
  static constexpr command table[] = {
      {"run", "generate text with a model, in this process", run_run},
      {"inspect", "print a GGUF file's format, metadata, tensors and totals", run_inspect},
      {"tokenize", "text to token ids with a model's tokenizer", run_tokenize},
      {"detokenize", "token ids to text", run_detokenize},
      {"bench-tokenize", "tokenizer throughput on a text file (MB/s)", run_bench_tokenize},
      {"devices", "the CPU and GPUs spite can use here, or why a GPU is not usable", run_devices},
      {"cards", "the GPU card table (names, archs, memory) for planning", run_cards},
      {"dispatch", "which kernel serves each op of a model here or on a named card", run_dispatch},
      {"verify", "check a kernel library against the reference ops over a sweep of shapes", run_verify},
      {"status", "what the running spited serves: models, kernels, state", run_status},
      {"models", "the models spited serves, loaded or on demand", run_models},
      {"load", "make spited load a model (from spite.toml or a file)", run_load},
      {"unload", "make spited unload a model once its requests finish", run_unload},
      {"reload", "make spited reread spite.toml and rescan its kernel directories", run_reload},
      {"mkmodel", "write a random-weight GGUF of a real model's shape and weight type, for benchmarks", run_mkmodel},
      {"bench", "prefill and decode tokens/s, as fractions of measured bandwidth and peak FLOP/s", run_bench},
  };
  return table;
}

}  // namespace spite::ctl
