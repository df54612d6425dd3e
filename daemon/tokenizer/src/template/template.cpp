// The public face of the chat-template interpreter: compile once, render many times.
#include "spite/tokenizer/template.hpp"

#include "template/interp.hpp"
#include "template/lexer.hpp"
#include "template/parser.hpp"

namespace spite::tokenizer {

result<chat_template> chat_template::compile(std::string_view source) {
  SPITE_TPL_LET(auto tokens, template_detail::tokenize(source));
  SPITE_TPL_LET(auto prog, template_detail::parse(std::move(tokens)));
  chat_template t;
  t.program_ = std::move(prog);
  return t;
}

result<std::string> chat_template::render(const value& context, const render_options& options) const {
  if (!program_) return make_error(errc::invalid_argument, "chat template: render of a template that was not compiled");
  if (!context.is_dict() && !context.is_undefined())
    return make_error(errc::invalid_argument, "chat template: the context must be a dict of variables");
  template_detail::interp in(options);
  return in.render(*program_, context);
}

}  // namespace spite::tokenizer
