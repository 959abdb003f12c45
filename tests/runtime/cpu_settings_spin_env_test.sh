#!/bin/bash
# The starting spin of idle kernel threads (runtime/backend/cpu_settings.h) under
# STREAMGRAD_THREAD_SPIN_US, unset included: runs cpu_settings_test's hidden "[spin_env]"
# case once per line (a shell sets the variable: the project's
# --test_env=STREAMGRAD_THREAD_SPIN_US=200 would override a target's env).
# Argument: the cpu_settings_test binary.
set -euo pipefail
bin="$1"
run() {  # run EXPECTED [STREAMGRAD_THREAD_SPIN_US=VALUE]
  local want=$1
  shift
  echo "cpu_settings_spin_env_test: ${*:-(unset)} -> $want"
  env -u STREAMGRAD_THREAD_SPIN_US EXPECT_SPIN_US="$want" "$@" "$bin" --warn NoTests "[spin_env]"
}
run 2000
run 0 STREAMGRAD_THREAD_SPIN_US=0
run 350 STREAMGRAD_THREAD_SPIN_US=350
run 1000000 STREAMGRAD_THREAD_SPIN_US=1000000
run "error: STREAMGRAD_THREAD_SPIN_US=-5 must be in [0, 1000000] microseconds" \
  STREAMGRAD_THREAD_SPIN_US=-5
run "error: STREAMGRAD_THREAD_SPIN_US=1000001 must be in [0, 1000000]" \
  STREAMGRAD_THREAD_SPIN_US=1000001
run "error: STREAMGRAD_THREAD_SPIN_US=2ms is not a valid whole number" \
  STREAMGRAD_THREAD_SPIN_US=2ms
echo "cpu_settings_spin_env_test: ok"
