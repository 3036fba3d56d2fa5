#!/usr/bin/python3
"""Check a generated decoder two independent ways and write ONNX-backend-style test cases.

1. an independent numpy forward pass (written from the math, not from the graph) computes
   logits and present K/V for a prefill step (S>1, P=0, one padded batch row) and a decode step
   (S=1, P>0) continuing from the prefill's present K/V;
2. a small numpy interpreter runs the ONNX graph itself on the same inputs;
the two must agree (rtol 1e-4). Then each step is written as
  <cases>/<name>_{prefill,decode}/model.onnx + test_data_set_0/{input,output}_<k>.pb
so the conformance runner (tests/conformance) can check ORT's CPU EP and Fusebox against the
numpy reference with `--dir`.

Usage: check_decoder.py --model PATH [--cases DIR]
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

RMS_EPS = 1e-5
MASK_NEG = -1.0e9


# ---------------------------------------------------------------- reference forward (numpy) ----
def ref_forward(W, cfg, input_ids, position_ids, attention_mask, past):
    L, H, N = cfg["layers"], cfg["hidden"], cfg["heads"]
    D = H // N
    B, S = input_ids.shape
    T = attention_mask.shape[1]
    P = T - S

    def rms(x, w):
        x64 = x.astype(np.float64)
        return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + RMS_EPS) * w).astype(np.float32)

    cos_t = W["model.rotary_emb.cos_cached"].astype(np.float64)
    sin_t = W["model.rotary_emb.sin_cached"].astype(np.float64)

    def rope(x):  # x (B, N, S, D)
        c = cos_t[position_ids][:, None]  # (B, 1, S, D/2)
        s = sin_t[position_ids][:, None]
        a, bb = x[..., : D // 2], x[..., D // 2:]
        return np.concatenate([a * c - bb * s, bb * c + a * s], -1)

    allowed = np.zeros((B, 1, S, T), dtype=bool)
    for bi in range(B):
        for si in range(S):
            for ti in range(T):
                allowed[bi, 0, si, ti] = ti <= P + si and attention_mask[bi, ti] != 0
    x = W["model.embed_tokens.weight"][input_ids].astype(np.float64)  # (B, S, H)
    presents = []
    for i in range(L):
        p = "model.layers.%d." % i
        h = rms(x, W[p + "input_layernorm.weight"]).astype(np.float64)
        heads = lambda t: t.reshape(B, S, N, D).transpose(0, 2, 1, 3)
        q = rope(heads(h @ W[p + "self_attn.q_proj.weight"]))
        k = rope(heads(h @ W[p + "self_attn.k_proj.weight"]))
        v = heads(h @ W[p + "self_attn.v_proj.weight"])
        K = np.concatenate([past[2 * i], k], 2)  # (B, N, T, D)
        V = np.concatenate([past[2 * i + 1], v], 2)
        presents += [K.astype(np.float32), V.astype(np.float32)]
        sc = q @ K.transpose(0, 1, 3, 2) / np.sqrt(D)
        # the additive bias is applied in fp32, as the graph does: on a fully masked (padding)
        # query row every score rounds to -1e9 and the row becomes uniform
        sc = (sc.astype(np.float32) + np.where(allowed, 0.0, MASK_NEG).astype(np.float32))
        sc = sc.astype(np.float64)
        sc = sc - sc.max(-1, keepdims=True)
        pr = np.exp(sc)
        pr /= pr.sum(-1, keepdims=True)
        ctx = (pr @ V).transpose(0, 2, 1, 3).reshape(B, S, H)
        x = x + ctx @ W[p + "self_attn.o_proj.weight"]
        h2 = rms(x, W[p + "post_attention_layernorm.weight"]).astype(np.float64)
        g = h2 @ W[p + "mlp.gate_proj.weight"]
        u = h2 @ W[p + "mlp.up_proj.weight"]
        x = x + (g / (1.0 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"]
    logits = rms(x, W["model.norm.weight"]).astype(np.float64) @ W["lm_head.weight"]
    return [logits.astype(np.float32)] + presents


# ------------------------------------------------------------ graph interpreter (numpy) ----
def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def run_graph(model, feeds):
    env = dict(feeds)
    for t in model.graph.initializer:
        env[t.name] = numpy_helper.to_array(t)
    for n in model.graph.node:
        x = [env[i] for i in n.input]
        o = n.op_type
        if o == "Gather":
            r = np.take(x[0], x[1], axis=_attr(n, "axis", 0))
        elif o == "Shape":
            r = np.array(x[0].shape, dtype=np.int64)
        elif o == "Range":
            r = np.arange(x[0], x[1], x[2], dtype=x[0].dtype)
        elif o == "Unsqueeze":
            r = x[0]
            for ax in sorted(int(a) % (r.ndim + len(x[1])) for a in x[1]):
                r = np.expand_dims(r, ax)
        elif o == "Concat":
            r = np.concatenate(x, axis=_attr(n, "axis"))
        elif o == "Slice":
            sl = [slice(None)] * x[0].ndim
            for st, en, ax in zip(x[1], x[2], x[3]):
                sl[int(ax)] = slice(int(st), int(en))
            r = x[0][tuple(sl)]
        elif o == "Reshape":
            shp = [x[0].shape[k] if v == 0 else int(v) for k, v in enumerate(x[1])]
            r = x[0].reshape(shp)
        elif o == "Transpose":
            r = x[0].transpose(_attr(n, "perm"))
        elif o == "Expand":
            r = x[0] * np.ones(tuple(x[1]), dtype=x[0].dtype)
        elif o == "ReduceMean":
            r = x[0].mean(axis=tuple(_attr(n, "axes")), keepdims=bool(_attr(n, "keepdims", 1)))
        elif o == "Softmax":
            e = np.exp(x[0] - x[0].max(axis=_attr(n, "axis", -1), keepdims=True))
            r = e / e.sum(axis=_attr(n, "axis", -1), keepdims=True)
        elif o == "Where":
            r = np.where(x[0], x[1], x[2])
        else:
            fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                  "Pow": np.power, "MatMul": np.matmul, "Greater": np.greater,
                  "Less": np.less, "Equal": np.equal, "Or": np.logical_or,
                  "Sqrt": np.sqrt, "Reciprocal": np.reciprocal, "Neg": np.negative,
                  "Sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)), "Identity": lambda a: a}[o]
            r = fn(*x)
        if isinstance(r, np.ndarray) and r.dtype == np.float64:
            r = r.astype(np.float32)
        env[n.output[0]] = np.asarray(r)
    return [env[o.name] for o in model.graph.output]


# ------------------------------------------------------------------------------ driver ----
def config_of(model):
    W = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    L = sum(1 for k in W if k.endswith("input_layernorm.weight"))
    V, H = W["model.embed_tokens.weight"].shape
    D = 2 * W["model.rotary_emb.cos_cached"].shape[1]
    return W, {"layers": L, "hidden": H, "heads": H // D, "vocab": V}


def write_case(model_path, case_dir, model, feeds, outs):
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    ds = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(ds)
    shutil.copyfile(model_path, os.path.join(case_dir, "model.onnx"))
    for k, vi in enumerate(model.graph.input):
        with open(os.path.join(ds, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(feeds[vi.name], vi.name).SerializeToString())
    for k, (vo, arr) in enumerate(zip(model.graph.output, outs)):
        with open(os.path.join(ds, "output_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(arr, vo.name).SerializeToString())


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--cases", default=None, help="write prefill/decode test cases here")
    a = ap.parse_args(argv)
    model = onnx.load(a.model)
    W, cfg = config_of(model)
    L, H, N, V = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["vocab"]
    D = H // N
    rs = np.random.RandomState(7)

    # prefill: batch 2, S=5, row 1 left-padded by 2 tokens
    B, S = 2, 5
    ids = rs.randint(0, V, size=(B, S)).astype(np.int64)
    am = np.ones((B, S), dtype=np.int64)
    am[1, :2] = 0
    pos = np.maximum(np.cumsum(am, 1) - 1, 0).astype(np.int64)
    past = [np.zeros((B, N, 0, D), np.float32) for _ in range(2 * L)]
    steps = []
    feeds = {"input_ids": ids, "position_ids": pos, "attention_mask": am}
    for i in range(L):
        feeds["past_key_values.%d.key" % i] = past[2 * i]
        feeds["past_key_values.%d.value" % i] = past[2 * i + 1]
    steps.append(("prefill", feeds, past))
    ref_pre = ref_forward(W, cfg, ids, pos, am, past)

    # decode: one new token per row, past = prefill's presents
    ids2 = rs.randint(0, V, size=(B, 1)).astype(np.int64)
    am2 = np.concatenate([am, np.ones((B, 1), np.int64)], 1)
    pos2 = (pos[:, -1:] + 1).astype(np.int64)
    past2 = ref_pre[1:]
    feeds2 = {"input_ids": ids2, "position_ids": pos2, "attention_mask": am2}
    for i in range(L):
        feeds2["past_key_values.%d.key" % i] = past2[2 * i]
        feeds2["past_key_values.%d.value" % i] = past2[2 * i + 1]
    steps.append(("decode", feeds2, past2))

    ok = True
    for name, fd, pst in steps:
        ref = ref_forward(W, cfg, fd["input_ids"], fd["position_ids"], fd["attention_mask"], pst)
        got = run_graph(model, fd)
        for vo, r, g in zip(model.graph.output, ref, got):
            if r.shape != g.shape or not np.allclose(g, r, rtol=1e-4, atol=1e-5):
                err = np.abs(g - r).max() if r.shape == g.shape else "shape %s vs %s" % (g.shape, r.shape)
                print("[check_decoder] %s %s: MISMATCH (max err %s)" % (name, vo.name, err))
                ok = False
        print("[check_decoder] %s: graph interpreter vs numpy reference: %s (logits %s, |max| %.3g)"
              % (name, "ok" if ok else "FAILED", ref[0].shape, np.abs(ref[0]).max()))
        if a.cases:
            base = os.path.splitext(os.path.basename(a.model))[0]
            write_case(a.model, os.path.join(a.cases, "%s_%s" % (base, name)), model, fd, ref)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
