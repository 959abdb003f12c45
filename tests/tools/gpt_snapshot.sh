#!/usr/bin/env bash
# Shared by memviz_test.sh and memviz_browser_test.sh: trains a one-layer GPT on a small
# text for one epoch on sim:0 with --memory-snapshot, leaving in folder $2 the text
# (text.txt), the snapshot (m.json) and train's stderr (train.err). Further arguments go
# to train (--offload, say). Exit 1 with train's output when it fails.
#
#   gpt_snapshot.sh path/to/train FOLDER [TRAIN FLAGS...]
set -euo pipefail
train="$1"
tmp="$2"
shift 2
for i in $(seq 1 30); do
  echo "The quick brown fox jumps over the lazy dog, number $i."
  echo "%"
done >"$tmp/text.txt"
"$train" --model=gpt --data="$tmp/text.txt" --layers=1 --dim=32 --heads=2 --context=16 \
  --batch-size=8 --limit=24 --test-limit=8 --device=sim:0 --sample-chars=0 --epochs=1 \
  --memory-snapshot="$tmp/m.json" "$@" 2>"$tmp/train.err" || {
  echo "gpt_snapshot: train failed: $(cat "$tmp/train.err")"
  exit 1
}
