#!/usr/bin/python3
"""One Qwen2.5-0.5B-shaped layer's MatMulNBits at prefill, and the lm_head, as one ONNX model for
`fusebox bench` (Fusebox against ORT's CPU EP, interleaved): A (M, 896) float32 through q (896->896),
k / v (896->128), o (896->896), gate / up (896->4864), down (4864->896, fed by gate's output) and
lm_head (896->151936): int4, block 32, packed uint8 zero points, random weights (models/gen_genai.py's
quantiser), accuracy_level from --accuracy-level.

Usage: bench/gen_mnb_prefill.py --out PATH [--m 128] [--accuracy-level 0|4] [--no-lm-head]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from gen_genai import quantize  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--accuracy-level", type=int, default=0, choices=(0, 4))
    ap.add_argument("--no-lm-head", action="store_true")
    a = ap.parse_args()
    rs = np.random.RandomState(7)
    mats = [("q", "A", 896, 896), ("k", "A", 896, 128), ("v", "A", 896, 128), ("o", "A", 896, 896),
            ("gate", "A", 896, 4864), ("up", "A", 896, 4864), ("down", "y_gate", 4864, 896)]
    if not a.no_lm_head:
        mats.append(("lm_head", "A", 896, 151936))
    nodes, inits, outs = [], [], []
    for name, x, k, n in mats:
        packed, scale, zp, _ = quantize(rs.standard_normal((n, k)) * 0.1, want_deq=False)
        for suffix, arr in (("qweight", packed), ("scales", scale), ("qzeros", zp)):
            inits.append(numpy_helper.from_array(arr, "%s.%s" % (name, suffix)))
        nodes.append(helper.make_node("MatMulNBits", [x, name + ".qweight", name + ".scales", name + ".qzeros"],
                                      ["y_" + name], name=name, domain="com.microsoft", K=k, N=n, bits=4,
                                      block_size=32, accuracy_level=a.accuracy_level))
        outs.append(helper.make_tensor_value_info("y_" + name, TensorProto.FLOAT, [a.m, n]))
    g = helper.make_graph(nodes, "mnb_prefill", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [a.m, 896])],
                          outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
