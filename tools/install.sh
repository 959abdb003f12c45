#!/usr/bin/env bash
# Installs streamgrad for projects that use CMake or pkg-config:
#
#   tools/install.sh --prefix=DIR [bazel build flags]      (default flags: -c opt)
#
# DIR/include/streamgrad/       streamgrad.h and every project header it includes, with
#                               their paths (#include "streamgrad.h" with -IDIR/include/streamgrad);
#                               the same headers serve both libraries
# DIR/lib/libstreamgrad.so      every object of //:streamgrad (tools/install/BUILD), linked
#                               with --no-undefined
# DIR/lib/libstreamgrad_lean.so every object of //:streamgrad_lean: cpu and sim devices only;
#                               needs no CUDA library, no NCCL and no gloo (checked here)
# DIR/lib/cmake/streamgrad/     streamgradConfig.cmake, streamgradConfigVersion.cmake:
#                               find_package(streamgrad) -> streamgrad::streamgrad and
#                               streamgrad::lean (link one of the two)
# DIR/lib/pkgconfig/streamgrad.pc, DIR/lib/pkgconfig/streamgrad-lean.pc
#
# The libraries are linked from the archives Bazel builds for the library targets anyway:
# with the flags of an earlier `bazel test` (e.g. `tools/install.sh --prefix=DIR -c
# fastbuild` after `bazel test //...`) only the two links are new. The default, -c opt, is
# what users want and compiles the library once more in that mode.
#
# Fails (non-zero, with a message) on a bad argument, a failed build, a library with an
# undefined streamgrad symbol, or a lean library that needs CUDA, NCCL or gloo. Overwrites
# the files it installs (running it again gives the same files); leaves others in DIR alone.
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

bazel build "${bazel_flags[@]}" //tools/install:streamgrad //tools/install:streamgrad_lean
bin=$(bazel info "${bazel_flags[@]}" bazel-bin 2>/dev/null)
out="$bin/tools/install"

# The links ran with --no-undefined; this also catches a symbol left undefined on purpose
# (weak) or by a linker that ignored the flag.
for so in "$out/libstreamgrad.so" "$out/libstreamgrad_lean.so"; do
  undefined=$(nm -D --undefined-only -C "$so" | grep 'streamgrad::' || true)
  if [ -n "$undefined" ]; then
    echo "install.sh: $so leaves streamgrad symbols undefined:" >&2
    echo "$undefined" >&2
    exit 1
  fi
done

# What the lean library promises: neither it nor its link flags bring in CUDA, NCCL or gloo.
heavy='lib(cuda|cudart|cublas|cublasLt|cudnn|nccl|gloo)'
heavy_needed=$(readelf -d "$out/libstreamgrad_lean.so" | grep NEEDED | grep -oE "$heavy[^] ]*" || true)
heavy_flags=$(grep -E "^-l${heavy#lib}" "$out/streamgrad_lean.linkopts" || true)
if [ -n "$heavy_needed$heavy_flags" ]; then
  echo "install.sh: libstreamgrad_lean.so needs CUDA, NCCL or gloo:" $heavy_needed $heavy_flags >&2
  exit 1
fi

# Headers: streamgrad.h's include closure within the project, found by the preprocessor
# (quote includes only; system headers such as abseil's stay where they are).
headers=$(g++ -std=c++17 -MM -MT streamgrad -I. streamgrad.h |
  sed -e 's/^streamgrad://' -e 's/\\$//' | tr ' ' '\n' | sed '/^$/d' | sort -u)
for h in $headers; do
  install -D -m 644 "$h" "$prefix/include/streamgrad/$h"
done
install -D -m 755 "$out/libstreamgrad.so" "$prefix/lib/libstreamgrad.so"
install -D -m 755 "$out/libstreamgrad_lean.so" "$prefix/lib/libstreamgrad_lean.so"

# Link dependencies for users, per library: the system libraries its deps link (abseil,
# whose inline header code users' objects reference directly; OpenBLAS, zlib, pthread;
# gloo for the full one). CUDA's are left out: the static CUDA runtime is inside
# libstreamgrad.so, and it finds cuBLAS, cuDNN and NCCL itself (DT_NEEDED with its
# RUNPATH). Sets cmake_libs (';'-separated) and pc_libs from the .linkopts file $1.
link_libs() {
  local cmake=() pc=() flag
  while read -r flag; do
    case "$flag" in
      -lpthread) cmake+=(Threads::Threads); pc+=(-pthread) ;;
      -lcudart_static | -lcudart | -lcublas | -lcublasLt | -lcudnn | -lnccl) ;;
      -l*) cmake+=("${flag#-l}"); pc+=("$flag") ;;
      *) ;;  # -L and -Wl,-rpath of the CUDA toolkit
    esac
  done <"$1"
  cmake_libs=$(IFS=';'; echo "${cmake[*]}")
  pc_libs="${pc[*]}"
}
description="C++17 autograd engine with a stream-aware backward pass"

cmake_dir="$prefix/lib/cmake/streamgrad"
mkdir -p "$cmake_dir" "$prefix/lib/pkgconfig"
link_libs "$out/streamgrad.linkopts"
full_cmake_libs=$cmake_libs
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$VERSION|" -e "s|@PC_NAME@|streamgrad|" \
  -e "s|@PC_DESCRIPTION@|$description|" -e "s|@PC_LIB@|streamgrad|" -e "s|@PC_LIBS@|$pc_libs|" \
  tools/install/streamgrad.pc.in >"$prefix/lib/pkgconfig/streamgrad.pc"
link_libs "$out/streamgrad_lean.linkopts"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$VERSION|" -e "s|@PC_NAME@|streamgrad-lean|" \
  -e "s|@PC_DESCRIPTION@|$description (cpu and sim devices; no CUDA, NCCL or gloo)|" \
  -e "s|@PC_LIB@|streamgrad_lean|" -e "s|@PC_LIBS@|$pc_libs|" \
  tools/install/streamgrad.pc.in >"$prefix/lib/pkgconfig/streamgrad-lean.pc"
sed -e "s|@CMAKE_LINK_LIBRARIES@|$full_cmake_libs|" -e "s|@CMAKE_LEAN_LINK_LIBRARIES@|$cmake_libs|" \
  tools/install/streamgradConfig.cmake.in >"$cmake_dir/streamgradConfig.cmake"
sed "s|@VERSION@|$VERSION|" tools/install/streamgradConfigVersion.cmake.in \
  >"$cmake_dir/streamgradConfigVersion.cmake"

echo "install.sh: installed streamgrad $VERSION into $prefix ($(echo "$headers" | wc -l) headers," \
  "lib/libstreamgrad.so, lib/libstreamgrad_lean.so, lib/cmake/streamgrad," \
  "lib/pkgconfig/streamgrad.pc and streamgrad-lean.pc)"
