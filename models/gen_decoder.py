#!/usr/bin/python3
"""Generate a Llama-style decoder written in plain ONNX ops (opset 17, IR version 8).

Inputs:  input_ids [batch_size, sequence_length] int64
         position_ids [batch_size, sequence_length] int64
         attention_mask [batch_size, total_sequence_length] int64 (1 = attend, 0 = padding)
         past_key_values.<i>.key/.value [batch_size, N, past_sequence_length, H/N] float32
Outputs: logits [batch_size, sequence_length, V] float32
         present.<i>.key/.value [batch_size, N, total_sequence_length, H/N] float32

Everything is decomposed into elementwise / shape / MatMul ops on purpose (RMSNorm, rotary,
causal + padding mask, SiLU): it is the graph an execution provider has to fuse.
Weights: numpy RandomState(seed), normal * 0.02 (norm weights 1 + normal * 0.02).

Usage: gen_decoder.py --layers L --hidden H --heads N --ffn F --vocab V --out PATH
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
MASK_NEG = -1.0e9  # additive bias of a masked key; finite so a fully masked row stays NaN-free


def rope_tables(max_pos, head_dim):
    """cos/sin tables [max_pos, head_dim/2] (fp32), the half-rotation (GPT-NeoX / Llama) layout."""
    inv_freq = 1.0 / (ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def decoder_weights(layers, hidden, ffn, vocab, seed):
    """All weights by name, in a fixed generation order (the numpy reference reuses this)."""
    rs = np.random.RandomState(seed)

    def normal(*shape):
        return (rs.standard_normal(shape) * 0.02).astype(np.float32)

    def norm_w():
        return (1.0 + rs.standard_normal((hidden,)) * 0.02).astype(np.float32)

    w = {"model.embed_tokens.weight": normal(vocab, hidden)}
    for i in range(layers):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = norm_w()
        w[p + "self_attn.q_proj.weight"] = normal(hidden, hidden)  # (in, out): y = x @ W
        w[p + "self_attn.k_proj.weight"] = normal(hidden, hidden)
        w[p + "self_attn.v_proj.weight"] = normal(hidden, hidden)
        w[p + "self_attn.o_proj.weight"] = normal(hidden, hidden)
        w[p + "post_attention_layernorm.weight"] = norm_w()
        w[p + "mlp.gate_proj.weight"] = normal(hidden, ffn)
        w[p + "mlp.up_proj.weight"] = normal(hidden, ffn)
        w[p + "mlp.down_proj.weight"] = normal(ffn, hidden)
    w["model.norm.weight"] = norm_w()
    w["lm_head.weight"] = normal(hidden, vocab)
    return w


class Builder:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.const_cache = {}

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def const(self, arr, dtype):
        """A shared small constant initializer (deduplicated by value)."""
        a = np.asarray(arr, dtype=dtype)
        key = (a.dtype.str, a.shape, a.tobytes())
        if key not in self.const_cache:
            self.const_cache[key] = self.init("const_%d" % len(self.const_cache), a)
        return self.const_cache[key]

    def op(self, op_type, inputs, name, n_out=1, **attrs):
        outs = [name + ("/output_%d" % k) for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs


def rms_norm(b, x, weight, prefix):
    sq = b.op("Pow", [x, b.const(2.0, np.float32)], prefix + "/Pow")
    mean = b.op("ReduceMean", [sq], prefix + "/ReduceMean", axes=[-1], keepdims=1)
    var = b.op("Add", [mean, b.const(RMS_EPS, np.float32)], prefix + "/Add")
    std = b.op("Sqrt", [var], prefix + "/Sqrt")
    inv = b.op("Reciprocal", [std], prefix + "/Reciprocal")
    xn = b.op("Mul", [x, inv], prefix + "/Mul")
    return b.op("Mul", [xn, weight], prefix + "/Mul_1")


def rotary(b, x, cos, sin, half, prefix):
    """x [B, N, S, D]; cos/sin [B, 1, S, D] -> x*cos + rotate_half(x)*sin."""
    axis3 = b.const([3], np.int64)
    x1 = b.op("Slice", [x, b.const([0], np.int64), b.const([half], np.int64), axis3], prefix + "/Slice")
    x2 = b.op("Slice", [x, b.const([half], np.int64), b.const([2 * half], np.int64), axis3],
              prefix + "/Slice_1")
    nx2 = b.op("Neg", [x2], prefix + "/Neg")
    rot = b.op("Concat", [nx2, x1], prefix + "/Concat", axis=-1)
    xc = b.op("Mul", [x, cos], prefix + "/Mul")
    rs = b.op("Mul", [rot, sin], prefix + "/Mul_1")
    return b.op("Add", [xc, rs], prefix + "/Add")


def build(layers, hidden, heads, ffn, vocab, max_pos, seed):
    assert hidden % heads == 0 and (hidden // heads) % 2 == 0
    d = hidden // heads
    half = d // 2
    b = Builder()
    w = decoder_weights(layers, hidden, ffn, vocab, seed)
    for name, arr in w.items():
        b.init(name, arr)
    cos_t, sin_t = rope_tables(max_pos, d)
    b.init("model.rotary_emb.cos_cached", cos_t)  # (max_pos, D/2)
    b.init("model.rotary_emb.sin_cached", sin_t)  # (max_pos, D/2)

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", vocab])]
    for i in range(layers):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                "past_key_values.%d.%s" % (i, kv), f32,
                ["batch_size", heads, "past_sequence_length", d]))
            outputs.append(helper.make_tensor_value_info(
                "present.%d.%s" % (i, kv), f32,
                ["batch_size", heads, "total_sequence_length", d]))

    # ---- embeddings ----
    x = b.op("Gather", ["model.embed_tokens.weight", "input_ids"], "/model/embed_tokens/Gather",
             axis=0)  # (B, S, H)

    # ---- rotary tables gathered with position_ids: (B, 1, S, D) ----
    rp = "/model/rotary_emb"
    cos_h = b.op("Gather", ["model.rotary_emb.cos_cached", "position_ids"], rp + "/Gather", axis=0)
    sin_h = b.op("Gather", ["model.rotary_emb.sin_cached", "position_ids"], rp + "/Gather_1", axis=0)
    cos_f = b.op("Concat", [cos_h, cos_h], rp + "/Concat", axis=-1)  # (B, S, D)
    sin_f = b.op("Concat", [sin_h, sin_h], rp + "/Concat_1", axis=-1)
    ax1 = b.const([1], np.int64)
    cos = b.op("Unsqueeze", [cos_f, ax1], rp + "/Unsqueeze")
    sin = b.op("Unsqueeze", [sin_f, ax1], rp + "/Unsqueeze_1")

    # ---- causal + padding additive bias: (B, 1, S, T) ----
    mp = "/model/attn_mask"
    ids_shape = b.op("Shape", ["input_ids"], mp + "/Shape")
    s_len = b.op("Gather", [ids_shape, b.const(1, np.int64)], mp + "/Gather", axis=0)  # scalar S
    am_shape = b.op("Shape", ["attention_mask"], mp + "/Shape_1")
    t_len = b.op("Gather", [am_shape, b.const(1, np.int64)], mp + "/Gather_1", axis=0)  # scalar T
    p_len = b.op("Sub", [t_len, s_len], mp + "/Sub")  # scalar P = T - S
    one = b.const(1, np.int64)
    q_pos = b.op("Range", [p_len, t_len, one], mp + "/Range")  # (S,) absolute query positions
    k_pos = b.op("Range", [b.const(0, np.int64), t_len, one], mp + "/Range_1")  # (T,)
    q_col = b.op("Unsqueeze", [q_pos, b.const([1], np.int64)], mp + "/Unsqueeze")  # (S, 1)
    k_row = b.op("Unsqueeze", [k_pos, b.const([0], np.int64)], mp + "/Unsqueeze_1")  # (1, T)
    future = b.op("Greater", [k_row, q_col], mp + "/Greater")  # (S, T) bool
    pad = b.op("Equal", ["attention_mask", b.const(0, np.int64)], mp + "/Equal")  # (B, T) bool
    pad4 = b.op("Unsqueeze", [pad, b.const([1, 2], np.int64)], mp + "/Unsqueeze_2")  # (B,1,1,T)
    masked = b.op("Or", [future, pad4], mp + "/Or")  # (B, 1, S, T)
    bias_b = b.op("Where", [masked, b.const(MASK_NEG, np.float32), b.const(0.0, np.float32)],
                  mp + "/Where")
    b_len = b.op("Gather", [ids_shape, b.const([0], np.int64)], mp + "/Gather_2", axis=0)  # (1,)
    bias_shape = b.op("Concat", [b_len, b.const([1], np.int64),
                                 b.op("Unsqueeze", [s_len, b.const([0], np.int64)], mp + "/Unsqueeze_3"),
                                 b.op("Unsqueeze", [t_len, b.const([0], np.int64)], mp + "/Unsqueeze_4")],
                      mp + "/Concat", axis=0)
    bias = b.op("Expand", [bias_b, bias_shape], mp + "/Expand")  # (B, 1, S, T) float

    scale = b.const(1.0 / np.sqrt(d), np.float32)
    heads_shape = b.const([0, 0, heads, d], np.int64)
    merge_shape = b.const([0, 0, hidden], np.int64)

    for i in range(layers):
        p = "model.layers.%d." % i
        lp = "/model/layers.%d" % i
        h = rms_norm(b, x, p + "input_layernorm.weight", lp + "/input_layernorm")

        def proj(name, inp):
            return b.op("MatMul", [inp, p + "self_attn.%s.weight" % name], lp + "/attn/%s/MatMul" % name)

        def to_heads(t, tag):
            r = b.op("Reshape", [t, heads_shape], lp + "/attn/Reshape_" + tag)  # (B, S, N, D)
            return b.op("Transpose", [r], lp + "/attn/Transpose_" + tag, perm=[0, 2, 1, 3])  # (B,N,S,D)

        q = to_heads(proj("q_proj", h), "q")
        k = to_heads(proj("k_proj", h), "k")
        v = to_heads(proj("v_proj", h), "v")
        q = rotary(b, q, cos, sin, half, lp + "/attn/rotary_q")
        k = rotary(b, k, cos, sin, half, lp + "/attn/rotary_k")
        pk, pv = "present.%d.key" % i, "present.%d.value" % i  # (B, N, T, D)
        b.nodes.append(helper.make_node("Concat", ["past_key_values.%d.key" % i, k], [pk],
                                        name=lp + "/attn/Concat_k", axis=2))
        b.nodes.append(helper.make_node("Concat", ["past_key_values.%d.value" % i, v], [pv],
                                        name=lp + "/attn/Concat_v", axis=2))
        kt = b.op("Transpose", [pk], lp + "/attn/Transpose_kt", perm=[0, 1, 3, 2])  # (B, N, D, T)
        sc = b.op("MatMul", [q, kt], lp + "/attn/MatMul_qk")  # (B, N, S, T)
        sc = b.op("Mul", [sc, scale], lp + "/attn/Mul_scale")
        sc = b.op("Add", [sc, bias], lp + "/attn/Add_mask")
        pr = b.op("Softmax", [sc], lp + "/attn/Softmax", axis=-1)
        ctx = b.op("MatMul", [pr, pv], lp + "/attn/MatMul_pv")  # (B, N, S, D)
        ctx = b.op("Transpose", [ctx], lp + "/attn/Transpose_ctx", perm=[0, 2, 1, 3])  # (B,S,N,D)
        ctx = b.op("Reshape", [ctx, merge_shape], lp + "/attn/Reshape_ctx")  # (B, S, H)
        o = proj("o_proj", ctx)
        x = b.op("Add", [x, o], lp + "/Add_attn_residual")

        h2 = rms_norm(b, x, p + "post_attention_layernorm.weight", lp + "/post_attention_layernorm")
        g = b.op("MatMul", [h2, p + "mlp.gate_proj.weight"], lp + "/mlp/gate_proj/MatMul")  # (B,S,F)
        u = b.op("MatMul", [h2, p + "mlp.up_proj.weight"], lp + "/mlp/up_proj/MatMul")
        sg = b.op("Sigmoid", [g], lp + "/mlp/act/Sigmoid")
        silu = b.op("Mul", [g, sg], lp + "/mlp/act/Mul")
        gu = b.op("Mul", [silu, u], lp + "/mlp/Mul")
        dn = b.op("MatMul", [gu, p + "mlp.down_proj.weight"], lp + "/mlp/down_proj/MatMul")
        x = b.op("Add", [x, dn], lp + "/Add_mlp_residual")

    xn = rms_norm(b, x, "model.norm.weight", "/model/norm")
    b.nodes.append(helper.make_node("MatMul", [xn, "lm_head.weight"], ["logits"],
                                    name="/lm_head/MatMul"))

    graph = helper.make_graph(b.nodes, "fusebox_decoder", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="fusebox-models")
    model.ir_version = IR_VERSION
    n_params = sum(int(np.prod(a.shape)) for a in w.values())
    return model, n_params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--ffn", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--max-pos", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    model, n_params = build(a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.max_pos, a.seed)
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(inferred)
    onnx.save(model, a.out)
    print("[models] %s: %d layers, hidden %d, heads %d, ffn %d, vocab %d -> %d params (%.1fM), "
          "%d nodes" % (a.out, a.layers, a.hidden, a.heads, a.ffn, a.vocab, n_params,
                        n_params / 1e6, len(model.graph.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
