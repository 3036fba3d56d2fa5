"""CNN latency on one GPU: Fusebox's GPU OrtEpDevice against ONNX Runtime's own CUDA EP (loaded as a
plugin EP library), in one process of a stock onnxruntime Python client, outputs checked against ORT's CPU EP.

usage: python3 bench/gpu_cnn_vs_ort_cuda.py --fusebox ABS/libfusebox_ep.so --ort-cuda ABS/libonnxruntime_providers_cuda.so \
         [--iters 50] [--warmup 10] MODEL=1x3x640x640 [...]

Per model and per EP, two ways of feeding it, timed alternately (round-robin over the EPs, so drift hits
both alike), median and min of --iters runs after --warmup:
  numpy      sess.run with a host input and host outputs (ORT copies through the EP's data transfer);
  iobinding  the input is a device OrtValue bound once, the outputs are bound to the EP's device memory
             (what a GPU pipeline does): the time is the EP's own work plus ORT's dispatch.
Each EP's outputs must match ORT's CPU EP (rtol 1e-3, atol 1e-4 scaled by max|ref|) or the row says FAIL.
Prints one markdown table; exit 1 on a failure. The CUDA EP library is ORT 1.29's CUDA 13 build
(npm com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9); it needs cuBLAS/cuDNN on LD_LIBRARY_PATH."""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from gpu_python_iobinding import empty_on_device, to_device, to_host, worst  # noqa: E402

FUSEBOX = "FuseboxExecutionProvider"


def gpu_devices():
    """{ep name: OrtEpDevice} for every GPU OrtEpDevice the registered libraries list."""
    out = {}
    for d in ort.get_ep_devices():
        print(f"  device: ep={d.ep_name} type={d.device.type} vendor={d.device.vendor_id:#x}")
        if "GPU" in str(d.device.type).upper() and d.ep_name not in out:
            out[d.ep_name] = d
    return out


def memory_info(dev):
    kind = getattr(ort, "OrtDeviceMemoryType", None)
    if kind is None:
        from onnxruntime.capi import _pybind_state as C
        kind = C.OrtDeviceMemoryType
    return dev.memory_info(kind.DEFAULT)


def session(model, dev):
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {})
    s = ort.InferenceSession(model, sess_options=so)
    if dev.ep_name not in s.get_providers():
        raise RuntimeError(f"{dev.ep_name} is not among the session's providers {s.get_providers()}")
    return s


class Runner:
    """One EP's session on one model, ready to run either way."""

    def __init__(self, model, dev, feed, ref):
        self.name = dev.ep_name
        self.sess = session(model, dev)
        self.mi = memory_info(dev)
        self.dev = dev
        self.feed = feed
        self.binding = self.sess.io_binding()
        self.dev_in = {k: to_device(v, self.mi, dev) for k, v in feed.items()}
        for k, v in self.dev_in.items():
            self.binding.bind_ortvalue_input(k, v)
        self.dev_out = []
        for o, r in zip(self.sess.get_outputs(), ref):
            ov = empty_on_device(r.shape, r.dtype, self.mi, dev)
            self.dev_out.append(ov)
            self.binding.bind_ortvalue_output(o.name, ov)
        self.times = {"numpy": [], "iobinding": []}

    def run_numpy(self):
        return self.sess.run(None, self.feed)

    def run_bound(self):
        self.sess.run_with_iobinding(self.binding)  # synchronous: ORT waits for the EP's stream

    def timed(self, how):
        t0 = time.perf_counter()
        self.run_numpy() if how == "numpy" else self.run_bound()
        self.times[how].append((time.perf_counter() - t0) * 1e3)


def bench_model(spec, devs, iters, warmup):
    model, _, shape = spec.partition("=")
    cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inp = cpu.get_inputs()[0]
    dims = [int(x) for x in shape.split("x")] if shape else [d if isinstance(d, int) else 1 for d in inp.shape]
    feed = {inp.name: np.random.default_rng(0).uniform(0, 1, size=dims).astype(np.float32)}
    ref = cpu.run(None, feed)
    rows, ok = [], True
    runners = []
    for name, dev in devs.items():
        try:
            r = Runner(model, dev, feed, ref)
        except Exception as e:  # an EP that cannot take the model gets a row saying so
            rows.append((name, f"cannot run: {e}", "", "", ""))
            ok = False
            continue
        err_np = worst(r.run_numpy(), ref)
        r.run_bound()
        err_io = worst([to_host(o, x) for o, x in zip(r.dev_out, ref)], ref)
        if err_np > 1 or err_io > 1:
            ok = False
        r.err = max(err_np, err_io)
        runners.append(r)
    for how in ("numpy", "iobinding"):
        for _ in range(warmup):
            for r in runners:
                r.run_numpy() if how == "numpy" else r.run_bound()
        for _ in range(iters):
            for r in runners:
                r.timed(how)
    med = {}
    for r in runners:
        m_np, m_io = statistics.median(r.times["numpy"]), statistics.median(r.times["iobinding"])
        med[r.name] = (m_np, m_io)
        rows.append((r.name, "ok" if r.err <= 1 else f"FAIL (error {r.err:.2f} x tolerance)",
                     f"{m_np:.3f} (min {min(r.times['numpy']):.3f})",
                     f"{m_io:.3f} (min {min(r.times['iobinding']):.3f})", r.sess.get_providers()[0]))
    return os.path.basename(model) + (f" {shape}" if shape else ""), rows, med, ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fusebox", required=True)
    ap.add_argument("--ort-cuda", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print(f"onnxruntime {ort.__version__}")
    ort.register_execution_provider_library("Fusebox", a.fusebox)
    ort.register_execution_provider_library("OrtCudaPlugin", a.ort_cuda)
    devs = gpu_devices()
    if FUSEBOX not in devs or len(devs) < 2:
        print(f"need Fusebox's GPU device and the CUDA EP's: found {list(devs)}")
        return 1
    all_ok = True
    print("\n| model | EP | check | numpy in/out, median ms | IOBinding on device, median ms |")
    print("|---|---|---|---:|---:|")
    ratios = []
    for spec in a.models:
        title, rows, med, ok = bench_model(spec, devs, a.iters, a.warmup)
        all_ok &= ok
        for name, check, t_np, t_io, _ in rows:
            print(f"| {title} | {name} | {check} | {t_np} | {t_io} |")
        others = [n for n in med if n != FUSEBOX]
        if FUSEBOX in med and others:
            o = others[0]
            ratios.append(f"{title}: {o} / Fusebox = {med[o][0] / med[FUSEBOX][0]:.2f}x (numpy), "
                          f"{med[o][1] / med[FUSEBOX][1]:.2f}x (IOBinding)  (> 1: Fusebox faster)")
    print()
    for r in ratios:
        print(r)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
