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

# CUDA: a build without it says so; with it, zero devices come with the reason and the
# versions, and every GPU with its compute capability (what nvidia-smi would show).
cuda_line=$(grep -E '^cuda: ' <<<"$text") || { echo "no cuda line: $text"; exit 1; }
case "$cuda_line" in
  "cuda: not in this build"*) ;;
  "cuda: 0 devices; runtime "*", no devices because cudaGetDeviceCount"*) ;;
  "cuda: "[1-9]*" device"*"; runtime "*", driver "*)
    grep -qE '^cuda:0  .* \(sm_[0-9]+\), ' <<<"$text" || { echo "no cuda:0 row: $text"; exit 1; }
    grep -qF "compute capability" <<<"$text" || { echo "no compute capability: $text"; exit 1; } ;;
  *) echo "unexpected cuda line: $cuda_line"; exit 1 ;;
esac
grep -qE '^  hardware threads [0-9]+, kernel threads [0-9]+, kernel level ' <<<"$text" ||
  { echo "no cpu facts: $text"; exit 1; }

json=$("$bin" --json)
for want in '"backends":[{"type":"cpu","built":true,"device_count":1' \
            '{"type":"cuda","built":'; do
  grep -qF "$want" <<<"$json" || { echo "JSON report lacks: $want"; echo "$json"; exit 1; }
done
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
