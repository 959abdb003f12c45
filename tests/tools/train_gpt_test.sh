#!/usr/bin/env bash
# tools/train's modern models on tiny slices (the full runs are in bench/RESULTS.md):
# --model=gpt on a small text file: per-epoch validation loss in nats and bits per
# character and tokens/s, a closing sample of the asked length, the --json line with the
# loss; the same seed gives the same loss; saved after epoch 1 and resumed to epoch 2 it
# ends exactly where the uninterrupted run ends, with every --schedule and AdamW's two
# parameter groups too (their state is in the checkpoint); DataParallel over sim:0 and sim:1 and
# --amp=bf16 train it; --offload and --checkpoint give the same loss with a lower peak
# (refused on cpu, and for twobranch, which has no checkpointed form);
# sizes that do not fit and missing text are one message and exit 2.
# --model=resnet trains and reports an accuracy, the same with --checkpoint.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "train_gpt_test: $*"; exit 1; }
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" <<<"$2"; }

for i in $(seq 1 40); do
  echo "The quick brown fox jumps over the lazy dog, number $i."
  echo "%"
  echo "A stitch in time saves nine; look before you leap, says line $i."
  echo "%"
done >"$tmp/text.txt"
gpt=(--model=gpt --data="$tmp/text.txt" --layers=1 --dim=32 --heads=2 --context=16
     --batch-size=8 --limit=48 --lr=0.01 --device=sim:0 --sample-chars=40)

full=$("$bin" "${gpt[@]}" --epochs=2 --json --save="$tmp/gpt.st" 2>"$tmp/gpt.err") ||
  fail "gpt: $(cat "$tmp/gpt.err")"
grep -qE "^epoch 2: train loss [0-9.]+, validation loss [0-9.]+ nats/char \([0-9.]+ bits/char\), next-char accuracy [0-9.]+%, [0-9]+ tokens/s" "$tmp/gpt.err" ||
  fail "gpt's epoch line: $(grep '^epoch 2:' "$tmp/gpt.err")"
grep -qF "sample (temperature 0.8, top-k 40):" "$tmp/gpt.err" || fail "no sample: $(cat "$tmp/gpt.err")"
# The newline prompt, 40 characters and the closing newline.
bytes=$(awk 'f { print } /^sample \(/ { f = 1 }' "$tmp/gpt.err" | wc -c)
[ "$bytes" -eq 42 ] || fail "want the prompt and 40 characters: $(sed -n '/^sample (/,$p' "$tmp/gpt.err")"
for want in '"test_loss":' '"model":"gpt"' '"epochs":2'; do
  grep -qF "$want" <<<"$full" || fail "--json lacks $want: $full"
done
loss=$(field test_loss "$full")
awk -v l="$loss" 'BEGIN { exit !(l > 0 && l < 3.4) }' || fail "gpt did not learn: loss $loss (uniform over the ~40 characters: 3.7)"

again=$("$bin" "${gpt[@]}" --epochs=2 --json 2>/dev/null)
[ "$(field test_loss "$again")" = "$loss" ] || fail "same seed, other loss: $full / $again"
"$bin" "${gpt[@]}" --epochs=1 --save="$tmp/one.st" >/dev/null 2>&1
resumed=$("$bin" "${gpt[@]}" --epochs=2 --json --resume="$tmp/one.st" 2>/dev/null)
[ "$(field test_loss "$resumed")" = "$loss" ] || fail "resumed run differs: $full / $resumed"

# The epochs after a resume are the uninterrupted run's, lr included. The schedule's state
# comes from the checkpoint: plateau's best loss and counters cannot be replayed.
# keep FILE [lr]: the metrics lines without their timings, or only their lrs.
keep() {
  if [ "${2:-}" = lr ]; then sed -E 's/.*("lr":[^,}]*).*/\1/' "$1"
  else sed -E 's/,"(examples_per_s|seconds|peak_memory_bytes|peak_reserved_bytes|peak_pinned_bytes)":[^,}]*//g' "$1"; fi
}
for sched in warmup onecycle plateau; do
  # plateau: a step too large, so that epoch 2, after the resume, is worse than epoch 1.
  lr=0.05; [ "$sched" = plateau ] && lr=0.5
  run=("${gpt[@]}" --optimizer=adamw --schedule="$sched" --lr=$lr --sample-chars=0)
  "$bin" "${run[@]}" --epochs=3 --metrics="$tmp/$sched.full" >/dev/null 2>"$tmp/$sched.err" ||
    fail "--schedule=$sched: $(cat "$tmp/$sched.err")"
  "$bin" "${run[@]}" --epochs=1 --save="$tmp/$sched.st" >/dev/null 2>&1
  head -c 4096 "$tmp/$sched.st" | grep -qF '"optimizer.group.1.weight_decay":"0"' ||
    fail "--optimizer=adamw: no second parameter group without decay in the checkpoint"
  head -c 4096 "$tmp/$sched.st" | grep -qF '"schedule.last_epoch":' ||
    fail "--schedule=$sched: no schedule state in the checkpoint"
  "$bin" "${run[@]}" --epochs=3 --resume="$tmp/$sched.st" --metrics="$tmp/$sched.resumed" \
    >/dev/null 2>&1
  # onecycle's first epoch depends on the run's length (its peak is at 30 % of it), so a
  # run saved with --epochs=1 trained otherwise; resumed, it follows the longer run's lrs.
  only=; [ "$sched" = onecycle ] && only=lr
  [ "$(keep "$tmp/$sched.resumed" $only)" = "$(tail -n 2 "$tmp/$sched.full" | keep /dev/stdin $only)" ] ||
    fail "--schedule=$sched resumed differs: $(cat "$tmp/$sched.full") / $(cat "$tmp/$sched.resumed")"
done
# plateau halved the lr after epoch 2, worse than the best (epoch 1's) that the
# checkpoint carried.
grep -qF '"epoch":2,' "$tmp/plateau.resumed" && grep -qF '"lr":0.25}' "$tmp/plateau.resumed" ||
  fail "plateau did not halve after the resume: $(cat "$tmp/plateau.resumed")"

"$bin" "${gpt[@]}" --epochs=1 --data-parallel=sim:0,sim:1 >/dev/null 2>"$tmp/dp.err" ||
  fail "gpt --data-parallel: $(cat "$tmp/dp.err")"
"$bin" "${gpt[@]}" --epochs=1 --device=cpu --amp=bf16 >/dev/null 2>"$tmp/bf16.err" ||
  fail "gpt --amp=bf16: $(cat "$tmp/bf16.err")"

# --offload: the plain run's loss to the last digit, with less device memory at the peak;
# on cpu it is refused.
plain=$("$bin" "${gpt[@]}" --epochs=1 --json --sample-chars=0 --metrics="$tmp/plain.m" 2>/dev/null)
off=$("$bin" "${gpt[@]}" --epochs=1 --json --sample-chars=0 --metrics="$tmp/off.m" --offload \
  2>"$tmp/off.err") || fail "gpt --offload: $(cat "$tmp/off.err")"
[ "$(field test_loss "$off")" = "$(field test_loss "$plain")" ] ||
  fail "--offload changed the loss: $plain / $off"
pm=$(field peak_memory_bytes "$(cat "$tmp/plain.m")")
om=$(field peak_memory_bytes "$(cat "$tmp/off.m")")
[ -n "$pm" ] && [ -n "$om" ] && [ "$om" -lt "$pm" ] ||
  fail "--offload did not lower the peak: $pm -> $om bytes"
# ... and less reserved: offloaded blocks are not kept until the device catches up.
pr=$(field peak_reserved_bytes "$(cat "$tmp/plain.m")")
or=$(field peak_reserved_bytes "$(cat "$tmp/off.m")")
[ -n "$pr" ] && [ -n "$or" ] && [ "$or" -lt "$pr" ] ||
  fail "--offload did not lower the reserved peak: $pr -> $or bytes"
# --checkpoint: the same again, and refused for the one model without a checkpointed form.
ck=$("$bin" "${gpt[@]}" --epochs=1 --json --sample-chars=0 --metrics="$tmp/ck.m" --checkpoint \
  2>"$tmp/ck.err") || fail "gpt --checkpoint: $(cat "$tmp/ck.err")"
[ "$(field test_loss "$ck")" = "$(field test_loss "$plain")" ] ||
  fail "--checkpoint changed the loss: $plain / $ck"
cm=$(field peak_memory_bytes "$(cat "$tmp/ck.m")")
[ -n "$cm" ] && [ "$cm" -lt "$pm" ] || fail "--checkpoint did not lower the peak: $pm -> $cm bytes"
rc=0
"$bin" --model=twobranch --checkpoint >/dev/null 2>"$tmp/cktwo.err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "no checkpointed form" "$tmp/cktwo.err" ||
  fail "--checkpoint with twobranch: exit $rc, $(cat "$tmp/cktwo.err")"
rc=0
"$bin" "${gpt[@]}" --epochs=1 --device=cpu --offload >/dev/null 2>"$tmp/offcpu.err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "--offload moves saved activations" "$tmp/offcpu.err" ||
  fail "--offload on cpu: exit $rc, $(cat "$tmp/offcpu.err")"

refused() {  # refused WANT ARGS...: exit 2 and one line naming WANT
  local want=$1 err rc
  shift
  set +e
  err=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, want 2: $err"
  grep -qF -e "$want" <<<"$err" || fail "$*: message lacks '$want': $err"
}
refused "--dim=30 must be a multiple of --heads=4" "${gpt[@]}" --dim=30 --heads=4
refused "--data=$tmp/nowhere" --model=gpt --data="$tmp/nowhere"
refused "holds a gpt model, not --model=cnn" --model=cnn --limit=64 --resume="$tmp/gpt.st"
refused "unknown --schedule=cyclic; expected cosine, step, warmup, onecycle, plateau or none" \
  "${gpt[@]}" --schedule=cyclic
refused "was trained with --schedule=plateau, not cosine" "${gpt[@]}" --optimizer=adamw \
  --resume="$tmp/plateau.st"

resnet=$("$bin" --model=resnet --limit=128 --test-limit=64 --batch-size=32 --epochs=1 \
         --device=cpu --json 2>"$tmp/resnet.err") || fail "resnet: $(cat "$tmp/resnet.err")"
grep -qF '"model":"resnet"' <<<"$resnet" || fail "resnet --json: $resnet"
# --checkpoint recomputes its basic blocks: the same loss, its batch norms' statistics moved
# once per step (the test loss is computed with them).
ckres=$("$bin" --model=resnet --limit=128 --test-limit=64 --batch-size=32 --epochs=1 \
         --device=cpu --json --checkpoint 2>"$tmp/ckres.err") ||
  fail "resnet --checkpoint: $(cat "$tmp/ckres.err")"
[ "$(field test_loss "$ckres")" = "$(field test_loss "$resnet")" ] ||
  fail "resnet --checkpoint changed the loss: $resnet / $ckres"
echo "train_gpt_test: ok"
