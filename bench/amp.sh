#!/usr/bin/env bash
# Mixed-precision figures (issue 14): tools/train's CNN for 5 epochs with --amp=off, bf16
# and fp16 on sim:0 and with off and bf16 on cpu (-c opt, OPENBLAS_NUM_THREADS=1: the test
# accuracy, examples/s and the peak device memory of the training steps), then
# bench/amp_memory: bytes live after the forward and the peak of one step, batch 64.
#
#   bench/amp.sh [--quick]     --quick: 1 epoch on 12000 examples instead of 5 on 60000
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--model=cnn --epochs=5 --json)
[ "${1:-}" = "--quick" ] && args=(--model=cnn --epochs=1 --limit=12000 --json)
bazel build -c opt //tools:train //bench:amp_memory >&2
export OPENBLAS_NUM_THREADS=1
for run in sim:0/off sim:0/bf16 sim:0/fp16 cpu/off cpu/bf16; do
  device=${run%/*} amp=${run#*/}
  out=$(bazel-bin/tools/train "${args[@]}" --device="$device" --amp="$amp" 2>&1)
  peak=$(grep -o 'peak training memory [0-9.]* [KMG]iB' <<<"$out" | tail -1)
  scale=$(grep -o 'loss scale .*' <<<"$out" | tail -1 || true)
  echo "$device --amp=$amp: $(grep -o '{"test_accuracy".*}' <<<"$out") $peak${scale:+, $scale}"
done
bazel-bin/bench/amp_memory
