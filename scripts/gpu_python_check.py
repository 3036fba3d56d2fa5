"""A real Python client on a GPU machine: stock onnxruntime (>= 1.29) loads Fusebox with
register_execution_provider_library, runs a model with device=cuda and compares every output
with ORT's CPU EP on the same random inputs.

usage: python3 scripts/gpu_python_check.py LIBFUSEBOX_EP MODEL[=1x3x48x320] [...]
Dynamic dims of the first input come from the =SHAPE suffix when given, else 1 (batch) / 8. Exit 1 on any mismatch (rtol 1e-3, atol 1e-4
scaled by max|ref|). Every Fusebox OrtEpDevice is given with device=cuda, so where Fusebox lists a GPU
device the session runs on it (ORT copies the feeds and outputs through Fusebox's data transfer);
scripts/gpu_python_iobinding.py checks IOBinding with device buffers."""
import sys
import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
         "tensor(bool)": np.bool_, "tensor(float16)": np.float16}


def feeds(sess, rng, first_shape):
    out = {}
    for n, i in enumerate(sess.get_inputs()):
        shape = [d if isinstance(d, int) and d > 0 else (1 if k == 0 else 8) for k, d in enumerate(i.shape)]
        if n == 0 and first_shape:
            shape = first_shape
        t = TYPES[i.type]
        if t in (np.int64, np.int32):
            out[i.name] = rng.integers(0, 4, size=shape).astype(t)
        elif t == np.bool_:
            out[i.name] = np.ones(shape, dtype=t)
        else:
            out[i.name] = rng.uniform(-1, 1, size=shape).astype(t)
    return out


def main():
    lib, models = sys.argv[1], sys.argv[2:]
    ort.register_execution_provider_library("Fusebox", lib)
    dev = [d for d in ort.get_ep_devices() if d.ep_name == "FuseboxExecutionProvider"]
    assert dev, "Fusebox lists no device"
    bad = 0
    for arg in models:
        m, _, shp = arg.partition("=")
        first_shape = [int(v) for v in shp.split("x")] if shp else None
        try:
            worst, provs = check(m, dev, first_shape)
        except Exception as e:  # a failed session or run is a failure of this model, not of the script
            worst, provs = float("inf"), str(e)[:300]
        ok = worst <= 1.0
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'}  python device=cuda {m.split('/')[-1]}: "
              f"worst error / tolerance {worst:.3g}; {provs}")
    return 1 if bad else 0


def check(m, dev, first_shape):
    """(worst error / tolerance over all outputs, the session's providers) for model m."""
    so = ort.SessionOptions()
    so.add_provider_for_devices(dev, {"device": "cuda"})
    fb = ort.InferenceSession(m, sess_options=so)
    cpu = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    f = feeds(cpu, np.random.default_rng(0), first_shape)
    got, ref = fb.run(None, f), cpu.run(None, f)
    worst = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            worst = float("inf")
            break
        if r.size:
            tol = 1e-4 * max(1.0, np.abs(r).max()) + 1e-3 * np.abs(r)
            worst = max(worst, float((np.abs(g - r) / tol).max()))
    return worst, f"providers {fb.get_providers()}"


if __name__ == "__main__":
    sys.exit(main())
