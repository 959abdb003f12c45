#!/usr/bin/env bash
# Installs what streamgrad needs on a fresh Debian bookworm machine, from Debian's archive
# only. Idempotent: packages already present are left alone and apt is not touched at all
# when nothing is missing.
set -euo pipefail

# cmake, pkg-config, make: tools/install.sh's users and tests/consumer/cmake_consumer.sh.
# fortunes: the default text corpus of the character-level language model (nn/data/text.h).
# chromium: renders tools/memviz's page in tests/tools:memviz_browser_test.
packages=(bazel-bootstrap catch2 libabsl-dev libopenblas-dev zlib1g-dev libbenchmark-dev
          dataset-fashion-mnist nlohmann-json3-dev libgloo-dev iproute2 cmake pkg-config make
          libsleef-dev libdnnl-dev fortunes chromium)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# Bazel 4 never evicts its disk cache: keep it bounded before each build.
"$(dirname "$0")/trim_disk_cache.sh"
