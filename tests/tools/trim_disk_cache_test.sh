#!/usr/bin/env bash
# tools/trim_disk_cache.sh: deletes least recently used entries (the later of access and
# modification time) until the cache fits, keeps everything when it fits, refuses a bad
# limit, and leaves a missing cache alone.
set -euo pipefail
trim="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "trim_disk_cache_test: $*"; exit 1; }

cache="$tmp/cache"
mkdir -p "$cache/cas/aa" "$cache/ac/bb"
entry() {  # entry PATH AGE_MINUTES_MODIFIED AGE_MINUTES_ACCESSED
  head -c 100000 /dev/zero >"$cache/$1"
  touch -m -d "-$2 minutes" "$cache/$1"
  touch -a -d "-$3 minutes" "$cache/$1"
}
entry cas/aa/oldest 500 500
entry cas/aa/old 400 400
entry ac/bb/read_lately 600 5  # written long ago, read a moment ago: in use
entry cas/aa/new 10 10
entry ac/bb/newest 1 1

# Everything fits: nothing goes.
SG_DISK_CACHE_DIR="$cache" SG_DISK_CACHE_LIMIT_BYTES=10000000 "$trim" 2>/dev/null
[ "$(find "$cache" -type f | wc -l)" -eq 5 ] || fail "a cache under its limit lost entries"

# Room for three entries: the two least recently used go.
SG_DISK_CACHE_DIR="$cache" SG_DISK_CACHE_LIMIT_BYTES=350000 "$trim" 2>/dev/null
left=$(cd "$cache" && find . -type f | sort | tr '\n' ' ')
[ "$left" = "./ac/bb/newest ./ac/bb/read_lately ./cas/aa/new " ] ||
  fail "want newest, read_lately and new kept, got: $left"

set +e
err=$(SG_DISK_CACHE_DIR="$cache" "$trim" 12x 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a malformed limit exits $rc, want 2"
grep -qF "whole number of GB, got '12x'" <<<"$err" || fail "unclear message: $err"

SG_DISK_CACHE_DIR="$tmp/nowhere" "$trim" 1 || fail "a missing cache is not an error"
[ ! -e "$tmp/nowhere" ] || fail "a missing cache was created"
echo "trim_disk_cache_test: ok"
