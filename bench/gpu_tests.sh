#!/usr/bin/env bash
# Runs the test binaries of an unpacked bench/gpu_bundle.sh archive as `bazel test` would run
# them (each with its target's environment, OPENBLAS_NUM_THREADS=1, TEST_TMPDIR), several at
# a time (those the bundle lists as exclusive alone, afterwards), one log per test, and
# prints one line per test and a closing count.
#
#   bench/gpu_tests.sh BUNDLE_DIR LOG_DIR     (GPU_TEST_JOBS: tests at a time, default 8;
#                                              GPU_TEST_TIMEOUT: seconds per test, default 300)
#
# Exit status: 0 when every test passed, 1 otherwise.
set -u
bundle="$1"; logs="$2"
mkdir -p "$logs"
run_one() {  # run_one BUNDLE LOGS "tests/x/y KEY=VALUE ..."
  local bundle="$1" logs="$2"; set -- $3
  local test="$1"; shift
  local log="$logs/$(echo "$test" | tr / _).log" tmp
  tmp="$(mktemp -d)"
  local start=$(date +%s) r=pass
  env OPENBLAS_NUM_THREADS=1 TEST_TMPDIR="$tmp" "$@" \
    timeout "${GPU_TEST_TIMEOUT:-300}" "$bundle/bin/$test" > "$log" 2>&1 || r=FAIL
  rm -rf "$tmp"
  printf '%-5s %4ss  %s\n' "$r" "$(( $(date +%s) - start ))" "$test"
}
export -f run_one
# Tests the bundle lists as exclusive run alone, after the others.
exclusive="$bundle/exclusive"
[[ -f "$exclusive" ]] || exclusive=/dev/null
alone() { grep -qxF -f "$exclusive" <<< "${1%% *}"; }
shared=() single=()
while read -r line; do
  if alone "$line"; then single+=("$line"); else shared+=("$line"); fi
done < <(grep cuda "$bundle/tests.env"; grep -v cuda "$bundle/tests.env")
# The cuda tests first: a run cut short has still executed them.
{
  printf '%s\0' "${shared[@]}" |
    xargs -0 -P "${GPU_TEST_JOBS:-8}" -I{} bash -c 'run_one "$0" "$1" "$2"' "$bundle" "$logs" {}
  for line in "${single[@]}"; do run_one "$bundle" "$logs" "$line"; done
} | tee "$logs/summary.txt"
failed=$(grep -c '^FAIL' "$logs/summary.txt")
echo "$(grep -c '^pass' "$logs/summary.txt") passed, $failed failed"
[[ "$failed" -eq 0 ]]
