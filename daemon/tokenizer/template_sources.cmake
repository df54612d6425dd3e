# Sources of the Jinja chat-template interpreter (spite/tokenizer/template.hpp), relative to
# daemon/tokenizer/.
set(SPITE_TEMPLATE_SOURCES)
