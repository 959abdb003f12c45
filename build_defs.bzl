"""Compiler options every streamgrad target passes itself.

The library's headers need C++17 (std::optional, structured bindings). A project that
depends on streamgrad as an external repository builds these targets with its own
toolchain and flags, and Bazel 4's default toolchain compiles C++ as -std=c++0x; so each
target asks for C++17 itself instead of relying on the .bazelrc, which Bazel does not
read for an external repository.
"""

SG_COPTS = ["-std=c++17"]
