#!/usr/bin/env bash
# Embeds streamgrad in a user's Bazel workspace the way README.md documents it, and runs
# one training step (tests/consumer/main.cc). The workspace is made in a temporary folder
# with its own output base, both removed at the end; it holds only the documented lines:
# local_repository pointing at this checkout, the deps.bzl load and call, and the
# .bazelrc line that silences Debian's --sandbox_debug. The program links the lean library
# (@streamgrad//:streamgrad_lean); the full one (@streamgrad) is analysed. Built with plain `bazel build`,
# no --cxxopt, so every library target must ask for C++17 itself.
#
# Also checks that every cc target of the project passes SG_COPTS (a new target without
# it builds in the project, whose .bazelrc adds C++17, and breaks only for users).
#
# Offline. Compiles the lean library once as external/streamgrad (most of a cold project
# build); --disk_cache at ~/.cache/bazel-disk makes later runs cheap.
# Exits non-zero on any failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sg_bazel_consumer.XXXXXX")
bazel_app=(bazel "--output_base=$work/output_base")

cleanup() {
  (cd "$work/app" 2>/dev/null && "${bazel_app[@]}" shutdown) >/dev/null 2>&1 || true
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "bazel_consumer: cc targets without SG_COPTS"
if ! missing=$(cd "$repo" && bazel query --noshow_progress --ui_event_filters=-info \
  'kind("cc_(library|binary|test) rule", //...) except attr(copts, "-std=c\+\+17", //...)'); then
  echo "bazel_consumer: FAILED: bazel query over the project failed"
  exit 1
fi
if [ -n "$missing" ]; then
  echo "bazel_consumer: FAILED: these targets do not pass SG_COPTS (load //:build_defs.bzl):"
  echo "$missing"
  exit 1
fi

mkdir -p "$work/app"
cd "$work/app"
cat >WORKSPACE <<EOF
workspace(name = "consumer")

local_repository(name = "streamgrad", path = "$repo")

load("@streamgrad//:deps.bzl", "streamgrad_dependencies")

streamgrad_dependencies()
EOF
cat >.bazelrc <<EOF
build --sandbox_debug=false
build --disk_cache=~/.cache/bazel-disk
EOF
cat >BUILD <<'EOF'
cc_binary(
    name = "app",
    srcs = ["main.cc"],
    copts = ["-std=c++17"],
    deps = ["@streamgrad//:streamgrad_lean"],
)

cc_binary(
    name = "app_full",
    srcs = ["main.cc"],
    copts = ["-std=c++17"],
    deps = ["@streamgrad"],
)
EOF
cp "$repo/tests/consumer/main.cc" main.cc

# The full library is analysed (every label it names resolves from the user's workspace:
# @local_cuda, gloo, NCCL) but not compiled: the lean one below compiles most of the same
# sources, and compiling both would double the check's time.
echo "bazel_consumer: bazel build --nobuild //:app_full in $work/app"
"${bazel_app[@]}" build --nobuild //:app_full
echo "bazel_consumer: bazel build //:app (the lean library) in $work/app"
start=$(date +%s)
"${bazel_app[@]}" build //:app
echo "bazel_consumer: build took $(( $(date +%s) - start )) s"
./bazel-bin/app
echo "bazel_consumer: PASSED"
