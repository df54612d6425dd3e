# spited's OpenAI HTTP API as a real process on loopback (test_http).
spite_add_catch_test(test_http HAS_SLOW
  SOURCES e2e/http_api_test.cpp support/http_client.cpp
  DEPS nlohmann_json::nlohmann_json)
target_compile_definitions(test_http PRIVATE
  SPITED_PATH="$<TARGET_FILE:spited>"
  SPITECTL_PATH="$<TARGET_FILE:spitectl>")
add_dependencies(test_http spited spitectl)

