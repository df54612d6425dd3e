# Sources of the Jinja chat-template interpreter (spite/tokenizer/template.hpp), relative to
# daemon/tokenizer/.
set(SPITE_TEMPLATE_SOURCES
  src/template/text.cpp
  src/template/strops.cpp
  src/template/value.cpp
  src/template/format.cpp
  src/template/lexer.cpp
  src/template/parser.cpp
  src/template/parse_expr.cpp
  src/template/eval.cpp
  src/template/exec.cpp
  src/template/ops.cpp
  src/template/methods.cpp
  src/template/str_methods.cpp
  src/template/globals.cpp
  src/template/filters.cpp
  src/template/filters_seq.cpp
  src/template/tests.cpp
  src/template/template.cpp)
