#!/usr/bin/env bash
# tools/train on small slices of Fashion-MNIST (the full runs are in bench/RESULTS.md):
# the --json closing line; the same seed gives the same accuracy; a run saved after
# epoch 1 and resumed to epoch 2 ends exactly where the uninterrupted run ends, and
# --eval-only of its checkpoint reads that accuracy back; --metrics, --plot and --trace
# write what they promise; twobranch on two streams runs clean under the process-wide
# stream sanitizer (throw mode: a finding would fail the run); bad checkpoints, a
# checkpoint of another model or optimiser, missing data and a device that does not exist
# (cuda:0 without a GPU: why, and what to pass) are one message and exit 2; --amp=bf16
# and --amp=fp16 (loss scale overflow, skipped steps, backoff, scale saved and resumed).
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
quick=(--model=cnn --limit=256 --test-limit=200 --batch-size=64 --device=sim:0)

field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" <<<"$2"; }
fail() { echo "train_test: $*"; exit 1; }

full=$("$bin" "${quick[@]}" --epochs=2 --json --save="$tmp/full.st" \
       --metrics="$tmp/m.jsonl" --plot="$tmp/curves.svg" --trace="$tmp/trace.json" 2>/dev/null)
for want in '{"test_accuracy":' '"epochs":2' '"examples_per_s":' '"device":"sim:0"' '"model":"cnn"'; do
  grep -qF "$want" <<<"$full" || fail "--json lacks $want: $full"
done
acc=$(field test_accuracy "$full")

again=$("$bin" "${quick[@]}" --epochs=2 --json 2>/dev/null)
[ "$(field test_accuracy "$again")" = "$acc" ] || fail "same seed, other accuracy: $full / $again"

"$bin" "${quick[@]}" --epochs=1 --save="$tmp/one.st" >/dev/null 2>&1
resumed=$("$bin" "${quick[@]}" --epochs=2 --json --resume="$tmp/one.st" 2>/dev/null)
[ "$(field test_accuracy "$resumed")" = "$acc" ] || fail "resumed run differs: $full / $resumed"
evaluated=$("$bin" "${quick[@]}" --eval-only --json --resume="$tmp/full.st" 2>/dev/null)
[ "$(field test_accuracy "$evaluated")" = "$acc" ] || fail "--eval-only differs: $full / $evaluated"

# DataParallel over sim:0 and sim:1: the mlp (no batch norm, no dropout) follows the
# single-device run to float32 rounding, so the accuracy is within a point; the cnn's
# batch norm sees half batches, so it only has to train.
mlp=(--model=mlp --limit=1024 --test-limit=500 --epochs=1 --json)
one=$("$bin" "${mlp[@]}" --device=sim:0 2>/dev/null)
two=$("$bin" "${mlp[@]}" --data-parallel=sim:0,sim:1 2>"$tmp/dp.err") ||
  fail "--data-parallel: $(cat "$tmp/dp.err")"
grep -qF "on sim:0+sim:1 (DataParallel)" "$tmp/dp.err" || fail "--data-parallel banner: $(cat "$tmp/dp.err")"
awk -v a="$(field test_accuracy "$one")" -v b="$(field test_accuracy "$two")" \
  'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01 && b > 0.5) }' ||
  fail "--data-parallel accuracy $(field test_accuracy "$two") vs one device $(field test_accuracy "$one")"
cnn_dp=$("$bin" "${quick[@]}" --epochs=1 --json --data-parallel=sim:0,sim:1 2>/dev/null) ||
  fail "--data-parallel with the cnn failed"

[ "$(wc -l <"$tmp/m.jsonl")" -eq 2 ] || fail "--metrics: want 2 lines: $(cat "$tmp/m.jsonl")"
grep -qF '"epoch":2' "$tmp/m.jsonl" || fail "--metrics lacks epoch 2"
grep -qF '<svg' "$tmp/curves.svg" || fail "--plot wrote no SVG"
grep -qF '"traceEvents"' "$tmp/trace.json" || fail "--trace wrote no trace"

STREAMGRAD_SANITIZE_STREAMS=1 "$bin" --model=twobranch --streams=2 --limit=128 --test-limit=100 \
  --epochs=1 --json >/dev/null 2>"$tmp/san.err" || fail "twobranch under the sanitizer: $(cat "$tmp/san.err")"

refused() {  # refused WANT ARGS...: exit 2 and one line naming WANT
  local want=$1 err rc
  shift
  set +e
  err=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, want 2: $err"
  grep -qF "$want" <<<"$err" || fail "$*: message lacks '$want': $err"
}
head -c 100 "$tmp/full.st" >"$tmp/cut.st"
refused "truncated" "${quick[@]}" --resume="$tmp/cut.st"
refused "holds a cnn model, not --model=mlp" --model=mlp --resume="$tmp/full.st"
refused "trained with --optimizer=adam, not sgd" "${quick[@]}" --optimizer=sgd --resume="$tmp/full.st"
refused "cannot open the file" --data="$tmp/nowhere"
refused "device sim:7 does not exist" --device=sim:7 --limit=64
refused "name at least two devices" --data-parallel=sim:0 --limit=64
refused "device sim:7 does not exist" --data-parallel=sim:0,sim:7 --limit=64
# Mixed precision (issue 14): bf16 on cpu trains and states its policy; fp16 on sim
# scales the loss, and a scale forced far too high overflows float16: every step of the
# epoch is skipped and the scale backs off by half each time; the scale is saved in the
# checkpoint and --resume continues from it (not from --amp-init-scale).
amp=$("$bin" --model=cnn --limit=256 --test-limit=200 --device=cpu --amp=bf16 --epochs=1 --json \
      2>"$tmp/amp.err") || fail "--amp=bf16: $(cat "$tmp/amp.err")"
grep -qF '"amp":"bf16"' <<<"$amp" || fail "--json lacks the amp field: $amp"
grep -qF "amp bfloat16: matmul, linear and conv2d in bfloat16" "$tmp/amp.err" ||
  fail "--amp=bf16 does not state its policy: $(cat "$tmp/amp.err")"
"$bin" "${quick[@]}" --amp=fp16 --amp-init-scale=1e38 --epochs=1 --save="$tmp/amp.st" \
  >/dev/null 2>"$tmp/fp16.err" || fail "--amp=fp16: $(cat "$tmp/fp16.err")"
scaled=$(grep "loss scale" "$tmp/fp16.err") || fail "--amp=fp16 reports no loss scale"
[ "$scaled" = "epoch 1: loss scale 6.25e+36, 4 of 4 steps skipped (Inf/NaN gradients)" ] ||
  fail "an overflowing scale must skip all 4 steps and back off to 1e38 / 16: $scaled"
grep -aqF '"scaler.scale"' "$tmp/amp.st" || fail "the checkpoint lacks the scaler's state"
"$bin" "${quick[@]}" --amp=fp16 --epochs=2 --resume="$tmp/amp.st" >/dev/null 2>"$tmp/fp16b.err" ||
  fail "--amp=fp16 --resume: $(cat "$tmp/fp16b.err")"
grep -qF "epoch 2: loss scale 3.90625e+35, 4 of 4 steps skipped" "$tmp/fp16b.err" ||
  fail "--resume did not continue the saved scale: $(grep "loss scale" "$tmp/fp16b.err")"
refused "amp=fp16 runs on sim and cuda devices" --device=cpu --amp=fp16 --limit=64
refused "unknown --amp=fp8" --amp=fp8 --limit=64

# cuda:0 where there is no GPU says why and what to pass instead; where there is one it
# trains (bench/gpu.sh runs that).
if ! "$2" --nodemo 2>/dev/null | grep -qE '^cuda: [1-9]'; then
  refused "Train on --device=cpu or --device=sim:0 instead" --device=cuda:0 --limit=64
  refused "device cuda:0 does not exist" --device=cuda:0 --limit=64
fi
echo "train_test: ok"
