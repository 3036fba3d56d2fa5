#!/usr/bin/python3
"""scripts/gpu_trace_check.py TRACE.json CAPTURE.json STDERR.log CAPTURE_EVAL_INDEX

Checks a FUSEBOX_TRACE of a CUDA decode (scripts/gpu_trace_check.sh makes it): GPU counters
present, a GPU track with kernels, every kernel attributed to a node or marked as a graph
replay, per eval the sum of the op.device times against the device-side fusebox.eval slice
(within 10% of its span, as issue 10 asks; the busy-time ratio is printed too), slowest ops
in device time, and the capture file holding exactly one eval's kernels (the eval with index
CAPTURE_EVAL_INDEX). Prints figures; exit 1 on a failed check. Standard library only."""
import collections
import json
import sys

def main():
    trace, capture, errlog, cap_index = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fails = []

    def check(ok, what):
        print(("PASS  " if ok else "FAIL  ") + what)
        if not ok:
            fails.append(what)

    evs = json.load(open(trace))["traceEvents"]
    names = collections.Counter(e.get("name") for e in evs)
    for c in ("fusebox.gpu_mem_bytes", "fusebox.gpu_mem_pct", "fusebox.gpu_util_pct", "fusebox.gpu_sm_clock_mhz"):
        check(names[c] > 0, "counter %s present (%d samples)" % (c, names[c]))
    tracks = {e["tid"] for e in evs if e.get("name") == "thread_name" and
              str(e.get("args", {}).get("name", "")).startswith("GPU stream")}
    kernels = [e for e in evs if e.get("cat") == "gpu.kernel"]
    check(len(tracks) >= 1 and len(kernels) > 0 and all(k["tid"] in tracks for k in kernels),
          "GPU track(s) %d with %d kernel slices" % (len(tracks), len(kernels)))
    unattributed = [k for k in kernels if not k["args"].get("node") and not k["args"].get("graph")]
    check(not unattributed, "every kernel attributed to a node or a graph replay (%d not)" % len(unattributed))
    ops = collections.defaultdict(float)
    span = {}
    busy = {}
    for e in evs:
        a = e.get("args", {})
        if e.get("cat") == "op.device":
            ops[a["eval"]] += a["device_us"]
        elif e.get("cat") == "device" and e.get("name") == "fusebox.eval" and a.get("side") == "device":
            span[a["eval"]] = span.get(a["eval"], 0.0) + e["dur"]
            busy[a["eval"]] = busy.get(a["eval"], 0.0) + a["device_us"]
    ratios = sorted(ops[v] / span[v] for v in span if span[v] > 0)
    bratios = sorted(ops[v] / busy[v] for v in busy if busy[v] > 0)
    if ratios:
        med = ratios[len(ratios) // 2]
        print("      op device time / device eval span: median %.3f, min %.3f, max %.3f over %d evals" %
              (med, ratios[0], ratios[-1], len(ratios)))
        print("      op device time / device eval busy time: median %.3f, min %.3f" %
              (bratios[len(bratios) // 2], bratios[0]))
        within = sum(1 for r in ratios if 0.9 <= r <= 1.1)
        check(within == len(ratios), "sum of op device times within 10%% of the device eval span: %d of %d evals" %
              (within, len(ratios)))
    else:
        check(False, "device-side fusebox.eval slices present")
    err = open(errlog, errors="replace").read()
    check("slowest ops (device time" in err, "slowest ops table in device time")
    top = [l for l in err.splitlines() if "[device]" in l][:5]
    for l in top:
        print("      " + l.strip())
    cap = json.load(open(capture))["traceEvents"]
    ck = [e for e in cap if e.get("cat") == "gpu.kernel"]
    cap_evals = {e["args"]["eval"] for e in ck}
    want = cap_index + 1  # eval numbers count from 1
    in_trace = [k for k in kernels if k["args"].get("eval") == want]
    check(len(ck) > 0 and cap_evals == {want} and len(ck) == len(in_trace),
          "capture file: %d kernels, all of eval index %d (the trace has %d for it)" % (len(ck), cap_index, len(in_trace)))
    print("%d checks failed" % len(fails))
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
