# spite::dispatch tests: device detection, the card table; spitectl devices / cards.
spite_add_catch_test(test_devices
  SOURCES unit/dispatch/devices_test.cpp
  DEPS spite::dispatch)
target_compile_definitions(test_devices PRIVATE SPITECTL_PATH="$<TARGET_FILE:spitectl>")
add_dependencies(test_devices spitectl)
