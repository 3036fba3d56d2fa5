#!/usr/bin/python3
"""Generate a recurrent cell inside a Loop or a Scan body (opset 17, IR version 8), and its float64
numpy reference, for the control-flow placement test (tests/e2e/test_e2e_control_flow.c).

--kind loop: inputs  h0 [1, H] float32, steps [] int64 (trip count)
             Loop(steps, cond=true) whose body reads W, U, b from the OUTER scope:
               a = Tanh(MatMul(h, W) + b); g = Sigmoid(MatMul(h, U)); h' = a * g + h * (1 - g)
               scan output y = Relu(h') * 2
             outputs h_last [1, H], ys [steps, 1, H]
--kind scan: inputs  h0 [1, H] float32, xs [T, 1, H] float32
             Scan(h0, xs) whose body holds its own Wx, Wh, b (initializers of the body):
               h' = Tanh(MatMul(x_t, Wx) + MatMul(h, Wh) + b); y_t = Sigmoid(h') - 0.5
             outputs h_last [1, H], ys [T, 1, H]
The body has several nodes, so a provider that ORT asks per subgraph can fuse it into one node; the
Loop/Scan node itself stays with ORT.

With --cases DIR it writes DIR/h0.npy, DIR/xs.npy (scan) or DIR/steps.npy (loop), DIR/h_last.npy and
DIR/ys.npy: the float64 recurrence written from the formulas above (not from the graph), cast to
float32.

Usage: gen_control_flow.py --kind loop|scan [--hidden 32] [--steps 12] [--seed 0] --out PATH [--cases DIR]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def loop_model(h, rs):
    w = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    u = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    b = (0.1 * rs.standard_normal((h,))).astype(np.float32)
    body_nodes = [
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body/cond"),
        helper.make_node("MatMul", ["h_in", "W"], ["hw"], name="body/mm_w"),
        helper.make_node("Add", ["hw", "b"], ["hwb"], name="body/add_b"),
        helper.make_node("Tanh", ["hwb"], ["a"], name="body/tanh"),
        helper.make_node("MatMul", ["h_in", "U"], ["hu"], name="body/mm_u"),
        helper.make_node("Sigmoid", ["hu"], ["g"], name="body/sigmoid"),
        helper.make_node("Mul", ["a", "g"], ["ag"], name="body/mul_ag"),
        helper.make_node("Sub", ["one", "g"], ["omg"], name="body/one_minus_g"),
        helper.make_node("Mul", ["h_in", "omg"], ["hk"], name="body/mul_keep"),
        helper.make_node("Add", ["ag", "hk"], ["h_out"], name="body/add_h"),
        helper.make_node("Relu", ["h_out"], ["r"], name="body/relu"),
        helper.make_node("Mul", ["r", "two"], ["y"], name="body/scale_y"),
    ]
    body = helper.make_graph(
        body_nodes, "loop_body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, h])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, h])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one"),
         numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    main = helper.make_graph(
        [helper.make_node("Loop", ["steps", "cond", "h0"], ["h_last", "ys"], name="loop", body=body)],
        "loop_cell",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("steps", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["steps", 1, h])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(u, "U"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array(True), "cond")])

    def reference(h0, steps):
        W, U, B = (x.astype(np.float64) for x in (w, u, b))
        hh, ys = h0.astype(np.float64), []
        for _ in range(steps):
            a, g = np.tanh(hh @ W + B), sigmoid(hh @ U)
            hh = a * g + hh * (1 - g)
            ys.append(np.maximum(hh, 0) * 2)
        return hh, np.stack(ys)

    return main, reference


def scan_model(h, rs):
    wx = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    wh = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    b = (0.1 * rs.standard_normal((h,))).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "Wx"], ["xw"], name="body/mm_x"),
         helper.make_node("MatMul", ["h_in", "Wh"], ["hw"], name="body/mm_h"),
         helper.make_node("Add", ["xw", "hw"], ["s"], name="body/add"),
         helper.make_node("Add", ["s", "b"], ["sb"], name="body/add_b"),
         helper.make_node("Tanh", ["sb"], ["h_out"], name="body/tanh"),
         helper.make_node("Sigmoid", ["h_out"], ["sg"], name="body/sigmoid"),
         helper.make_node("Sub", ["sg", "half"], ["y_t"], name="body/sub_half")],
        "scan_body",
        [helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [1, h])],
        [helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1, h])],
        [numpy_helper.from_array(wx, "Wx"), numpy_helper.from_array(wh, "Wh"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    main = helper.make_graph(
        [helper.make_node("Scan", ["h0", "xs"], ["h_last", "ys"], name="scan", body=body, num_scan_inputs=1)],
        "scan_cell",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, ["T", 1, h])],
        [helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [1, h]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["T", 1, h])])

    def reference(h0, xs):
        Wx, Wh, B = (x.astype(np.float64) for x in (wx, wh, b))
        hh, ys = h0.astype(np.float64), []
        for x in xs.astype(np.float64):
            hh = np.tanh(x @ Wx + hh @ Wh + B)
            ys.append(sigmoid(hh) - 0.5)
        return hh, np.stack(ys)

    return main, reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("loop", "scan"), required=True)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases")
    a = ap.parse_args()
    rs = np.random.default_rng(a.seed)
    graph, reference = (loop_model if a.kind == "loop" else scan_model)(a.hidden, rs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    if a.cases:
        os.makedirs(a.cases, exist_ok=True)
        h0 = rs.uniform(-1, 1, (1, a.hidden)).astype(np.float32)
        np.save(os.path.join(a.cases, "h0.npy"), h0)
        if a.kind == "loop":
            np.save(os.path.join(a.cases, "steps.npy"), np.array(a.steps, np.int64))
            h_last, ys = reference(h0, a.steps)
        else:
            xs = rs.uniform(-1, 1, (a.steps, 1, a.hidden)).astype(np.float32)
            np.save(os.path.join(a.cases, "xs.npy"), xs)
            h_last, ys = reference(h0, xs)
        np.save(os.path.join(a.cases, "h_last.npy"), h_last.astype(np.float32))
        np.save(os.path.join(a.cases, "ys.npy"), ys.astype(np.float32))
    print(f"[gen_control_flow] {a.out}: {a.kind}, hidden {a.hidden}")


if __name__ == "__main__":
    main()
