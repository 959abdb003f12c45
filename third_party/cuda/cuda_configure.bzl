"""Detects the CUDA toolkit and publishes it as @local_cuda.

With nvcc present (at $CUDA_PATH, default /usr/local/cuda, unless STREAMGRAD_CUDA=0) the
repository offers the toolkit headers and link targets. Without it the same labels exist
but are incompatible with every platform, so `bazel test //...` reports dependent targets
as SKIPPED and project BUILD files need no conditionals. `defs.bzl` tells Starlark code
whether CUDA is on (`CUDA_ENABLED`, `if_cuda`).

After installing or removing the toolkit, run `bazel sync --only=local_cuda` (or
`bazel shutdown`): a running server does not notice nvcc appearing or disappearing.
"""

_LIBS = {
    "cudart": ["-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    "cudart_shared": ["-lcudart"],
    "cublas": ["-lcublas", "-lcublasLt"],
    "cudnn": ["-lcudnn"],
    "nccl": ["-lnccl"],
}

def _cuda_configure_impl(rctx):
    cuda_path = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    enabled = rctx.os.environ.get("STREAMGRAD_CUDA", "1") != "0"
    nvcc = rctx.path(cuda_path + "/bin/nvcc")
    enabled = enabled and nvcc.exists
    rctx.file("WORKSPACE", "workspace(name = \"local_cuda\")\n")
    lines = [
        "package(default_visibility = [\"//visibility:public\"])",
        "constraint_setting(name = \"cuda\")",
        "constraint_value(name = \"cuda_missing\", constraint_setting = \":cuda\")",
    ]
    if enabled:
        rctx.symlink(cuda_path + "/include", "include")
        libdir = cuda_path + "/lib64"
        lines.append("cc_library(name = \"cuda_headers\", hdrs = glob([\"include/**\"]), " +
                     "includes = [\"include\"])")
        for name, flags in _LIBS.items():
            opts = ["-L" + libdir, "-Wl,-rpath," + libdir] + flags
            lines.append("cc_library(name = %r, deps = [\":cuda_headers\"], linkopts = %r)" %
                         (name, opts))
    else:
        for name in ["cuda_headers"] + _LIBS.keys():
            lines.append("cc_library(name = %r, target_compatible_with = [\":cuda_missing\"])" %
                         name)
    rctx.file("BUILD", "\n".join(lines) + "\n")
    rctx.file("defs.bzl", "\n".join([
        "CUDA_ENABLED = %s" % enabled,
        "NVCC = %r" % (str(nvcc) if enabled else ""),
        "CUDA_COMPATIBLE = [] if CUDA_ENABLED else [\"@local_cuda//:cuda_missing\"]",
        "def if_cuda(if_true, if_false = []):",
        "    return if_true if CUDA_ENABLED else if_false",
    ]) + "\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "STREAMGRAD_CUDA"],
    local = True,
)
