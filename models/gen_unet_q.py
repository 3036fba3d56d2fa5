#!/usr/bin/python3
"""Generate a U-Net-style segmentation net, dynamically quantized the way
onnxruntime.quantization.quantize_dynamic does it (opset 17, IR version 8).

Float net: `levels` encoder levels (level l: `convs` Conv3x3+Relu at width widths[l]; MaxPool 2x2
between levels), a decoder mirroring it (Resize nearest x2, Concat with the encoder's skip,
`convs` Conv3x3+Relu), a 1x1 Conv head -> `logits` [1, classes, size, size]. He-normal weights,
random biases (numpy RandomState(seed)).

Every Conv is then rewritten as quantize_dynamic's ConvInteger pattern (written here with onnx
directly, the quantization tool not being available):
    x_q, x_scale, x_zp = DynamicQuantizeLinear(x)          (one per distinct conv input)
    acc   = ConvInteger(x_q, W_q uint8, x_zp, w_zp)          (W quantized per tensor, asymmetric)
    y     = Cast(acc, float) * Mul(x_scale, w_scale) + bias[1, M, 1, 1]
Weights: rmin = min(0, min W), rmax = max(0, max W), w_scale = (rmax - rmin) / 255,
w_zp = clip(round(-rmin / w_scale), 0, 255), W_q = clip(round(W / w_scale) + w_zp, 0, 255).

--cases DIR also writes DIR/input.npy (normal, seed+1) and DIR/logits.npy: the quantized net run
by a numpy reference written here (int64 convolution, float32 elementwise in the graph's order),
independent of ONNX Runtime and of Fusebox.

Usage: gen_unet_q.py --size S --widths 16,32,64,128 --convs 2 [--classes 4] [--float] [--cases DIR] --out PATH
"""
import os
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def build(size, widths, convs, classes, seed, quantize):
    rs = np.random.RandomState(seed)
    nodes, inits = [], []
    counts = {"conv": 0}
    dql_of = {}  # float tensor -> (x_q, x_scale, x_zp): one DynamicQuantizeLinear per input

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def conv(x, cin, cout, k, name, relu):
        counts["conv"] += 1
        w = (rs.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (0.05 * rs.standard_normal(cout)).astype(np.float32)
        pad = k // 2
        y = name + "/Conv/output_0"
        if not quantize:
            nodes.append(helper.make_node("Conv", [x, init(name + ".weight", w), init(name + ".bias", b)], [y],
                                          name=name + "/Conv", kernel_shape=[k, k], pads=[pad] * 4))
        else:
            if x not in dql_of:
                q = (x + "_quantized", x + "_scale", x + "_zero_point")
                nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(q), name=x + "_QuantizeLinear"))
                dql_of[x] = q
            xq, xs, xz = dql_of[x]
            rmin, rmax = min(0.0, float(w.min())), max(0.0, float(w.max()))
            ws = np.float32((rmax - rmin) / 255.0)
            wz = np.uint8(np.clip(np.round(-rmin / ws), 0, 255))
            wq = np.clip(np.round(w / ws) + float(wz), 0, 255).astype(np.uint8)
            wqn = init(name + ".weight_quantized", wq)
            wsn = init(name + ".weight_scale", np.array(ws, dtype=np.float32))
            wzn = init(name + ".weight_zero_point", np.array(wz, dtype=np.uint8))
            acc = name + "/Conv_output_0_quantized"
            nodes.append(helper.make_node("ConvInteger", [xq, wqn, xz, wzn], [acc], name=name + "/Conv_quant",
                                          kernel_shape=[k, k], pads=[pad] * 4))
            cast = acc + "_cast_output"
            nodes.append(helper.make_node("Cast", [acc], [cast], name=name + "/Conv_quant_cast", to=TensorProto.FLOAT))
            sm = name + "/Conv_quant_scales_mul"
            nodes.append(helper.make_node("Mul", [xs, wsn], [sm], name=name + "/Conv_quant_scales_mul"))
            mo = name + "/Conv_quant_output_scale_mul"
            nodes.append(helper.make_node("Mul", [cast, sm], [mo], name=name + "/Conv_quant_output_scale_mul"))
            bn = init(name + ".bias_reshaped", b.reshape(1, cout, 1, 1))
            nodes.append(helper.make_node("Add", [mo, bn], [y], name=name + "/Conv_bias_add"))
        if not relu:
            return y
        r = name + "/Relu/output_0"
        nodes.append(helper.make_node("Relu", [y], [r], name=name + "/Relu"))
        return r

    x, cin, skips = "input", 3, []
    for l, wd in enumerate(widths):
        if l > 0:
            mp = "/enc%d/MaxPool/output_0" % l
            nodes.append(helper.make_node("MaxPool", [x], [mp], name="/enc%d/MaxPool" % l, kernel_shape=[2, 2],
                                          strides=[2, 2]))
            x = mp
        for c in range(convs):
            x = conv(x, cin, wd, 3, "/enc%d/conv%d" % (l, c), True)
            cin = wd
        skips.append((x, wd))
    scales = init("up_scales", np.array([1, 1, 2, 2], dtype=np.float32))
    for l in range(len(widths) - 2, -1, -1):
        up = "/dec%d/Resize/output_0" % l
        nodes.append(helper.make_node("Resize", [x, "", scales], [up], name="/dec%d/Resize" % l, mode="nearest"))
        s, swd = skips[l]
        cat = "/dec%d/Concat/output_0" % l
        nodes.append(helper.make_node("Concat", [up, s], [cat], name="/dec%d/Concat" % l, axis=1))
        x, cin = cat, cin + swd
        for c in range(convs):
            x = conv(x, cin, widths[l], 3, "/dec%d/conv%d" % (l, c), True)
            cin = widths[l]
    conv_out = conv(x, cin, classes, 1, "/head", False)
    nodes.append(helper.make_node("Identity", [conv_out], ["logits"], name="/head/Identity"))
    graph = helper.make_graph(
        nodes, "fusebox_unet_q",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fusebox-models")
    model.ir_version = IR_VERSION
    return model, counts["conv"]


def _dql(x):
    """DynamicQuantizeLinear in the spec's float32 formulas and order."""
    f = np.float32
    lo = np.minimum(f(0), x.min()).astype(f)
    hi = np.maximum(f(0), x.max()).astype(f)
    scale = f((hi - lo) / f(255))
    zp = np.clip(np.rint(f(0) - lo / scale), 0, 255).astype(f)
    q = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.int64)
    return q, scale, zp.astype(np.int64)


def _conv_int(xq, xz, wq, wz, pad):
    """int64 ConvInteger, stride 1, square pads filled with x_zero_point."""
    m, c, k, _ = wq.shape
    xp = np.pad(xq - xz, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, w = xq.shape[2], xq.shape[3]
    cols = np.empty((c, k, k, h, w), dtype=np.int64)
    for ky in range(k):
        for kx in range(k):
            cols[:, ky, kx] = xp[0, :, ky:ky + h, kx:kx + w]
    acc = (wq.astype(np.int64) - wz).reshape(m, -1) @ cols.reshape(c * k * k, h * w)
    return acc.reshape(1, m, h, w)


def reference(model, x):
    """Runs the quantized graph of build() with numpy (the ops it emits only)."""
    f = np.float32
    vals = {"input": x}
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    get = lambda n: vals[n] if n in vals else init[n]
    for nd in model.graph.node:
        i = [get(n) if n else None for n in nd.input]
        a = {at.name: helper.get_attribute_value(at) for at in nd.attribute}
        if nd.op_type == "DynamicQuantizeLinear":
            q, s, z = _dql(i[0])
            out = [q, s, z]
        elif nd.op_type == "ConvInteger":
            out = [_conv_int(i[0], int(i[2]), i[1], int(i[3]), a["pads"][0])]
        elif nd.op_type == "Cast":
            out = [i[0].astype(np.int32).astype(f)]
        elif nd.op_type == "Mul":
            out = [(i[0] * i[1]).astype(f)]
        elif nd.op_type == "Add":
            out = [(i[0] + i[1]).astype(f)]
        elif nd.op_type == "Relu":
            out = [np.maximum(i[0], f(0))]
        elif nd.op_type == "MaxPool":
            v = i[0]
            out = [v.reshape(v.shape[0], v.shape[1], v.shape[2] // 2, 2, v.shape[3] // 2, 2).max(axis=(3, 5))]
        elif nd.op_type == "Resize":
            out = [i[0].repeat(2, axis=2).repeat(2, axis=3)]
        elif nd.op_type == "Concat":
            out = [np.concatenate(i, axis=a["axis"])]
        elif nd.op_type == "Identity":
            out = [i[0]]
        else:
            raise ValueError("reference: op %s" % nd.op_type)
        for n, v in zip(nd.output, out):
            vals[n] = v
    return vals["logits"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--widths", default="8,16,32")
    ap.add_argument("--convs", type=int, default=2)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--float", action="store_true", help="the float model, not quantized")
    ap.add_argument("--cases", help="write input.npy / logits.npy (numpy reference) into this folder")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    widths = [int(v) for v in a.widths.split(",")]
    assert a.size % (1 << (len(widths) - 1)) == 0, "size must be divisible by 2^(levels-1)"
    model, n_conv = build(a.size, widths, a.convs, a.classes, a.seed, not a.float)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    if a.cases:
        assert not a.float, "--cases is for the quantized model"
        os.makedirs(a.cases, exist_ok=True)
        x = np.random.RandomState(a.seed + 1).standard_normal((1, 3, a.size, a.size)).astype(np.float32)
        np.save(os.path.join(a.cases, "input.npy"), x)
        np.save(os.path.join(a.cases, "logits.npy"), reference(model, x).astype(np.float32))
    print("[models] %s: input 1x3x%dx%d, widths %s, %d convs per stage -> %d convs, %d nodes%s"
          % (a.out, a.size, a.size, a.widths, a.convs, n_conv, len(model.graph.node), "" if a.float else " (quantized)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
