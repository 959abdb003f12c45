#!/usr/bin/env bash
# Packs what bench/gpu.sh runs into one archive, for a GPU machine that has the NVIDIA driver
# and CUDA's libraries but no Bazel, no Debian packages and no network: the GPU-relevant
# test binaries (fastbuild, as `bazel test` builds them), tools/{devices,gradcheck,
# stream_race,train} and bench/{gpu_bench,sg_bench} (-c opt), every shared library they load
# that such a machine may lack (abseil, OpenBLAS, SLEEF, gloo and theirs; cudart, so that the
# runtime is the one we compiled against), a manifest of each test's environment from its
# BUILD target, a small Fashion-MNIST (the test set, also as the training set) and Debian's
# fortunes (the GPT's text).
# cuBLAS, cuDNN and NCCL are not packed (hundreds of MB): bench/gpu.sh --bundle finds the
# machine's own. Unpack there and run `bench/gpu.sh --bundle=DIR`.
#
#   bench/gpu_bundle.sh OUT.tar.xz
#
# Exit status: 0, or 1 after a message (a build failed, a library could not be resolved).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 1 ]] || { echo "usage: bench/gpu_bundle.sh OUT.tar.xz" >&2; exit 1; }
archive="$(realpath -m "$1")"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The packages whose tests touch kernels, ops, modules, the engine or the cuda backend; the
# runtime's other tests are about the sim and cpu devices and gain nothing on a GPU machine.
# data_test reads the whole Fashion-MNIST training set, too large to travel with the rest.
tests_query='kind(cc_test, //tests/kernels/... + //tests/ops/... + //tests/nn/... +
  //tests/engine/... + //tests/gradcheck/... + //tests/runtime/cuda/... +
  //tests/distributed:nccl_gpu_test) except //tests/nn/data:data_test'
tools=(//tools:devices //tools:gradcheck //tools:stream_race //tools:train)
benches=(//bench:gpu_bench //bench:sg_bench)

mapfile -t tests < <(bazel query "$tests_query" 2>/dev/null)
bazel build "${tests[@]}"
bazel build -c opt "${tools[@]}" "${benches[@]}"
fast="$(bazel info bazel-bin 2>/dev/null)"
opt="$(bazel info -c opt bazel-bin 2>/dev/null)"

as_path() { local t="${1#//}"; echo "${t/://}"; }
mkdir -p "$stage/bin" "$stage/lib" "$stage/data/fashion-mnist"
built=()  # the binaries where Bazel left them, where ldd resolves their runpaths
for t in "${tests[@]}"; do built+=("$fast/$(as_path "$t")"); done
for t in "${tools[@]}" "${benches[@]}"; do built+=("$opt/$(as_path "$t")"); done
for b in "${built[@]}"; do
  p="${b#"$fast/"}"; p="${p#"$opt/"}"
  mkdir -p "$stage/bin/$(dirname "$p")"; cp -L "$b" "$stage/bin/$p"
done

# Each test's env attribute, one line per test: "tests/x/y_test KEY=VALUE ...".
bazel query --output=xml "$tests_query" 2>/dev/null | python3 -c '
import sys, xml.etree.ElementTree as ET
for rule in ET.parse(sys.stdin).getroot().iter("rule"):
    path = rule.get("name").lstrip("/").replace(":", "/")
    env = rule.find("dict[@name=\"env\"]")
    pairs = [[s.get("value") for s in p.findall("string")] for p in (env if env is not None else [])]
    print(" ".join([path] + [k + "=" + v for k, v in pairs]))
' > "$stage/tests.env"
# Tests tagged exclusive (they read device-wide state such as the GPU's free memory), which
# bench/gpu_tests.sh runs alone, as `bazel test` does.
bazel query "attr(tags, '\\bexclusive\\b', $tests_query)" 2>/dev/null |
  sed 's|^//||; s|:|/|' > "$stage/exclusive"
[[ $(wc -l < "$stage/tests.env") -eq ${#tests[@]} ]] || {
  echo "gpu_bundle.sh: tests.env has $(wc -l < "$stage/tests.env") lines for ${#tests[@]} tests" >&2
  exit 1
}

# Libraries: everything ldd resolves except the C runtime (the machine's own, newer) and the
# CUDA libraries the machine's toolkit provides (cudart excepted, above).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcublas|libcudnn|libnccl)'
printf '%s\0' "${built[@]}" | xargs -0 -n1 ldd | awk '/=>/ {print $1, $3}' |
  sort -u | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [[ "$path" == /* ]] || { echo "gpu_bundle.sh: cannot resolve $name" >&2; exit 1; }
    cp -L "$path" "$stage/lib/$name"
  done

mkdir -p "$stage/data/fortunes"  # --model=gpt's text: the regular files, not the .dat indexes
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' -exec cp {} "$stage/data/fortunes/" \;
d=/usr/share/datasets/fashion-mnist
cp "$d/t10k-images-idx3-ubyte.gz" "$d/t10k-labels-idx1-ubyte.gz" "$stage/data/fashion-mnist/"
cp "$d/t10k-images-idx3-ubyte.gz" "$stage/data/fashion-mnist/train-images-idx3-ubyte.gz"
cp "$d/t10k-labels-idx1-ubyte.gz" "$stage/data/fashion-mnist/train-labels-idx1-ubyte.gz"
git rev-parse --short HEAD > "$stage/commit" 2>/dev/null || echo unknown > "$stage/commit"

# One dictionary over the whole stream: the test binaries share most of their bytes.
tar -C "$stage" -cf - . | xz -6 --lzma2=dict=256MiB -T1 -c > "$archive"
echo "gpu_bundle.sh: $archive: $(du -h "$archive" | cut -f1), ${#tests[@]} tests, $(ls "$stage/lib" | wc -l) libraries"
