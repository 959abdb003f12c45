#!/usr/bin/env bash
# Keeps Bazel's disk cache (.bazelrc: --disk_cache=~/.cache/bazel-disk) under a size limit by
# deleting its least recently used entries. Bazel 4 never evicts that cache, and each change
# to the library adds a new generation of objects for every configuration CI builds: left
# alone it filled this machine's disk and failed a CI run with "No space left on device".
#
# Usage: tools/trim_disk_cache.sh [limit_gb]   (default SG_DISK_CACHE_GB, else 20)
# Idempotent and safe to run while no bazel command is running: Bazel treats a missing
# cache entry as a miss and runs the action again. "Recently used" is the later of an
# entry's access and modification times (the file system records access times relatively:
# at least once a day), so the oldest generations go first.
set -euo pipefail

limit_gb=${1:-${SG_DISK_CACHE_GB:-20}}
cache=${SG_DISK_CACHE_DIR:-$HOME/.cache/bazel-disk}
if ! [[ "$limit_gb" =~ ^[0-9]+$ ]]; then
  echo "trim_disk_cache: the limit must be a whole number of GB, got '$limit_gb'" >&2
  exit 2
fi
[ -d "$cache" ] || exit 0
# SG_DISK_CACHE_LIMIT_BYTES overrides the limit at byte precision (its test uses it).
limit=${SG_DISK_CACHE_LIMIT_BYTES:-$((limit_gb * 1024 * 1024 * 1024))}

# One line per file: last use (epoch seconds), size in bytes, path; newest first, so that
# everything after the running total passes the limit is the least recently used.
find "$cache" -type f -printf '%A@ %T@ %s %p\n' |
  awk '{ used = ($1 > $2) ? $1 : $2; printf "%d %s %s\n", used, $3, $4 }' |
  sort -k1,1nr |
  awk -v limit="$limit" '{ total += $2; if (total > limit) print $3 }' |
  xargs -r rm -f

echo "trim_disk_cache: $cache holds $(du -sh "$cache" | cut -f1) (limit ${limit_gb} GB)" >&2
