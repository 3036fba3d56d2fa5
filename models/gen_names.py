#!/usr/bin/python3
"""Generate a tiny model whose node names need escaping in JSON traces (opset 17, IR 8).

X [2, 3] float32 -> Relu -> Add(1) -> Mul(2) -> Sigmoid -> Y [2, 3]. Node names contain a double
quote, a backslash, a newline, a tab, a control character and non-ASCII text. Exact results:
Y = sigmoid((relu(X) + 1) * 2).

Usage: gen_names.py --out PATH
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NAMES = [
    'relu "quoted" node',
    'add back\\slash\\node',
    'mul new\nline\ttab',
    'sigmoid ünïcødé → ✓ 日本 \x01ctl',
]


def build():
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [
        helper.make_node("Relu", ["X"], ["r"], name=NAMES[0]),
        helper.make_node("Add", ["r", "one"], ["a"], name=NAMES[1]),
        helper.make_node("Mul", ["a", "two"], ["m"], name=NAMES[2]),
        helper.make_node("Sigmoid", ["m"], ["Y"], name=NAMES[3]),
    ]
    graph = helper.make_graph(
        nodes, 'names "escape" \\ test',
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])], [one, two])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="fusebox-models")
    model.ir_version = 8
    return model


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    model = build()
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.save(model, a.out)
    print("[models] %s: %d nodes with names that need JSON escaping" % (a.out, len(model.graph.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
