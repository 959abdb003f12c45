"""A Catch2 test of the runtime layer: one source file named after the target."""

def runtime_test(name, env = {}, size = "small", **kwargs):
    native.cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"],
        env = env,
        deps = [
            ":test_devices",
            "//runtime",
            "//third_party/catch2:catch2_main",
        ],
        **kwargs
    )
