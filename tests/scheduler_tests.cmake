# spite::scheduler tests: samplers.
spite_add_catch_test(test_sampler
  SOURCES unit/scheduler/sampler_test.cpp
  DEPS spite::scheduler)

spite_add_catch_test(test_prompt_cache
  SOURCES unit/scheduler/prompt_cache_test.cpp
  DEPS spite::scheduler spite::tokenizer spite::gguf)
