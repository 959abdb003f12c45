#!/usr/bin/env bash
# tools/train --distributed under tools/launch, end to end on small slices of Fashion-MNIST:
# 2 and 4 processes (cpu, and sim for 2) reach the accuracy of one process that takes the
# same global batch; a rank killed mid-training makes the survivor fail with a
# DistributedError long before the timeout, and makes tools/launch exit 1 naming it; the
# flags refuse a run outside the launcher; and two "hosts" (network namespaces joined by a
# veth pair) train together over TCP, or, where namespaces cannot be made, loopback says so.
set -euo pipefail
train="$1"
launch="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export OPENBLAS_NUM_THREADS=1
quick=(--model=mlp --limit=2048 --test-limit=1000 --epochs=2 --json)

field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" <<<"$2"; }
fail() { echo "train_distributed_test: $*"; exit 1; }
# |a - b| <= tolerance, in percentage points of accuracy.
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = (a - b) * 100; exit !(d <= t && d >= -t) }'; }

one=$("$train" "${quick[@]}" --device=cpu --batch-size=64 2>/dev/null)
acc1=$(field test_accuracy "$one")
for n in 2 4; do
  out=$("$launch" --nproc="$n" -- "$train" "${quick[@]}" --device=cpu --distributed \
        --batch-size=$((64 / n)) 2>"$tmp/err.$n") || fail "--nproc=$n: $(tail -5 "$tmp/err.$n")"
  json=$(grep -F '"world_size"' <<<"$out") || fail "--nproc=$n printed no --json line: $out"
  [ "$(field world_size "$json")" = "$n" ] || fail "--nproc=$n: $json"
  [ "$(grep -c '"world_size"' <<<"$out")" = 1 ] || fail "only rank 0 prints --json: $out"
  close "$(field test_accuracy "$json")" "$acc1" 3 ||
    fail "--nproc=$n reached $(field test_accuracy "$json"), one process $acc1"
done
out=$("$launch" --nproc=2 -- "$train" "${quick[@]}" --device=sim:0 --distributed \
      --batch-size=32 2>"$tmp/err.sim") || fail "sim: $(tail -5 "$tmp/err.sim")"
close "$(field test_accuracy "$out")" "$acc1" 3 || fail "sim reached $out, one process $acc1"

# Outside the launcher --distributed is a usage error.
set +e
env -u MASTER_ADDR -u RANK "$train" --distributed --device=cpu >/dev/null 2>"$tmp/usage"
code=$?
set -e
[ "$code" = 2 ] && grep -q "tools/launch" "$tmp/usage" || fail "no launcher: exit $code, $(cat "$tmp/usage")"

# A rank killed mid-training: the survivor reports the broken collective and fails, well
# within --dist-timeout (a dead peer closes its connections: no need to wait it out).
long=(--model=mlp --limit=20000 --test-limit=100 --epochs=50 --device=cpu --distributed
      --dist-timeout=60)
port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
    "$train" "${long[@]}" >/dev/null 2>"$tmp/rank$r.err" &
  eval "pid$r=$!"
done
sleep 3
kill -9 "$pid1"
wait "$pid1" 2>/dev/null || true
start=$(date +%s)
set +e
wait "$pid0"
code=$?
set -e
took=$(( $(date +%s) - start ))
[ "$code" != 0 ] || fail "survivor exited 0"
[ "$took" -lt 30 ] || fail "survivor took $took s to notice"
grep -q "on rank 0 of 2 failed" "$tmp/rank0.err" || fail "survivor said: $(tail -3 "$tmp/rank0.err")"

# The same under tools/launch: it names the rank that died and stops the other one.
set +e
"$launch" --nproc=2 -- sh -c "echo \$\$ > $tmp/pid.\$RANK; exec $train ${long[*]}" \
  >/dev/null 2>"$tmp/launch.err" &
lpid=$!
for _ in $(seq 50); do [ -s "$tmp/pid.1" ] && break; sleep 0.1; done
sleep 2
kill -9 "$(cat "$tmp/pid.1")"
wait "$lpid"
code=$?
set -e
[ "$code" = 1 ] || fail "launch exited $code after rank 1 was killed"
grep -q "rank 1" "$tmp/launch.err" && grep -q "signal 9" "$tmp/launch.err" ||
  fail "launch said: $(grep launch: "$tmp/launch.err")"

# Two hosts: namespaces sgA/sgB (10.77.X.1 and .2) joined by a veth pair.
ns="sg$$"
cleanup() { ip netns del "${ns}a" 2>/dev/null || true; ip netns del "${ns}b" 2>/dev/null || true; }
trap cleanup EXIT
net=$((RANDOM % 200 + 20))
port2=$((20000 + RANDOM % 20000))
master=127.0.0.1
netns=0
if ip netns add "${ns}a" 2>"$tmp/netns.err" && ip netns add "${ns}b" 2>>"$tmp/netns.err" &&
   ip link add "${ns}va" type veth peer name "${ns}vb" 2>>"$tmp/netns.err" &&
   ip link set "${ns}va" netns "${ns}a" && ip link set "${ns}vb" netns "${ns}b" &&
   ip -n "${ns}a" addr add "10.77.$net.1/24" dev "${ns}va" &&
   ip -n "${ns}b" addr add "10.77.$net.2/24" dev "${ns}vb" &&
   ip -n "${ns}a" link set "${ns}va" up && ip -n "${ns}b" link set "${ns}vb" up &&
   ip -n "${ns}a" link set lo up && ip -n "${ns}b" link set lo up; then
  master="10.77.$net.1"
  netns=1
  echo "train_distributed_test: two hosts are network namespaces ${ns}a and ${ns}b"
else
  echo "train_distributed_test: cannot create network namespaces here" \
       "($(head -1 "$tmp/netns.err")); both hosts run on loopback"
fi
for node in 0 1; do
  where=()
  [ "$netns" = 1 ] && where=(ip netns exec "${ns}$([ $node = 0 ] && echo a || echo b)")
  "${where[@]}" "$launch" --nnodes=2 --node-rank=$node --nproc=1 --master-addr="$master" \
    --master-port="$port2" -- "$train" "${quick[@]}" --device=cpu --distributed --batch-size=32 \
    >"$tmp/host$node.out" 2>"$tmp/host$node.err" &
  eval "host$node=$!"
done
wait "$host0" || fail "host 0: $(tail -5 "$tmp/host0.err")"
wait "$host1" || fail "host 1: $(tail -5 "$tmp/host1.err")"
json=$(grep -F '"world_size":2' "$tmp/host0.out") || fail "host 0 printed: $(cat "$tmp/host0.out")"
close "$(field test_accuracy "$json")" "$acc1" 3 || fail "two hosts reached $json, one $acc1"
echo "train_distributed_test: one process $acc1; DDP runs within 3 points; faults reported"
