#!/usr/bin/env bash
# Side-by-side benchmark of streamgrad and libtorch (issue 11): builds bench/sg_bench and,
# where libtorch is installed (bench/install_libtorch.sh), bench/torch_bench with -c opt;
# runs every case of `sg_bench --list` on 1 and 2 threads, streamgrad then libtorch as
# separate processes, case after case, RUNS times over, so that machine noise hits both
# sides alike; then prints one table (bench/report.py): per benchmark and thread count,
# each side's median of per-process medians, their spread and the ratio (lower is better).
#
#   bench/run.sh [--json] [--quick] [--runs=N] [--filter=REGEX] [--threads=1,2]
#
#   --json       print only {"benchmarks":[{"name":...,"device":"cpu","streamgrad":...,
#                "libtorch":...,"ratio":...}, ...]} on stdout (the rest goes to stderr)
#   --quick      one run, 3 repetitions per process (about a minute with the builds cached)
#   --runs=N     processes per side, case and thread count (default 3)
#   --filter=RE  only the cases whose flags line (see `sg_bench --list`) matches RE
#   --threads=L  comma-separated thread counts (default 1,2)
#
# Threads: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set per process, and torch_bench
# calls torch::set_num_threads. Raw JSON lines and both binaries' stderr (their sanity
# checks) are kept in a temporary folder named at the end. Exit status: 0; 1 when a
# build or a benchmark process failed or a check value was wrong; 2 for bad arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

cmdline="bench/run.sh"
for arg in "$@"; do cmdline+=" $(printf '%q' "$arg")"; done
json=0
quick=0
runs=3
filter=""
threads="1,2"
for arg in "$@"; do
  case "$arg" in
    --json) json=1 ;;
    --quick) quick=1 ;;
    --runs=*) runs="${arg#--runs=}" ;;
    --filter=*) filter="${arg#--filter=}" ;;
    --threads=*) threads="${arg#--threads=}" ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --runs must be a positive integer" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] \
  || { echo "run.sh: --threads must be a list such as 1,2" >&2; exit 2; }
extra=()
if [ "$quick" -eq 1 ]; then
  runs=1
  extra=(--reps=3 --warmup=1)
fi

# Tables and headers go to stdout, unless --json claims it.
if [ "$json" -eq 1 ]; then exec 3>&2; else exec 3>&1; fi
say() { echo "$@" >&3; }
progress() { echo "$@" >&2; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
bazel_quiet=(--noshow_progress --ui_event_filters=-info,-stdout)
progress "run.sh: building with -c opt"
bazel build -c opt "${bazel_quiet[@]}" //bench:sg_bench >&2
bin_dir=$(bazel info -c opt bazel-bin 2>/dev/null)
sg="$bin_dir/bench/sg_bench"

torch=""
if bazel query --output=build @local_libtorch//:libtorch 2>/dev/null | grep -q libtorch_missing; then
  say "libtorch not installed (bench/install_libtorch.sh): streamgrad only"
else
  bazel build -c opt "${bazel_quiet[@]}" //bench:torch_bench >&2
  torch="$bin_dir/bench/torch_bench"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/streamgrad-bench.XXXXXX")
raw="$out/raw.jsonl"
log="$out/stderr.log"
: >"$raw"
failed=0

mapfile -t cases < <("$sg" --list | { [ -n "$filter" ] && grep -E -- "$filter" || cat; })
[ "${#cases[@]}" -gt 0 ] || { echo "run.sh: no case matches --filter=$filter" >&2; exit 2; }

# One process: its JSON line to raw, its stderr to the log; a failure is noted, not fatal.
run_one() {
  local bin=$1 t=$2 case_flags=$3
  echo "== $(basename "$bin") $case_flags --threads=$t ${extra[*]}" >>"$log"
  # glibc's malloc keeps what is freed (no mmap for large blocks, no trimming): libtorch's
  # cpu allocator frees each step's activations to malloc, and with glibc's defaults its
  # resnet step ran 4-5 times slower in some processes, from page faults on memory handed
  # back to the kernel and mapped again (bench/RESULTS.md, 2026-11-27). streamgrad's
  # caching allocator keeps its blocks itself; both sides get the same setting. Output
  # goes through a pipe and is split after: JSON lines are the results, the rest the log.
  local both="$out/one_process.txt" rc=0
  # One-thread processes of both sides run on the same CPU (the last): on this machine's
  # two virtual CPUs the same process ran 20-25 % slower on CPU 0 than on CPU 1, which
  # made a side's figures bimodal depending on where the scheduler put it.
  local pin=()
  if [ "$t" -eq 1 ] && command -v taskset >/dev/null; then pin=(taskset -c "$(( $(nproc) - 1 ))"); fi
  # shellcheck disable=SC2086
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296 \
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "${pin[@]}" "$bin" $case_flags --threads="$t" \
    "${extra[@]}" 2>&1 | cat >"$both" || rc=$?
  grep '^{' "$both" >>"$raw" || true
  grep -v '^{' "$both" >>"$log" || true
  if [ "$rc" -ne 0 ]; then
    echo "run.sh: $(basename "$bin") $case_flags --threads=$t failed (see $log)" >&2
    failed=1
  fi
}

IFS=',' read -r -a thread_list <<<"$threads"
start=$(date +%s)
for ((run = 1; run <= runs; ++run)); do
  for case_flags in "${cases[@]}"; do
    progress "run $run/$runs: $case_flags"
    for t in "${thread_list[@]}"; do
      run_one "$sg" "$t" "$case_flags"
      if [ -n "$torch" ]; then run_one "$torch" "$t" "$case_flags"; fi
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

say "date:         $(date '+%Y-%m-%d %H:%M:%S %Z')"
say "machine:      $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
say "load average: before $load_before, after $load_after (1, 5, 15 min)"
say "command:      $cmdline"
say "commit:       $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
if [ -n "$torch" ]; then
  say "libtorch:     $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo "at \$LIBTORCH_PREFIX")"
fi
say "runs:         $runs per side, case and thread count, interleaved; $(( $(date +%s) - start )) s"
say ""
if [ "$json" -eq 1 ]; then
  python3 bench/report.py "$raw" --json
else
  python3 bench/report.py "$raw"
fi
say ""
say "raw lines: $raw; sanity checks and errors: $log"
if grep -q '"check_ok": *false' "$raw"; then failed=1; fi
exit "$failed"
