#!/usr/bin/env bash
# tools/gradcheck: add, mul and exp pass grad, gradgrad and (on sim) stream checks on cpu,
# sim:0 and sim:1, in JSON with exit code 0, with their comparison errors; an unknown op
# exits 2 naming the known ones; an op that throws (sim memory too small) is a failed row
# with exit code 1, not a crash.
set -uo pipefail
bin="$1"

fail() { echo "gradcheck_test: $*"; exit 1; }

json=$("$bin" --json --ops=add,mul,exp --streams)
rc=$?
[ "$rc" -eq 0 ] || fail "exit code $rc, want 0: $json"
for op in add mul exp; do
  for dev in cpu sim:0 sim:1; do
    for check in grad gradgrad; do
      want="{\"op\":\"$op\",\"device\":\"$dev\",\"check\":\"$check\",\"passed\":true"
      grep -qF "$want" <<<"$json" || fail "JSON lacks: $want in $json"
    done
  done
  for dev in sim:0 sim:1; do
    want="{\"op\":\"$op\",\"device\":\"$dev\",\"check\":\"streams\",\"passed\":true"
    grep -qF "$want" <<<"$json" || fail "JSON lacks: $want in $json"
  done
done
# 3 ops x (3 devices x 2 checks + 2 sim devices x 1 stream check) = 24 rows, plus the
# grad and gradgrad rows of each cuda device present (the interpreted device has two), all
# passed.
cuda_rows=$(grep -oE '"device":"cuda:[0-9]+","check":"(grad|gradgrad)"' <<<"$json" | wc -l)
want_passed=$((24 + cuda_rows))
grep -qF "\"passed\":$want_passed,\"failed\":0,\"skipped\":0" <<<"$json" ||
  fail "counts wrong (want $want_passed passed): $json"
if grep -qF '"passed":false' <<<"$json"; then fail "a row failed: $json"; fi
# A passing row reports the comparison's errors: central differences of exp are never exact
# (the checks run after the comparison used to reset them to 0).
exp_row='"op":"exp","device":"cpu","check":"grad","passed":true,"skipped":false'
exp_err=$(grep -oE "$exp_row,\"max_abs_err\":[^,]+" <<<"$json" | sed 's/.*://')
[ -n "$exp_err" ] || fail "JSON lacks the exp row: $json"
awk -v e="$exp_err" 'BEGIN { exit !(e > 0) }' || fail "exp's max_abs_err is $exp_err: $json"

text=$("$bin" --ops=add --devices=cpu)
rc=$?
[ "$rc" -eq 0 ] || fail "text report: exit code $rc, want 0"
grep -qE '^add +cpu +grad +pass' <<<"$text" || fail "text report lacks the add row: $text"
grep -qF 'gradcheck: 2 passed, 0 failed, 0 skipped in' <<<"$text" || fail "no summary: $text"

err=$("$bin" --ops=nosuchop 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "--ops=nosuchop: exit code $rc, want 2"
for want in "unknown op 'nosuchop'" "known ops: add, " "matmul" "index_select" "copy_"; do
  grep -qF "$want" <<<"$err" || fail "--ops=nosuchop message lacks: $want in $err"
done

err=$("$bin" --ops=add --devices=sim:9 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "--devices=sim:9: exit code $rc, want 2"
grep -qF "present devices: cpu, sim:0, sim:1" <<<"$err" || fail "device message: $err"

out=$(STREAMGRAD_SIM_MEMORY_BYTES=64 "$bin" --json --ops=add --devices=cpu,sim:0 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "an op that throws: exit code $rc, want 1: $out"
grep -qF '{"op":"add","device":"sim:0","check":"grad","passed":false' <<<"$out" ||
  fail "the throwing row is not a failure: $out"
grep -qF '"message":"threw: sim:0: out of memory' <<<"$out" || fail "no error message: $out"
grep -qF '"passed":2,"failed":2' <<<"$out" || fail "cpu rows should still pass: $out"

# Unknown flags and malformed values are bad flags too (exit 2, tools/cli_flags.h).
for bad in --no-such-flag --seed=abc stray_argument; do
  err=$("$bin" "$bad" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "$bad: exit code $rc, want 2: $err"
done
echo "gradcheck_test: ok"
