"""catch_test: a Catch2 test made of one source file, by default named after the target.

ALL_BACKENDS: every backend and kernel table this build has beyond //runtime's cpu and sim
(the cuda backend and kernels where nvcc is). Every test links them, so that tests that
walk the devices present run on cuda where a GPU is; the lean library's own test leaves
them out (catch_test(..., lean = True)).
"""

load("@local_cuda//:defs.bzl", "if_cuda")
load("//:build_defs.bzl", "SG_COPTS")

ALL_BACKENDS = if_cuda([
    "//kernels:cuda_kernels",
    "//runtime/cuda:cuda_backend",
])

def catch_test(name, deps, env = {}, size = "small", srcs = None, copts = [], lean = False, **kwargs):
    native.cc_test(
        name = name,
        copts = SG_COPTS + [c for c in copts if c not in SG_COPTS],
        size = size,
        srcs = srcs or [name + ".cc"],
        env = env,
        deps = deps + ["//third_party/catch2:catch2_main"] + ([] if lean else ALL_BACKENDS),
        **kwargs
    )
