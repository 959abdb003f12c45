"""Compiler options every streamgrad target passes itself.

The library's headers need C++17 (std::optional, structured bindings). A project that
depends on streamgrad as an external repository builds these targets with its own
toolchain and flags, and Bazel 4's default toolchain compiles C++ as -std=c++0x; so each
target asks for C++17 itself instead of relying on the .bazelrc, which Bazel does not
read for an external repository.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

SG_COPTS = ["-std=c++17"]

def cc_toolchain_setup(ctx):
    """The C++ toolchain, its feature configuration, and the deps' CcInfo merged into one.

    For rules that run the toolchain themselves (tools/install's whole library, tests/pch's
    preludes): ctx needs the attributes _cc_toolchain and deps, the cpp fragment and the
    C++ toolchain type.
    """
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    return cc_toolchain, features, deps
