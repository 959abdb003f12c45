#!/bin/bash
# ThreadSanitizer still sees the level loops' memory although the tsan build compiles them
# without its instrumentation (kernels/host/announced_loops.cc): for every operand of every
# entry of the level tables, a plain write raced against the entry's call must be reported
# (TSan's exit status 66, "data race" in its report), and the same two accesses ordered by a
# join must not be. The strided case's operand 2 is an element the row skips: no report.
# Argument: the loops_tsan_race binary.
set -euo pipefail
bin="$1"
export TSAN_OPTIONS="halt_on_error=1:exitcode=66"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
runs=0
expect() {  # expect STATUS NAME K [joined]
  local want=$1 rc=0
  shift
  "$bin" "$@" >"$out" 2>&1 || rc=$?
  runs=$((runs + 1))
  if [ "$rc" -ne "$want" ]; then
    echo "loops_tsan_test: '$*' exited $rc, expected $want:"
    sed 's/^/  | /' "$out" | head -30
    fail=1
  elif [ "$want" -eq 66 ] && ! grep -q "WARNING: ThreadSanitizer: data race" "$out"; then
    echo "loops_tsan_test: '$*' exited 66 without a data race report:"
    sed 's/^/  | /' "$out" | head -30
    fail=1
  fi
}
cases=$("$bin" --list)
[ -n "$cases" ] || { echo "loops_tsan_test: no cases"; exit 1; }
while read -r name count; do
  for ((k = 0; k < count; ++k)); do
    if [ "$name" = unary_strided ] && [ "$k" -eq 2 ]; then
      expect 0 "$name" "$k"
    else
      expect 66 "$name" "$k"
    fi
    expect 0 "$name" "$k" joined
  done
done <<<"$cases"
echo "loops_tsan_test: $runs runs, $([ $fail -eq 0 ] && echo ok || echo FAILED)"
exit $fail
