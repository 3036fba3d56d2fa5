#!/usr/bin/env python3
"""Per device-side eval of a Fusebox trace: host eval span, device span and busy time, and the
longest kernel slices (a diagnosis aid for the GPU track: device time can never exceed the host
eval that launched and waited for it). Usage: trace_evals.py TRACE.json [N_EVALS]"""
import collections, json, sys

evs = json.load(open(sys.argv[1]))["traceEvents"]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 12
dev = {}
kern = collections.defaultdict(list)
for e in evs:
    a = e.get("args", {})
    if e.get("cat") == "device" and e.get("name") == "fusebox.eval" and a.get("side") == "device":
        dev[a["eval"]] = (e["ts"], e.get("dur", 0), a.get("dev_us", 0), a.get("records", 0))
    elif e.get("cat") == "gpu.kernel":
        kern[a.get("eval")].append((e.get("dur", 0), e["ts"], e.get("name", "")[:40], a.get("node", ""),
                                    a.get("early_start_us", 0)))
print("%d device-side evals; kernel slices %d" % (len(dev), sum(len(v) for v in kern.values())))
for v in sorted(dev)[:limit]:
    ts, dur, busy, n = dev[v]
    ks = sorted(kern[v], reverse=True)[:3]
    print("eval %4d: span %10.1f us busy %10.1f us records %4d; longest: %s" % (
        v, dur, busy, n, "; ".join("%.1fus @%+.1f %s [%s] early %.1f" % (d, t - ts, nm, nd, es) for d, t, nm, nd, es in ks)))
