#!/usr/bin/env bash
# bench/sg_bench (streamgrad's side of bench/run.sh) runs every case of its --list, one
# repetition each, and every JSON line parses, names its case, reports each metric, and
# carries the right check value, computed here independently of bench/bench_common.h:
# chain and retain 1.0001^k in float32 terms, fanin k * 1.0001, the DAG's exact value
# 2.83815e+12, the forked graph's gradient and its event and wait counts, the sum of each
# element-wise function over its input, the sums of layer_norm's and batch_norm's outputs
# squared (batch_norm's case shrunk to a batch of 2), the sum of causal attention's output
# squared (its cases shrunk to one batch of 16 positions, so that Python can compute it).
# No timing is asserted. libtorch is not needed.
set -euo pipefail
bin="$1"
out="${TEST_TMPDIR:-/tmp}/sg_bench_smoke.jsonl"
: >"$out"

cases=$("$bin" --list)
[ "$(wc -l <<<"$cases")" -ge 16 ] || { echo "--list is short: $cases"; exit 1; }
while read -r line; do
  # Later flags win: one repetition, and a short overlap graph.
  small=""
  [[ "$line" == *attention* ]] && small="--batch=1 --n=16"
  [[ "$line" == *batch_norm* ]] && small="--batch=2"
  # shellcheck disable=SC2086
  "$bin" $line --reps=1 --warmup=0 --length=2 --kernel_us=200 $small >>"$out" \
    || { echo "sg_bench $line: exit code $?"; exit 1; }
done <<<"$cases"

python3 - "$out" <<'PY'
import json, math, struct, sys

f32 = struct.unpack("f", struct.pack("f", 1.0001))[0]  # the factor both engines use


def math_input(n):  # SplitMix64(11), 24-bit uniforms, 8 u - 4 (exact in float32)
    state, mask, out = 11, (1 << 64) - 1, []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out.append(8 * ((z >> 40) / 16777216.0) - 4)
    return out
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
fail = []
seen = set()
for j in lines:
    name, case = j["name"], j["case"]
    seen.add(case)
    flags = dict(p.split("=", 1) for p in name.split() if "=" in p)
    if j["side"] != "streamgrad" or not j["check_ok"]:
        fail.append(f"{name}: side {j['side']}, check_ok {j['check_ok']}")
    want_metrics = {
        "chain": ["fwd", "bwd", "fwd+bwd", "teardown", "total", "nograd"],
        "fanin": ["fwd", "bwd", "fwd+bwd", "teardown", "total"],
        "dag": ["fwd", "bwd", "fwd+bwd", "teardown", "total"],
        "retain": ["rebwd", "grad_x", "grad_mid"],
        "mlp": ["fwd", "bwd", "optim", "teardown", "total"],
        "mlp_hand": ["fwd", "bwd", "optim", "teardown", "total"],
        "cnn": ["fwd", "bwd", "optim", "teardown", "total"],
        "resnet": ["fwd", "bwd", "optim", "teardown", "total"],
        "overlap": ["bwd_forked", "bwd_longest_branch", "bwd_one_stream"],
        "math": ["fwd", "fwd_bwd"],
        "layer_norm": ["fwd", "fwd_bwd"],
        "batch_norm": ["fwd", "fwd_bwd"],
        "gpt": ["fwd", "bwd", "optim", "total"],
        "attention": ["fwd", "fwd_bwd"],
    }[case]
    for m in want_metrics:
        s = j["metrics"].get(m)
        if s is None or not all(math.isfinite(s[k]) and s[k] >= 0 for k in
                                ("median", "p10", "p90", "min")):
            fail.append(f"{name}: metric {m}: {s}")
    check = j["check"]
    if case == "chain":
        n = int(flags["n"])
        want = f32 ** n if flags["op"] == "mul" else 1.0
        ok = abs(check - want) <= 2e-5 * want and j["nodes"] == n + 2
    elif case == "retain":
        n, mid = int(flags["n"]), int(flags["mid"])
        want = f32 ** (n - mid)
        ok = abs(check - want) <= 2e-5 * want and j["nodes"] == n + 2
    elif case == "fanin":
        want = int(flags["k"]) * 1.0001
        ok = abs(check - want) <= 2e-5 * want
    elif case == "dag":
        want = 2.83815e12  # bench/README.md, n=5000 seed=42
        ok = abs(check - want) <= 2e-6 * want
    elif case == "math":
        # The sum of op(x) over bench_common.h's math_input, in double, against float32
        # kernels (1 ulp each) summed in double blocks: within 2e-6 of the sum of |op(x)|,
        # far below the 26 between gelu and its tanh form.
        fns = {"exp": math.exp, "tanh": math.tanh,
               "sigmoid": lambda v: 1 / (1 + math.exp(-v)),
               "gelu": lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))),
               "gelu_tanh": lambda v: 0.5 * v * (1 + math.tanh(
                   math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
               "silu": lambda v: v / (1 + math.exp(-v))}
        ys = [fns[flags["op"]](v) for v in math_input(int(flags["numel"]))]
        want = sum(ys)
        ok = abs(check - want) <= 2e-6 * sum(abs(y) for y in ys)
    elif case == "layer_norm":
        # Rows of 256 of math_input, normalised in double (biased variance, eps 1e-5), times
        # weight 0.5 + j / 256 plus bias 0.25 - j / 512; the sum of the squares, against
        # float32 kernels: within 1e-5 relative.
        xs, width = math_input(int(flags["numel"])), 256
        want = 0.0
        for r in range(0, len(xs), width):
            row = xs[r:r + width]
            mu = sum(row) / width
            rstd = 1 / math.sqrt(sum((v - mu) ** 2 for v in row) / width + 1e-5)
            for j, v in enumerate(row):
                want += ((v - mu) * rstd * (0.5 + j / width) + 0.25 - j / (2 * width)) ** 2
        ok = abs(check - want) <= 1e-5 * want
    elif case == "batch_norm":
        # x [b, 16, 28, 28] from math_input; per channel c the biased variance v over its
        # b * 784 values: the sum of y squared is count * (w^2 v / (v + 1e-5) + bias^2) for
        # weight 0.5 + c / 16 and bias 0.25 - c / 32. Within 1e-5 relative.
        b, ch, side = (int(v) for v in name.split("[")[1].rstrip("]").split(",")[:3])
        xs, plane = math_input(b * ch * side * side), side * side
        want = 0.0
        for c in range(ch):
            vals = [v for i in range(b)
                    for v in xs[(i * ch + c) * plane:(i * ch + c + 1) * plane]]
            mu = sum(vals) / len(vals)
            var = sum((v - mu) ** 2 for v in vals) / len(vals)
            w, bias = 0.5 + c / ch, 0.25 - c / (2 * ch)
            want += len(vals) * (w * w * var / (var + 1e-5) + bias * bias)
        ok = abs(check - want) <= 1e-5 * want
    elif case == "attention":
        # q, k, v [b, 4, t, 32] from math_input / 4 one after the other; each position
        # attends to itself and those before it, scaled by 1 / sqrt(32), in double; the sum
        # of the output squared against the float32 kernel: within 1e-5 relative.
        b, h, t, d = (int(v) for v in name.split("[")[1].rstrip("]").split(","))
        n = b * h * t * d
        vals = [v / 4 for v in math_input(3 * n)]
        q, k, v = vals[:n], vals[n:2 * n], vals[2 * n:]
        want = 0.0
        for head in range(b * h):
            base = head * t * d
            row = lambda a, i: a[base + i * d:base + (i + 1) * d]
            for i in range(t):
                s = [sum(x * y for x, y in zip(row(q, i), row(k, j))) / math.sqrt(d)
                     for j in range(i + 1)]
                top = max(s)
                w = [math.exp(x - top) for x in s]
                total = sum(w)
                for c in range(d):
                    o = sum(w[j] * row(v, j)[c] for j in range(i + 1)) / total
                    want += o * o
        ok = abs(check - want) <= 1e-5 * want
    elif case in ("mlp", "mlp_hand", "cnn", "resnet"):
        want = "about ln 10"  # cross-entropy of 10 classes before training
        ok = 1.5 < check < 3.5
    elif case == "gpt":
        want = "about ln 96 = 4.56"  # 96 tokens before training
        ok = 4.0 < check < 5.5
    else:
        want = int(flags["K"])
        x = j["extra"]
        ok = (check == want and x["one_stream"] == {"events": 0, "waits": 0,
                                                    "cross_stream_edges": 0}
              # per branch: join to branch, branch to the view of x on the caller's stream
              and x["forked"]["cross_stream_edges"] == 2 * want
              and 0 < x["forked"]["events"] <= 2 * want
              and 0 < x["forked"]["waits"] <= 2 * want
              and x["overlap_ratio"] > 0)
    if not ok:
        fail.append(f"{name}: check {check}, want {want}; line {json.dumps(j)[:300]}")
missing = {"chain", "fanin", "dag", "retain", "mlp", "mlp_hand", "cnn", "overlap", "math",
           "layer_norm", "batch_norm", "gpt", "resnet", "attention"} - seen
if missing:
    fail.append(f"cases never run: {sorted(missing)}")
if fail:
    print("\n".join(fail))
    sys.exit(1)
print(f"sg_bench_smoke_test: {len(lines)} cases ok")
PY

set +e
err=$("$bin" --case=nope 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "--case=nope: exit code $rc, want 2: $err"; exit 1; }
grep -qF "unknown or missing --case 'nope'" <<<"$err" || { echo "message: $err"; exit 1; }
