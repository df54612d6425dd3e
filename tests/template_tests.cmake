# Chat-template interpreter tests (unit and golden).
spite_add_catch_test(test_template
  SOURCES unit/tokenizer/template_test.cpp golden/chat_template_test.cpp
  DEPS spite::tokenizer)
