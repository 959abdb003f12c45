#!/usr/bin/env bash
# bench/report.py (bench/run.sh's aggregation) on hand-made raw lines: the median of the
# per-process medians, the spread (max - min) / median, the ratio streamgrad / libtorch,
# the exact --json shape, skipped libtorch cases, and the notes (wrong checks, differing
# node counts, the overlap verdict and sync counts).
set -euo pipefail
report="$1"
raw="${TEST_TMPDIR:-/tmp}/report_test.jsonl"

line() {  # side median check_ok nodes
  printf '{"side":"%s","name":"chain n=3","case":"chain","device":"cpu","threads":1,"nodes":%s,"nominal_nodes":5,"check":1.0,"expected":1.0,"check_ok":%s,"metrics":{"bwd":{"median":%s,"p10":0,"p90":0,"min":0,"unit":"us/node","per":5}}}\n' \
    "$1" "$4" "$3" "$2"
}
{
  line streamgrad 1.0 true 5
  line libtorch 4.0 true 7
  line streamgrad 3.0 true 5
  line libtorch 5.0 false 7
  line streamgrad 1.5 true 5
  line libtorch 4.0 true 7
  echo 'not json'
  echo '{"side":"libtorch","name":"overlap K=2","case":"overlap","device":"sim:0","threads":1,"skipped":"sim only"}'
  echo '{"side":"streamgrad","name":"overlap K=2","case":"overlap","device":"sim:0","threads":1,"nodes":9,"nominal_nodes":0,"check":2.0,"expected":2.0,"check_ok":true,"metrics":{"bwd_forked":{"median":8.5,"p10":0,"p90":0,"min":0,"unit":"ms","per":0}},"extra":{"overlap_ratio":1.5,"limit_ratio":1.2,"one_stream":{"events":0,"waits":0,"cross_stream_edges":0},"forked":{"events":4,"waits":3,"cross_stream_edges":4}}}'
} >"$raw"

fail() { echo "report_test: $1"; echo "$2"; exit 1; }

json=$(python3 "$report" "$raw" --json)
python3 - "$json" <<'PY' || fail "--json output wrong" "$json"
import json, sys
d = json.loads(sys.argv[1])
assert list(d) == ["benchmarks"], d.keys()
b = d["benchmarks"]
assert len(b) == 2, b
c, o = b
assert c["name"] == "chain n=3 bwd" and c["device"] == "cpu" and c["threads"] == 1, c
assert c["streamgrad"] == 1.5 and c["libtorch"] == 4.0 and c["ratio"] == 0.375, c
assert c["spread"] == {"streamgrad": 2 / 1.5, "libtorch": 0.25}, c["spread"]
assert c["check_ok"] is False and c["nodes"] == {"streamgrad": 5, "libtorch": 7}, c
assert o["name"] == "overlap K=2 bwd_forked" and o["device"] == "sim:0", o
assert o["streamgrad"] == 8.5 and o["libtorch"] is None and o["ratio"] is None, o
assert o["overlap_ratio"] == 1.5 and o["sync_counts"]["forked"]["waits"] == 3, o
PY

table=$(python3 "$report" "$raw")
row='^chain n=3 +bwd +1 +us/node +1\.500 \[133%\] +4\.000 \[25%\] +0\.38$'
grep -qE -- "$row" <<<"$table" || fail "table lacks the row $row" "$table"
for want in "CHECK WRONG: libtorch chain n=3: 1.0" \
            "nodes differ: chain n=3: streamgrad 5, libtorch 7" \
            "overlap K=2: forked backward / longest branch alone = 1.500 (limit 1.2: NOT overlapped)" \
            "forked: 4 events, 3 waits (4 cross-stream edges)" "1 unreadable line(s)"; do
  grep -qF -- "$want" <<<"$table" || fail "table lacks: $want" "$table"
done

: >"$raw"
set +e
err=$(python3 "$report" "$raw" 2>&1); rc=$?
set -e
[ "$rc" -eq 1 ] || fail "empty input: exit code $rc, want 1" "$err"
echo "report_test: ok"
