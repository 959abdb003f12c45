#!/usr/bin/env bash
# Which __global__ functions of kernels/cuda/ a test suite launched: reads the names the
# interpreted CUDA device logged (STREAMGRAD_CUDAEMU_KERNEL_LOG, one per line, from every
# test process of a `bazel test --config=cudaemu` run), prints how many of the kernels
# the sources define were launched and names the others. .ci/run calls it after its
# interpreted-cuda pass.
#
#   tests/kernels/cuda/kernel_coverage.sh LOG
#
# Exit status: 0 when every kernel was launched at least once, 1 otherwise (or when LOG
# is missing or empty: the run logged nothing).
set -euo pipefail
cd "$(dirname "$0")/../../.."
log=$1
if [ ! -s "$log" ]; then
  echo "kernel_coverage: $log is missing or empty: no kernel launch was logged"
  exit 1
fi
# Every `__global__ void [__launch_bounds__(...)] name(` of the sources, declarations
# spread over lines included.
mapfile -t defined < <(for f in kernels/cuda/*.cu; do
  { tr '\n' ' ' <"$f" | grep -oE '__global__ void( __launch_bounds__\([^)]*\))? +[a-z_0-9]+\(' ||
    true; } | sed -E 's/.* ([a-z_0-9]+)\($/\1/'
done | sort -u)
missing=()
for k in "${defined[@]}"; do
  grep -qx "$k" "$log" || missing+=("$k")
done
echo "kernel_coverage: $(( ${#defined[@]} - ${#missing[@]} )) of ${#defined[@]} kernels of" \
  "kernels/cuda launched by the suite on the interpreted CUDA device"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "kernel_coverage: never launched: ${missing[*]}"
  exit 1
fi
