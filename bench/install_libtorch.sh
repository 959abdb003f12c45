#!/usr/bin/env bash
# Optional: installs Debian's libtorch-dev (libtorch 1.13, CPU) so that bench/run.sh can
# measure libtorch beside streamgrad, then tells the Bazel server to look for it again
# (@local_libtorch, third_party/libtorch/libtorch_configure.bzl). Not needed to build or
# test streamgrad. Idempotent: apt is not touched when the package is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

if dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "install_libtorch: libtorch-dev $(dpkg-query -W -f='${Version}' libtorch-dev) is installed" >&2
else
  echo "install_libtorch: installing libtorch-dev" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    libtorch-dev >/dev/null
fi

# A running server does not notice headers and libraries appearing: re-run the detection.
bazel sync --only=local_libtorch >&2
if bazel query --output=build @local_libtorch//:libtorch 2>/dev/null | grep -q libtorch_missing; then
  echo "install_libtorch: libtorch-dev is installed but @local_libtorch did not find it" \
       "(is STREAMGRAD_LIBTORCH=0 set?)" >&2
  exit 1
fi
echo "install_libtorch: @local_libtorch//:libtorch is available; run bench/run.sh" >&2
