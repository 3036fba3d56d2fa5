#!/usr/bin/env python3
"""The decoder's RMSNorm as its own model (bench/RESULTS.md, "fp32step"): x (1, S, H) ->
Pow 2, ReduceMean, Add eps, Sqrt, Reciprocal, Mul x, Mul weight, as gen_decoder.py builds it;
S and H are fixed at generation so `fusebox bench` times one shape.

Usage: /usr/bin/python3 models/gen_rmsnorm.py --seq 128 --hidden 768 --out /tmp/rmsnorm.onnx
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, __import__("os").path.dirname(__file__))
import gen_decoder as gd  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    b = gd.Builder()
    w = np.random.default_rng(1).standard_normal(a.hidden).astype(np.float32)
    b.init("w", w)
    y = gd.rms_norm(b, "x", "w", "/norm")
    f32 = onnx.TensorProto.FLOAT
    g = helper.make_graph(b.nodes, "rmsnorm", [helper.make_tensor_value_info("x", f32, [1, a.seq, a.hidden])],
                          [helper.make_tensor_value_info(y, f32, [1, a.seq, a.hidden])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", gd.OPSET)], producer_name="fusebox-models")
    m.ir_version = gd.IR_VERSION
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
