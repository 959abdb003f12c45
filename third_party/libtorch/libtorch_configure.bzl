"""Detects libtorch and publishes it as @local_libtorch, for bench/torch_bench only.

Where libtorch's headers and libraries exist (Debian's libtorch-dev: headers under
/usr/include, the C++ API under /usr/include/torch/csrc/api/include, libraries in
/usr/lib/x86_64-linux-gnu; or an unpacked libtorch distribution at $LIBTORCH_PREFIX) the
repository offers `@local_libtorch//:libtorch`. Elsewhere the same label exists but is
incompatible with every platform, so a target depending on it is skipped by `//...` and
refused with a clear message when named. STREAMGRAD_LIBTORCH=0 turns it off.
`defs.bzl` says which (`LIBTORCH_ENABLED`).

After installing or removing libtorch (bench/install_libtorch.sh), run
`bazel sync --only=local_libtorch` (or `bazel shutdown`): a running server does not
notice the files appearing or disappearing.
"""

_LIBS = ["torch", "torch_cpu", "c10"]

def _find_libdir(rctx, prefix):
    for sub in ["lib/x86_64-linux-gnu", "lib64", "lib"]:
        if rctx.path(prefix + "/" + sub + "/libtorch_cpu.so").exists:
            return prefix + "/" + sub
    return None

def _libtorch_configure_impl(rctx):
    prefix = rctx.os.environ.get("LIBTORCH_PREFIX", "/usr")
    enabled = rctx.os.environ.get("STREAMGRAD_LIBTORCH", "1") != "0"
    api_include = prefix + "/include/torch/csrc/api/include"
    libdir = _find_libdir(rctx, prefix)
    enabled = enabled and rctx.path(api_include + "/torch/torch.h").exists and libdir != None
    rctx.file("WORKSPACE", "workspace(name = \"local_libtorch\")\n")
    lines = [
        "package(default_visibility = [\"//visibility:public\"])",
        "constraint_setting(name = \"libtorch_presence\")",
        "constraint_value(name = \"libtorch_missing\", constraint_setting = \":libtorch_presence\")",
    ]
    if enabled:
        # Bazel accepts only include directories inside the execution root (or the
        # toolchain's built-in ones, such as /usr/include): link them into the repository.
        rctx.symlink(api_include, "api_include")
        includes = ["api_include"]
        if prefix != "/usr":
            rctx.symlink(prefix + "/include", "include")
            includes.append("include")
        opts = ["-l" + lib for lib in _LIBS]
        if prefix != "/usr":
            opts = ["-L" + libdir, "-Wl,-rpath," + libdir] + opts
        lines.append("cc_library(name = \"libtorch\", hdrs = glob([%s]), includes = %r, " %
                     (", ".join(["\"%s/**\"" % d for d in includes]), includes) +
                     "linkopts = %r)" % opts)
    else:
        lines.append("cc_library(name = \"libtorch\", " +
                     "target_compatible_with = [\":libtorch_missing\"])")
    rctx.file("BUILD", "\n".join(lines) + "\n")
    rctx.file("defs.bzl", "LIBTORCH_ENABLED = %s\n" % enabled)

libtorch_configure = repository_rule(
    implementation = _libtorch_configure_impl,
    environ = ["LIBTORCH_PREFIX", "STREAMGRAD_LIBTORCH"],
    local = True,
)
