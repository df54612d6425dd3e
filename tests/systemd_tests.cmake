# The systemd packaging of spited (systemd/): the units verify without a single warning, their
# hardening keeps a low exposure score, and a real systemd in systemd-nspawn runs them end to end.
# The scripts exit 77 (skipped) when the machine lacks what they cannot provide, saying what.
set(_systemd_tests "${CMAKE_CURRENT_LIST_DIR}/systemd")

add_test(NAME systemd_analyze_verify
         COMMAND "${_systemd_tests}/verify_units.sh" "${PROJECT_SOURCE_DIR}/systemd" "$<TARGET_FILE:spited>")
set_tests_properties(systemd_analyze_verify PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)

add_test(NAME systemd_analyze_security
         COMMAND "${_systemd_tests}/security.sh" "${PROJECT_SOURCE_DIR}/systemd" 2.5)
set_tests_properties(systemd_analyze_security PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)

# Root only; the first run builds a Debian root file system with debootstrap (about a minute,
# cached under ~/.cache/spite), later runs boot in seconds. Not under ASan (its preset excludes
# the label systemd): the container has no sanitizer runtime.
add_test(NAME systemd_nspawn_e2e
         COMMAND "${_systemd_tests}/nspawn_e2e.sh" "${PROJECT_SOURCE_DIR}" "$<TARGET_FILE:spited>"
                 "$<TARGET_FILE:spitectl>" "$<TARGET_FILE:spite_fixture_good_generic>")
set_tests_properties(systemd_nspawn_e2e PROPERTIES
  LABELS "slow;systemd" SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "SPITE_SHARED_DIR_DEFAULT=${SPITE_SHARED_DIR}")
