#!/usr/bin/python3
"""Generate a ResNet-style CNN in plain ONNX ops (opset 17, IR version 8).

stem: Conv 7x7/2 + BatchNormalization + Relu, MaxPool 3x3/2
4 stages of basic residual blocks (Conv3x3-BN-Relu-Conv3x3-BN, Add shortcut, Relu; the first
block of stages 2-4 has stride 2 and a 1x1/2 Conv-BN projection shortcut),
GlobalAveragePool, Flatten, Gemm -> `logits` [N, classes].
Input `input` [1, 3, size, size] float32 (static). He-normal conv weights, random BN statistics
(numpy RandomState(seed)) so activations stay O(1) through the depth.

Usage: gen_cnn.py --size S --widths 64,128,256,512 --blocks 2,2,2,2 [--classes 1000] --out PATH
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def build(size, widths, blocks, classes, seed, batch=1, act="relu"):
    rs = np.random.RandomState(seed)
    nodes, inits = [], []
    n_params = [0]

    def init(name, arr):
        arr = np.asarray(arr)
        inits.append(numpy_helper.from_array(arr, name))
        n_params[0] += int(arr.size)
        return name

    def conv_bn(x, cin, cout, k, stride, name, relu):
        fan_in = cin * k * k
        w = init(name + ".conv.weight",
                 (rs.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32))
        pad = k // 2
        y = name + "/Conv/output_0"
        nodes.append(helper.make_node("Conv", [x, w], [y], name=name + "/Conv", kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1],
                                      group=1))
        scale = init(name + ".bn.weight", (1.0 + 0.1 * rs.standard_normal(cout)).astype(np.float32))
        bias = init(name + ".bn.bias", (0.1 * rs.standard_normal(cout)).astype(np.float32))
        mean = init(name + ".bn.running_mean", (0.1 * rs.standard_normal(cout)).astype(np.float32))
        var = init(name + ".bn.running_var", (1.0 + 0.2 * rs.rand(cout)).astype(np.float32))
        z = name + "/BatchNormalization/output_0"
        nodes.append(helper.make_node("BatchNormalization", [y, scale, bias, mean, var], [z],
                                      name=name + "/BatchNormalization", epsilon=1e-5))
        if not relu:
            return z
        return activation(z, name)

    def activation(z, name):
        if act == "silu":  # as PyTorch exports nn.SiLU: x * Sigmoid(x)
            sg = name + "/Sigmoid/output_0"
            nodes.append(helper.make_node("Sigmoid", [z], [sg], name=name + "/Sigmoid"))
            r = name + "/Mul/output_0"
            nodes.append(helper.make_node("Mul", [z, sg], [r], name=name + "/Mul"))
            return r
        r = name + "/Relu/output_0"
        nodes.append(helper.make_node("Relu", [z], [r], name=name + "/Relu"))
        return r

    x = conv_bn("input", 3, widths[0], 7, 2, "/stem", True)  # (1, w0, size/2, size/2)
    mp = "/stem/MaxPool/output_0"
    nodes.append(helper.make_node("MaxPool", [x], [mp], name="/stem/MaxPool", kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = mp, widths[0]
    for si, (cout, nb) in enumerate(zip(widths, blocks)):
        for bi in range(nb):
            stride = 2 if (si > 0 and bi == 0) else 1
            p = "/layer%d.%d" % (si + 1, bi)
            h = conv_bn(x, cin, cout, 3, stride, p + "/conv1", True)
            h = conv_bn(h, cout, cout, 3, 1, p + "/conv2", False)
            sc = x
            if stride != 1 or cin != cout:
                sc = conv_bn(x, cin, cout, 1, stride, p + "/downsample", False)
            s = p + "/Add/output_0"
            nodes.append(helper.make_node("Add", [h, sc], [s], name=p + "/Add"))
            x, cin = activation(s, p), cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["/pool/output_0"], name="/pool/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["/pool/output_0"], ["/flatten/output_0"], name="/flatten/Flatten",
                                  axis=1))
    fw = init("fc.weight", (rs.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)).astype(np.float32))
    fb = init("fc.bias", (0.01 * rs.standard_normal(classes)).astype(np.float32))
    nodes.append(helper.make_node("Gemm", ["/flatten/output_0", fw, fb], ["logits"], name="/fc/Gemm",
                                  transB=1))
    graph = helper.make_graph(
        nodes, "fusebox_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="fusebox-models")
    model.ir_version = IR_VERSION
    return model, n_params[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--widths", default="64,128,256,512")
    ap.add_argument("--blocks", default="2,2,2,2")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--act", choices=["relu", "silu"], default="relu",
                    help="activation: Relu, or SiLU as x * Sigmoid(x) (YOLO / EfficientNet-style exports)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    widths = [int(v) for v in a.widths.split(",")]
    blocks = [int(v) for v in a.blocks.split(",")]
    assert len(widths) == 4 and len(blocks) == 4
    model, n_params = build(a.size, widths, blocks, a.classes, a.seed, act=a.act)
    onnx.checker.check_model(model)
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True))
    onnx.save(model, a.out)
    print("[models] %s: input 1x3x%dx%d, widths %s, blocks %s -> %d params (%.2fM), %d nodes"
          % (a.out, a.size, a.size, a.widths, a.blocks, n_params, n_params / 1e6, len(model.graph.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
