#!/bin/bash
# Every symbol a loops_<level> library defines for the linker must belong to that level
# (its namespace appears in the name). An inline function or template instantiated there
# with a shared name (a std:: helper, a functor's operator() that was not inlined) would be
# emitted by every level, and the linker would keep one copy for all of them: baseline code
# could then run AVX-512 instructions. See kernels/host/loops.h.
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
  # Global and weak definitions (type letters other than U, in upper case, plus V/W/u).
  syms=$(nm -C --defined-only "$f")
  # The level's name may appear mangled: ASan's __odr_asan.<mangled global> markers.
  # DW.ref.__gxx_personality_v0 is data (a pointer to the C++ runtime's unwinder), the
  # same bytes in every object.
  bad=$(echo "$syms" | awk '$2 ~ /^[A-TV-Zuvw]$/' | grep -v "level_${level}" |
        grep -v " DW\.ref\.__gxx_personality_v0$" || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $f (level $level) defines symbols outside namespace level_${level}:"
    echo "$bad"
    status=1
  fi
  checked=$((checked + 1))
done
# The baseline level exists on every platform (the others only on x86-64).
if [ "$checked" -eq 0 ]; then
  echo "FAIL: no loops archive among the arguments: $*"
  exit 1
fi
echo "checked $checked archives"
exit $status
