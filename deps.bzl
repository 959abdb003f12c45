"""streamgrad_dependencies(): the repositories //:streamgrad needs, for any workspace.

streamgrad's own WORKSPACE and a project that embeds streamgrad call the same function,
so the two cannot drift. In a user's WORKSPACE:

    local_repository(name = "streamgrad", path = "/path/to/streamgrad")  # or http_archive
    load("@streamgrad//:deps.bzl", "streamgrad_dependencies")
    streamgrad_dependencies()

Bazel does not read an external repository's WORKSPACE, which is why this is a macro.
It declares, each only when the workspace has not declared that name already (so a
project that brings its own abseil or rules_cc keeps it; declare those before the call):

- rules_cc, rules_java, remote_coverage_tools: offline stand-ins (ARCHITECTURE.md §10) for the
  repositories Bazel 4 fetches even for a plain C++ build. offline_stubs = False leaves
  them to Bazel's own (online) defaults.
- com_google_absl: Debian's libabsl-dev under upstream labels (third_party/system_absl.bzl).
- local_cuda: the CUDA toolkit where nvcc exists, else labels that make the CUDA parts
  SKIPPED (third_party/cuda/cuda_configure.bzl; STREAMGRAD_CUDA=0 turns CUDA off).

The other system libraries (OpenBLAS, zlib, gloo, nlohmann-json) need no repository: they
are link flags on //third_party/sys targets (tools/bootstrap.sh installs them).

Nothing is fetched until a build needs it. Where libabsl-dev is missing, that build fails
with system_absl's message naming the package to install.
"""

load("//third_party:system_absl.bzl", "system_absl")
load("//third_party/cuda:cuda_configure.bzl", "cuda_configure")
load("//third_party/libtorch:libtorch_configure.bzl", "libtorch_configure")

def _stub_repository_impl(rctx):
    # The stub's directory inside streamgrad, wherever streamgrad itself lies (the main
    # repository or external/streamgrad): a local_repository path would be relative to the
    # user's workspace instead.
    src = rctx.path(rctx.attr.build_file).dirname
    for child in src.readdir():
        rctx.symlink(child, child.basename)

_stub_repository = repository_rule(
    implementation = _stub_repository_impl,
    attrs = {"build_file": attr.label(mandatory = True)},
)

_STUBS = ["rules_cc", "rules_java", "remote_coverage_tools"]

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def streamgrad_dependencies(offline_stubs = True):
    """Declares the repositories //:streamgrad needs that the workspace does not have yet.

    Args:
      offline_stubs: declare the offline stand-ins for rules_cc, rules_java and
        remote_coverage_tools (needed where Bazel cannot download them).
    """
    if offline_stubs:
        for name in _STUBS:
            _maybe(
                _stub_repository,
                name,
                build_file = Label("//third_party/stubs/%s:BUILD" % name),
            )
    _maybe(system_absl, "com_google_absl")
    _maybe(cuda_configure, "local_cuda")

def streamgrad_dev_dependencies():
    """What only streamgrad's own benchmarks need (bench/torch_bench): libtorch detection."""
    _maybe(libtorch_configure, "local_libtorch")
