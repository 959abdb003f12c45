#!/usr/bin/env bash
# tools/stream_race through its command line:
#   1. defaults (threaded, jitter, 1000 runs, sanitizer; fewer runs in the sanitizer
#      builds, see below): safe scenarios 0 wrong and 0 findings, unsafe ones flagged on
#      every run; exit 0;
#   2. --scheduler=adversarial: unsafe scenarios wrong and flagged on every run;
#      --scheduler=pct --pct-depth=1: wrong in a stated number of seeds, flagged on every run;
#   3. --legacy-seed-streams: seed_race expected unsafe, flagged on every run (threaded) and
#      wrong on every run (adversarial); --legacy-leaf-sync likewise for leaf_sync;
#   4. --legacy-seed-streams --assume-safe=seed_race exits 1;
#   5. bad flags exit 2 naming the known scenarios;
#   6. under STREAMGRAD_SANITIZE_STREAMS=1 (a process-wide sanitizer that throws) no run
#      throws: the tool's races are suppressed there and counted by its own sanitizer;
#   7. --trace=DIR writes a complete Chrome trace of each scenario's first run;
#   8. --device=cuda says why it cannot run where there is no GPU, and gives sim's verdicts
#      where there is one.
#
# Under ThreadSanitizer the unsafe scenarios do not run on the threaded scheduler: sim
# memory is host memory shared by the stream worker threads, so a stream race there is a
# real data race that TSan reports (rightly) and halts on. There, unsafe programs run on
# the deterministic schedulers only (one task at a time: no data race), while the safe ones
# still get threaded runs, which is where TSan checks the engine's ordering.
#
# In the sanitizer builds check 1 runs 200 threaded runs per scenario, not the default
# 1000: the sanitizers judge each run's accesses as they happen (TSan by happens-before,
# not by whether a race lost), so the later runs repeat what the first found, at 4-6 ms
# each (1000 runs were 37 s of the ASan pass and 55 s of the TSan pass). The default
# build, where a run costs 0.3 ms, checks the real defaults: the repeat count and every
# verdict over 1000 runs.
set -uo pipefail
bin="$1"

fail() { echo "stream_race_test: $*"; exit 1; }

# The tsan build has TSan's runtime entry point in it, the asan build ASan's; the default
# build neither.
tsan=false
if grep -q "__tsan_init" "$bin"; then tsan=true; fi
sanitized=$tsan
if grep -q "__asan_init" "$bin"; then sanitized=true; fi
runs=1000
if $sanitized; then runs=200; fi

safe=(seed_race seed_filled_on_backward_stream seed_filled_elsewhere_synced fork_join
      grads_read_elsewhere_wait free_while_read_elsewhere_recorded cross_device_copy leaf_sync)
unsafe=(seed_filled_elsewhere_no_sync grads_read_elsewhere_no_wait free_while_read_elsewhere)
join() { local IFS=,; echo "$*"; }

# expect_safe JSON NAME RUNS: expected safe, no wrong run, no finding.
expect_safe() {
  local want="{\"name\":\"$2\",\"expected\":\"safe\",\"runs\":$3,\"wrong\":0,"
  want+="\"sanitizer_findings\":0,\"flagged_runs\":0,\"as_expected\":true,\"errors\":0,"
  grep -qF "$want" <<<"$1" || fail "$4: $2 is not a clean safe row: $(row "$1" "$2")"
}
# expect_unsafe JSON NAME RUNS WRONG CONTEXT: expected unsafe, flagged on every run, no run
# threw; WRONG is a number or a regex ([0-9]+).
expect_unsafe() {
  local want="\\{\"name\":\"$2\",\"expected\":\"unsafe\",\"runs\":$3,\"wrong\":$4,"
  want+="\"sanitizer_findings\":[1-9][0-9]*,\"flagged_runs\":$3,\"as_expected\":true,\"errors\":0,"
  grep -qE "$want" <<<"$1" || fail "$5: $2 is not an unsafe row flagged $3/$3 with wrong=$4: $(row "$1" "$2")"
}
row() { grep -oE "\{\"name\":\"$2\",[^}]*\}" <<<"$1"; }
count_rows() { grep -o '{"name":' <<<"$1" | wc -l; }

# 1. Defaults.
defaults=()
if $sanitized; then defaults=(--repeat=$runs); fi
if $tsan; then
  json=$("$bin" --json "${defaults[@]}" --scenarios="$(join "${safe[@]}")")
else
  json=$("$bin" --json "${defaults[@]}")
fi
rc=$?
[ "$rc" -eq 0 ] || fail "defaults: exit code $rc, want 0: $json"
grep -qF "\"scheduler\":\"threaded\",\"seed\":0,\"jitter_us\":20.0,\"repeat\":$runs,\"sanitizer\":true," \
  <<<"$json" || fail "defaults: settings not reported: $json"
grep -qF '"legacy_seed_streams":false,"legacy_leaf_sync":false' <<<"$json" ||
  fail "defaults: switches not reported: $json"
for s in "${safe[@]}"; do expect_safe "$json" "$s" $runs defaults; done
if ! $tsan; then
  [ "$(count_rows "$json")" -eq 11 ] || fail "defaults: want 11 scenarios: $json"
  for s in "${unsafe[@]}"; do expect_unsafe "$json" "$s" $runs '[0-9]+' defaults; done
  # The unsafe rows keep the sanitizer's first message, naming both accesses.
  grep -qE '"first_finding":"run 0: stream sanitizer: [a-z_]+ on sim:0/s[0-9]+ (reads|writes)' \
    <<<"$json" || fail "defaults: no first finding: $json"
fi

# 2. Adversarial: every unsafe program reads the wrong value on every run.
json=$("$bin" --json --scheduler=adversarial --repeat=100)
rc=$?
[ "$rc" -eq 0 ] || fail "adversarial: exit code $rc, want 0: $json"
[ "$(count_rows "$json")" -eq 11 ] || fail "adversarial: want 11 scenarios: $json"
for s in "${safe[@]}"; do expect_safe "$json" "$s" 100 adversarial; done
for s in "${unsafe[@]}"; do expect_unsafe "$json" "$s" 100 100 adversarial; done
grep -qF '"first_wrong":"run 0: x.grad = 14, want 2"' <<<"$json" ||
  fail "adversarial: no first wrong value: $json"

# 2b. PCT at depth 1: every unsafe program is of depth 1 (its read before the write), so
# each run shows it with probability >= 1/n; the counts are those of seeds 0..29
# (deterministic). Safe programs stay clean, and the settings are reported.
json=$("$bin" --json --scheduler=pct --pct-depth=1 --repeat=30)
rc=$?
[ "$rc" -eq 0 ] || fail "pct: exit code $rc, want 0: $json"
for s in "${safe[@]}"; do expect_safe "$json" "$s" 30 pct; done
expect_unsafe "$json" seed_filled_elsewhere_no_sync 30 10 pct
expect_unsafe "$json" grads_read_elsewhere_no_wait 30 15 pct
expect_unsafe "$json" free_while_read_elsewhere 30 15 pct
grep -qF '"scheduler":"pct","seed":0,"pct_depth":1,"pct_steps":1000,' <<<"$json" ||
  fail "pct: settings not reported: $json"

# Where unsafe programs may run concurrently (see the top of this file).
racy=threaded
if $tsan; then racy=random; fi

# 3. Without S3 the seed race is back; without S6 the caller's read of .grad races.
json=$("$bin" --json --legacy-seed-streams --scheduler=$racy --repeat=100)
rc=$?
[ "$rc" -eq 0 ] || fail "--legacy-seed-streams: exit code $rc, want 0: $json"
expect_unsafe "$json" seed_race 100 '[0-9]+' "--legacy-seed-streams --scheduler=$racy"
# The program that filled its seed on the default stream relied on the legacy behaviour.
expect_safe "$json" seed_filled_elsewhere_no_sync 100 "--legacy-seed-streams --scheduler=$racy"
json=$("$bin" --json --legacy-seed-streams --scheduler=adversarial --repeat=100)
rc=$?
[ "$rc" -eq 0 ] || fail "--legacy-seed-streams adversarial: exit code $rc, want 0: $json"
for s in seed_race seed_filled_on_backward_stream leaf_sync grads_read_elsewhere_no_wait \
  free_while_read_elsewhere; do
  expect_unsafe "$json" "$s" 100 100 "--legacy-seed-streams --scheduler=adversarial"
done
for s in seed_filled_elsewhere_no_sync seed_filled_elsewhere_synced fork_join \
  grads_read_elsewhere_wait free_while_read_elsewhere_recorded cross_device_copy; do
  expect_safe "$json" "$s" 100 "--legacy-seed-streams --scheduler=adversarial"
done
grep -qF '"legacy_seed_streams":true,"legacy_leaf_sync":false' <<<"$json" ||
  fail "--legacy-seed-streams not reported: $json"

json=$("$bin" --json --legacy-leaf-sync --scheduler=adversarial --repeat=50 \
  --scenarios=leaf_sync,seed_filled_elsewhere_synced,fork_join,grads_read_elsewhere_wait)
rc=$?
[ "$rc" -eq 0 ] || fail "--legacy-leaf-sync: exit code $rc, want 0: $json"
for s in leaf_sync seed_filled_elsewhere_synced; do
  expect_unsafe "$json" "$s" 50 50 "--legacy-leaf-sync --scheduler=adversarial"
done
for s in fork_join grads_read_elsewhere_wait; do
  expect_safe "$json" "$s" 50 "--legacy-leaf-sync --scheduler=adversarial"
done

# 4. A scenario assumed safe that races fails the run.
json=$("$bin" --json --legacy-seed-streams --assume-safe=seed_race --scenarios=seed_race,fork_join \
  --scheduler=$racy --repeat=20)
rc=$?
[ "$rc" -eq 1 ] || fail "--assume-safe=seed_race: exit code $rc, want 1: $json"
grep -qE '\{"name":"seed_race","expected":"safe","runs":20,"wrong":[0-9]+,"sanitizer_findings":[1-9][0-9]*,"flagged_runs":20,"as_expected":false' \
  <<<"$json" || fail "--assume-safe=seed_race: row: $json"
grep -qF '"assume_safe":["seed_race"]' <<<"$json" || fail "--assume-safe not reported: $json"

# Without the sanitizer an unsafe scenario is as expected when some run was wrong.
json=$("$bin" --json --nosanitizer --scheduler=$racy --repeat=50 \
  --scenarios=free_while_read_elsewhere,free_while_read_elsewhere_recorded)
rc=$?
[ "$rc" -eq 0 ] || fail "--nosanitizer: exit code $rc, want 0: $json"
grep -qE '\{"name":"free_while_read_elsewhere","expected":"unsafe","runs":50,"wrong":[1-9][0-9]*,"sanitizer_findings":0,"flagged_runs":0,"as_expected":true' \
  <<<"$json" || fail "--nosanitizer: unsafe row: $json"
expect_safe "$json" free_while_read_elsewhere_recorded 50 --nosanitizer

# 5. Bad flags.
err=$("$bin" --scenarios=seed_race,nosuch 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "--scenarios=nosuch: exit code $rc, want 2: $err"
for want in "unknown scenario 'nosuch'" "known scenarios: seed_race, " "fork_join" "leaf_sync"; do
  grep -qF "$want" <<<"$err" || fail "--scenarios=nosuch message lacks: $want in $err"
done
for bad in --assume-safe=nosuch --scheduler=fifo --repeat=0 --repeat=abc --no-such-flag \
           --device=gpu; do
  err=$("$bin" "$bad" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "$bad: exit code $rc, want 2: $err"
done

# 8. --device=cuda: where there is no GPU, one message saying why; where there is one, the
# same verdicts as on sim (the sanitizer's findings do not depend on timing).
if ! "$bin" --device=cuda --list >/dev/null 2>&1; then
  err=$("$bin" --device=cuda --repeat=1 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "--device=cuda without a GPU: exit code $rc, want 2: $err"
  grep -qE -- "--device=cuda: (no usable GPU|this program has no cuda backend).*--device=sim" \
    <<<"$err" || fail "--device=cuda message: $err"
else
  json=$("$bin" --device=cuda --json --repeat=20)
  rc=$?
  [ "$rc" -eq 0 ] || fail "--device=cuda: exit code $rc, want 0: $json"
  grep -qF '"device":"cuda"' <<<"$json" || fail "--device=cuda: report lacks the device: $json"
  for s in "${unsafe[@]}"; do expect_unsafe "$json" "$s" 20 '[0-9]+' --device=cuda; done
  for s in "${safe[@]}"; do
    if ! grep -qF "\"left_out\":[\"$s\"" <<<"$json"; then expect_safe "$json" "$s" 20 --device=cuda; fi
  done
fi
grep -qF '"device":"sim"' <<<"$("$bin" --json --scenarios=fork_join --repeat=1)" ||
  fail "the JSON report lacks \"device\":\"sim\""

# The text report and --list.
text=$("$bin" --scenarios=fork_join --repeat=5)
rc=$?
[ "$rc" -eq 0 ] || fail "text report: exit code $rc, want 0: $text"
grep -qE '^fork_join +safe +5 +0 +0 +0 +yes' <<<"$text" || fail "text report lacks the row: $text"
grep -qF 'stream_race: 1 of 1 scenarios as expected; 0 expected safe failed' <<<"$text" ||
  fail "text report lacks the summary: $text"
list=$("$bin" --list --legacy-leaf-sync)
grep -qE '^leaf_sync +unsafe ' <<<"$list" || fail "--list: $list"
[ "$(grep -c . <<<"$list")" -eq 11 ] || fail "--list: want 11 lines: $list"

# 6. The process-wide throwing sanitizer never sees the tool's races.
json=$(STREAMGRAD_SANITIZE_STREAMS=1 "$bin" --json --scheduler=$racy --repeat=50 \
  --scenarios="$(join "${unsafe[@]}" seed_race fork_join)")
rc=$?
[ "$rc" -eq 0 ] || fail "STREAMGRAD_SANITIZE_STREAMS=1: exit code $rc, want 0: $json"
for s in "${unsafe[@]}"; do expect_unsafe "$json" "$s" 50 '[0-9]+' STREAMGRAD_SANITIZE_STREAMS=1; done
for s in seed_race fork_join; do expect_safe "$json" "$s" 50 STREAMGRAD_SANITIZE_STREAMS=1; done

# --trace: a Chrome trace of each scenario's first run, every span complete.
dir="${TEST_TMPDIR:-$(mktemp -d)}/traces"
json=$("$bin" --json --trace="$dir" --scenarios=seed_race,free_while_read_elsewhere \
  --scheduler=$racy --repeat=3)
rc=$?
[ "$rc" -eq 0 ] || fail "--trace: exit code $rc, want 0: $json"
for s in seed_race free_while_read_elsewhere; do
  f="$dir/$s.json"
  [ -s "$f" ] || fail "--trace: $f missing or empty"
  grep -qF "\"trace\":\"$f\"" <<<"$json" || fail "--trace: report lacks $f: $json"
  t=$(cat "$f")
  for want in '{"traceEvents":[' '"name":"sleep","cat":"sleep"' '"ph":"s","name":"event"' \
    '"otherData":{"recorder":"streamgrad","incomplete_spans":0}'; do
    grep -qF "$want" <<<"$t" || fail "--trace: $f lacks $want: $t"
  done
done
err=$("$bin" --trace=/dev/null/traces --scenarios=fork_join --repeat=1 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "--trace=/dev/null/traces: exit code $rc, want 2: $err"

echo "stream_race_test: ok (tsan build: $tsan)"
