#!/usr/bin/python3
"""Generate a Qwen2-style decoder the way ONNX Runtime GenAI's model builder emits it, and its
float64 numpy reference (written from the math over the dequantised weights, not from the graph).

Graph (default domain opset 17 + com.microsoft 1), per layer:
  (Skip)SimplifiedLayerNormalization -> MatMulNBits q/k/v (int4, block 32, packed uint8 zero
  points, bias) -> GroupQueryAttention (do_rotary, cos/sin caches, seqlens_k /
  total_sequence_length from attention_mask) -> MatMulNBits o_proj -> SkipSimplifiedLayerNorm
  -> MatMulNBits gate/up, SiLU as Sigmoid * Mul, MatMulNBits down; final SkipSimplifiedLayerNorm
  and an int4 MatMulNBits lm_head.
Inputs:  input_ids (batch, seq) int64, attention_mask (batch, total) int64,
         past_key_values.<i>.key/value (batch, kv_heads, past, head_dim) float32
Outputs: logits (batch, seq, vocab) float32, present.<i>.key/value (batch, kv_heads, total, head_dim)

With --float the linear layers are plain MatMul (+ Add for the biases) on float32 weights (in, out),
as the model builder emits them for -p fp32; the same random draws (unquantised), the same other nodes,
and the reference uses those float32 weights.

MatMulNBits packing (ORT's contrib-op docs): B (N, k_blocks, block/2) uint8, value k of a block
in the low nibble for even k; zero points (N, ceil(k_blocks/2)) uint8 packed the same way;
w = (q - zp) * scale. Quantisation: asymmetric round-to-nearest per block over [min(w,0), max(w,0)].

With --cases DIR it also writes the reference for the tests (float64 forward, teacher forcing):
  DIR/prompt.npy (1, S) int64, DIR/tokens.npy (steps,) int64 (greedy from the reference),
  DIR/prefill_logits.npy (1, S, V), DIR/decode_logits.npy (steps, V): logits of decode step t
  fed tokens[t] after the prompt and tokens[:t].

Usage: gen_genai.py --layers L --hidden H --heads N --kv-heads NK --ffn F --vocab V
                    [--accuracy-level 0|4 | --float] [--seed S] [--max-pos P] --out PATH [--cases DIR --steps 32]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
RMS_EPS = 1e-6
ROPE_THETA = 1000000.0
BLOCK = 32
MAX_POS = 512  # default cos/sin cache length (--max-pos)


def rope_tables(max_pos, head_dim):
    """cos/sin (max_pos, head_dim/2): the half-split (GPT-NeoX / Llama / Qwen) layout."""
    inv = 1.0 / (ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)


def quantize(w_nk, want_deq=True):
    """(N, K) float -> packed B (N, kb, BLOCK/2) u8, scales (N, kb) f32, zero points (N, ceil(kb/2)) u8,
    and the dequantised weights (N, K) float64 the reference uses (None unless want_deq). Large N goes
    in chunks of rows (the same numbers; float64 temporaries stay small for a 151936-row lm_head)."""
    n, k = w_nk.shape
    if n > 8192:
        parts = [quantize(w_nk[i:i + 8192], want_deq) for i in range(0, n, 8192)]
        return tuple(np.concatenate([p[j] for p in parts]) if parts[0][j] is not None else None for j in range(4))
    kb = (k + BLOCK - 1) // BLOCK
    wp = np.zeros((n, kb * BLOCK), np.float64)
    wp[:, :k] = w_nk
    blocks = wp.reshape(n, kb, BLOCK)
    lo = np.minimum(blocks.min(-1), 0.0)
    hi = np.maximum(blocks.max(-1), 0.0)
    scale = ((hi - lo) / 15.0).astype(np.float32)
    scale[scale == 0] = 1.0
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(blocks / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zpp = np.zeros((n, (kb + 1) // 2), np.uint8)
    for b in range(kb):
        zpp[:, b // 2] |= (zp[:, b] << (4 * (b % 2))).astype(np.uint8)
    if not want_deq:
        return packed, scale, zpp, None
    deq = ((q.astype(np.float64) - zp[..., None]) * scale[..., None].astype(np.float64)).reshape(n, kb * BLOCK)[:, :k]
    return packed, scale, zpp, deq


def make_weights(cfg, seed, want_deq=True, float_weights=False):
    """Weights by name, fixed generation order: floats for embeddings, norms and biases; the
    linear weights (out, in) quantised as soon as they are drawn (quantize's tuple), so the
    float64 matrices of a large model never live together. float_weights: the linear weights
    stay float32, as (None, None, None, w (out, in) float32) in quantize's tuple layout."""
    rs = np.random.RandomState(seed)
    if float_weights:
        quantize = lambda w_nk, _deq: (None, None, None, w_nk.astype(np.float32))  # noqa: E731
    else:
        quantize = globals()["quantize"]
    h, f, v, d = cfg["hidden"], cfg["ffn"], cfg["vocab"], cfg["head_dim"]
    nq, nkv = cfg["heads"] * d, cfg["kv_heads"] * d

    def normal(*shape, s=0.02):
        return rs.standard_normal(shape) * s

    w = {"embed": normal(v, h, s=0.5).astype(np.float32)}
    for i in range(cfg["layers"]):
        p = "l%d." % i
        w[p + "ln1"] = (1.0 + normal(h)).astype(np.float32)
        for name, n_out in (("q", nq), ("k", nkv), ("v", nkv)):
            w[p + name] = quantize(normal(n_out, h, s=0.15), want_deq)
            w[p + name + "_bias"] = normal(n_out, s=0.1).astype(np.float32)
        w[p + "o"] = quantize(normal(h, nq, s=0.15), want_deq)
        w[p + "ln2"] = (1.0 + normal(h)).astype(np.float32)
        w[p + "gate"] = quantize(normal(f, h, s=0.15), want_deq)
        w[p + "up"] = quantize(normal(f, h, s=0.15), want_deq)
        w[p + "down"] = quantize(normal(h, f, s=0.1), want_deq)
    w["norm"] = (1.0 + normal(h)).astype(np.float32)
    w["lm_head"] = quantize(normal(v, h, s=0.3), want_deq)
    return w


# ------------------------------------------------------------------------------- the graph ----
class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, n_out=1, domain="", outputs=None, **attrs):
        self.n += 1
        name = "/%s_%d" % (op_type, self.n)
        outs = outputs or ["%s/out%d" % (name, k) for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, domain=domain or None, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def mnb(self, x, q, prefix, k, n, level, bias=None):
        packed, scale, zp, _ = q
        ins = [x, self.init(prefix + ".qweight", packed), self.init(prefix + ".scales", scale),
               self.init(prefix + ".qzeros", zp)]
        if bias is not None:
            ins += ["", self.init(prefix + ".bias", bias)]
        return self.op("MatMulNBits", ins, domain="com.microsoft", K=k, N=n, bits=4, block_size=BLOCK,
                       accuracy_level=level)

    def matmul(self, x, q, prefix, k, n, level, bias=None, outputs=None):
        """--float's linear layer: MatMul(x, W (k, n) float32) (+ Add bias), mnb's signature."""
        del level
        wt = np.ascontiguousarray(q[3].T)  # (out, in) -> (in, out) = (k, n)
        assert wt.shape == (k, n)
        y = self.op("MatMul", [x, self.init(prefix + ".weight", wt)], outputs=None if bias is not None else outputs)
        if bias is None:
            return y
        return self.op("Add", [y, self.init(prefix + ".bias", bias)], outputs=outputs)


def build(cfg, w, qw, level, float_weights=False):
    max_pos = cfg["max_pos"]
    L, h, f, v, d = cfg["layers"], cfg["hidden"], cfg["ffn"], cfg["vocab"], cfg["head_dim"]
    nh, nkv = cfg["heads"], cfg["kv_heads"]
    b = Builder()
    if float_weights:
        b.mnb = b.matmul
    cos, sin = rope_tables(max_pos, d)
    b.init("cos_cache", cos.astype(np.float32))
    b.init("sin_cache", sin.astype(np.float32))
    x = b.op("Gather", [b.init("model.embed_tokens.weight", w["embed"]), "input_ids"])
    # seqlens_k = sum(attention_mask, 1) - 1 and total_sequence_length = attention_mask.shape[1], int32
    rsum = b.op("ReduceSum", ["attention_mask", b.init("axes_1", np.array([1], np.int64))], keepdims=0)
    seqlens = b.op("Cast", [b.op("Sub", [rsum, b.init("one_i64", np.array(1, np.int64))])], to=TensorProto.INT32)
    total = b.op("Cast", [b.op("Gather", [b.op("Shape", ["attention_mask"]), b.init("idx_1", np.array(1, np.int64))],
                               axis=0)], to=TensorProto.INT32)
    residual, pending = x, None  # pending: the sublayer output the next Skip norm adds to residual
    for i in range(L):
        p = "l%d." % i
        if pending is None:
            hn = b.op("SimplifiedLayerNormalization", [x, b.init(p + "ln1.weight", w[p + "ln1"])], axis=-1,
                      epsilon=RMS_EPS, stash_type=1)
        else:
            hn, _, _, residual = b.op("SkipSimplifiedLayerNormalization",
                                      [pending, residual, b.init(p + "ln1.weight", w[p + "ln1"])], n_out=4,
                                      domain="com.microsoft", epsilon=RMS_EPS,
                                      outputs=[p + "ln1.out", "", "", p + "ln1.sum"])
        q = b.mnb(hn, qw[p + "q"], p + "q_proj", h, nh * d, level, w[p + "q_bias"])
        k = b.mnb(hn, qw[p + "k"], p + "k_proj", h, nkv * d, level, w[p + "k_bias"])
        vv = b.mnb(hn, qw[p + "v"], p + "v_proj", h, nkv * d, level, w[p + "v_bias"])
        att = b.op("GroupQueryAttention",
                   [q, k, vv, "past_key_values.%d.key" % i, "past_key_values.%d.value" % i, seqlens, total,
                    "cos_cache", "sin_cache"],
                   domain="com.microsoft", num_heads=nh, kv_num_heads=nkv, do_rotary=1, rotary_interleaved=0,
                   local_window_size=-1, scale=float(1.0 / np.sqrt(d)),
                   outputs=[p + "attn.out", "present.%d.key" % i, "present.%d.value" % i])[0]
        o = b.mnb(att, qw[p + "o"], p + "o_proj", nh * d, h, level)
        h2, _, _, residual = b.op("SkipSimplifiedLayerNormalization",
                                  [o, residual, b.init(p + "ln2.weight", w[p + "ln2"])], n_out=4,
                                  domain="com.microsoft", epsilon=RMS_EPS,
                                  outputs=[p + "ln2.out", "", "", p + "ln2.sum"])
        gate = b.mnb(h2, qw[p + "gate"], p + "gate_proj", h, f, level)
        up = b.mnb(h2, qw[p + "up"], p + "up_proj", h, f, level)
        act = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]), up])
        pending = b.mnb(act, qw[p + "down"], p + "down_proj", f, h, level)
    hn, _, _, _ = b.op("SkipSimplifiedLayerNormalization", [pending, residual, b.init("norm.weight", w["norm"])],
                       n_out=4, domain="com.microsoft", epsilon=RMS_EPS, outputs=["final_norm.out", "", "", ""])
    b.nodes[-1].output[:] = ["final_norm.out"]  # only the normalised output is used
    if float_weights:
        b.matmul(hn, qw["lm_head"], "lm_head", h, v, level, outputs=["logits"])
    else:
        b.op("MatMulNBits", [hn, b.init("lm_head.qweight", qw["lm_head"][0]), b.init("lm_head.scales", qw["lm_head"][1]),
                             b.init("lm_head.qzeros", qw["lm_head"][2])], domain="com.microsoft", outputs=["logits"],
             K=h, N=v, bits=4, block_size=BLOCK, accuracy_level=level)

    F = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", F, ["batch_size", "sequence_length", v])]
    for i in range(L):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info("past_key_values.%d.%s" % (i, kv), F,
                                                        ["batch_size", nkv, "past_sequence_length", d]))
            outputs.append(helper.make_tensor_value_info("present.%d.%s" % (i, kv), F,
                                                         ["batch_size", nkv, "total_sequence_length", d]))
    graph = helper.make_graph(b.nodes, "genai_decoder", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="fusebox-gen-genai")
    model.ir_version = IR_VERSION
    return model


# --------------------------------------------------------------- float64 reference forward ----
def ref_forward(cfg, w, qw, ids, past):
    """ids (S,) int, past: list of (k, v) (kv_heads, P, d) float64. Returns logits (S, V), new past."""
    nh, nkv, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    S, P = len(ids), past[0][0].shape[1]
    cos, sin = rope_tables(cfg["max_pos"], d)
    pos = np.arange(P, P + S)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + RMS_EPS) * g.astype(np.float64)

    def lin(x, name, bias=None):
        y = x @ qw[name][3].T
        return y + bias.astype(np.float64) if bias is not None else y

    def rope(t):  # (S, heads, d)
        half = d // 2
        c, s = cos[pos][:, None, :], sin[pos][:, None, :]
        a, b2 = t[..., :half], t[..., half:]
        return np.concatenate([a * c - b2 * s, b2 * c + a * s], -1)

    residual = w["embed"][ids].astype(np.float64)
    new_past = []
    for i in range(cfg["layers"]):
        p = "l%d." % i
        hn = rms(residual, w[p + "ln1"])
        q = rope(lin(hn, p + "q", w[p + "q_bias"]).reshape(S, nh, d))
        k = rope(lin(hn, p + "k", w[p + "k_bias"]).reshape(S, nkv, d))
        v = lin(hn, p + "v", w[p + "v_bias"]).reshape(S, nkv, d)
        K = np.concatenate([past[i][0], k.transpose(1, 0, 2)], 1)  # (nkv, P+S, d)
        V = np.concatenate([past[i][1], v.transpose(1, 0, 2)], 1)
        new_past.append((K, V))
        att = np.zeros((S, nh, d))
        for hh in range(nh):
            g = hh // (nh // nkv)
            sc = q[:, hh, :] @ K[g].T / np.sqrt(d)  # (S, P+S)
            sc = np.where(np.arange(P + S)[None, :] <= pos[:, None], sc, -np.inf)
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            att[:, hh, :] = (sc / sc.sum(-1, keepdims=True)) @ V[g]
        residual = residual + lin(att.reshape(S, nh * d), p + "o")
        h2 = rms(residual, w[p + "ln2"])
        gate, up = lin(h2, p + "gate"), lin(h2, p + "up")
        residual = residual + lin(gate / (1.0 + np.exp(-gate)) * up, p + "down")
    return lin(rms(residual, w["norm"]), "lm_head"), new_past


def write_cases(cfg, w, qw, out_dir, steps, seed):
    os.makedirs(out_dir, exist_ok=True)
    rs = np.random.RandomState(seed + 1)
    prompt = rs.randint(0, cfg["vocab"], size=7).astype(np.int64)
    empty = [(np.zeros((cfg["kv_heads"], 0, cfg["head_dim"])),) * 2 for _ in range(cfg["layers"])]
    logits, past = ref_forward(cfg, w, qw, prompt, empty)
    tokens, dec = [], []
    nxt = int(np.argmax(logits[-1]))
    for _ in range(steps):
        tokens.append(nxt)
        lg, past = ref_forward(cfg, w, qw, np.array([nxt]), past)
        dec.append(lg[0])
        nxt = int(np.argmax(lg[0]))
    np.save(os.path.join(out_dir, "prompt.npy"), prompt[None, :])
    np.save(os.path.join(out_dir, "tokens.npy"), np.array(tokens, np.int64))
    np.save(os.path.join(out_dir, "prefill_logits.npy"), logits[None, :, :].astype(np.float32))
    np.save(os.path.join(out_dir, "decode_logits.npy"), np.array(dec, np.float32))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--ffn", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--accuracy-level", type=int, default=0, choices=(0, 4))
    ap.add_argument("--float", action="store_true",
                    help="plain MatMul on float32 weights instead of MatMulNBits (the model builder's -p fp32)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-pos", type=int, default=MAX_POS, help="positions in the cos/sin caches")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases")
    ap.add_argument("--steps", type=int, default=32)
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 16:
        sys.exit("gen_genai: hidden/heads must be a multiple of 16 and heads a multiple of kv_heads")
    cfg = {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
           "vocab": a.vocab, "head_dim": a.hidden // a.heads, "max_pos": a.max_pos}
    w = make_weights(cfg, a.seed, want_deq=bool(a.cases), float_weights=a.float)
    model = build(cfg, w, w, a.accuracy_level, float_weights=a.float)

    onnx.save(model, a.out)
    if a.cases:
        write_cases(cfg, w, w, a.cases, a.steps, a.seed)


if __name__ == "__main__":
    main()
