// Catch2's main, compiled once for every test (it costs ~9 s at -O0; ARCHITECTURE.md §10).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
