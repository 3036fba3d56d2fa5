#!/usr/bin/python3
"""Generate a Silero-style voice activity detector (opset 17, IR version 8).

Inputs:  input [1, chunk] float32 (one chunk of audio: `chunk` samples at 16 kHz,
         chunk/2 at 8 kHz), state [2, 1, hidden] float32 (LSTM h and c), sr [] int64.
Outputs: output [1, 1] float32 (speech probability of the chunk), stateN [2, 1, hidden].

Main graph: Equal(sr, 16000) -> If, whose two branches (16 kHz / 8 kHz, own weights)
each hold the whole network, reading `input` and `state` from the outer scope:
  Reshape -> Pad (reflect) -> STFT as a Conv1d (cos/sin filters, hop = n_fft/2) ->
  Slice re/im -> sqrt(re^2 + im^2) (magnitude) -> 4x (Conv1d k3 + Relu), strides 1,2,1,1 ->
  Transpose to (T, 1, C) -> LSTM(hidden) with initial_h/initial_c sliced from state ->
  stateN = Concat(Y_h, Y_c); Y -> Squeeze -> Transpose -> Relu -> Conv1d k1 -> Sigmoid (1, 1, T).
After the If: ReduceMean over the frames -> output [1, 1].

Usage: gen_vad.py [--chunk 512] [--hidden 128] [--seed 0] [--no-branch-shapes] --out PATH
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def branch(name, chunk, n_fft, hidden, widths, strides, rs):
    """One sample-rate branch: a subgraph with no inputs (outer scope: input, state)."""
    nodes, inits = [], []
    p = name + "/"

    def init(n, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), p + n))
        return p + n

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, [p + o for o in outs], name=p + op + "_" + outs[0], **attrs))
        return p + outs[0]

    hop = n_fft // 2
    bins = n_fft // 2 + 1
    x = node("Reshape", ["input", init("shape3", np.array([1, 1, chunk], np.int64))], ["x3"])
    x = node("Pad", [x, init("pads", np.array([0, 0, hop, 0, 0, hop], np.int64))], ["xpad"], mode="reflect")
    # STFT basis: rows 0..bins-1 real (cos), bins..2*bins-1 imaginary (-sin), Hann window
    n = np.arange(n_fft)
    win = 0.5 - 0.5 * np.cos(2 * np.pi * n / n_fft)
    k = np.arange(bins)[:, None]
    basis = np.concatenate([np.cos(2 * np.pi * k * n / n_fft) * win, -np.sin(2 * np.pi * k * n / n_fft) * win])
    w = init("stft.weight", basis.astype(np.float32)[:, None, :])
    s = node("Conv", [x, w], ["stft"], kernel_shape=[n_fft], strides=[hop])
    re = node("Slice", [s, init("re.starts", np.array([0], np.int64)), init("re.ends", np.array([bins], np.int64)),
                        init("axis1", np.array([1], np.int64))], ["re"])
    im = node("Slice", [s, init("im.starts", np.array([bins], np.int64)),
                        init("im.ends", np.array([2 * bins], np.int64)), p + "axis1"], ["im"])
    mag = node("Sqrt", [node("Add", [node("Mul", [re, re], ["re2"]), node("Mul", [im, im], ["im2"])], ["pow"])],
               ["mag"])
    cin, y = bins, mag
    for i, (cout, st) in enumerate(zip(widths, strides)):
        wt = init(f"enc{i}.weight", (rs.standard_normal((cout, cin, 3)) * np.sqrt(2.0 / (cin * 3))).astype(np.float32))
        b = init(f"enc{i}.bias", (0.05 * rs.standard_normal(cout)).astype(np.float32))
        y = node("Conv", [y, wt, b], [f"enc{i}"], kernel_shape=[3], strides=[st], pads=[1, 1])
        y = node("Relu", [y], [f"enc{i}.relu"])
        cin = cout
    seq = node("Transpose", [y], ["seq"], perm=[2, 0, 1])  # (T, 1, C)
    h0 = node("Slice", ["state", init("h.s", np.array([0], np.int64)), init("h.e", np.array([1], np.int64)),
                        init("axis0", np.array([0], np.int64))], ["h0"])
    c0 = node("Slice", ["state", init("c.s", np.array([1], np.int64)), init("c.e", np.array([2], np.int64)),
                        p + "axis0"], ["c0"])
    sc = 1.0 / np.sqrt(hidden)
    W = init("lstm.W", rs.uniform(-sc, sc, (1, 4 * hidden, cin)).astype(np.float32))
    R = init("lstm.R", rs.uniform(-sc, sc, (1, 4 * hidden, hidden)).astype(np.float32))
    B = init("lstm.B", rs.uniform(-sc, sc, (1, 8 * hidden)).astype(np.float32))
    nodes.append(helper.make_node("LSTM", [seq, W, R, B, "", h0, c0], [p + "Y", p + "Y_h", p + "Y_c"],
                                  name=p + "LSTM", hidden_size=hidden))
    st_out = node("Concat", [p + "Y_h", p + "Y_c"], ["stateN"], axis=0)
    yq = node("Squeeze", [p + "Y", init("axes1", np.array([1], np.int64))], ["Yq"])  # (T, 1, H)
    d = node("Transpose", [yq], ["dec.in"], perm=[1, 2, 0])  # (1, H, T)
    d = node("Relu", [d], ["dec.relu"])
    wd = init("dec.weight", (rs.standard_normal((1, hidden, 1)) * np.sqrt(1.0 / hidden)).astype(np.float32))
    bd = init("dec.bias", np.zeros(1, np.float32))
    d = node("Conv", [d, wd, bd], ["dec.conv"], kernel_shape=[1])
    prob = node("Sigmoid", [d], ["prob"])
    outs = [helper.make_value_info(prob, helper.make_tensor_type_proto(TensorProto.FLOAT, [1, 1, None])),
            helper.make_value_info(st_out, helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 1, hidden]))]
    return helper.make_graph(nodes, name, [], outs, inits)


def build(chunk, hidden, seed, branch_shapes=True):
    rs = np.random.RandomState(seed)
    widths, strides = [128, 64, 64, 128], [1, 2, 1, 1]
    g16 = branch("sr16k", chunk, 256, hidden, widths, strides, rs)
    g8 = branch("sr8k", chunk // 2, 128, hidden, widths, strides, rs)
    if not branch_shapes:  # the If's output shapes are then only what shape inference derives
        for g in (g16, g8):
            for o in g.output:
                o.type.tensor_type.ClearField("shape")
    nodes = [
        helper.make_node("Equal", ["sr", "sr16000"], ["is16k"], name="/Equal"),
        helper.make_node("If", ["is16k"], ["prob", "stateN"], name="/If", then_branch=g16, else_branch=g8),
        helper.make_node("ReduceMean", ["prob"], ["prob.mean"], name="/ReduceMean", axes=[2], keepdims=0),
        helper.make_node("Identity", ["prob.mean"], ["output"], name="/Identity"),
    ]
    inits = [numpy_helper.from_array(np.array(16000, np.int64), "sr16000")]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, None]),
              helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, hidden]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
               helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, hidden])]
    g = helper.make_graph(nodes, "vad", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="fusebox-gen_vad")
    m.ir_version = IR_VERSION
    onnx.checker.check_model(m)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-branch-shapes", action="store_true", help="branch outputs declared without shapes")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = build(a.chunk, a.hidden, a.seed, not a.no_branch_shapes)
    onnx.save(m, a.out)
    print(f"[gen_vad] {a.out}: chunk {a.chunk}, hidden {a.hidden}", file=sys.stderr)


if __name__ == "__main__":
    main()
