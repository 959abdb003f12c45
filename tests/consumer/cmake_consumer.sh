#!/usr/bin/env bash
# Installs streamgrad with tools/install.sh into a temporary prefix, then builds a user's
# program (tests/consumer/main.cc: one training step and a gradcheck) against the install
# only, twice: as a plain CMake project (find_package(streamgrad) +
# target_link_libraries(app streamgrad::streamgrad), cmake + make) and with
# `pkg-config --cflags --libs streamgrad`. Runs both. Removes the prefix and the build
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

undefined=$(nm -D --undefined-only -C "$prefix/lib/libstreamgrad.so" | grep 'streamgrad::' || true)
if [ -n "$undefined" ]; then
  echo "cmake_consumer: FAILED: libstreamgrad.so leaves streamgrad symbols undefined:"
  echo "$undefined"
  exit 1
fi

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
# Word splitting of pkg-config's output is intended.
# shellcheck disable=SC2046
g++ -o "$work/app_pc" "$work/app/main.cc" $(pkg-config --cflags --libs streamgrad)
LD_LIBRARY_PATH="$prefix/lib" "$work/app_pc"
echo "cmake_consumer: pkg-config build and run took $(( $(date +%s) - start )) s"
echo "cmake_consumer: PASSED"
