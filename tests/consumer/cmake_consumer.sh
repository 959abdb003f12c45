#!/usr/bin/env bash
# Installs streamgrad with tools/install.sh into a temporary prefix, then builds a user's
# program (tests/consumer/main.cc: one training step and a gradcheck) against the install
# only, against each of the two libraries: as a plain CMake project (find_package(streamgrad)
# + target_link_libraries(app streamgrad::streamgrad), then streamgrad::lean; cmake + make)
# and with `pkg-config --cflags --libs streamgrad` (then streamgrad-lean). Runs all four.
# The lean programs must link no CUDA library, no NCCL and no gloo (`ldd`), and
# streamgrad::lean must carry none of them; the full CMake program must show gloo by the
# same ldd check, or that check could not see anything. Removes the prefix and the build
# folders at the end.
#
#   tests/consumer/cmake_consumer.sh [bazel build flags]   (default: -c fastbuild)
#
# The default flags are those of `bazel test //...`, so after it (as in CI) the install
# reuses every compiled object and only links libstreamgrad.so; from a clean state it
# compiles the library once. Offline. Exits non-zero on any failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sg_cmake_consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(-c fastbuild)
prefix="$work/prefix"

start=$(date +%s)
"$repo/tools/install.sh" "--prefix=$prefix" "${flags[@]}"
echo "cmake_consumer: install took $(( $(date +%s) - start )) s"

for lib in libstreamgrad.so libstreamgrad_lean.so; do
  undefined=$(nm -D --undefined-only -C "$prefix/lib/$lib" | grep 'streamgrad::' || true)
  if [ -n "$undefined" ]; then
    echo "cmake_consumer: FAILED: $lib leaves streamgrad symbols undefined:"
    echo "$undefined"
    exit 1
  fi
done

# The CUDA, cuBLAS, cuDNN, NCCL and gloo libraries program $1 loads, one per line.
heavy() { { ldd "$1" | grep -oE 'lib(cuda|cublas|cudnn|nccl|gloo)[^ ]*' || true; } | sort -u; }
# Fails unless program $1 loads libstreamgrad_lean.so and none of heavy()'s libraries.
check_lean_links() {
  local found
  found=$(heavy "$1")
  if [ -n "$found" ]; then
    echo "cmake_consumer: FAILED: the lean program $1 links" $found
    ldd "$1"
    exit 1
  fi
  if ! ldd "$1" | grep -q 'libstreamgrad_lean\.so'; then
    echo "cmake_consumer: FAILED: $1 does not load libstreamgrad_lean.so"
    ldd "$1"
    exit 1
  fi
}

mkdir -p "$work/app"
cp "$repo/tests/consumer/main.cc" "$work/app/main.cc"
cat >"$work/app/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(consumer LANGUAGES CXX)
find_package(streamgrad 0.1 REQUIRED)
add_executable(app main.cc)
target_link_libraries(app PRIVATE streamgrad::streamgrad)
EOF

echo "cmake_consumer: cmake + make"
start=$(date +%s)
cmake -S "$work/app" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
make -C "$work/build" --no-print-directory
"$work/build/app"
echo "cmake_consumer: cmake build and run took $(( $(date +%s) - start )) s"
if ! heavy "$work/build/app" | grep -q gloo; then
  echo "cmake_consumer: FAILED: ldd shows no gloo in the full program; the lean check cannot see"
  exit 1
fi

echo "cmake_consumer: cmake + make against streamgrad::lean"
start=$(date +%s)
mkdir -p "$work/app_lean"
cp "$work/app/main.cc" "$work/app_lean/main.cc"
cat >"$work/app_lean/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(consumer_lean LANGUAGES CXX)
find_package(streamgrad 0.1 REQUIRED)
get_target_property(lean_libs streamgrad::lean INTERFACE_LINK_LIBRARIES)
if(lean_libs MATCHES "cuda|cublas|cudnn|nccl|gloo")
  message(FATAL_ERROR "streamgrad::lean carries ${lean_libs}")
endif()
add_executable(app main.cc)
target_link_libraries(app PRIVATE streamgrad::lean)
EOF
cmake -S "$work/app_lean" -B "$work/build_lean" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
make -C "$work/build_lean" --no-print-directory
"$work/build_lean/app"
check_lean_links "$work/build_lean/app"
echo "cmake_consumer: lean cmake build and run took $(( $(date +%s) - start )) s"

# streamgradConfigVersion.cmake: a version this install is not must be refused.
mkdir -p "$work/app_v9"
sed 's/find_package(streamgrad 0.1 REQUIRED)/find_package(streamgrad 9.0 REQUIRED)/' \
  "$work/app/CMakeLists.txt" >"$work/app_v9/CMakeLists.txt"
cp "$work/app/main.cc" "$work/app_v9/"
if cmake -S "$work/app_v9" -B "$work/build_v9" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  echo "cmake_consumer: FAILED: find_package(streamgrad 9.0) accepted version 0.1.0"
  exit 1
fi

echo "cmake_consumer: pkg-config"
start=$(date +%s)
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# Both .pc files give the same Cflags: compile once, link against each. Word splitting of
# pkg-config's output is intended.
if [ "$(pkg-config --cflags streamgrad)" != "$(pkg-config --cflags streamgrad-lean)" ]; then
  echo "cmake_consumer: FAILED: streamgrad.pc and streamgrad-lean.pc differ in Cflags"
  exit 1
fi
# shellcheck disable=SC2046
g++ -c -o "$work/main.o" "$work/app/main.cc" $(pkg-config --cflags streamgrad)
# shellcheck disable=SC2046
g++ -o "$work/app_pc" "$work/main.o" $(pkg-config --libs streamgrad)
LD_LIBRARY_PATH="$prefix/lib" "$work/app_pc"
# shellcheck disable=SC2046
g++ -o "$work/app_pc_lean" "$work/main.o" $(pkg-config --libs streamgrad-lean)
LD_LIBRARY_PATH="$prefix/lib" "$work/app_pc_lean"
LD_LIBRARY_PATH="$prefix/lib" check_lean_links "$work/app_pc_lean"
echo "cmake_consumer: pkg-config build and run took $(( $(date +%s) - start )) s"
echo "cmake_consumer: PASSED"
