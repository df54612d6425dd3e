// A model's chat format: the Jinja template stored in the GGUF file (tokenizer.chat_template,
// or a named variant tokenizer.chat_template.<name>), rendered with the conversation and the
// model's BOS / EOS texts. A model without a template gets ChatML.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "spite/core/result.hpp"
#include "spite/gguf/file.hpp"
#include "spite/tokenizer/template.hpp"
#include "spite/tokenizer/vocab.hpp"

namespace spite::tokenizer {

struct chat_message {
  std::string role;
  std::string content;
};

class chat_format {
 public:
  // Compiles the model's template now, so a template that cannot be used is reported when the
  // model loads. `variant` selects tokenizer.chat_template.<variant>.
  static result<chat_format> from_metadata(const gguf::metadata& meta, const vocab& v, std::string_view variant = {});
  static result<chat_format> chatml(const vocab& v);

  // messages: an array of OpenAI-style message objects (role, content as string or parts,
  // tool_calls, ...). `extra`: further template variables (tools, enable_thinking, ...).
  result<std::string> render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  result<std::string> render(std::span<const chat_message> messages, bool add_generation_prompt) const;

  const std::string& source() const noexcept { return source_; }
  bool is_fallback() const noexcept { return fallback_; }

 private:
  chat_template template_;
  std::string source_, bos_, eos_;
  bool fallback_ = false;
};

}  // namespace spite::tokenizer
