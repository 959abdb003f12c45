#!/usr/bin/env bash
# Installs streamgrad for projects that use CMake or pkg-config:
#
#   tools/install.sh --prefix=DIR [bazel build flags]      (default flags: -c opt)
#
# DIR/include/streamgrad/       streamgrad.h and every project header it includes, with
#                               their paths (#include "streamgrad.h" with -IDIR/include/streamgrad)
# DIR/lib/libstreamgrad.so      every object of //:streamgrad (tools/install/BUILD), linked
#                               with --no-undefined
# DIR/lib/cmake/streamgrad/     streamgradConfig.cmake, streamgradConfigVersion.cmake:
#                               find_package(streamgrad) -> streamgrad::streamgrad
# DIR/lib/pkgconfig/streamgrad.pc
#
# The library is linked from the archives Bazel builds for the library targets anyway:
# with the flags of an earlier `bazel test` (e.g. `tools/install.sh --prefix=DIR -c
# fastbuild` after `bazel test //...`) only the link is new. The default, -c opt, is what
# users want and compiles the library once more in that mode.
#
# Fails (non-zero, with a message) on a bad argument, a failed build, or a library with an
# undefined streamgrad symbol. Overwrites the files it installs; leaves others in DIR alone.
set -euo pipefail

# The version the CMake and pkg-config files report.
readonly VERSION=0.1.0

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

prefix=""
bazel_flags=()
for arg in "$@"; do
  case "$arg" in
    --prefix=*) prefix=${arg#--prefix=} ;;
    -h | --help) usage 0 ;;
    *) bazel_flags+=("$arg") ;;
  esac
done
if [ -z "$prefix" ]; then
  echo "install.sh: --prefix=DIR is required (where include/ and lib/ go)" >&2
  usage 2 >&2
fi
[ ${#bazel_flags[@]} -eq 0 ] && bazel_flags=(-c opt)

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
cd "$(dirname "$0")/.."

bazel build "${bazel_flags[@]}" //tools/install:streamgrad
bin=$(bazel info "${bazel_flags[@]}" bazel-bin 2>/dev/null)
so="$bin/tools/install/libstreamgrad.so"
linkopts="$bin/tools/install/streamgrad.linkopts"

# The link ran with --no-undefined; this also catches a symbol left undefined on purpose
# (weak) or by a linker that ignored the flag.
undefined=$(nm -D --undefined-only -C "$so" | grep 'streamgrad::' || true)
if [ -n "$undefined" ]; then
  echo "install.sh: $so leaves streamgrad symbols undefined:" >&2
  echo "$undefined" >&2
  exit 1
fi

# Headers: streamgrad.h's include closure within the project, found by the preprocessor
# (quote includes only; system headers such as abseil's stay where they are).
headers=$(g++ -std=c++17 -MM -MT streamgrad -I. streamgrad.h |
  sed -e 's/^streamgrad://' -e 's/\\$//' | tr ' ' '\n' | sed '/^$/d' | sort -u)
for h in $headers; do
  install -D -m 644 "$h" "$prefix/include/streamgrad/$h"
done
install -D -m 755 "$so" "$prefix/lib/libstreamgrad.so"

# Link dependencies for users: the system libraries the deps link (abseil, whose inline
# header code users' objects reference directly; OpenBLAS, zlib, gloo, pthread). CUDA's are
# left out: the static CUDA runtime is inside libstreamgrad.so, and it finds cuBLAS, cuDNN
# and NCCL itself (DT_NEEDED with its RUNPATH).
cmake_libs=()
pc_libs=()
while read -r flag; do
  case "$flag" in
    -lpthread) cmake_libs+=(Threads::Threads); pc_libs+=(-pthread) ;;
    -lcudart_static | -lcudart | -lcublas | -lcublasLt | -lcudnn | -lnccl) ;;
    -l*) cmake_libs+=("${flag#-l}"); pc_libs+=("$flag") ;;
    *) ;;  # -L and -Wl,-rpath of the CUDA toolkit
  esac
done <"$linkopts"

cmake_dir="$prefix/lib/cmake/streamgrad"
mkdir -p "$cmake_dir" "$prefix/lib/pkgconfig"
(IFS=';'; sed "s|@CMAKE_LINK_LIBRARIES@|${cmake_libs[*]}|" \
  tools/install/streamgradConfig.cmake.in >"$cmake_dir/streamgradConfig.cmake")
sed "s|@VERSION@|$VERSION|" tools/install/streamgradConfigVersion.cmake.in \
  >"$cmake_dir/streamgradConfigVersion.cmake"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$VERSION|" -e "s|@PC_LIBS@|${pc_libs[*]}|" \
  tools/install/streamgrad.pc.in >"$prefix/lib/pkgconfig/streamgrad.pc"

echo "install.sh: installed streamgrad $VERSION into $prefix ($(echo "$headers" | wc -l) headers," \
  "lib/libstreamgrad.so, lib/cmake/streamgrad, lib/pkgconfig/streamgrad.pc)"
