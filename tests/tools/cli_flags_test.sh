#!/usr/bin/env bash
# The command-line conventions of tools/cli_flags.h, for each tool (gradcheck,
# stream_race, devices):
#   1. --help (and -h, --helpfull) prints the tool's usage line and every flag of the tool
#      with its help text, nothing on stderr, exit 0;
#   2. a bad flagfile (missing, a directory, including itself) and bad flags inside a
#      flagfile are one message and exit 2; a good flagfile is used;
#   3. positional arguments (also after "--"), unknown flags and absl's --fromenv are one
#      message and exit 2;
#   4. numeric flags outside their range or not finite (inf, nan, 1e308, 1e12...) are one
#      message naming the flag, the value and the range, exit 2; the bounds themselves pass;
#   5. empty lists (--ops=, --scenarios=, ...) are one message naming the flag, exit 2.
# Every refused invocation fails before any work, so this test is quick.
set -uo pipefail
gradcheck="$1"
stream_race="$2"
devices="$3"
tmp="${TEST_TMPDIR:-/tmp}"

fail() { echo "cli_flags_test: $*"; exit 1; }

# usage_error WANT BIN ARGS...: exit code 2, nothing on stdout, exactly one line on stderr,
# "<tool>: ..." containing WANT.
usage_error() {
  local want="$1" bin="$2"
  shift 2
  local tool out rc err
  tool=$(basename "$bin")
  out=$("$bin" "$@" 2>"$tmp/err")
  rc=$?
  err=$(cat "$tmp/err")
  [ "$rc" -eq 2 ] || fail "$tool $*: exit code $rc, want 2: $err"
  [ -z "$out" ] || fail "$tool $*: printed on stdout: $out"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$tool $*: want one line on stderr, got: $err"
  [[ "$err" == "$tool: "* ]] || fail "$tool $*: message does not start with '$tool: ': $err"
  grep -qF -- "$want" <<<"$err" || fail "$tool $*: message lacks '$want': $err"
}

# help_lists BIN USAGE FLAG...: each help flag prints USAGE and every FLAG at the start of a
# line followed by a line of help text (indented by six spaces).
help_lists() {
  local bin="$1" usage="$2"
  shift 2
  local h out rc flag
  for h in --help -h --helpfull; do
    out=$("$bin" "$h" 2>"$tmp/err")
    rc=$?
    [ "$rc" -eq 0 ] || fail "$bin $h: exit code $rc, want 0"
    [ ! -s "$tmp/err" ] || fail "$bin $h: wrote to stderr: $(cat "$tmp/err")"
    grep -qF -- "$usage" <<<"$out" || fail "$bin $h: no usage line '$usage' in: $out"
    for flag in "$@"; do
      awk -v f="  $flag" 'found { exit !($0 ~ /^      [^ ]/) }
                          index($0, f) == 1 { found = 1 }
                          END { if (!found) exit 1 }' <<<"$out" ||
        fail "$bin $h: flag $flag or its help text is missing: $out"
    done
  done
}

# common BIN: the conventions every tool shares (2, 3).
common() {
  local bin="$1"
  usage_error "--flagfile=$tmp/no_such_file: cannot read the file (No such file or directory)" \
    "$bin" --flagfile="$tmp/no_such_file"
  usage_error "--flagfile=$tmp/no_such_file: cannot read the file" "$bin" --flagfile "$tmp/no_such_file"
  usage_error "is a directory" "$bin" --flagfile="$tmp"
  echo "--flagfile=$tmp/self" >"$tmp/self"
  usage_error "nested more than 8 deep" "$bin" --flagfile="$tmp/self"
  printf -- '# a comment\n\n  --no-such-flag  \n' >"$tmp/bad_flag"
  usage_error "unknown flag '--no-such-flag'" "$bin" --flagfile="$tmp/bad_flag"
  usage_error "flag '--flagfile' needs a file name" "$bin" --flagfile=
  usage_error "unexpected argument 'stray'; it takes flags only" "$bin" stray
  usage_error "unexpected argument 'stray' after '--'" "$bin" -- stray
  usage_error "unknown flag '--no-such-flag'" "$bin" --no-such-flag
  usage_error "'--fromenv=json' is not supported" "$bin" --fromenv=json
}

# 1. --help.
help_lists "$gradcheck" "Usage: gradcheck [--ops=a,b]" --ops=\<text\> --devices=\<text\> --fast \
  --streams --json "--seed=<number>  (default 0; an integer from 0 to 18446744073709551615)"
"$gradcheck" --help | grep -qF "fast mode: compare random projections" ||
  fail "gradcheck --help lacks the help text of --fast"
help_lists "$stream_race" "Usage: stream_race [--device=sim|cuda] [--scenarios=a,b]" --scenarios=\<text\> --list \
  "--repeat=<number>  (default 1000; an integer from 1 to 10000000)" --scheduler=\<text\> \
  "--seed=<number>  (default 0; an integer from 0 to 18446744073709551615)" \
  "--jitter-us=<number>  (default 20; a finite number from 0 to 1000000)" \
  --legacy-seed-streams --legacy-leaf-sync --sanitizer --assume-safe=\<text\> --json \
  --trace=\<text\>
"$stream_race" --help | grep -qF "max random delay before each launch" ||
  fail "stream_race --help lacks the help text of --jitter-us"
help_lists "$devices" "Usage: devices [--json] [--nodemo]" --json --demo
"$devices" --help | grep -qF "order two streams of each accelerator" ||
  fail "devices --help lacks the help text of --demo"

# 2, 3.
for bin in "$gradcheck" "$stream_race" "$devices"; do common "$bin"; done
printf -- '--ops=add\n# only cpu\n--devices=cpu\n' >"$tmp/gradcheck_flags"
out=$("$gradcheck" --flagfile="$tmp/gradcheck_flags") || fail "gradcheck flagfile: exit $?: $out"
grep -qF "gradcheck: 2 passed, 0 failed, 0 skipped" <<<"$out" || fail "flagfile not used: $out"
printf -- '--list\n' >"$tmp/stream_race_flags"
out=$("$stream_race" --flagfile="$tmp/stream_race_flags") || fail "stream_race flagfile: $out"
grep -qE '^seed_race +safe' <<<"$out" || fail "stream_race flagfile not used: $out"
printf -- '--json\n--nodemo\n' >"$tmp/devices_flags"
out=$("$devices" --flagfile="$tmp/devices_flags") || fail "devices flagfile: $out"
grep -qF '{"default_device":' <<<"$out" || fail "devices flagfile not used: $out"
printf -- '--repeat=1e12\n' >"$tmp/bad_value"
usage_error "'--repeat=1e12'" "$stream_race" --flagfile="$tmp/bad_value"

# 4. Numeric flags.
seed_range="takes an integer from 0 to 18446744073709551615"
for v in -1 18446744073709551616 1e3 abc inf; do
  usage_error "'--seed=$v': " "$gradcheck" --seed=$v
  usage_error "$seed_range" "$gradcheck" --seed=$v
  usage_error "$seed_range" "$stream_race" --seed=$v
done
for v in inf -inf nan 1e308 1e12 1000001 -1 -0.5; do
  usage_error "'--jitter-us=$v'" "$stream_race" --jitter-us=$v
  usage_error "--jitter-us takes a finite number from 0 to 1000000" "$stream_race" --jitter-us=$v
  usage_error "--jitter-us takes a finite number from 0 to 1000000" "$stream_race" --jitter_us=$v
done
usage_error "'--jitter-us 1e12' is out of range" "$stream_race" --jitter-us 1e12
for v in 0 -1 10000001 1e12 99999999999 abc; do
  usage_error "'--repeat=$v'" "$stream_race" --repeat=$v
  usage_error "--repeat takes an integer from 1 to 10000000" "$stream_race" --repeat=$v
done
out=$("$stream_race" --list --repeat=10000000 --jitter-us=1000000 --seed=18446744073709551615) ||
  fail "stream_race: the upper bounds are refused: $out"
out=$("$stream_race" --list --repeat=1 --jitter-us=0 --seed=0) ||
  fail "stream_race: the lower bounds are refused: $out"
out=$("$gradcheck" --ops=add --devices=cpu --seed=18446744073709551615) ||
  fail "gradcheck: the largest seed is refused: $out"

# 5. Empty lists.
for v in , "" "add,,mul" " "; do
  usage_error "'--ops=$v' has an empty entry: --ops takes a comma-separated list" "$gradcheck" "--ops=$v"
done
for v in , "" "cpu,"; do
  usage_error "'--devices=$v' has an empty entry: --devices takes" "$gradcheck" "--devices=$v"
done
for v in , "" ",seed_race"; do
  usage_error "'--scenarios=$v' has an empty entry: --scenarios takes" "$stream_race" "--scenarios=$v"
  usage_error "'--assume-safe=$v' has an empty entry: --assume-safe takes" "$stream_race" \
    "--assume-safe=$v"
done
echo "cli_flags_test: ok"
