#include "spite/tokenizer/chat.hpp"

namespace spite::tokenizer {
namespace {

constexpr std::string_view k_chatml =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

std::string token_text(const vocab& v, token t) { return v.valid(t) ? std::string(v.text(t)) : std::string(); }

}  // namespace

result<chat_format> chat_format::chatml(const vocab& v) {
  chat_format f;
  auto t = chat_template::compile(k_chatml);
  if (!t) return std::move(t).err();
  f.template_ = std::move(*t);
  f.source_ = std::string(k_chatml);
  f.bos_ = token_text(v, v.special().bos);
  f.eos_ = token_text(v, v.special().eos);
  f.fallback_ = true;
  return f;
}

result<chat_format> chat_format::from_metadata(const gguf::metadata& meta, const vocab& v, std::string_view variant) {
  const std::string key = variant.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + std::string(variant);
  const auto source = meta.get_string(key);
  if (!source) {
    if (!variant.empty()) return make_error(errc::not_found, "the model has no chat template named '" + std::string(variant) + "'");
    return chatml(v);
  }
  auto t = chat_template::compile(*source);
  if (!t) return std::move(t).err().with_context(key);
  chat_format f;
  f.template_ = std::move(*t);
  f.source_ = std::string(*source);
  f.bos_ = token_text(v, v.special().bos);
  f.eos_ = token_text(v, v.special().eos);
  // A template that compiles but cannot render the simplest conversation is reported now,
  // when the model loads, rather than on the first request.
  const chat_message probe[] = {{"user", "Hello"}};
  if (auto r = f.render(probe, true); !r) {
    return make_error(r.err().code, key + " cannot be rendered: " + r.err().message);
  }
  return f;
}

result<std::string> chat_format::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json ctx = extra.is_object() ? extra : nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  if (!ctx.contains("tools")) ctx["tools"] = nullptr;
  if (!ctx.contains("documents")) ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  return template_.render(from_json(ctx));
}

result<std::string> chat_format::render(std::span<const chat_message> messages, bool add_generation_prompt) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return render_json(list, add_generation_prompt);
}

}  // namespace spite::tokenizer
