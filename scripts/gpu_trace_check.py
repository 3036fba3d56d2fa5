#!/usr/bin/python3
"""scripts/gpu_trace_check.py TRACE.json CAPTURE.json STDERR.log CAPTURE_EVAL_INDEX

Checks a FUSEBOX_TRACE of a CUDA decode (scripts/gpu_trace_check.sh makes it) for exactly what
issue 10 says the trace "must show":
  1. the GPU counters fusebox.gpu_mem_bytes, gpu_mem_pct, gpu_util_pct, gpu_sm_clock_mhz;
  2. a GPU track (a "GPU stream <n>" thread) with kernel slices;
  3. op spans with device times (op.device slices, args.dev_us) whose sum per eval is within
     10% of the device-side eval span. The span is defined as trace_gpu.c does: the device-side
     fusebox.eval slice's dev_us, the sum of the eval's busy intervals; its idle gaps (idle_us,
     the device waiting for the host) are reported on their own, as the summary's
     "idle (host-bound)" entry. The op sum counts nodes only (not "(no node)": input uploads and
     output copies; not an unsplit "CUDAGraphReplay");
  4. a slowest-ops table in device time (the session summary on stderr);
  5. the capture file of eval index CAPTURE_EVAL_INDEX holding exactly one eval's kernels.
Prints figures (with how kernels were attributed); exit 1 on a failed check. Standard library only."""
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
    # 1. counters
    for c in ("fusebox.gpu_mem_bytes", "fusebox.gpu_mem_pct", "fusebox.gpu_util_pct", "fusebox.gpu_sm_clock_mhz"):
        check(names[c] > 0, "1. counter %s present (%d samples)" % (c, names[c]))
    # 2. GPU track with kernels
    tracks = {e["tid"] for e in evs if e.get("name") == "thread_name" and
              str(e.get("args", {}).get("name", "")).startswith("GPU stream")}
    kernels = [e for e in evs if e.get("cat") == "gpu.kernel"]
    check(len(tracks) >= 1 and len(kernels) > 0 and all(k["tid"] in tracks for k in kernels),
          "2. GPU track(s) %d with %d kernel slices" % (len(tracks), len(kernels)))
    how = collections.Counter(k["args"].get("attribution", "none") for k in kernels)
    with_node = sum(1 for k in kernels if k["args"].get("node"))
    print("      kernels attributed to a node: %d of %d (%s)" %
          (with_node, len(kernels), ", ".join("%s %d" % kv for kv in sorted(how.items()))))
    # 3. op device times add up per eval
    op_nodes = collections.defaultdict(float)   # nodes only
    op_all = collections.defaultdict(float)     # every op.device slice (nodes, "(no node)", replays)
    busy, span, idle, mode = {}, {}, {}, set()
    for e in evs:
        a = e.get("args", {})
        if e.get("cat") == "op.device":
            op_all[a["eval"]] += a["dev_us"]
            if e.get("name") not in ("(no node)", "CUDAGraphReplay"):
                op_nodes[a["eval"]] += a["dev_us"]
        elif e.get("cat") == "device" and e.get("name") == "fusebox.eval" and a.get("side") == "device":
            v = a["eval"]
            busy[v] = busy.get(v, 0.0) + a["dev_us"]
            span[v] = span.get(v, 0.0) + a["span_us"]
            idle[v] = idle.get(v, 0.0) + a["idle_us"]
            mode.add(a.get("attribution", "?"))
    # evals recorded per kernel (FUSEBOX_GPU_DETAIL: the first ones)
    per_kernel = {k["args"].get("eval") for k in kernels}
    evals = sorted(v for v in busy if busy[v] > 0 and v in per_kernel)
    print("      device-side evals: %d per kernel, %d as whole graph replays" %
          (len(evals), sum(1 for v in busy if busy[v] > 0 and v not in per_kernel)))
    if evals:
        r = sorted(op_nodes[v] / busy[v] for v in evals)
        ra = sorted(op_all[v] / busy[v] for v in evals)
        rs = sorted(op_nodes[v] / span[v] for v in evals if span[v] > 0)
        tb, ts, ti = sum(busy[v] for v in evals), sum(span[v] for v in evals), sum(idle[v] for v in evals)
        print("      tags: %s; %d device-side evals: span %.1f ms = busy %.1f ms + idle (host-bound) %.1f ms (%.1f%%)" %
              (", ".join(sorted(mode)), len(evals), ts / 1e3, tb / 1e3, ti / 1e3, 100.0 * ti / ts if ts else 0.0))
        print("      per eval, op (nodes) device time / eval busy time: median %.3f, min %.3f, max %.3f" %
              (r[len(r) // 2], r[0], r[-1]))
        print("      per eval, all op.device slices (with '(no node)' copies) / busy: median %.3f, min %.3f" %
              (ra[len(ra) // 2], ra[0]))
        print("      (for reference: op device time / wall span first..last record, gaps included: median %.3f)" %
              rs[len(rs) // 2])
        within = sum(1 for x in r if 0.9 <= x <= 1.1)
        check(within == len(r), "3. sum of op device times within 10%% of the device-side eval span (busy): %d of %d evals"
              % (within, len(r)))
    else:
        check(False, "3. device-side fusebox.eval slices present")
    # 4. slowest ops in device time
    err = open(errlog, errors="replace").read()
    check("slowest ops (device time" in err, "4. slowest ops table in device time")
    top = [l for l in err.splitlines() if "[device]" in l][:5]
    for l in top:
        print("      " + l.strip())
    for l in err.splitlines():
        if l.strip().startswith("gpu:") or "busy attributed to nodes" in l or "device records of" in l:
            print("      " + l.strip())
    # 6. device time is real: each device-side eval lies inside its host eval's window (after the
    #    previous eval's launches, before the next eval's start: each run waits for its device work;
    #    evals count from 1 in host order), so no kernel record carries another run's timestamps
    hs = sorted((e["ts"], e.get("dur", 0)) for e in evs if e.get("name") == "fusebox.eval" and
                e.get("cat") == "device" and "side" not in e.get("args", {}))
    host = [t for t, _ in hs]
    bad = []
    for e in evs:
        a = e.get("args", {})
        if e.get("cat") == "device" and e.get("name") == "fusebox.eval" and a.get("side") == "device":
            v = a["eval"]
            if v < 1 or v > len(host):
                bad.append((v, "no host eval"))
                continue
            lo = hs[v - 2][0] + hs[v - 2][1] if v >= 2 else float("-inf")
            hi = host[v] if v < len(host) else float("inf")
            if e["ts"] < lo or e["ts"] + e.get("dur", 0) > hi:
                bad.append((v, "device %.1f..%.1f us outside host %.1f..%.1f" % (e["ts"], e["ts"] + e.get("dur", 0), lo, hi)))
    check(not bad, "6. every device-side eval inside its host eval's window (%d outside%s)" %
          (len(bad), ("; first: eval %d %s" % bad[0]) if bad else ""))
    # 5. the capture file: exactly one eval's kernels
    cap = json.load(open(capture))["traceEvents"]
    ck = [e for e in cap if e.get("cat") == "gpu.kernel"]
    cap_evals = {e["args"]["eval"] for e in ck}
    want = cap_index + 1  # eval numbers count from 1
    in_trace = [k for k in kernels if k["args"].get("eval") == want]
    check(len(ck) > 0 and cap_evals == {want} and len(ck) == len(in_trace),
          "5. capture file: %d kernels, all of eval index %d (the trace has %d for it)" % (len(ck), cap_index, len(in_trace)))
    print("%d checks failed" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
