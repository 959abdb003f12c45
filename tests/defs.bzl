"""catch_test: a Catch2 test made of one source file, by default named after the target."""

def catch_test(name, deps, env = {}, size = "small", srcs = None, **kwargs):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs or [name + ".cc"],
        env = env,
        deps = deps + ["//third_party/catch2:catch2_main"],
        **kwargs
    )
