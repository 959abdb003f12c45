"""A Catch2 test of the engine."""

load("//tests:defs.bzl", "catch_test")

def engine_test(name, extra_deps = [], **kwargs):
    catch_test(name = name, deps = [":engine_test_util", "//engine", "//ops", "//runtime", "//tests:device_names"] + extra_deps, **kwargs)
