#!/usr/bin/env bash
# tools/devices: the text report and the JSON report list cpu and both sim devices, and
# every accelerator's two-stream demonstration reads the value its event ordered.
set -euo pipefail
bin="$1"

text=$("$bin")
for want in "cpu  host cpu" "sim:0  simulated accelerator" "sim:1  simulated accelerator" \
            "streams: s0(default)" ": ordered (producer took"; do
  grep -qF "$want" <<<"$text" || { echo "text report lacks: $want"; echo "$text"; exit 1; }
done

json=$("$bin" --json)
for want in '{"default_device":"' '"devices":[{"name":"cpu","type":"cpu","index":0' \
            '{"name":"sim:0","type":"sim","index":0' '{"name":"sim:1","type":"sim","index":1' \
            '"memory":{"allocated_bytes":0' '"ordered":true'; do
  grep -qF "$want" <<<"$json" || { echo "JSON report lacks: $want"; echo "$json"; exit 1; }
done
if grep -qF '"ordered":false' <<<"$json"; then echo "a demo was not ordered: $json"; exit 1; fi

# STREAMGRAD_TRACE: the demonstrations' timeline is written at exit, with a flow from the
# producer's record to the consumer's wait.
trace="${TEST_TMPDIR:-/tmp}/devices_trace.json"
rm -f "$trace"
STREAMGRAD_TRACE="$trace" "$bin" >/dev/null
[ -s "$trace" ] || { echo "STREAMGRAD_TRACE wrote nothing to $trace"; exit 1; }
for want in '{"traceEvents":[' '"name":"process_name","pid":' '"args":{"name":"sim:0"}' \
            '{"ph":"X","name":"fill","cat":"fill"' '{"ph":"s","name":"event"' \
            '{"ph":"f","bp":"e","name":"event"' '"incomplete_spans":0'; do
  grep -qF "$want" "$trace" || { echo "trace lacks: $want"; head -c 3000 "$trace"; exit 1; }
done
set +e
err=$("$bin" --no-such-flag 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "--no-such-flag: exit code $rc, want 2: $err"; exit 1; }
grep -qF "unknown flag '--no-such-flag'" <<<"$err" || { echo "message: $err"; exit 1; }
echo "devices_test: ok"
