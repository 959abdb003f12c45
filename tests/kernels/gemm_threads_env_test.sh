#!/bin/bash
# The default thread count (runtime/backend/cpu_settings.h) under each combination of
# STREAMGRAD_NUM_THREADS, OPENBLAS_NUM_THREADS and OMP_NUM_THREADS, and OpenBLAS kept at one
# thread whatever they say: runs gemm_threads_test's hidden "[env]" case once per line.
# Argument: the gemm_threads_test binary.
set -euo pipefail
bin="$1"
cpus=$(nproc)  # the CPUs this process may run on, as sched_getaffinity counts them
[ "$cpus" -gt 16 ] && cpus=16
run() {  # run EXPECTED [VAR=VALUE...]: the default must be EXPECTED
  local want=$1
  shift
  echo "gemm_threads_env_test: $* -> $want"
  env -u STREAMGRAD_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -u GOTO_NUM_THREADS \
    EXPECT_DEFAULT_THREADS="$want" "$@" "$bin" --warn NoTests "[env]"
}
run 11 OPENBLAS_NUM_THREADS=11
run 5 OMP_NUM_THREADS=5
run 3 OPENBLAS_NUM_THREADS=3 OMP_NUM_THREADS=5
run 4 STREAMGRAD_NUM_THREADS=4 OPENBLAS_NUM_THREADS=3 OMP_NUM_THREADS=5
run 6 OPENBLAS_NUM_THREADS=many OMP_NUM_THREADS=6   # not a count: skipped, as OpenBLAS does
run "$cpus" OPENBLAS_NUM_THREADS=0
run "$cpus"
echo "gemm_threads_env_test: ok"
