# spite::scheduler tests: samplers.
spite_add_catch_test(test_sampler
  SOURCES unit/scheduler/sampler_test.cpp
  DEPS spite::scheduler)
