#!/usr/bin/python3
"""Generate a BERT-style encoder dynamically quantized the way
onnxruntime.quantization.quantize_dynamic writes it (opset 17, IR version 8).

Float encoder: input `hidden` [1, S, H] (embeddings already summed), `layers` post-LN blocks:
    q, k, v = x Wq + bq, x Wk + bk, x Wv + bv        (H x H each)
    attention in float: (1, heads, S, dh) views, Softmax(q k^T / sqrt(dh)) v
    x = LayerNorm(x + ctx Wo + bo)
    x = LayerNorm(x + Gelu(x W1 + b1) W2 + b2)         (Gelu as x * 0.5 * (1 + Erf(x / sqrt 2)))
-> `last_hidden` [1, S, H]. Normal weights (std 0.05), random biases, numpy RandomState(seed).

Every weight MatMul is then rewritten as quantize_dynamic's MatMulInteger pattern (written here with
onnx directly, the quantization tool not being available):
    a_q, a_scale, a_zp = DynamicQuantizeLinear(a)         (one per distinct MatMul input)
    acc = MatMulInteger(a_q, W_q, a_zp, w_zp)            -> int32 [1, S, N]
    y   = Cast(acc, float) * Mul(a_scale, w_scale) + bias  (the original Add stays a float Add)
Weights (--wtype):
    s8 (quantize_dynamic's default, symmetric): w_scale = max|W| / 127, w_zp = 0, W_q = clip(round(W / w_scale), -127, 127)
    u8 (asymmetric): rmin = min(0, min W), rmax = max(0, max W), w_scale = (rmax - rmin) / 255,
       w_zp = clip(round(-rmin / w_scale), 0, 255), W_q = clip(round(W / w_scale) + w_zp, 0, 255)
--per-channel: the same per column of W (w_scale, w_zp 1-D [N]), as per_channel=True writes it.
--float: no quantization (the float encoder: weight MatMul + bias Add, as a float export writes it).

--cases DIR also writes DIR/input.npy (normal, seed+1) and DIR/last_hidden.npy: the quantized graph run
by a numpy reference written here (int64 MatMulInteger, which is exact; every float op in float32 in the
graph's order, LayerNorm / Softmax / Erf evaluated in float64 and rounded to float32), independent of
ONNX Runtime and of Fusebox.

Usage: gen_bert_q.py --layers 4 --hidden 384 --heads 6 --ffn 1536 --seq 128 [--wtype s8|u8] [--per-channel]
                     [--cases DIR] --out PATH
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def _quant_weight(w, wtype, per_channel):
    """(W_q, w_scale, w_zp) as quantize_dynamic computes them (per tensor or per column of W [K, N])."""
    f = np.float32
    axis = 0 if per_channel else None
    if wtype == "s8":
        amax = np.abs(w).max(axis=axis).astype(f)
        scale = (amax / f(127)).astype(f)
        zp = np.zeros_like(scale, dtype=np.int8)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    else:
        rmin = np.minimum(f(0), w.min(axis=axis)).astype(f)
        rmax = np.maximum(f(0), w.max(axis=axis)).astype(f)
        scale = ((rmax - rmin) / f(255)).astype(f)
        zp = np.clip(np.rint(-rmin / scale), 0, 255).astype(np.uint8)
        q = np.clip(np.rint(w / scale) + zp.astype(f), 0, 255).astype(np.uint8)
    return q, np.asarray(scale, dtype=f), np.asarray(zp)


def build(layers, hidden, heads, ffn, seq, wtype, per_channel, seed, float_weights=False):
    rs = np.random.RandomState(seed)
    nodes, inits = [], []
    dql_of = {}  # float tensor -> (a_q, a_scale, a_zp): one DynamicQuantizeLinear per input
    counts = {"mmint": 0}
    dh = hidden // heads

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, outs, name, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, **attrs))
        return outs[0]

    def qlinear(x, k, n, name):
        counts["mmint"] += 1
        w = (0.05 * rs.standard_normal((k, n))).astype(np.float32)
        b = (0.02 * rs.standard_normal(n)).astype(np.float32)
        if float_weights:  # the float encoder as exported: MatMul by the weight, then Add of the bias
            mm = node("MatMul", [x, init(name + ".weight", w)], [name + "/MatMul/output_0"], name + "/MatMul")
            return node("Add", [mm, init(name + ".bias", b)], [name + "/Add/output_0"], name + "/Add")
        if x not in dql_of:
            q = (x + "_quantized", x + "_scale", x + "_zero_point")
            node("DynamicQuantizeLinear", [x], list(q), x + "_QuantizeLinear")
            dql_of[x] = q
        xq, xs, xz = dql_of[x]
        wq, ws, wz = _quant_weight(w, wtype, per_channel)
        wqn = init(name + ".weight_quantized", wq)
        wsn = init(name + ".weight_scale", ws)
        wzn = init(name + ".weight_zero_point", wz)
        acc = node("MatMulInteger", [xq, wqn, xz, wzn], [name + "/MatMul_output_0_quantized"], name + "/MatMul_quant")
        cast = node("Cast", [acc], [acc + "_cast_output"], name + "/MatMul_quant_cast", to=TensorProto.FLOAT)
        sm = node("Mul", [xs, wsn], [name + "/MatMul_quant_scales_mul"], name + "/MatMul_quant_scales_mul")
        mo = node("Mul", [cast, sm], [name + "/MatMul_quant_output_scale_mul"], name + "/MatMul_quant_output_scale_mul")
        return node("Add", [mo, init(name + ".bias", b)], [name + "/Add/output_0"], name + "/Add")

    def layernorm(x, name):
        g = (1.0 + 0.1 * rs.standard_normal(hidden)).astype(np.float32)
        bb = (0.05 * rs.standard_normal(hidden)).astype(np.float32)
        return node("LayerNormalization", [x, init(name + ".weight", g), init(name + ".bias", bb)],
                    [name + "/output_0"], name, axis=-1, epsilon=1e-5)

    heads_shape = init("heads_shape", np.array([1, seq, heads, dh], dtype=np.int64))
    flat_shape = init("flat_shape", np.array([1, seq, hidden], dtype=np.int64))
    inv_sqrt = init("inv_sqrt_dh", np.array(1.0 / math.sqrt(dh), dtype=np.float32))
    half = init("half", np.array(0.5, dtype=np.float32))
    one = init("one", np.array(1.0, dtype=np.float32))
    sqrt2 = init("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    x = "hidden"
    for l in range(layers):
        p = "/layer%d" % l
        q = qlinear(x, hidden, hidden, p + "/attn/q")
        k = qlinear(x, hidden, hidden, p + "/attn/k")
        v = qlinear(x, hidden, hidden, p + "/attn/v")
        qh = node("Reshape", [q, heads_shape], [p + "/q_heads"], p + "/q_reshape")
        kh = node("Reshape", [k, heads_shape], [p + "/k_heads"], p + "/k_reshape")
        vh = node("Reshape", [v, heads_shape], [p + "/v_heads"], p + "/v_reshape")
        qt = node("Transpose", [qh], [p + "/q_t"], p + "/q_transpose", perm=[0, 2, 1, 3])
        kt = node("Transpose", [kh], [p + "/k_t"], p + "/k_transpose", perm=[0, 2, 3, 1])
        vt = node("Transpose", [vh], [p + "/v_t"], p + "/v_transpose", perm=[0, 2, 1, 3])
        sc = node("MatMul", [qt, kt], [p + "/scores"], p + "/scores_matmul")
        ss = node("Mul", [sc, inv_sqrt], [p + "/scores_scaled"], p + "/scores_scale")
        pr = node("Softmax", [ss], [p + "/probs"], p + "/softmax", axis=-1)
        cx = node("MatMul", [pr, vt], [p + "/ctx"], p + "/ctx_matmul")
        ct = node("Transpose", [cx], [p + "/ctx_t"], p + "/ctx_transpose", perm=[0, 2, 1, 3])
        cf = node("Reshape", [ct, flat_shape], [p + "/ctx_flat"], p + "/ctx_reshape")
        o = qlinear(cf, hidden, hidden, p + "/attn/o")
        r1 = node("Add", [x, o], [p + "/attn_residual"], p + "/attn_residual_add")
        x1 = layernorm(r1, p + "/ln1")
        h = qlinear(x1, hidden, ffn, p + "/ffn/fc1")
        d = node("Div", [h, sqrt2], [p + "/gelu_div"], p + "/gelu_div")
        e = node("Erf", [d], [p + "/gelu_erf"], p + "/gelu_erf")
        e1 = node("Add", [e, one], [p + "/gelu_add"], p + "/gelu_add")
        hm = node("Mul", [h, e1], [p + "/gelu_mul"], p + "/gelu_mul")
        g = node("Mul", [hm, half], [p + "/gelu"], p + "/gelu_half")
        f2 = qlinear(g, ffn, hidden, p + "/ffn/fc2")
        r2 = node("Add", [x1, f2], [p + "/ffn_residual"], p + "/ffn_residual_add")
        x = layernorm(r2, p + "/ln2")
    node("Identity", [x], ["last_hidden"], "/output/Identity")
    graph = helper.make_graph(
        nodes, "fusebox_bert_q",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("last_hidden", TensorProto.FLOAT, [1, seq, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fusebox-models")
    model.ir_version = IR_VERSION
    return model, counts["mmint"]


def _dql(x):
    """DynamicQuantizeLinear in the spec's float32 formulas and order."""
    f = np.float32
    lo = np.minimum(f(0), x.min()).astype(f)
    hi = np.maximum(f(0), x.max()).astype(f)
    scale = f((hi - lo) / f(255))
    zp = np.clip(np.rint(f(0) - lo / scale), 0, 255).astype(f)
    q = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.int64)
    return q, scale, zp.astype(np.int64)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def reference(model, x):
    """Runs the quantized graph of build() with numpy (the ops it emits only)."""
    f = np.float32
    vals = {"hidden": x}
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    get = lambda n: vals[n] if n in vals else init[n]
    for nd in model.graph.node:
        i = [get(n) if n else None for n in nd.input]
        a = {at.name: helper.get_attribute_value(at) for at in nd.attribute}
        op = nd.op_type
        if op == "DynamicQuantizeLinear":
            out = list(_dql(i[0]))
        elif op == "MatMulInteger":  # exact: int64 products and sums
            out = [np.matmul(i[0].astype(np.int64) - i[2].astype(np.int64),
                             i[1].astype(np.int64) - i[3].astype(np.int64))]
        elif op == "Cast":
            out = [i[0].astype(f)]
        elif op == "Mul":
            out = [(i[0] * i[1]).astype(f)]
        elif op == "Add":
            out = [(i[0] + i[1]).astype(f)]
        elif op == "Div":
            out = [(i[0] / i[1]).astype(f)]
        elif op == "Erf":
            out = [_erf(i[0].astype(np.float64)).astype(f)]
        elif op == "MatMul":
            out = [np.matmul(i[0].astype(np.float64), i[1].astype(np.float64)).astype(f)]
        elif op == "Softmax":
            v = i[0].astype(np.float64)
            e = np.exp(v - v.max(axis=-1, keepdims=True))
            out = [(e / e.sum(axis=-1, keepdims=True)).astype(f)]
        elif op == "LayerNormalization":
            v = i[0].astype(np.float64)
            mu = v.mean(axis=-1, keepdims=True)
            var = ((v - mu) ** 2).mean(axis=-1, keepdims=True)
            out = [((v - mu) / np.sqrt(var + a["epsilon"]) * i[1] + i[2]).astype(f)]
        elif op == "Reshape":
            out = [i[0].reshape(i[1])]
        elif op == "Transpose":
            out = [np.transpose(i[0], a["perm"])]
        elif op == "Identity":
            out = [i[0]]
        else:
            raise ValueError("reference: op %s" % op)
        for n, v in zip(nd.output, out):
            vals[n] = v
    return vals["last_hidden"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--wtype", choices=["s8", "u8"], default="s8")
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--float", action="store_true", help="the float encoder itself (MatMul + Add), not quantized")
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--cases", help="write input.npy / last_hidden.npy (numpy reference) into this folder")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    assert a.hidden % a.heads == 0, "hidden must be a multiple of heads"
    model, n_mm = build(a.layers, a.hidden, a.heads, a.ffn, a.seq, a.wtype, a.per_channel, a.seed, a.float)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    if a.cases:
        os.makedirs(a.cases, exist_ok=True)
        x = np.random.RandomState(a.seed + 1).standard_normal((1, a.seq, a.hidden)).astype(np.float32)
        np.save(os.path.join(a.cases, "input.npy"), x)
        np.save(os.path.join(a.cases, "last_hidden.npy"), reference(model, x).astype(np.float32))
    wdesc = "float32" if a.float else "%s %s" % (a.wtype, "per-channel" if a.per_channel else "per-tensor")
    print("[models] %s: hidden 1x%dx%d, %d layers, %d heads, ffn %d, weights %s -> %d %s, %d nodes"
          % (a.out, a.seq, a.hidden, a.layers, a.heads, a.ffn, wdesc, n_mm, "MatMul" if a.float else "MatMulInteger",
             len(model.graph.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
