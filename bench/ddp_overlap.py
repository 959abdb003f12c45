#!/usr/bin/env python3
"""How much of DDP's bucket all-reducing overlaps backward, from a Chrome trace.

    bench/ddp_overlap.py TRACE.json STEPS [DEVICE]

TRACE.json is rank 0's `tools/train --distributed --trace=...` (its first STEPS steps on
DEVICE, default sim:0). Counts the "all_reduce" spans (the communication stream), the part
of their time during which a backward node's kernel ran on the device, and the steps in
which the first bucket's all-reduce started before the step's last backward node ended.
"""
import json
import sys


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "sim:0"
    events = json.load(open(path))["traceEvents"]
    pid = next(e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
               and e["args"]["name"] == device)
    spans = [e for e in events if e.get("ph") == "X" and e["pid"] == pid and e.get("cat") != "event"]
    reduces = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["name"] == "all_reduce")
    nodes = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans
                   if e.get("args", {}).get("node") and e["name"] != "all_reduce")
    merged = []
    for a, b in nodes:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    total = sum(b - a for a, b in reduces)
    during = sum(max(0, min(b, d) - max(a, c)) for a, b in reduces for c, d in merged)
    per = len(reduces) // steps
    early = 0
    for s in range(steps):
        group = reduces[s * per:(s + 1) * per]
        after = reduces[s * per - 1][1] if s > 0 else float("-inf")
        ends = [b for a, b in nodes if a >= after and b <= group[-1][1]]
        early += bool(ends) and group[0][0] < max(ends)
    print(f"{len(reduces)} bucket all-reduces in {steps} steps ({per} per step); "
          f"{total / 1000:.1f} ms of all-reduce, {during / 1000:.1f} ms "
          f"({100 * during / max(total, 1):.0f}%) while backward kernels ran; "
          f"first bucket started before backward's last node ended in {early}/{steps} steps")


if __name__ == "__main__":
    main()
