"""catch_test: a Catch2 test made of one source file, by default named after the target.

ALL_BACKENDS: every backend and kernel table this build has beyond //runtime's cpu and sim
(the cuda backend and kernels where nvcc is). Every test links them, so that tests that
walk the devices present run on cuda where a GPU is; the lean library's own test leaves
them out (catch_test(..., lean = True)).

OPS_PRELUDE, RUNTIME_PRELUDE: the copts and deps that make a test's sources load one of
tests/pch's precompiled headers (tests/pch/prelude.bzl says why); catch_test picks one
from the test's deps, other cc_tests add it themselves.
"""

load("@local_cuda//:defs.bzl", "if_cuda")
load("//:build_defs.bzl", "SG_COPTS")

ALL_BACKENDS = if_cuda([
    "//kernels:cuda_kernels",
    "//runtime/cuda:cuda_backend",
])

def _prelude(kind):
    return struct(
        copts = ["-include", "tests/pch/%s_prelude.h" % kind, "-Winvalid-pch",
                 "-include", "tests/pch/%s_prelude_stamp.h" % kind],
        deps = ["//tests/pch:%s_prelude" % kind],
    )

OPS_PRELUDE = _prelude("ops")
RUNTIME_PRELUDE = _prelude("runtime")
NO_PRELUDE = struct(copts = [], deps = [])

# Packages at or above //ops: a test that depends on one of them links the operators anyway.
_OPS_LEVEL = ["//ops", "//nn", "//gradcheck", "//distributed", "//tools", "//:streamgrad",
              "//tests/ops", "//tests/nn", "//tests/gradcheck", "//tests/engine",
              "//tests/distributed", "//tests/tools"]

def _at(label, packages):
    for p in packages:
        if label == p or label.startswith(p + ":") or label.startswith(p + "/"):
            return True
    return False

def prelude_for(deps):
    """The precompiled prelude a test with these deps can load without new dependencies."""
    for d in deps:
        if _at(d, _OPS_LEVEL):
            return OPS_PRELUDE
    for d in deps:
        if _at(d, ["//runtime", "//kernels"]):
            return RUNTIME_PRELUDE
    return NO_PRELUDE

def catch_test(name, deps, env = {}, size = "small", srcs = None, copts = [], lean = False, **kwargs):
    # The lean library's tests keep exactly their dependencies.
    prelude = NO_PRELUDE if lean else prelude_for(deps)
    native.cc_test(
        name = name,
        copts = SG_COPTS + [c for c in copts if c not in SG_COPTS] + prelude.copts,
        size = size,
        srcs = srcs or [name + ".cc"],
        env = env,
        deps = deps + prelude.deps + ["//third_party/catch2:catch2_main"] +
               ([] if lean else ALL_BACKENDS),
        **kwargs
    )
