# spite::server units: tool-call formats (grammars, parsers, detection from real templates).
spite_add_catch_test(test_server
  SOURCES unit/server/tools_test.cpp unit/server/harmony_test.cpp
  DEPS spite::server spite::grammar)
