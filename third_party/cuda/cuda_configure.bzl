"""Detects the CUDA toolkit and publishes it as @local_cuda.

With nvcc present (at $CUDA_PATH, default /usr/local/cuda, unless STREAMGRAD_CUDA=0) the
repository offers the toolkit headers and link targets. Without it the same labels exist
but are incompatible with every platform, so `bazel test //...` reports dependent targets
as SKIPPED and project BUILD files need no conditionals. `defs.bzl` tells Starlark code
whether CUDA is on (`CUDA_ENABLED`, `if_cuda`).

STREAMGRAD_CUDA=emu (the `--config=cudaemu` of .bazelrc) publishes the interpreted CUDA
device instead (runtime/cudaemu): the same labels point at the project's stand-ins for the
CUDA runtime, cuBLAS and cuDNN, `cuda_library` compiles .cu sources as host C++
(`CUDA_EMULATED`), and NCCL is missing (its process group stays GPU-only). No toolkit is
needed for it.

After installing or removing the toolkit, run `bazel sync --only=local_cuda` (or
`bazel shutdown`): a running server does not notice nvcc appearing or disappearing.
"""

_LIBS = {
    "cudart": ["-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    "cudart_shared": ["-lcudart"],
    "cudnn": ["-lcudnn"],
    "nccl": ["-lnccl"],
}

# cuBLAS is opened on first use (third_party/cuda/cublas_lazy.cc): linked directly, it and
# cublasLt cost every process ~0.6 s and ~210 MB at start-up.
_CUBLAS_LAZY = "//third_party/cuda:cublas_lazy"

# The interpreted device's stand-in for each label; None: missing there.
_EMULATED = {
    "cuda_headers": "//runtime/cudaemu:cudart",
    "cudart": "//runtime/cudaemu:cudart",
    "cudart_shared": "//runtime/cudaemu:cudart",
    "cublas": "//runtime/cudaemu:cublas",
    "cudnn": "//runtime/cudaemu:cudnn",
    "nccl": None,
    "cuda_paths": None,
}

def _c_string(s):
    # A C string literal of a path.
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""

def _project_label(path):
    # The project's own label as seen from @local_cuda: "@//..." when the project is the
    # main repository, "@streamgrad//..." when a user's workspace embeds it.
    label = Label(path)
    return "@%s//%s:%s" % (label.workspace_name, label.package, label.name)

def _cuda_configure_impl(rctx):
    cuda_path = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    setting = rctx.os.environ.get("STREAMGRAD_CUDA", "1")
    emulated = setting == "emu"
    nvcc = rctx.path(cuda_path + "/bin/nvcc")
    enabled = emulated or (setting != "0" and nvcc.exists)
    rctx.file("WORKSPACE", "workspace(name = \"local_cuda\")\n")
    lines = [
        "package(default_visibility = [\"//visibility:public\"])",
        "constraint_setting(name = \"cuda\")",
        "constraint_value(name = \"cuda_missing\", constraint_setting = \":cuda\")",
    ]
    if emulated:
        for name, actual in _EMULATED.items():
            if actual:
                lines.append("alias(name = %r, actual = %r)" % (name, _project_label(actual)))
            else:
                lines.append("cc_library(name = %r, target_compatible_with = [\":cuda_missing\"])" %
                             name)
    elif enabled:
        rctx.symlink(cuda_path + "/include", "include")
        libdir = cuda_path + "/lib64"
        lines.append("cc_library(name = \"cuda_headers\", hdrs = glob([\"include/**\"]), " +
                     "includes = [\"include\"])")
        for name, flags in _LIBS.items():
            opts = ["-L" + libdir, "-Wl,-rpath," + libdir] + flags
            lines.append("cc_library(name = %r, deps = [\":cuda_headers\"], linkopts = %r)" %
                         (name, opts))
        rctx.file("streamgrad_cuda_paths.h",
                  "// Written by cuda_configure: where this build's CUDA libraries are.\n" +
                  "#define STREAMGRAD_CUDA_LIBDIR %s\n" % _c_string(libdir))
        lines.append("cc_library(name = \"cuda_paths\", hdrs = [\"streamgrad_cuda_paths.h\"], " +
                     "includes = [\".\"])")
        lines.append("alias(name = \"cublas\", actual = %r)" % _project_label(_CUBLAS_LAZY))
    else:
        for name in ["cuda_headers", "cublas", "cuda_paths"] + _LIBS.keys():
            lines.append("cc_library(name = %r, target_compatible_with = [\":cuda_missing\"])" %
                         name)
    rctx.file("BUILD", "\n".join(lines) + "\n")
    rctx.file("defs.bzl", "\n".join([
        "CUDA_ENABLED = %s" % enabled,
        "CUDA_EMULATED = %s" % emulated,
        "NVCC = %r" % (str(nvcc) if enabled and not emulated else ""),
        "CUDA_COMPATIBLE = [] if CUDA_ENABLED else [\"@local_cuda//:cuda_missing\"]",
        "def if_cuda(if_true, if_false = []):",
        "    return if_true if CUDA_ENABLED else if_false",
        "def if_cuda_emulated(if_true, if_false = []):",
        "    return if_true if CUDA_EMULATED else if_false",
    ]) + "\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "STREAMGRAD_CUDA"],
    local = True,
)
