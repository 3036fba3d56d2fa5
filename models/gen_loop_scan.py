#!/usr/bin/python3
"""Loop and Scan models whose Loop/Scan node Fusebox claims whole, with nodes before and after it
(opset 17, IR version 8), and their float64 numpy references, for tests/e2e/test_e2e_loop_scan.c.

--kind loop: inputs x [2, H] f32, M [] int64, limit [] int64, go [] bool
    h0 = Tanh(x); s = Sigmoid(ReduceMean(x)); wk = W * s      (wk: a NON-constant outer value)
    Loop(M, go, h0, acc0 = zeros [2, 1]), body (iter, cond, h, acc), outer values wk, b, limit:
      hn = Tanh(h @ wk + b + float(iter) * 0.01); accn = acc + ReduceSum(hn, axis 1, keepdims)
      cond' = (iter + 1) < limit;  scan outputs ys = hn * 2 [2, H], accs = accn [2, 1]
    out = h_last + 1;  outputs out [2, H], acc_last [2, 1], ys [n, 2, H], accs [n, 2, 1]
    (n: the iterations run: min(M, limit) when go, with at least one when M >= 1 and go; 0 when
    M = 0 or go = false)
--kind scan: inputs x0 [2, H] f32, xs [T, 2, H] f32, zs [2, T, H] f32, gin [H] f32
    s0 = Tanh(x0 * 0.5); g = Sigmoid(gin)                       (g: a NON-constant outer value)
    Scan(s0, xs, zs) with scan_input_axes [0, 1], scan_input_directions [0, 1] (zs in reverse),
    scan_output_axes [0, -1], scan_output_directions [1, 0], body (s, x_t, z_t), outer values Wx, g:
      sn = Tanh(x_t @ Wx + s * z_t + g);  y1 = sn (stacked on axis 0, reversed);
      y2 = x_t - z_t (stacked on the last axis: [2, H, T])
    out = s_last * 3;  outputs out [2, H], y1 [T, 2, H], y2 [2, H, T]

--kind misc: inputs x [2, 2] f32, M [] int64, limit [] int64, go [1] bool; three Loops in a row:
    A (Fusebox claims it): Loop("", go, Tanh(x)) with no trip count, h' = h * 0.5 + 0.25, stopped
      by cond' = (iter + 1) < limit; scan output ysa = h' (its body declares iter, cond as [1], as
      exporters do)
    B (declined: Det is not claimable): Loop(M, "", h_A), h' = Tanh(h @ W), scan output d = Det(h')
    C (declined: a sequence-typed loop-carried value): Loop(M, "", h_B, SequenceEmpty), h' = h + 1,
      seq' = SequenceInsert(seq, h'); cat = ConcatFromSequence(seq_C, new_axis 1, axis 0)
    outputs ysa [na, 2, 2], dsb [nb], out = h_C * 2 [2, 2], cat [nc, 2, 2]

--kind nested: inputs x0 [2, H], xs [T, 2, H]; Scan(Tanh(x0), xs) whose body runs a Loop of 3 trips
    (h' = h * 0.5 + x_t, x_t read from the Scan body's scope) and y = Tanh(h_3); out = s_last * 2

With --cases DIR: one folder per case under DIR (loop: m8, cond5, zero_m, zero_go; scan: t5, t1; misc: l3m4, l1m2; nested: t4),
holding every input and every output as .npy: the float64 recurrence written from the formulas
above (not from the graph), cast to float32.

Usage: gen_loop_scan.py --kind loop|scan|misc|nested [--hidden 16] [--seed 0] --out PATH [--cases DIR]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def loop_model(h, rs):
    w = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    b = (0.1 * rs.standard_normal((h,))).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Cast", ["iter"], ["itf"], to=F, name="body/cast_iter"),
         helper.make_node("Mul", ["itf", "c001"], ["itk"], name="body/iter_scale"),
         helper.make_node("MatMul", ["h_in", "wk"], ["hw"], name="body/matmul"),
         helper.make_node("Add", ["hw", "b"], ["hwb"], name="body/add_b"),
         helper.make_node("Add", ["hwb", "itk"], ["pre"], name="body/add_iter"),
         helper.make_node("Tanh", ["pre"], ["h_out"], name="body/tanh"),
         helper.make_node("ReduceSum", ["h_out", "ax1"], ["rs"], keepdims=1, name="body/reduce"),
         helper.make_node("Add", ["acc_in", "rs"], ["acc_out"], name="body/acc"),
         helper.make_node("Add", ["iter", "one_i"], ["next"], name="body/next"),
         helper.make_node("Less", ["next", "limit"], ["cond_out"], name="body/less"),
         helper.make_node("Mul", ["h_out", "two"], ["y"], name="body/scale_y"),
         helper.make_node("Identity", ["acc_out"], ["acc_y"], name="body/acc_y")],
        "loop_body",
        [vi("iter", I64, []), vi("cond_in", B, []), vi("h_in", F, [2, h]), vi("acc_in", F, [2, 1])],
        [vi("cond_out", B, []), vi("h_out", F, [2, h]), vi("acc_out", F, [2, 1]), vi("y", F, [2, h]),
         vi("acc_y", F, [2, 1])],
        [numpy_helper.from_array(np.array(0.01, np.float32), "c001"),
         numpy_helper.from_array(np.array([1], np.int64), "ax1"),
         numpy_helper.from_array(np.array(1, np.int64), "one_i"),
         numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    main = helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["h0"], name="/pre_tanh"),
         helper.make_node("ReduceMean", ["x"], ["xm"], keepdims=0, name="/pre_mean"),
         helper.make_node("Sigmoid", ["xm"], ["s"], name="/pre_sigmoid"),
         helper.make_node("Mul", ["W", "s"], ["wk"], name="/pre_wk"),
         helper.make_node("Loop", ["M", "go", "h0", "acc0"], ["h_last", "acc_last", "ys", "accs"], name="/loop",
                          body=body),
         helper.make_node("Add", ["h_last", "one_f"], ["out"], name="/post_add")],
        "loop_graph",
        [vi("x", F, [2, h]), vi("M", I64, []), vi("limit", I64, []), vi("go", B, [])],
        [vi("out", F, [2, h]), vi("acc_last", F, [2, 1]), vi("ys", F, ["n", 2, h]), vi("accs", F, ["n", 2, 1])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.zeros((2, 1), np.float32), "acc0"),
         numpy_helper.from_array(np.array(1.0, np.float32), "one_f")])

    def reference(x, M, limit, go):
        x = x.astype(np.float64)
        wk = w.astype(np.float64) * sigmoid(x.mean())
        hh, acc, ys, accs = np.tanh(x), np.zeros((2, 1)), [], []
        t, cond = 0, bool(go)
        while t < M and cond:
            hh = np.tanh(hh @ wk + b.astype(np.float64) + t * 0.01)
            acc = acc + hh.sum(axis=1, keepdims=True)
            ys.append(hh * 2)
            accs.append(acc)
            cond = (t + 1) < limit
            t += 1
        stack = lambda a, s: np.stack(a) if a else np.zeros((0,) + s)
        return {"out": hh + 1, "acc_last": acc, "ys": stack(ys, (2, h)), "accs": stack(accs, (2, 1))}

    def cases(rs):
        out = {}
        for name, M, limit, go in (("m8", 8, 100, True), ("cond5", 20, 5, True), ("zero_m", 0, 100, True),
                                   ("zero_go", 6, 100, False)):
            x = rs.uniform(-1, 1, (2, h)).astype(np.float32)
            ins = {"x": x, "M": np.array(M, np.int64), "limit": np.array(limit, np.int64), "go": np.array(go)}
            out[name] = (ins, reference(x, M, limit, go))
        return out

    return main, cases


def scan_model(h, rs):
    wx = (rs.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "Wx"], ["xw"], name="body/matmul"),
         helper.make_node("Mul", ["s_in", "z_t"], ["sz"], name="body/mul"),
         helper.make_node("Add", ["xw", "sz"], ["a"], name="body/add"),
         helper.make_node("Add", ["a", "g"], ["ag"], name="body/add_g"),
         helper.make_node("Tanh", ["ag"], ["s_out"], name="body/tanh"),
         helper.make_node("Identity", ["s_out"], ["y1"], name="body/y1"),
         helper.make_node("Sub", ["x_t", "z_t"], ["y2"], name="body/y2")],
        "scan_body",
        [vi("s_in", F, [2, h]), vi("x_t", F, [2, h]), vi("z_t", F, [2, h])],
        [vi("s_out", F, [2, h]), vi("y1", F, [2, h]), vi("y2", F, [2, h])])
    main = helper.make_graph(
        [helper.make_node("Mul", ["x0", "half"], ["xh"], name="/pre_mul"),
         helper.make_node("Tanh", ["xh"], ["s0"], name="/pre_tanh"),
         helper.make_node("Sigmoid", ["gin"], ["g"], name="/pre_g"),
         helper.make_node("Scan", ["s0", "xs", "zs"], ["s_last", "y1s", "y2s"], name="/scan", body=body,
                          num_scan_inputs=2, scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                          scan_output_axes=[0, -1], scan_output_directions=[1, 0]),
         helper.make_node("Mul", ["s_last", "three"], ["out"], name="/post_mul")],
        "scan_graph",
        [vi("x0", F, [2, h]), vi("xs", F, ["T", 2, h]), vi("zs", F, [2, "T", h]), vi("gin", F, [h])],
        [vi("out", F, [2, h]), vi("y1s", F, ["T", 2, h]), vi("y2s", F, [2, h, "T"])],
        [numpy_helper.from_array(wx, "Wx"), numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(3.0, np.float32), "three")])

    def reference(x0, xs, zs, gin):
        Wx = wx.astype(np.float64)
        g = sigmoid(gin.astype(np.float64))
        s = np.tanh(x0.astype(np.float64) * 0.5)
        T = xs.shape[0]
        y1, y2 = [None] * T, []
        for t in range(T):
            x_t, z_t = xs[t].astype(np.float64), zs[:, T - 1 - t, :].astype(np.float64)
            s = np.tanh(x_t @ Wx + s * z_t + g)
            y1[T - 1 - t] = s
            y2.append(x_t - z_t)
        return {"out": s * 3, "y1s": np.stack(y1), "y2s": np.stack(y2, axis=-1)}

    def cases(rs):
        out = {}
        for name, T in (("t5", 5), ("t1", 1)):
            ins = {"x0": rs.uniform(-1, 1, (2, h)).astype(np.float32),
                   "xs": rs.uniform(-1, 1, (T, 2, h)).astype(np.float32),
                   "zs": rs.uniform(-1, 1, (2, T, h)).astype(np.float32),
                   "gin": rs.uniform(-1, 1, (h,)).astype(np.float32)}
            out[name] = (ins, reference(**ins))
        return out

    return main, cases


def misc_model(h, rs):
    """Three Loops in a row: A (claimed: no trip count, the condition ends it), B (declined: a Det
    in its body), C (declined: a sequence-typed loop-carried value)."""
    del h  # 2 x 2 throughout (Det needs a square matrix)
    w = (rs.standard_normal((2, 2)) / np.sqrt(2)).astype(np.float32)
    body_a = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "half"], ["hh"], name="a/mul"),
         helper.make_node("Add", ["hh", "quarter"], ["h_out"], name="a/add"),
         helper.make_node("Add", ["iter", "one_i"], ["next"], name="a/next"),
         helper.make_node("Less", ["next", "limit"], ["cond_out"], name="a/less"),
         helper.make_node("Identity", ["h_out"], ["y"], name="a/y")],
        "body_a", [vi("iter", I64, [1]), vi("cond_in", B, [1]), vi("h_in", F, [2, 2])],
        [vi("cond_out", B, [1]), vi("h_out", F, [2, 2]), vi("y", F, [2, 2])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(0.25, np.float32), "quarter"),
         numpy_helper.from_array(np.array(1, np.int64), "one_i")])
    body_b = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b/cond"),
         helper.make_node("MatMul", ["h_in", "W"], ["hw"], name="b/matmul"),
         helper.make_node("Tanh", ["hw"], ["h_out"], name="b/tanh"),
         helper.make_node("Det", ["h_out"], ["d"], name="b/det")],
        "body_b", [vi("iter", I64, []), vi("cond_in", B, []), vi("h_in", F, [2, 2])],
        [vi("cond_out", B, []), vi("h_out", F, [2, 2]), vi("d", F, [])])
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2, 2]))
    body_c = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="c/cond"),
         helper.make_node("Add", ["h_in", "one_f"], ["h_out"], name="c/add"),
         helper.make_node("SequenceInsert", ["seq_in", "h_out"], ["seq_out"], name="c/insert")],
        "body_c", [vi("iter", I64, []), vi("cond_in", B, []), vi("h_in", F, [2, 2]),
                   helper.make_value_info("seq_in", seq_t)],
        [vi("cond_out", B, []), vi("h_out", F, [2, 2]), helper.make_value_info("seq_out", seq_t)],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one_f")])
    main = helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["h0"], name="/pre_tanh"),
         helper.make_node("Loop", ["", "go", "h0"], ["ha", "ysa"], name="/loop_a", body=body_a),
         helper.make_node("Loop", ["M", "", "ha"], ["hb", "dsb"], name="/loop_b", body=body_b),
         helper.make_node("SequenceEmpty", [], ["seq0"], dtype=F, name="/seq0"),
         helper.make_node("Loop", ["M", "", "hb", "seq0"], ["hc", "seqc"], name="/loop_c", body=body_c),
         helper.make_node("ConcatFromSequence", ["seqc"], ["cat"], axis=0, new_axis=1, name="/cat"),
         helper.make_node("Mul", ["hc", "two"], ["out"], name="/post_mul")],
        "loop_misc",
        [vi("x", F, [2, 2]), vi("M", I64, []), vi("limit", I64, []), vi("go", B, [1])],
        [vi("ysa", F, ["na", 2, 2]), vi("dsb", F, ["nb"]), vi("out", F, [2, 2]), vi("cat", F, ["nc", 2, 2])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(2.0, np.float32), "two")])

    def reference(x, M, limit, go):
        hh = np.tanh(x.astype(np.float64))
        ysa, t, cond = [], 0, bool(go)
        while cond:
            hh = hh * 0.5 + 0.25
            ysa.append(hh)
            cond = (t + 1) < limit
            t += 1
        dsb = []
        for _ in range(M):
            hh = np.tanh(hh @ w.astype(np.float64))
            dsb.append(np.linalg.det(hh))
        cat = []
        for _ in range(M):
            hh = hh + 1
            cat.append(hh)
        stack = lambda a, s: np.stack(a) if a else np.zeros((0,) + s)
        return {"ysa": stack(ysa, (2, 2)), "dsb": np.array(dsb).reshape(-1), "out": hh * 2, "cat": stack(cat, (2, 2))}

    def cases(rs):
        out = {}
        for name, M, limit, go in (("l3m4", 4, 3, True), ("l1m2", 2, 1, True)):
            x = rs.uniform(-1, 1, (2, 2)).astype(np.float32)
            ins = {"x": x, "M": np.array(M, np.int64), "limit": np.array(limit, np.int64), "go": np.array([go])}
            out[name] = (ins, reference(x, M, limit, go))
        return out

    return main, cases


def nested_model(h, rs):
    """A Loop inside a Scan body: the inner Loop (3 trips) reads the Scan's slice x_t from its
    outer scope."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["ci"], ["co"], name="inner/cond"),
         helper.make_node("Mul", ["hi", "k"], ["hm"], name="inner/mul"),
         helper.make_node("Add", ["hm", "x_t"], ["ho"], name="inner/add")],
        "inner", [vi("it", I64, []), vi("ci", B, []), vi("hi", F, [2, h])], [vi("co", B, []), vi("ho", F, [2, h])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "k")])
    body = helper.make_graph(
        [helper.make_node("Loop", ["three", "", "s_in"], ["s_out"], body=inner, name="body/inner_loop"),
         helper.make_node("Tanh", ["s_out"], ["y"], name="body/tanh")],
        "scan_body", [vi("s_in", F, [2, h]), vi("x_t", F, [2, h])], [vi("s_out", F, [2, h]), vi("y", F, [2, h])],
        [numpy_helper.from_array(np.array(3, np.int64), "three")])
    main = helper.make_graph(
        [helper.make_node("Tanh", ["x0"], ["s0"], name="/pre_tanh"),
         helper.make_node("Scan", ["s0", "xs"], ["s_last", "ys"], body=body, num_scan_inputs=1, name="/scan"),
         helper.make_node("Mul", ["s_last", "two"], ["out"], name="/post_mul")],
        "nested", [vi("x0", F, [2, h]), vi("xs", F, ["T", 2, h])], [vi("out", F, [2, h]), vi("ys", F, ["T", 2, h])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])

    def reference(x0, xs):
        s, ys = np.tanh(x0.astype(np.float64)), []
        for x in xs.astype(np.float64):
            for _ in range(3):
                s = s * 0.5 + x
            ys.append(np.tanh(s))
        return {"out": s * 2, "ys": np.stack(ys)}

    def cases(rs):
        ins = {"x0": rs.uniform(-1, 1, (2, h)).astype(np.float32), "xs": rs.uniform(-1, 1, (4, 2, h)).astype(np.float32)}
        return {"t4": (ins, reference(**ins))}

    return main, cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("loop", "scan", "misc", "nested"), required=True)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases")
    a = ap.parse_args()
    rs = np.random.default_rng(a.seed)
    graph, cases = {"loop": loop_model, "scan": scan_model, "misc": misc_model, "nested": nested_model}[a.kind](a.hidden, rs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    if a.cases:
        for name, (ins, outs) in cases(rs).items():
            d = os.path.join(a.cases, name)
            os.makedirs(d, exist_ok=True)
            for k, v in ins.items():
                np.save(os.path.join(d, k + ".npy"), v)
            for k, v in outs.items():
                np.save(os.path.join(d, "ref_" + k + ".npy"), v.astype(np.float32))
    print(f"[gen_loop_scan] {a.out}: {a.kind}, hidden {a.hidden}")


if __name__ == "__main__":
    main()
