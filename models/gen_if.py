#!/usr/bin/python3
"""Generate a small If model (opset 17, IR version 8) for tests/e2e/test_e2e_if.c.

Inputs:  x [2, 8] float32, y [8] float32, k [] int64.   Outputs: z [2, ?] float32, s [2, 1] float32.
Main graph: h = x * 2 (an outer value the branches read); If(k > 0):
  then_branch (reads h, y; own weight W [8, 3]):  t = h + y; z = t @ W [2, 3]; s = ReduceSum(z, axis 1)
  else_branch (reads h, x, y): a nested If(sum(y) > 0):
      then: z2 = Slice(Concat(h, x), cols 0..5) [2, 5]; s2 = ReduceMax(z2, axis 1)
      else: z2 = Tanh(Slice(h, cols 1..6)) [2, 5];     s2 = ReduceMean(z2, axis 1) - bias0 (a MAIN-graph
            initializer, two scopes up)
    z = Relu(z2) [2, 5]; s = s2 + sum(y)
After the If: z = Identity(If.z); s = If.s * 3.
So the two branches give z different shapes ([2, 3] / [2, 5]); every body reads outer values, the
nested one from two scopes up.

--unclaimable puts a Det (an op Fusebox does not run) in then_branch: t2 = Det(Reshape(t, [4, 2, 2]));
s = ReduceSum(z, axis 1) + ReduceSum(t2) there, so the If must stay with ORT.

Usage: gen_if.py [--seed 0] [--unclaimable] --out PATH
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
F = TensorProto.FLOAT


def vi(name, dims):
    return helper.make_tensor_value_info(name, F, dims)


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, np.int64), name)


def then_branch(rs, unclaimable):
    w = numpy_helper.from_array(rs.standard_normal((8, 3)).astype(np.float32), "then/W")
    nodes = [
        helper.make_node("Add", ["h", "y"], ["then/t"], name="then/Add"),
        helper.make_node("MatMul", ["then/t", "then/W"], ["then/z"], name="then/MatMul"),
        helper.make_node("ReduceSum", ["then/z", "then/axis1"], ["then/s0"], name="then/ReduceSum", keepdims=1),
    ]
    inits = [w, i64("then/axis1", [1])]
    if unclaimable:
        nodes += [
            helper.make_node("Reshape", ["then/t", "then/shape422"], ["then/t3"], name="then/Reshape"),
            helper.make_node("Det", ["then/t3"], ["then/det"], name="then/Det"),
            helper.make_node("ReduceSum", ["then/det"], ["then/dsum"], name="then/ReduceSumDet", keepdims=0),
            helper.make_node("Add", ["then/s0", "then/dsum"], ["then/s"], name="then/AddDet"),
        ]
        inits.append(i64("then/shape422", [4, 2, 2]))
    else:
        nodes.append(helper.make_node("Identity", ["then/s0"], ["then/s"], name="then/Identity"))
    return helper.make_graph(nodes, "then_branch", [], [vi("then/z", [2, 3]), vi("then/s", [2, 1])], inits)


def inner_branches():
    t = helper.make_graph([
        helper.make_node("Concat", ["h", "x"], ["in_then/hx"], name="in_then/Concat", axis=1),
        helper.make_node("Slice", ["in_then/hx", "in_then/s0", "in_then/s5", "in_then/ax1"], ["in_then/z"],
                         name="in_then/Slice"),
        helper.make_node("ReduceMax", ["in_then/z"], ["in_then/s"], name="in_then/ReduceMax", axes=[1], keepdims=1),
    ], "inner_then", [], [vi("in_then/z", [2, 5]), vi("in_then/s", [2, 1])],
        [i64("in_then/s0", [0]), i64("in_then/s5", [5]), i64("in_then/ax1", [1])])
    e = helper.make_graph([
        helper.make_node("Slice", ["h", "in_else/s1", "in_else/s6", "in_else/ax1"], ["in_else/hs"], name="in_else/Slice"),
        helper.make_node("Tanh", ["in_else/hs"], ["in_else/z"], name="in_else/Tanh"),
        helper.make_node("ReduceMean", ["in_else/z"], ["in_else/m"], name="in_else/ReduceMean", axes=[1], keepdims=1),
        helper.make_node("Sub", ["in_else/m", "bias0"], ["in_else/s"], name="in_else/Sub"),
    ], "inner_else", [], [vi("in_else/z", [2, 5]), vi("in_else/s", [2, 1])],
        [i64("in_else/s1", [1]), i64("in_else/s6", [6]), i64("in_else/ax1", [1])])
    return t, e


def else_branch():
    it, ie = inner_branches()
    nodes = [
        helper.make_node("ReduceSum", ["y"], ["else/ysum"], name="else/ReduceSum", keepdims=0),
        helper.make_node("Greater", ["else/ysum", "else/zero"], ["else/cy"], name="else/Greater"),
        helper.make_node("If", ["else/cy"], ["else/z2", "else/s2"], name="else/If", then_branch=it, else_branch=ie),
        helper.make_node("Relu", ["else/z2"], ["else/z"], name="else/Relu"),
        helper.make_node("Add", ["else/s2", "else/ysum"], ["else/s"], name="else/Add"),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "else/zero")]
    return helper.make_graph(nodes, "else_branch", [], [vi("else/z", [2, 5]), vi("else/s", [2, 1])], inits)


def build(seed, unclaimable):
    rs = np.random.RandomState(seed)
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["h"], name="/Mul"),
        helper.make_node("Greater", ["k", "zero_i64"], ["c"], name="/Greater"),
        helper.make_node("If", ["c"], ["if.z", "if.s"], name="/If", then_branch=then_branch(rs, unclaimable),
                         else_branch=else_branch()),
        helper.make_node("Identity", ["if.z"], ["z"], name="/Identity"),
        helper.make_node("Mul", ["if.s", "three"], ["s"], name="/MulS"),
    ]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three"),
             numpy_helper.from_array(np.array([0.25], np.float32), "bias0"),
             numpy_helper.from_array(np.array(0, np.int64), "zero_i64")]
    inputs = [vi("x", [2, 8]), vi("y", [8]), helper.make_tensor_value_info("k", TensorProto.INT64, [])]
    outputs = [vi("z", [2, None]), vi("s", [2, 1])]
    g = helper.make_graph(nodes, "if_small", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fusebox-gen_if")
    m.ir_version = IR_VERSION
    onnx.checker.check_model(m)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--unclaimable", action="store_true", help="a Det in then_branch (not claimable)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    onnx.save(build(a.seed, a.unclaimable), a.out)


if __name__ == "__main__":
    main()
