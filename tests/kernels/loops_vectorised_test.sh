#!/bin/bash
# The contiguous element-wise rows of the avx2 and avx512 levels (row1_* and row2_*
# inplace, disjoint and scalar variants of elementwise_rows.h: a functor applied along a
# row, no library call inside) must be vector code of the level's width: at least one
# instruction on a %ymm (avx2) or %zmm (avx512) register. GCC falls back to scalar code
# without a word when it cannot vectorise a functor (at the avx2 level the exact GELU once
# ran element by element, 13x libtorch's time: kernels/host/BUILD says why), and every
# test still passes, since the scalar code gives the same bits. The baseline level is not
# checked: its fma is a library call. See kernels/host/loops.h.
# Arguments: the libraries' files (Bazel passes every output; archives are checked).
set -euo pipefail
checked=0
status=0
for f in "$@"; do
  case "$f" in
    *.a) ;;
    *) continue ;;
  esac
  level=$(basename "$f" | sed -E 's/^libloops_([a-z0-9]+)(\.pic)?\.a$/\1/')
  case "$level" in
    avx2) reg='%ymm' ;;
    avx512) reg='%zmm' ;;
    *) continue ;;
  esac
  # One line per row function: "vector" or "scalar", then its name.
  report=$(objdump -d -C --no-show-raw-insn "$f" | awk -v reg="$reg" -v level="level_${level}" '
    function flush() { if (name != "") print (found ? "vector " : "scalar ") name }
    /^[0-9a-f]+ <.*>:$/ {
      flush()
      name = ""
      found = 0
      if (match($0, level "::\\(anonymous namespace\\)::row[12]_(inplace|disjoint|scalar)")) {
        name = $0
      }
      next
    }
    name != "" && index($0, reg) { found = 1 }
    END { flush() }')
  rows=$(echo "$report" | grep -c . || true)
  if [ "$rows" -lt 40 ]; then
    echo "FAIL: $f (level $level): only $rows row functions found; did their names change?"
    status=1
  fi
  scalar=$(echo "$report" | grep '^scalar ' || true)
  if [ -n "$scalar" ]; then
    echo "FAIL: $f (level $level): rows without $reg instructions (not vectorised):"
    echo "$scalar"
    status=1
  fi
  echo "level $level: $rows rows checked"
  checked=$((checked + 1))
done
# Off x86-64 the vector levels are empty archives: nothing to check there.
if [ "$checked" -eq 0 ] && [ "$(uname -m)" = "x86_64" ]; then
  echo "FAIL: no avx2 or avx512 loops archive among the arguments: $*"
  exit 1
fi
exit $status
