#!/bin/bash
# The layering, as visibility declares it: the layers above kernels/ may depend on
# //kernels (the public entry points) and on nothing else under kernels/; the layers above
# runtime/ may depend on //runtime and on nothing else under runtime/ (the cuda backend
# only where cuda code lives: the process groups). Inside runtime/, memory, observe and the
# cpu and sim backends are visible to the umbrella //runtime alone, so that none of them
# can lean on another; the interpreted CUDA device (runtime/cudaemu) is reached through
# @local_cuda only, and sees the sim executor it runs on.
#
# Bazel 4 has no negative build test, so this asks `bazel query` which targets each
# layer's libraries can see, and fails on any it should not.
#
# Run from the workspace (it runs bazel itself, so it is not a bazel test target):
#   tests/kernels/layering_test.sh
# Exit status 0 when the layering holds, 1 with the offending targets listed otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

status=0

# check LAYER UNIVERSE ALLOWED: the libraries in UNIVERSE that LAYER may depend on must
# all match the extended regex ALLOWED (config_settings are always visible in Bazel 4 and
# hold no code; test-only targets are for the tests).
check() {
  local layer=$1 universe=$2 allowed=$3
  local visible extra
  visible=$(bazel query --noshow_progress \
    "visible(set($layer), kind('_library|filegroup|cc_binary', $universe)) except attr(testonly, 1, $universe)" \
    2>/dev/null | sort)
  extra=$(echo "$visible" | grep -vE "^($allowed)\$" || true)
  if [[ -n "$extra" ]]; then
    echo "FAIL: $layer may depend on internals of $universe:"
    echo "$extra" | sed 's/^/  /'
    status=1
  else
    echo "ok: $layer sees only $allowed in $universe"
  fi
}

for layer in //engine:engine //ops:ops //nn:nn //gradcheck:gradcheck //distributed:distributed //tools:all; do
  check "$layer" //kernels/... '//kernels:kernels'
done
for layer in //kernels:kernels //engine:engine //ops:ops //nn:nn //gradcheck:gradcheck //tools:all; do
  check "$layer" //runtime/... '//runtime:runtime'
done
check //distributed:all //runtime/... '//runtime:runtime|//runtime/cuda:cuda_backend'
# Inside the runtime: the backend interface sees only the value types; memory, the
# observers and the backends see the interface and the value types. (The public
# //runtime:runtime is visible everywhere, but depending on it from inside is a cycle,
# which Bazel refuses.)
inner='//runtime:runtime|//runtime/base:base|//runtime/backend:backend'
check //runtime/backend:backend //runtime/... "$inner"
for pkg in memory observe cpu sim cuda; do
  check "//runtime/$pkg:all" //runtime/... "$inner|//runtime/$pkg:[a-z_]+"
done
# The interpreted CUDA device runs its streams on the sim backend's executor.
check //runtime/cudaemu:all //runtime/... "$inner|//runtime/cudaemu:[a-z_]+|//runtime/sim:sim"

# The tests of the kernels see the internals they check.
if ! bazel query --noshow_progress "visible(//tests/kernels:kernel_test_util, //kernels/host:host)" \
    2>/dev/null | grep -q '^//kernels/host:host$'; then
  echo "FAIL: //tests/kernels cannot see //kernels/host:host"
  status=1
fi
exit $status
