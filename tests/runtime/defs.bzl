"""A Catch2 test of the runtime layer."""

load("//tests:defs.bzl", "catch_test")

def runtime_test(name, **kwargs):
    catch_test(name = name, deps = [":test_devices", "//runtime"], **kwargs)
