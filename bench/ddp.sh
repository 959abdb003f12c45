#!/usr/bin/env bash
# DistributedDataParallel figures (issue 13): tools/train on cpu with 1, 2 and 4 processes
# of tools/launch, -c opt, and the bucket all-reduce / backward overlap of a sim run read
# from rank 0's trace (bench/ddp_overlap.py).
#
#   bench/ddp.sh [--quick]     --quick: 12000 training examples instead of 60000
#
# Rows: examples/s summed over the processes, with --batch-size=64 per process (the
# global batch grows with the processes) and with 64 / N per process (the single process's
# global batch: the accuracy comparison). On a 2-core machine this is a correctness and
# overhead figure, not a speed-up claim: 4 processes share 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=0
[ "${1:-}" = "--quick" ] && limit=12000
bazel build -c opt //tools:train //tools:launch >&2
train=bazel-bin/tools/train launch=bazel-bin/tools/launch
export OPENBLAS_NUM_THREADS=1
json() { grep -o '{"test_accuracy".*}'; }
for model in mlp cnn; do
  epochs=3
  [ "$model" = cnn ] && epochs=2
  common=(--model="$model" --device=cpu --epochs="$epochs" --limit="$limit" --json)
  echo "$model, $epochs epochs, 1 process, batch 64: $("$train" "${common[@]}" 2>/dev/null | json)"
  for n in 2 4; do
    for per in 64 $((64 / n)); do
      echo "$model, $epochs epochs, $n processes, batch $per each:" \
           "$("$launch" --nproc="$n" -- "$train" "${common[@]}" --distributed \
              --batch-size="$per" 2>/dev/null | json)"
    done
  done
done
trace=$(mktemp --suffix=.json)
"$launch" --nproc=2 -- "$train" --distributed --device=sim:0 --model=cnn --limit=2560 \
  --epochs=1 --bucket-cap-mb=0.05 --trace="$trace" >/dev/null 2>&1
echo "overlap (cnn on sim:0, 2 processes, --bucket-cap-mb=0.05, first 20 steps):" \
     "$(python3 bench/ddp_overlap.py "$trace" 20)"
