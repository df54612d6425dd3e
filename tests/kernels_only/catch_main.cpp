// Catch2's main, compiled for the target (the packaged Catch2WithMain is built for the host).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
