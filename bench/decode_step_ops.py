#!/usr/bin/env python3
"""Per-op time of the decode steps in a FUSEBOX_TRACE file (bench/RESULTS.md, "gemv32").

Usage: decode_step_ops.py TRACE.json [SKIP=2] [TOP=14]
Takes the fusebox.eval spans inside fusebox.subgraph spans whose path is "decode", leaves out
the first SKIP (plan building, warm-up), and sums the op spans inside them by (op name,
kernel_variant): ms per step, calls per step, the bytes the ops report per step, and those
bytes over the op time (GB/s: for the packed GEMV, the weight stream rate inside the step).
"""
import collections
import json
import sys


def main():
    ev = json.load(open(sys.argv[1]))["traceEvents"]
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 14
    subs = [e for e in ev if e.get("name") == "fusebox.subgraph"]

    def path_of(e):
        for s in subs:
            if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]:
                return s["args"].get("path")
        return None

    dec = [e for e in ev if e.get("name") == "fusebox.eval" and path_of(e) == "decode"][skip:]
    if not dec:
        sys.exit("no decode evals after the first %d" % skip)
    print("decode steps %d, eval %.3f ms per step" % (len(dec), sum(e["dur"] for e in dec) / len(dec) / 1e3))
    ops = [e for e in ev if e.get("cat") == "op"]
    agg = collections.defaultdict(lambda: [0.0, 0, 0])
    for d in dec:
        a, b = d["ts"], d["ts"] + d["dur"]
        for o in ops:
            if a <= o["ts"] <= b:
                k = (o["name"], o["args"].get("kernel_variant"))
                agg[k][0] += o["dur"]
                agg[k][1] += 1
                agg[k][2] += o["args"].get("bytes", 0)
    n = len(dec)
    for (name, variant), (us, calls, nbytes) in sorted(agg.items(), key=lambda x: -x[1][0])[:top]:
        print("%-18s %-24s %8.3f ms/step %4d calls/step %7.1f MB/step %6.1f GB/s"
              % (name, variant, us / n / 1e3, calls // n, nbytes / n / 1e6, nbytes / us / 1e3 if us else 0))


if __name__ == "__main__":
    main()
