# spite::scheduler tests: samplers.
spite_add_catch_test(test_sampler
  SOURCES unit/scheduler/sampler_test.cpp
  DEPS spite::scheduler)

# The continuous-batching engine with real models: prompt cache, streamed text.
spite_add_catch_test(test_engine
  SOURCES unit/scheduler/prompt_cache_test.cpp unit/scheduler/engine_text_test.cpp
  DEPS spite::scheduler spite::tokenizer spite::gguf)
