"""A Catch2 test of the engine: one source file named after the target."""

def engine_test(name, env = {}, size = "small", **kwargs):
    native.cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"],
        env = env,
        deps = [
            ":engine_test_util",
            "//engine",
            "//ops",
            "//runtime",
            "//third_party/catch2:catch2_main",
        ],
        **kwargs
    )
