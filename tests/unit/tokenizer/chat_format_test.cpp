#include <catch2/catch.hpp>

#include "spite/gguf/file.hpp"
#include "spite/gguf/writer.hpp"
#include "spite/tokenizer/chat.hpp"
#include "spite/tokenizer/tokenizer.hpp"

namespace {

using namespace spite::tokenizer;

struct model_meta {
  std::vector<std::byte> bytes;
  spite::gguf::file file;
};

model_meta with_template(const char* tmpl) {
  spite::gguf::writer w;
  w.set("tokenizer.ggml.model", spite::gguf::value::string("llama"));
  w.set("tokenizer.ggml.tokens", spite::gguf::value::array_of_strings({"<unk>", "<s>", "</s>", "a"}));
  if (tmpl != nullptr) w.set("tokenizer.chat_template", spite::gguf::value::string(tmpl));
  model_meta m{w.to_bytes(), {}};
  auto f = spite::gguf::file::parse(m.bytes, "chat.gguf");
  REQUIRE(f.ok());
  m.file = std::move(*f);
  return m;
}

}  // namespace

TEST_CASE("the model's own chat template renders the conversation with its BOS text", "[tokenizer][chat]") {
  auto m = with_template("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}");
  auto v = vocab::load(m.file.meta());
  REQUIRE(v.ok());
  auto chat = chat_format::from_metadata(m.file.meta(), **v);
  REQUIRE(chat.ok());
  CHECK_FALSE(chat->is_fallback());
  const chat_message conv[] = {{"system", "be brief"}, {"user", "hi"}};
  CHECK(*chat->render(conv, true) == "<s>[system]be brief[user]hi[assistant]");
  CHECK(*chat->render(conv, false) == "<s>[system]be brief[user]hi");
}

TEST_CASE("a model without a template gets ChatML", "[tokenizer][chat]") {
  auto m = with_template(nullptr);
  auto v = vocab::load(m.file.meta());
  auto chat = chat_format::from_metadata(m.file.meta(), **v);
  REQUIRE(chat.ok());
  CHECK(chat->is_fallback());
  const chat_message conv[] = {{"user", "hi"}};
  CHECK(*chat->render(conv, true) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("a template that cannot be used is reported at load with the reason", "[tokenizer][chat]") {
  auto broken = with_template("{% for m in messages %}{{ m.content }");
  auto v = vocab::load(broken.file.meta());
  auto chat = chat_format::from_metadata(broken.file.meta(), **v);
  REQUIRE_FALSE(chat.ok());
  CHECK_THAT(chat.err().message, Catch::Contains("tokenizer.chat_template"));

  auto raising = with_template("{{ raise_exception('this template needs tools') }}");
  auto r = chat_format::from_metadata(raising.file.meta(), **v);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.err().message, Catch::Contains("cannot be rendered") && Catch::Contains("this template needs tools"));
  CHECK_FALSE(chat_format::from_metadata(raising.file.meta(), **v, "tool_use").ok());  // no such variant
}
