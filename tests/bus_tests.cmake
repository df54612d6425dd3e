# spite::bus tests: org.spite.Daemon1 on private dbus-daemons (a session bus, and a system bus
# built from the machine's system.conf with the shipped policy file); they need dbus-daemon.
find_package(sdbus-c++ 1.2 CONFIG REQUIRED)
spite_add_catch_test(test_bus
  SOURCES unit/bus/private_bus.cpp unit/bus/daemon_bus_test.cpp unit/bus/policy_test.cpp
  DEPS spite::bus SDBusCpp::sdbus-c++)
target_compile_definitions(test_bus PRIVATE SPITE_DBUS_POLICY="${PROJECT_SOURCE_DIR}/systemd/org.spite.Daemon1.conf")

# spited itself on a private session bus: needs the daemon and the kernel fixtures.
target_sources(test_bus PRIVATE e2e/daemon_bus_test.cpp)
target_include_directories(test_bus PRIVATE unit/bus e2e)
target_link_libraries(test_bus PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_bus PRIVATE
  SPITED_PATH="$<TARGET_FILE:spited>"
  SPITECTL_PATH="$<TARGET_FILE:spitectl>"
  SPITE_FIXTURE_DIR="${_fixture_dir}")
add_dependencies(test_bus spited spitectl ${_fixture_names})
