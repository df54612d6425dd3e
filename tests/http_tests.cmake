# A Catch2 test that runs spited and spitectl as processes (their paths compiled in).
function(spite_add_daemon_test target)
  spite_add_catch_test(${target} ${ARGN})
  target_compile_definitions(${target} PRIVATE
    SPITED_PATH="$<TARGET_FILE:spited>"
    SPITECTL_PATH="$<TARGET_FILE:spitectl>")
  add_dependencies(${target} spited spitectl)
endfunction()

# The HTTP client of these tests, compiled once for all of them.
add_library(spite_test_http_client STATIC support/http_client.cpp)
target_include_directories(spite_test_http_client PUBLIC support)
target_link_libraries(spite_test_http_client PUBLIC nlohmann_json::nlohmann_json PRIVATE spite_warnings)

# spited's OpenAI HTTP API as a real process on loopback (test_http).
spite_add_daemon_test(test_http HAS_SLOW
  SOURCES e2e/http_api_test.cpp e2e/http_robustness_test.cpp
  DEPS spite_test_http_client)


# The official openai SDK (Node 20, "openai": "^6") against a spited with an API key: models,
# chat (plain, streamed with usage, the SDK's stream helper), completions, embeddings (base64 and
# float), a forced tool call (plain and streamed), json_schema output, logprobs and the SDK's
# error classes. run.sh installs the SDK once into ~/.cache/spite/openai-node, never into the tree, and
# exits 77 (skipped) when npm cannot reach its registry.
add_test(NAME openai_node_client
         COMMAND "${CMAKE_CURRENT_LIST_DIR}/openai_client/run.sh" "$<TARGET_FILE:spited>" "$<TARGET_FILE:spitectl>")
set_tests_properties(openai_node_client PROPERTIES
  LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "SPITE_SHARED_DIR_DEFAULT=${SPITE_SHARED_DIR}")

# Embeddings, structured output, forced tool calls, logprobs (against the golden logits), token-id
# prompts and fill-in-the-middle suffixes.
spite_add_daemon_test(test_http_features
  SOURCES e2e/http_features_test.cpp e2e/http_prompts_test.cpp
  DEPS spite_test_http_client spite::gguf)

# The API and `spitectl run` on a MoE (tiny-qwen3moe) and an MLA (tiny-deepseek2) model: golden
# greedy completions, embeddings and streamed chat.
spite_add_daemon_test(test_http_arch
  SOURCES e2e/http_arch_test.cpp
  DEPS spite_test_http_client)
