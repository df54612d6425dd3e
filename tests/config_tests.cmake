# spite::config tests: spite.toml parsing, errors, overrides; the documented config/spite.toml.
spite_add_catch_test(test_config
  SOURCES unit/config/config_test.cpp unit/config/errors_test.cpp
  DEPS spite::config)
target_compile_definitions(test_config PRIVATE SPITE_CONFIG_EXAMPLE="${PROJECT_SOURCE_DIR}/config/spite.toml")
