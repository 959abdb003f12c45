#!/usr/bin/env python3
"""Aggregates bench/run.sh's raw JSON lines (one per process, from sg_bench and
torch_bench) into one table, or into {"benchmarks": [...]} with --json.

Per benchmark (case and config, metric, thread count) and per side: the median over the
processes of each process's median, and the spread (max - min) / median across the
processes (bench/README.md). ratio = streamgrad / libtorch, so lower is better. Tiny-op
graphs are in microseconds per graph node (divided by libtorch's node count on both
sides), the model steps and the overlap graph in ms.

Usage: report.py RAW.jsonl [--json]. Reads only the standard library. Exit status 0; 1
when RAW holds no line it can read.
"""
import argparse
import json
import statistics
import sys

SIDES = ("streamgrad", "libtorch")


def load(path):
    rows, bad = [], 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1
    return rows, bad


def spread(values):
    if len(values) < 2:
        return None
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else None


def aggregate(rows):
    """{(name, threads): {"order", "device", "metrics": {metric: {side: [medians]}},
    "unit": {metric: unit}, "runs": {side: [row]}}} in first-seen order."""
    out = {}
    for i, r in enumerate(rows):
        key = (r["name"], r.get("threads", 1))
        b = out.setdefault(key, {"order": i, "device": r.get("device", "cpu"),
                                 "metrics": {}, "unit": {}, "runs": {s: [] for s in SIDES},
                                 "skipped": {}})
        side = r["side"]
        if "skipped" in r:
            b["skipped"][side] = r["skipped"]
            continue
        b["runs"][side].append(r)
        for metric, m in r.get("metrics", {}).items():
            b["metrics"].setdefault(metric, {s: [] for s in SIDES})[side].append(m["median"])
            b["unit"][metric] = m["unit"]
    return sorted(out.items(), key=lambda kv: kv[1]["order"])


def entries(aggregated):
    """One dict per (benchmark, metric, threads), as --json prints them."""
    result = []
    for (name, threads), b in aggregated:
        for metric, sides in b["metrics"].items():
            e = {"name": f"{name} {metric}", "device": b["device"], "threads": threads,
                 "unit": b["unit"][metric], "benchmark": name, "metric": metric}
            for s in SIDES:
                e[s] = statistics.median(sides[s]) if sides[s] else None
            e["ratio"] = (e["streamgrad"] / e["libtorch"]
                          if e["streamgrad"] is not None and e["libtorch"] else None)
            e["spread"] = {s: spread(sides[s]) for s in SIDES}
            e["runs"] = {s: len(sides[s]) for s in SIDES}
            e["nodes"] = {s: b["runs"][s][0]["nodes"] for s in SIDES if b["runs"][s]}
            e["check_ok"] = all(r["check_ok"] for s in SIDES for r in b["runs"][s])
            if metric == "bwd_forked" and b["runs"]["streamgrad"]:
                extra = b["runs"]["streamgrad"][0].get("extra", {})
                e["overlap_ratio"] = statistics.median(
                    r["extra"]["overlap_ratio"] for r in b["runs"]["streamgrad"])
                e["sync_counts"] = {k: extra[k] for k in ("one_stream", "forked") if k in extra}
            result.append(e)
    return result


def fmt(value, sp):
    if value is None:
        return "—"
    text = f"{value:.3f}" if value < 100 else f"{value:.1f}"
    return text + (f" [{sp * 100:.0f}%]" if sp is not None else "")


def notes(aggregated):
    lines = []
    for (name, threads), b in aggregated:
        if threads != min(t for (n, t), _ in aggregated if n == name):
            continue  # one note per benchmark
        runs = b["runs"]
        for s in SIDES:
            for r in runs[s]:
                if not r["check_ok"]:
                    lines.append(f"CHECK WRONG: {s} {name}: {r['check']} "
                                 f"(expected {r['expected']})")
        if runs["streamgrad"] and runs["libtorch"]:
            a, t = runs["streamgrad"][0], runs["libtorch"][0]
            if a["nodes"] != t["nodes"]:
                per = (f" (per-node figures divide both by {a['nominal_nodes']})"
                       if a["nominal_nodes"] and a["case"] not in ("mlp", "mlp_hand", "cnn") else "")
                lines.append(f"nodes differ: {name}: streamgrad {a['nodes']}, "
                             f"libtorch {t['nodes']}{per}")
            if a["expected"] is None and abs(a["check"] - t["check"]) > 1e-4 * abs(t["check"]):
                lines.append(f"initial loss differs: {name}: streamgrad {a['check']}, "
                             f"libtorch {t['check']}")
        if runs["streamgrad"] and "overlap_ratio" in runs["streamgrad"][0].get("extra", {}):
            x = runs["streamgrad"][0]["extra"]
            ratio = statistics.median(r["extra"]["overlap_ratio"] for r in runs["streamgrad"])
            verdict = "ok" if ratio <= x["limit_ratio"] else "NOT overlapped"
            one, fork = x["one_stream"], x["forked"]
            lines.append(f"{name}: forked backward / longest branch alone = {ratio:.3f} "
                         f"(limit {x['limit_ratio']}: {verdict})")
            lines.append(f"{name}: per backward, one stream: {one['events']} events, "
                         f"{one['waits']} waits ({one['cross_stream_edges']} cross-stream "
                         f"edges); forked: {fork['events']} events, {fork['waits']} waits "
                         f"({fork['cross_stream_edges']} cross-stream edges)")
    return lines


def table(aggregated, out):
    rows = [("benchmark", "metric", "thr", "unit", "streamgrad [spread]",
             "libtorch [spread]", "ratio")]
    for e in entries(aggregated):
        ratio = f"{e['ratio']:.2f}" if e["ratio"] is not None else "—"
        rows.append((e["benchmark"], e["metric"], str(e["threads"]), e["unit"],
                     fmt(e["streamgrad"], e["spread"]["streamgrad"]),
                     fmt(e["libtorch"], e["spread"]["libtorch"]), ratio))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        cells = [c.ljust(w) if j < 4 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))]
        print("  ".join(cells).rstrip(), file=out)
        if i == 0:
            print("  ".join("-" * w for w in widths), file=out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows, bad = load(args.raw)
    if not rows:
        print(f"report.py: no benchmark line in {args.raw}", file=sys.stderr)
        return 1
    aggregated = aggregate(rows)
    if args.json:
        print(json.dumps({"benchmarks": entries(aggregated)}))
        return 0
    table(aggregated, sys.stdout)
    print()
    for line in notes(aggregated):
        print(line)
    if bad:
        print(f"{bad} unreadable line(s) in {args.raw}")
    print("ratio = streamgrad / libtorch (lower is better); [spread] = (max - min) / median "
          "of the per-process medians; tiny-op graphs in us per graph node, mlp/cnn/overlap "
          "in ms.")
    print("threads: libtorch's intra-op threads (torch::set_num_threads) and OpenBLAS's "
          "(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS); streamgrad's threads "
          "(set_num_threads), which its matmuls share out over single-threaded OpenBLAS "
          "gemms.")
    print("zero_grad: each side keeps its default (streamgrad sets grads to none and "
          "AccumulateGrad takes the next gradient over; libtorch 1.13 zeroes in place and "
          "accumulates into it).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
