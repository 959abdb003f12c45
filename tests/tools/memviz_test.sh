#!/usr/bin/env bash
# tools/train --memory-snapshot and tools/memviz: a small GPT on sim:0 records every
# allocation of its first epoch's steps, filed under parameter, input, activation, gradient
# (with the backward node that made it) and optimizer, forward allocations named after the
# kernel that first wrote them; memviz's page replays the record to
# the same allocated peak as the allocator's own statistics (train's "peak training
# memory": batches freed while the compute stream still reads them count until their free
# is asked for, as there), a larger or equal active peak, the same reserved peak with the
# allocator's cache drawn above ("cached"), and a chart and a legend row per category; with
# --offload, the pinned host memory that holds the offloaded activations as a section of
# its own; bad snapshots, missing flags and unwritable paths are one message and exit 2.
set -euo pipefail
train="$1"
memviz="$2"
snapshot="$3"  # gpt_snapshot.sh
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "memviz_test: $*"; exit 1; }

"$snapshot" "$train" "$tmp" || fail "no snapshot"
peak=$(sed -n 's/.*peak training memory [^(]*(\([0-9]*\) bytes).*/\1/p' "$tmp/train.err")
[[ -n "$peak" ]] || fail "no peak in train's output: $(cat "$tmp/train.err")"

# The record: each category on sim:0, and backward nodes named.
for cat in parameter input activation gradient optimizer; do
  grep -qE "\"action\":\"alloc\",\"device\":\"sim:0\",\"stream\":[0-9]+,\"address\":[0-9]+,\"size\":[0-9]+,\"category\":\"$cat\"" \
    "$tmp/m.json" || fail "no sim:0 allocation filed under $cat"
done
grep -qE '"category":"gradient","op":"[A-Za-z]+Backward[0-9]*"' "$tmp/m.json" ||
  fail "no gradient allocation names its backward node"
# ... and forward ones the kernel that wrote them first: every sim:0 activation is named.
alloc='"action":"alloc","device":"sim:0",[^}]*"category":"activation","op":'
grep -qE "$alloc\"layer_norm\"" "$tmp/m.json" ||
  fail "no activation allocation names the layer_norm kernel that wrote it"
unnamed=$(grep -oE "\{$alloc\"\"[^}]*\}" "$tmp/m.json" | head -3 || true)
[[ -z "$unnamed" ]] || fail "sim:0 activation allocations without an op: $unnamed"
grep -q '"segments":\[' "$tmp/m.json" || fail "no segments in the dump"

# The page.
"$memviz" --snapshot="$tmp/m.json" --out="$tmp/m.html" || fail "memviz failed"
grep -q "<section class=\"device\" data-device=\"sim:0\">" "$tmp/m.html" || fail "no sim:0 section"
page_peak=$(sed -n '/data-device="sim:0"/,/<\/section>/s/.*<p class="peak" data-bytes="\([0-9]*\)".*/\1/p' \
  "$tmp/m.html")
[[ "$page_peak" == "$peak" ]] ||
  fail "the page's sim:0 peak ($page_peak bytes) is not train's peak training memory ($peak bytes)"
active=$(sed -n '/data-device="sim:0"/,/<\/section>/s/.*<p class="active" data-bytes="\([0-9]*\)".*/\1/p' \
  "$tmp/m.html")
[[ -n "$active" && "$active" -ge "$peak" ]] ||
  fail "active bytes ($active) must include the allocated peak ($peak)"
for cat in parameter activation; do
  grep -q "<path class=\"area\" data-category=\"$cat\"" "$tmp/m.html" || fail "no $cat area"
  grep -q "<tr data-category=\"$cat\">" "$tmp/m.html" || fail "no $cat legend row"
done
grep -q '<table class="top">' "$tmp/m.html" || fail "no table of the largest blocks"
reserved=$(sed -n 's/.*peak training memory .*, reserved [^(]*(\([0-9]*\) bytes).*/\1/p' "$tmp/train.err")
page_reserved=$(sed -n '/data-device="sim:0"/,/<\/section>/s/.*<p class="reserved" data-bytes="\([0-9]*\)".*/\1/p' \
  "$tmp/m.html")
[[ -n "$reserved" && "$page_reserved" == "$reserved" ]] ||
  fail "the page's sim:0 reserved peak ($page_reserved bytes) is not train's reserved ($reserved bytes)"
sim0=$(sed -n '/data-device="sim:0"/,/<\/section>/p' "$tmp/m.html")
grep -q '<path class="area" data-category="cached"' <<<"$sim0" || fail "no cached area on sim:0"
grep -q '<tr data-category="cached">' <<<"$sim0" || fail "no cached legend row on sim:0"

# Offloaded activations: pinned host memory, filed under "offloaded".
mkdir -p "$tmp/offload"
"$snapshot" "$train" "$tmp/offload" --offload || fail "no snapshot of the offloaded run"
grep -qE '"action":"alloc","device":"pinned",[^}]*"category":"offloaded"' "$tmp/offload/m.json" ||
  fail "no pinned allocation filed under offloaded"
"$memviz" --snapshot="$tmp/offload/m.json" --out="$tmp/offload/m.html" || fail "memviz failed"
pinned=$(sed -n '/data-device="pinned"/,/<\/section>/p' "$tmp/offload/m.html")
[[ -n "$pinned" ]] || fail "no pinned section in the offloaded run's page"
grep -q '<path class="area" data-category="offloaded"' <<<"$pinned" || fail "no offloaded area"
grep -q '<tr data-category="offloaded">' <<<"$pinned" || fail "no offloaded legend row"

# Refusals: exit 2 and one message.
refused() {
  local want=$1
  shift
  local err rc=0
  err=$("$@" 2>&1) || rc=$?
  [[ $rc -eq 2 ]] || fail "$* exited $rc, want 2 ($err)"
  grep -qF -e "$want" <<<"$err" || fail "$*: '$want' not in: $err"
}
refused "--snapshot=FILE is required" "$memviz" --out="$tmp/x.html"
refused "cannot read --snapshot=$tmp/none.json" "$memviz" --snapshot="$tmp/none.json"
echo '{"events": [' >"$tmp/bad.json"
refused "is not a memory history dump" "$memviz" --snapshot="$tmp/bad.json"
echo '{"traceEvents": []}' >"$tmp/other.json"
refused "has no \"events\" list" "$memviz" --snapshot="$tmp/other.json"
refused "cannot write --out=/nonexistent/m.html" "$memviz" --snapshot="$tmp/m.json" \
  --out=/nonexistent/m.html
refused "cannot write --memory-snapshot=/nonexistent/m.json" "$train" --model=gpt \
  --data="$tmp/text.txt" --device=sim:0 --memory-snapshot=/nonexistent/m.json
echo "memviz_test: passed (peak $peak bytes on sim:0)"
