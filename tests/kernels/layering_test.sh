#!/bin/bash
# The kernels' layering, as visibility declares it (kernels/BUILD): the layers above
# kernels/ may depend on //kernels (the public entry points) and on nothing else under
# kernels/; the host loops, the functors, the dispatch table and the cuda kernels are
# internal. Bazel 4 has no negative build test, so this asks `bazel query` which kernels
# targets each layer's library can see, and fails on any but //kernels:kernels.
#
# Run from the workspace (it runs bazel itself, so it is not a bazel test target):
#   tests/kernels/layering_test.sh
# Exit status 0 when the layering holds, 1 with the offending targets listed otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

status=0
for layer in //engine:engine //ops:ops //nn:nn //distributed:distributed //tools:all; do
  # Libraries under kernels/ that `layer` may depend on (config_settings are always
  # visible in Bazel 4 and hold no code).
  visible=$(bazel query --noshow_progress \
    "visible(set($layer), kind('_library|filegroup|cc_binary', //kernels/...)) except attr(testonly, 1, //kernels/...)" \
    2>/dev/null | sort)
  extra=$(echo "$visible" | grep -v '^//kernels:kernels$' || true)
  if [[ -n "$extra" ]]; then
    echo "FAIL: $layer may depend on kernels internals:"
    echo "$extra" | sed 's/^/  /'
    status=1
  else
    echo "ok: $layer sees only //kernels:kernels"
  fi
done
# The tests of the kernels see the internals they check.
if ! bazel query --noshow_progress "visible(//tests/kernels:kernel_test_util, //kernels/host:host)" \
    2>/dev/null | grep -q '^//kernels/host:host$'; then
  echo "FAIL: //tests/kernels cannot see //kernels/host:host"
  status=1
fi
exit $status
