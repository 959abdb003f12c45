#!/usr/bin/env bash
# tools/launch with `sh -c` children:
#   1. each rank sees RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and one
#      free MASTER_PORT, and its stdout comes out behind "[rank K] ", one line per line;
#   2. --nnodes=2 --node_rank=1 numbers the ranks 2 and 3 of 4; a multi-node job without
#      --master-port is refused (flags take dashes or underscores);
#   3. stderr goes to stderr; a last line without a newline, and the pieces of a line
#      longer than 64 KiB, come out as lines; lines of ranks writing at once never mix;
#      output nobody reads any more is dropped and the job goes on;
#   4. a rank exiting 3 stops the others at once: exit 1, stderr names the rank and the
#      status, and the other rank's process is gone;
#   5. a rank killed by SIGKILL is reported as killed by signal 9;
#   6. a rank ignoring SIGTERM is SIGKILLed after --grace-ms;
#   7. a program that does not exist is status 127 and "cannot run";
#   8. SIGTERM to the launcher reaches the ranks: exit 128+15, no rank left; a second
#      SIGTERM kills them without waiting out --grace-ms;
#   9. the ranks inherit no pipe of each other or of the launcher (close-on-exec);
#  10. --help and usage errors (exit 2, one line naming the flag, no child started);
#  11. torchrun's form: PROGRAM is the first argument that is not a launcher flag (nor the
#      value of one); it and everything after it (flags, a "--") are the ranks' arguments.
set -euo pipefail
bin="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

fail() { echo "launch_test: $*"; exit 1; }
# gone PIDFILE: the process whose pid the file holds no longer exists.
gone() { local pid; pid=$(cat "$1"); ! kill -0 "$pid" 2>/dev/null || fail "pid $pid ($1) survived"; }

# 1. The environment of each rank; one free port, the same for all.
out=$("$bin" --nproc=3 -- sh -c \
  'echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE a=$MASTER_ADDR p=$MASTER_PORT"')
[ "$(wc -l <<<"$out")" -eq 3 ] || fail "want 3 lines: $out"
port=$(sed -n 's/^\[rank 0\] .* p=\([0-9]*\)$/\1/p' <<<"$out")
[ -n "$port" ] && [ "$port" -gt 0 ] || fail "no port for rank 0: $out"
for k in 0 1 2; do
  grep -qxF "[rank $k] r=$k w=3 l=$k lw=3 a=127.0.0.1 p=$port" <<<"$out" || fail "rank $k: $out"
done

# 2. Ranks of the second node; a second node needs the port of the first.
out=$("$bin" --nnodes=2 --node_rank=1 --nproc=2 --master_port=29999 -- sh -c \
  'echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK p=$MASTER_PORT"' | sort)
[ "$out" = "$(printf '[rank 2] r=2 w=4 l=0 p=29999\n[rank 3] r=3 w=4 l=1 p=29999')" ] ||
  fail "node 1 of 2: $out"
rc=0
"$bin" --nnodes=2 --nproc=1 -- true 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "--master-port" "$tmp/err" || fail "--nnodes=2 without port: $rc $(cat "$tmp/err")"

# 3. stderr, unterminated last lines, long lines, and four ranks writing at once.
"$bin" --nproc=1 -- sh -c 'echo out; echo err >&2; printf "tail" >&2' >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = "[rank 0] out" ] || fail "stdout: $(cat "$tmp/out")"
[ "$(cat "$tmp/err")" = "$(printf '[rank 0] err\n[rank 0] tail')" ] || fail "stderr: $(cat "$tmp/err")"
"$bin" --nproc=1 -- sh -c 'head -c 100000 /dev/zero | tr "\0" x' >"$tmp/out"
awk '{ n[NR] = length($0) } END { exit !(NR == 2 && n[1] == 9 + 65536 && n[2] == 9 + 100000 - 65536) }' \
  "$tmp/out" || fail "a 100000-byte line: $(awk '{ print length($0) }' "$tmp/out" | tr '\n' ' ')"
"$bin" --nproc=4 -- sh -c \
  'line=$(head -c 5000 /dev/zero | tr "\0" "$RANK"); for i in $(seq 200); do echo "$line"; done' \
  >"$tmp/out"
awk '{ k = substr($0, 7, 1)
       if (!(k in want)) { w = "[rank " k "] "; for (i = 0; i < 5000; ++i) w = w k; want[k] = w }
       if ($0 != want[k]) bad++ }
     END { exit !(NR == 800 && bad == 0) }' "$tmp/out" || fail "mixed or lost lines of 4 ranks"

# Nobody reads stdout any more: the output is dropped, the job goes on.
rc=0
"$bin" --nproc=1 -- sh -c 'seq 100000; echo done >&2' 2>"$tmp/err" | head -1 >/dev/null ||
  rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && grep -qxF '[rank 0] done' "$tmp/err" || fail "stdout closed: exit $rc: $(cat "$tmp/err")"

# 4. Rank 1 exits 3 once rank 0 sleeps: the launcher stops rank 0 and exits 1.
start=$(date +%s)
rc=0
"$bin" --nproc=2 -- sh -c "if [ \"\$RANK\" = 1 ]; then
    while [ ! -s '$tmp/pid4' ]; do sleep 0.1; done; exit 3; fi
  echo \$\$ >'$tmp/pid4'; exec sleep 60" >"$tmp/out" 2>"$tmp/err" || rc=$?
elapsed=$(($(date +%s) - start))
[ "$rc" -eq 1 ] || fail "a failed rank: exit $rc, want 1: $(cat "$tmp/err")"
[ "$elapsed" -lt 20 ] || fail "a failed rank: took $elapsed s"
grep -qE '^launch: rank 1 \(pid [0-9]+\) exited with status 3; stopping the other 1 rank$' "$tmp/err" ||
  fail "a failed rank: $(cat "$tmp/err")"
gone "$tmp/pid4"

# 5. A rank killed by a signal.
rc=0
"$bin" --nproc=1 -- sh -c 'kill -9 $$' 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -qE '^launch: rank 0 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' "$tmp/err" ||
  fail "killed rank: exit $rc: $(cat "$tmp/err")"

# 6. Rank 0 ignores SIGTERM: SIGKILL after --grace-ms=500.
start=$(date +%s)
rc=0
"$bin" --nproc=2 --grace-ms=500 -- sh -c "if [ \"\$RANK\" = 1 ]; then
    while [ ! -s '$tmp/pid6' ]; do sleep 0.1; done; exit 3; fi
  trap '' TERM; echo \$\$ >'$tmp/pid6'; exec sleep 60" 2>"$tmp/err" || rc=$?
elapsed=$(($(date +%s) - start))
[ "$rc" -eq 1 ] && [ "$elapsed" -lt 20 ] || fail "SIGTERM ignored: exit $rc after $elapsed s"
grep -qE '^launch: rank 0 \(pid [0-9]+\) is still running 500 ms after SIGTERM; sending SIGKILL$' \
  "$tmp/err" || fail "SIGTERM ignored: $(cat "$tmp/err")"
gone "$tmp/pid6"

# 7. A program that does not exist.
rc=0
"$bin" --nproc=1 -- no-such-program-for-launch-test 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "missing program: exit $rc, want 1"
grep -qF '[rank 0] launch: cannot run no-such-program-for-launch-test: No such file' "$tmp/err" &&
  grep -qE '^launch: rank 0 \(pid [0-9]+\) exited with status 127$' "$tmp/err" ||
  fail "missing program: $(cat "$tmp/err")"

# 8. SIGTERM to the launcher: passed on, exit 143, no rank left behind.
"$bin" --nproc=2 -- sh -c "echo \$\$ >'$tmp/pid8.'\$RANK; exec sleep 60" 2>"$tmp/err" &
launcher=$!
for _ in $(seq 100); do
  [ -s "$tmp/pid8.0" ] && [ -s "$tmp/pid8.1" ] && break
  sleep 0.1
done
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
[ "$rc" -eq 143 ] && grep -qF 'launch: got SIGTERM; passing it on to the 2 ranks' "$tmp/err" ||
  fail "SIGTERM to the launcher: exit $rc: $(cat "$tmp/err")"
gone "$tmp/pid8.0"
gone "$tmp/pid8.1"
# A second SIGTERM does not wait out --grace-ms for ranks that ignore the first.
rm -f "$tmp"/pid8.*
start=$(date +%s)
"$bin" --nproc=2 --grace-ms=60000 -- sh -c "trap '' TERM; echo \$\$ >'$tmp/pid8.'\$RANK; exec sleep 60" \
  2>"$tmp/err" &
launcher=$!
for _ in $(seq 100); do
  [ -s "$tmp/pid8.0" ] && [ -s "$tmp/pid8.1" ] && break
  sleep 0.1
done
kill -TERM "$launcher"
sleep 0.3
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
elapsed=$(($(date +%s) - start))
[ "$rc" -eq 143 ] && [ "$elapsed" -lt 20 ] &&
  grep -qF 'launch: got SIGTERM again; killing the 2 ranks' "$tmp/err" ||
  fail "two SIGTERMs: exit $rc after $elapsed s: $(cat "$tmp/err")"
gone "$tmp/pid8.0"
gone "$tmp/pid8.1"

# 9. A rank holds no pipe of another rank nor of the launcher: as many open files as sh
#    started directly.
want=$(sh -c 'ls /proc/$$/fd' | wc -l)
"$bin" --nproc=3 -- sh -c 'ls /proc/$$/fd' >"$tmp/out"
for k in 0 1 2; do
  [ "$(grep -c "^\[rank $k\] " "$tmp/out")" -eq "$want" ] ||
    fail "rank $k has other open files than sh alone ($want): $(cat "$tmp/out")"
done

# 10. --help, and usage errors: exit 2, one line on stderr naming the flag, nothing started.
help=$("$bin" --help)
for want in "Usage: launch --nproc=N" "  --nproc=" "  --nnodes=" "  --node-rank=" "  --master-addr=" \
            "  --master-port=" "  --grace-ms="; do
  grep -qF -- "$want" <<<"$help" || fail "--help lacks '$want': $help"
done
refused() {  # refused WANT ARGS...
  local want=$1 rc=0
  shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" -eq 2 ] || fail "$*: exit $rc, want 2: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] && [ ! -e "$tmp/started" ] || fail "$*: a child ran"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err" || fail "$*: $(cat "$tmp/err")"
}
child=(sh -c "touch '$tmp/started'; echo started")
refused "no PROGRAM to run" --nproc=2
refused "no PROGRAM to run" --nproc=2 --
refused "--nproc takes an integer from 1" --nproc=0 -- "${child[@]}"
refused "--nnodes takes an integer from 1" --nnodes=0 -- "${child[@]}"
refused "--node-rank=2 is not a node of --nnodes=2; pass 0 to 1" --nnodes=2 --node_rank=2 \
  --master_port=29999 -- "${child[@]}"
refused "--node-rank takes an integer from 0" --node_rank=-1 -- "${child[@]}"
refused "--nnodes=3 needs an explicit --master-port" --nnodes=3 --node_rank=1 -- "${child[@]}"
refused "--master-port takes an integer from 0 to 65535" --master_port=70000 -- "${child[@]}"
refused "unknown flag '--bogus'" --bogus -- "${child[@]}"
refused "unknown flag '--bogus'" --bogus "${child[@]}"
refused "--nproc takes an integer from 1" --nproc=0 "${child[@]}"

# 11. The program as the first positional argument, its own flags after it.
out=$("$bin" --nproc=2 sh -c 'echo "r=$RANK args=$*"' prog --epochs=1 --nproc=5 -- x | sort)
[ "$out" = "$(printf '[rank 0] r=0 args=--epochs=1 --nproc=5 -- x\n[rank 1] r=1 args=--epochs=1 --nproc=5 -- x')" ] ||
  fail "launch --nproc=2 PROGRAM ARGS: $out"
# A flag's value as the next argument is not the program; flags with dashes or underscores.
out=$("$bin" --nproc 2 --master_addr 127.0.0.1 --grace-ms 100 sh -c 'echo "r=$RANK a=$MASTER_ADDR"' | sort)
[ "$out" = "$(printf '[rank 0] r=0 a=127.0.0.1\n[rank 1] r=1 a=127.0.0.1')" ] ||
  fail "launch --nproc 2 PROGRAM: $out"
# Before the program, "--" still ends the launcher's flags and is not passed on.
out=$("$bin" --nproc=1 -- sh -c 'echo "n=$# args=$*"' prog --epochs=1)
[ "$out" = "[rank 0] n=1 args=--epochs=1" ] || fail "launch -- PROGRAM ARGS: $out"
echo "launch_test: ok"
