#!/usr/bin/env bash
# Work queued on a sim stream finishes before the process exits (see
# tests/runtime/sim_exit_drain_main.cc): the helper returns from main at once and its
# stream's task writes the marker 300 ms later.
set -euo pipefail
marker="${TEST_TMPDIR:-$(mktemp -d)}/drained"
rm -f "$marker"
"$1" "$marker"
[ -s "$marker" ] || { echo "sim_exit_drain_test: the queued sim work did not run before exit"; exit 1; }
echo "sim_exit_drain_test: queued sim work finished before exit"
