"""Fusebox's GPU OrtEpDevice from a real Python client (stock onnxruntime >= 1.29 wheel, CPU build
is enough: the GPU is Fusebox's), with and without IOBinding, compared with ORT's CPU EP.

usage: python3 scripts/gpu_python_iobinding.py LIBFUSEBOX_EP MODEL[=1x3x640x640] [...]
  e.g. python3 scripts/gpu_python_iobinding.py build/libfusebox_ep.so models/gen/cnn_small.onnx \
         models/gen/decoder_tiny.onnx models/gen/decoder_small.onnx .deps/ocr/package/assets/ch_PP-OCRv4_det_infer.onnx=1x3x640x640

Per model, in a child process with FUSEBOX_VERBOSE=1 (the session summaries are read back):
  plain     session on Fusebox's GPU OrtEpDevice alone, numpy feeds: ORT copies them to the GPU and the
            outputs back through Fusebox's data transfer;
  iobinding inputs and outputs are OrtValues in the GPU's memory, made by Fusebox's allocator
            (OrtValue.ortvalue_from_shape_and_type on the device's memory info), bound with
            bind_ortvalue_input/output; a decoder (inputs past_key_values.*) runs a prefill and 4 decode
            steps with its KV cache kept on the GPU (presents bound on the device become the next pasts).
Both must match ORT's CPU EP (rtol 1e-3, atol 1e-4 scaled by max|ref|), and the iobinding sessions'
summaries must show zero-copy wraps and no output copy-out (the data stayed on the device).
FUSEBOX_TEST_DEVICE=gpu-sim runs the same on Fusebox's simulated GPU (no GPU needed).
Exit 1 on any failure; every failure prints the step and the exception."""
import gc
import os
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
         "tensor(bool)": np.bool_, "tensor(float16)": np.float16}
EP = "FuseboxExecutionProvider"


def gpu_device():
    dev = [d for d in ort.get_ep_devices()
           if d.ep_name == EP and "GPU" in str(d.device.type).upper()]
    if not dev:
        raise RuntimeError("Fusebox lists no GPU OrtEpDevice (devices: %s)" %
                           [(d.ep_name, str(d.device.type)) for d in ort.get_ep_devices()])
    return dev[0]


def device_memory_info(dev):
    kind = getattr(ort, "OrtDeviceMemoryType", None)
    if kind is None:
        from onnxruntime.capi import _pybind_state as C
        kind = C.OrtDeviceMemoryType
    mi = dev.memory_info(kind.DEFAULT)
    if mi is None:
        raise RuntimeError("the GPU OrtEpDevice has no DEFAULT memory info")
    return mi


def empty_on_device(shape, dtype, mi, dev):
    """An OrtValue of shape/dtype in the GPU's memory (Fusebox's allocator)."""
    errors = []
    for how in ("memory_info", "vendor", "cuda"):
        try:
            if how == "memory_info":
                return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, memory_info=mi)
            if how == "vendor":
                return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, "gpu", mi.device_id,
                                                                 dev.device.vendor_id)
            return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, "cuda", mi.device_id)
        except Exception as e:  # the wheel's signature varies across releases: try the next form
            errors.append(f"{how}: {e}")
    raise RuntimeError("cannot allocate on the device: " + " | ".join(errors))


def to_device(arr, mi, dev):
    """A device copy of numpy arr (host -> device through Fusebox's data transfer)."""
    return upload(empty_on_device(arr.shape, arr.dtype, mi, dev), arr)


def upload(ov, arr):
    """Copy numpy arr into the existing device OrtValue ov (same shape and dtype); returns ov."""
    if not arr.size:
        return ov
    try:
        ov.update_inplace(np.ascontiguousarray(arr))
    except Exception as first:
        if not hasattr(ort, "copy_tensors"):
            raise RuntimeError(f"update_inplace on device memory failed ({first}) and this onnxruntime has "
                               "no copy_tensors")
        ort.copy_tensors([ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))], [ov], None)
    return ov


def to_host(ov, like):
    """numpy copy of device value ov (shape/dtype of like)."""
    try:
        return np.asarray(ov.numpy())
    except Exception as first:
        dst = ort.OrtValue.ortvalue_from_numpy(np.empty(like.shape, like.dtype))
        if not hasattr(ort, "copy_tensors"):
            raise RuntimeError(f"OrtValue.numpy() on device memory failed ({first}) and this onnxruntime has "
                               "no copy_tensors")
        ort.copy_tensors([ov], [dst], None)
        return dst.numpy()


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


def worst(got, ref):
    w = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            return float("inf")
        if r.size:
            tol = 1e-4 * max(1.0, np.abs(r).max()) + 1e-3 * np.abs(r)
            w = max(w, float((np.abs(g - r) / tol).max()))
    return w


def fusebox_session(m, dev):
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {})
    s = ort.InferenceSession(m, sess_options=so)
    if EP not in s.get_providers():
        raise RuntimeError(f"Fusebox is not among the session's providers {s.get_providers()} "
                           "(see stderr: Python retries on the CPU EP when an EP fails)")
    return s


def run_bound(sess, dev, mi, f, out_shapes):
    """One run with every input and output bound in device memory; returns (host outputs, device outputs)."""
    b = sess.io_binding()
    keep = []
    for name, arr in f.items():
        ov = f[name] if isinstance(arr, ort.OrtValue) else to_device(arr, mi, dev)
        keep.append(ov)
        b.bind_ortvalue_input(name, ov)
    outs = []
    for o, (shape, dtype) in zip(sess.get_outputs(), out_shapes):
        ov = empty_on_device(shape, dtype, mi, dev)
        outs.append(ov)
        b.bind_ortvalue_output(o.name, ov)
    sess.run_with_iobinding(b)
    return outs


def check_model(m, first_shape, dev, mi):
    """[(check name, worst error / tolerance)]. The Fusebox session is gone when this returns, so its
    summary (FUSEBOX_VERBOSE) has been printed."""
    cpu = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    fb = fusebox_session(m, dev)
    try:
        return check_session(m, first_shape, dev, mi, cpu, fb)
    finally:
        del fb
        gc.collect()


def check_session(m, first_shape, dev, mi, cpu, fb):
    names = [i.name for i in cpu.get_inputs()]
    results = []
    if any(n.startswith("past_key_values.") for n in names):
        results += check_decoder(cpu, fb, dev, mi)
    else:
        f = feeds(cpu, np.random.default_rng(0), first_shape)
        ref = cpu.run(None, f)
        results.append(("plain", worst(fb.run(None, f), ref)))
        shapes = [(r.shape, r.dtype) for r in ref]
        for k in range(2):  # the second run is the steady state (cache HIT)
            outs = run_bound(fb, dev, mi, f, shapes)
            results.append((f"iobinding run {k}", worst([to_host(o, r) for o, r in zip(outs, ref)], ref)))
    return results


def check_decoder(cpu, fb, dev, mi):
    """Prefill 5 tokens then 4 decode steps; plain feeds, and IOBinding with the KV cache on the device."""
    ins = {i.name: i for i in cpu.get_inputs()}
    kv = sorted(n for n in ins if n.startswith("past_key_values."))
    h, d = ins[kv[0]].shape[1], ins[kv[0]].shape[3]
    out_names = [o.name for o in cpu.get_outputs()]
    present = {n: "present." + n[len("past_key_values."):] for n in kv}
    ids = [np.array([[3, 17, 42, 5, 99]], np.int64)] + [np.array([[t]], np.int64) for t in (7, 120, 64, 1)]

    def step_feeds(step_ids, pos, past):
        n = step_ids.shape[1]
        f = {"input_ids": step_ids}
        if "position_ids" in ins:
            f["position_ids"] = np.arange(pos, pos + n, dtype=np.int64)[None, :]
        if "attention_mask" in ins:
            f["attention_mask"] = np.ones((1, pos + n), np.int64)
        f.update(past)
        return f

    results = []
    ref_past = {n: np.zeros((1, h, 0, d), np.float32) for n in kv}
    fb_past = dict(ref_past)
    dev_past = {n: to_device(v, mi, dev) for n, v in ref_past.items()}
    pos = 0
    for s, step_ids in enumerate(ids):
        ref = dict(zip(out_names, cpu.run(None, step_feeds(step_ids, pos, ref_past))))
        got = dict(zip(out_names, fb.run(None, step_feeds(step_ids, pos, fb_past))))
        results.append((f"plain step {s}", worst([got[n] for n in out_names], [ref[n] for n in out_names])))
        f = step_feeds(step_ids, pos, {})
        f.update(dev_past)  # device OrtValues: bound as they are
        outs = run_bound(fb, dev, mi, f, [(ref[n].shape, ref[n].dtype) for n in out_names])
        outs = dict(zip(out_names, outs))
        results.append((f"iobinding step {s} (KV cache on the device)",
                        worst([to_host(outs["logits"], ref["logits"])], [ref["logits"]])))
        ref_past = {n: ref[present[n]] for n in kv}
        fb_past = {n: got[present[n]] for n in kv}
        dev_past = {n: outs[present[n]] for n in kv}
        pos += step_ids.shape[1]
    return results


def child(lib, arg):
    """Runs one model's checks; prints 'RESULT <name> <worst>' lines (the parent judges them)."""
    ort.register_execution_provider_library("Fusebox", lib)
    dev = gpu_device()
    mi = device_memory_info(dev)
    m, _, shp = arg.partition("=")
    first_shape = [int(v) for v in shp.split("x")] if shp else None
    for name, w in check_model(m, first_shape, dev, mi):
        print(f"RESULT {w!r} {name}", flush=True)
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    lib, models = os.path.abspath(sys.argv[1]), sys.argv[2:]  # ORT resolves a relative path against its own package
    bad = 0
    for arg in models:
        env = dict(os.environ, FUSEBOX_VERBOSE="1")
        p = subprocess.run([sys.executable, __file__, "--child", lib, arg], env=env, capture_output=True, text=True)
        label = arg.split("/")[-1]
        res = [l.split(" ", 2)[1:] for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if p.returncode != 0 or not res:
            bad += 1
            tail = (p.stderr.strip().splitlines() or ["(no output)"])[-8:]
            print(f"FAIL  python gpu-device {label}: exit {p.returncode}\n      " + "\n      ".join(tail))
            continue
        for w, name in res:
            ok = float(w) <= 1.0
            bad += not ok
            print(f"{'PASS' if ok else 'FAIL'}  python gpu-device {label} {name}: worst error / tolerance {float(w):.3g}")
        # Session summaries (FUSEBOX_VERBOSE): the plain session is the first, IOBinding runs share it.
        wraps = [int(x) for x in re.findall(r"memory:\s+zero-copy wrap (\d+)", p.stderr)]
        full = re.findall(r"copy-out delta \d+ \([^)]*\) vs full (\d+)", p.stderr)
        ok = bool(wraps) and all(w > 0 for w in wraps) and all(int(x) == 0 for x in full)
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'}  python gpu-device {label} summary: zero-copy wraps {wraps}, "
              f"full output copies {full} (want wraps > 0: inputs read in device memory; copies 0: outputs "
              f"written in place)")
    print(f"{'FAIL' if bad else 'PASS'}: {bad} failure(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
