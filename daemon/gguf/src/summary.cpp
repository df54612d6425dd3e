#include "spite/gguf/summary.hpp"

namespace spite::gguf {

std::string tokenizer_kind(std::string_view model) {
  struct entry {
    std::string_view model, kind;
  };
  static constexpr entry table[] = {
      {"llama", "SPM"}, {"gpt2", "BPE"}, {"bert", "WPM"}, {"t5", "UGM"},
      {"rwkv", "RWKV"}, {"plamo2", "PLaMo-2"}, {"no_vocab", "none"}, {"none", "none"},
  };
  for (const auto& e : table) {
    if (e.model == model) return std::string(e.kind);
  }
  return model.empty() ? "none" : std::string(model);
}

file_summary summarize(const file& f) {
  file_summary s;
  const metadata& m = f.meta();
  s.architecture = std::string(m.get_string("general.architecture").value_or(""));
  s.name = std::string(m.get_string("general.name").value_or(""));
  s.tokenizer_model = std::string(m.get_string("tokenizer.ggml.model").value_or(""));
  s.tokenizer_kind = tokenizer_kind(s.tokenizer_model);
  s.tokenizer_pre = std::string(m.get_string("tokenizer.ggml.pre").value_or(""));
  if (const array_value* tokens = m.get_array("tokenizer.ggml.tokens")) s.n_vocab = tokens->size();
  for (const tensor_info& t : f.tensors()) {
    type_total& tt = s.per_type[std::string(type_name(t.type))];
    tt.tensors += 1;
    tt.elements += static_cast<std::uint64_t>(t.n_elements());
    tt.bytes += t.size;
    s.n_params += static_cast<std::uint64_t>(t.n_elements());
    s.tensor_bytes += t.size;
  }
  return s;
}

}  // namespace spite::gguf
