"""catch_test: a Catch2 test made of one source file, by default named after the target."""

load("//:build_defs.bzl", "SG_COPTS")

def catch_test(name, deps, env = {}, size = "small", srcs = None, copts = [], **kwargs):
    native.cc_test(
        name = name,
        copts = SG_COPTS + [c for c in copts if c not in SG_COPTS],
        size = size,
        srcs = srcs or [name + ".cc"],
        env = env,
        deps = deps + ["//third_party/catch2:catch2_main"],
        **kwargs
    )
