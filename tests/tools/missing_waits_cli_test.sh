#!/usr/bin/env bash
# tools/missing_waits through its command line, and STREAMGRAD_DROP_SYNC through
# tools/stream_race:
#   1. --list names every program; one program's --json report has a row per variant with
#      its verdict (grads_read_elsewhere_wait: its wait caught, its record_stream
#      redundant); --markdown has the summary table;
#   2. an unknown program, --calls without exactly one program, an out-of-range flag: exit 2;
#   3. STREAMGRAD_DROP_SYNC=list prints each synchronisation call; =1 leaves the first out,
#      so a safe stream_race scenario reads a wrong value (exit 1); a malformed value is
#      one message and exit 2.
set -uo pipefail
bin="$1"
race="$2"

fail() { echo "missing_waits_cli_test: $*"; exit 1; }

# 1.
out=$("$bin" --list) || fail "--list: exit code $?"
for p in seed_race fork_join leaf_sync twobranch data_loader data_parallel ddp; do
  grep -q "^$p " <<<"$out" || fail "--list: no $p: $out"
done
[ "$(wc -l <<<"$out")" -eq 12 ] || fail "--list: want 12 programs: $out"

json=$("$bin" --programs=grads_read_elsewhere_wait --max-seeds=5 --json)
rc=$?
[ "$rc" -eq 0 ] || fail "--json: exit code $rc: $json"
grep -qF '{"name":"grads_read_elsewhere_wait","scheduler":"pct",' <<<"$json" ||
  fail "--json: no program row: $json"
# (The calling function may be inlined into its caller in optimised builds.)
grep -qE '"index":1,"id":"wait sim:0/s[0-9]+ <- sim:0/s[0-9]+ at race_programs::grads_read_elsewhere[_a-z]*\+0x[0-9a-f]+ [^"]*#1","kind":"wait","verdict":"caught","findings":1,' \
  <<<"$json" || fail "--json: the wait is not caught on the first run: $json"
grep -qE '"index":2,"id":"record_stream [^"]*","kind":"record_stream","verdict":"redundant","findings":0,"flagged_runs":0,"made_in":5,"runs":5,"runs_to_wrong":0,' \
  <<<"$json" || fail "--json: the record_stream is not redundant over 5 runs: $json"
grep -qF '"pct_depth":2,"max_seeds":5,' <<<"$json" || fail "--json: settings: $json"

md=$("$bin" --programs=grads_read_elsewhere_wait --max-seeds=5 --markdown) ||
  fail "--markdown: exit code $?"
grep -qF '| grads_read_elsewhere_wait | pct |' <<<"$md" || fail "--markdown: summary row: $md"
grep -qF '## grads_read_elsewhere_wait' <<<"$md" || fail "--markdown: program section: $md"

# 2.
err=$("$bin" --programs=nosuch 2>&1 >/dev/null)
[ $? -eq 2 ] || fail "--programs=nosuch: want exit 2"
grep -qF "unknown program 'nosuch'; known programs: seed_race" <<<"$err" || fail "nosuch: $err"
err=$("$bin" --calls=1 2>&1 >/dev/null)
[ $? -eq 2 ] || fail "--calls without a program: want exit 2"
grep -qF -- "--calls needs exactly one program" <<<"$err" || fail "--calls: $err"
"$bin" --max-seeds=0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--max-seeds=0: want exit 2"

# 3.
err=$(STREAMGRAD_DROP_SYNC=list "$race" --scenarios=grads_read_elsewhere_wait --repeat=1 \
  --scheduler=adversarial 2>&1 >/dev/null)
grep -qE '^streamgrad: sync 1: wait sim:0/s[0-9]+ <- sim:0/s[0-9]+ at ' <<<"$err" ||
  fail "STREAMGRAD_DROP_SYNC=list: no first call: $err"
grep -qE '^streamgrad: sync 2: record_stream ' <<<"$err" ||
  fail "STREAMGRAD_DROP_SYNC=list: no second call: $err"
json=$(STREAMGRAD_DROP_SYNC=1 "$race" --scenarios=grads_read_elsewhere_wait --repeat=1 \
  --scheduler=adversarial --json)
rc=$?
[ "$rc" -eq 1 ] || fail "STREAMGRAD_DROP_SYNC=1: exit code $rc, want 1: $json"
grep -qF '"runs":1,"wrong":1,' <<<"$json" || fail "STREAMGRAD_DROP_SYNC=1: not wrong: $json"
err=$(STREAMGRAD_DROP_SYNC=abc "$bin" --programs=fork_join 2>&1 >/dev/null)
[ $? -eq 2 ] || fail "STREAMGRAD_DROP_SYNC=abc: want exit 2: $err"
grep -qF "STREAMGRAD_DROP_SYNC=abc is neither 'list' nor a call number >= 1" <<<"$err" ||
  fail "STREAMGRAD_DROP_SYNC=abc: $err"

echo "missing_waits_cli_test: all passed"
