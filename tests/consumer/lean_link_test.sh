#!/bin/bash
# The lean library (//:streamgrad_lean) links no CUDA library, no NCCL and no gloo: a
# user's program built against it (lean_app, tests/consumer/main.cc) has none of them in
# `ldd`, and none statically inside it either (the cuda backend links CUDA's runtime
# statically, so ldd alone would miss it). The same program against the full library
# (full_app) must show gloo by the same two checks, or the checks could not see anything.
# Both programs then run their training step.
#
#   tests/consumer/lean_link_test.sh path/to/lean_app path/to/full_app
set -euo pipefail
lean=$1
full=$2
status=0

# The shared libraries of CUDA, NCCL and gloo that `ldd $1` lists.
linked() { ldd "$1" | grep -oE 'lib(cuda|cudart|cublas|cublasLt|cudnn|nccl|gloo)[^ ]*\.so[^ ]*' || true; }
# Symbols of the CUDA runtime, NCCL, gloo and streamgrad's own cuda backend in $1.
inside() {
  nm -C "$1" | grep -oE '(cudaStreamCreate|cudaMalloc|ncclCommInitRank|gloo::[A-Za-z_]+|CudaBackend|GlooGroup)' |
    sort -u | head -5 || true
}

if [ -n "$(linked "$lean")" ]; then
  echo "FAIL: the lean program needs $(linked "$lean" | tr '\n' ' ')"
  status=1
fi
if [ -n "$(inside "$lean")" ]; then
  echo "FAIL: the lean program holds CUDA, NCCL or gloo code: $(inside "$lean" | tr '\n' ' ')"
  status=1
fi
if ! linked "$full" | grep -q gloo || ! inside "$full" | grep -q GlooGroup; then
  echo "FAIL: the full program shows no gloo; the checks above cannot see what they look for"
  status=1
fi
for app in "$lean" "$full"; do
  echo "$(basename "$app"): $(stat -L -c %s "$app") bytes; ldd:"
  ldd "$app" | sed 's/^/  /'
  "$app" || status=1
done
exit $status
