# spite::grammar tests: GBNF, the matcher, the JSON-schema compiler and the grammar sampler.
spite_add_catch_test(test_grammar
  SOURCES unit/grammar/gbnf_test.cpp unit/grammar/json_schema_test.cpp unit/grammar/grammar_sampler_test.cpp
          unit/grammar/engine_grammar_test.cpp
  DEPS spite::grammar spite::scheduler spite::tokenizer spite::gguf)
