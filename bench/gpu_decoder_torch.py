"""Batch-1 decode on one GPU, side by side in one process: Fusebox (device=cuda, through stock
onnxruntime's Python client), PyTorch eager and torch.compile(mode="reduce-overhead") with a
static KV cache, on the same weights (read from the ONNX model's initializers), fp32 with TF32
off and bf16 for PyTorch. Reports decode tokens/s at a given past length and the fraction of the
HBM read limit (bytes read per token / measured read bandwidth).

usage: python3 bench/gpu_decoder_torch.py --model decoder.onnx --ep-lib build/libfusebox_ep.so
           [--past 128] [--steps 64] [--torch-modes eager,compile] [--dtypes fp32,bf16] [--ort-cpu]
The model is models/gen_decoder.py's (plain ONNX ops; weights (in, out), y = x @ W). Driver:
bench/gpu_decoder_torch.sh. Prints one line per configuration and a summary table.
"""
import argparse
import math
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

from gpu_bench_common import gpu_profile, read_bandwidth  # bench/, next to this file

RMS_EPS = 1e-5


def load_weights(path):
    m = onnx.load(path)
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    layers = 0
    while "model.layers.%d.self_attn.q_proj.weight" % layers in w:
        layers += 1
    inputs = {i.name: i for i in m.graph.input}
    heads = inputs["past_key_values.0.key"].type.tensor_type.shape.dim[1].dim_value
    return w, layers, heads


def weight_bytes(w, layers, elem):
    """Bytes of the weights one decode step reads (matrices, norms, one embedding row)."""
    n = 0
    for k, a in w.items():
        if k.startswith("model.layers.") or k in ("lm_head.weight", "model.norm.weight"):
            n += a.size
    hidden = w["model.embed_tokens.weight"].shape[1]
    return (n + hidden) * elem


# ---------------------------------------------------------------- PyTorch model
def torch_decoder(torch, w, layers, heads, dtype, max_len, dev):
    """A module-free decoder step with a static KV cache (gpt-fast style): the cache is
    (layers, 2, 1, N, max_len, D); step(tok, pos) writes position pos and attends over
    positions <= pos through an additive mask, so shapes never change between steps."""
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev, dtype)
    emb = t(w["model.embed_tokens.weight"])
    hidden = emb.shape[1]
    d = hidden // heads
    L = []
    for i in range(layers):
        p = "model.layers.%d." % i
        L.append(dict(
            n1=t(w[p + "input_layernorm.weight"]), n2=t(w[p + "post_attention_layernorm.weight"]),
            qkv=torch.cat([t(w[p + "self_attn.%s_proj.weight" % n]) for n in "qkv"], dim=1),
            o=t(w[p + "self_attn.o_proj.weight"]),
            gu=torch.cat([t(w[p + "mlp.gate_proj.weight"]), t(w[p + "mlp.up_proj.weight"])], dim=1),
            dn=t(w[p + "mlp.down_proj.weight"])))
    norm = t(w["model.norm.weight"])
    head = t(w["lm_head.weight"])
    cos_c = t(w["model.rotary_emb.cos_cached"])
    sin_c = t(w["model.rotary_emb.sin_cached"])
    cache = torch.zeros(layers, 2, 1, heads, max_len, d, device=dev, dtype=dtype)
    # static addresses: reduce-overhead's CUDA graphs keep the weights and the mutated cache
    # in place instead of skipping graphs for a mutated input
    for tt in [emb, norm, head, cos_c, sin_c, cache] + [v for l in L for v in l.values()]:
        torch._dynamo.mark_static_address(tt)
    ffn = L[0]["dn"].shape[0]
    ar = torch.arange(max_len, device=dev)

    def rms(x, wt):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(dtype) * wt

    def rot(x, cos, sin):
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def step(tok, pos):
        """tok (1, 1) int64, pos (1,) int64 on the device -> logits (1, 1, V)."""
        x = emb[tok]  # (1, 1, H)
        cos = torch.cat([cos_c[pos], cos_c[pos]], dim=-1).view(1, 1, 1, d)
        sin = torch.cat([sin_c[pos], sin_c[pos]], dim=-1).view(1, 1, 1, d)
        mask = torch.where(ar <= pos, 0.0, -1.0e9).to(dtype).view(1, 1, 1, max_len)
        for i, l in enumerate(L):
            h = rms(x, l["n1"])
            q, k, v = (h @ l["qkv"]).view(1, 1, 3, heads, d).permute(2, 0, 3, 1, 4)  # (1, N, 1, D) each
            q, k = rot(q, cos, sin), rot(k, cos, sin)
            cache[i, 0].index_copy_(2, pos, k)
            cache[i, 1].index_copy_(2, pos, v)
            s = (q @ cache[i, 0].transpose(-1, -2)) * (1.0 / math.sqrt(d)) + mask
            a = torch.softmax(s.float(), dim=-1).to(dtype) @ cache[i, 1]  # (1, N, 1, D)
            x = x + a.transpose(1, 2).reshape(1, 1, hidden) @ l["o"]
            h = rms(x, l["n2"])
            g, u = (h @ l["gu"]).split(ffn, dim=-1)
            x = x + (torch.nn.functional.silu(g) * u) @ l["dn"]
        return rms(x, norm) @ head

    def step_tok(tok, pos):
        """The greedy next token (1, 1), on the device."""
        return step(tok, pos)[:, -1].argmax(-1).view(1, 1)

    return step_tok, cache


def run_torch(torch, w, layers, heads, dtype_name, mode, past, steps, dev, prompt):
    dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    max_len = past + steps + 8
    step, cache = torch_decoder(torch, w, layers, heads, dtype, max_len, dev)
    fn = step
    if mode == "compile":
        fn = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    toks = torch.tensor(prompt, device=dev).view(1, -1)

    @torch.no_grad()
    def decode(n, start_pos, tok):
        out = []
        for j in range(n):
            pos = torch.tensor([start_pos + j], device=dev)
            tok = fn(tok, pos).clone()  # clone: a CUDA-graph output is overwritten by the next replay
            out.append(tok)
        return out, tok

    with torch.no_grad():
        # fill the cache with the prompt, one token at a time (the prefill's speed is not measured)
        for j in range(past):
            step(toks[:, j:j + 1], torch.tensor([j], device=dev))
        snap = cache.clone()
        t0 = time.time()
        decode(3, past, toks[:, -1:])  # warm-up: compiles, captures CUDA graphs
        torch.cuda.synchronize()
        warm_s = time.time() - t0
        cache.copy_(snap)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out, logits = decode(steps, past, toks[:, -1:])
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    return steps / dt, warm_s, [int(t.item()) for t in out]


# ---------------------------------------------------------------- ONNX Runtime (Fusebox / CPU EP)
def ort_session(ort, model, fusebox_dev):
    so = ort.SessionOptions()
    if fusebox_dev is not None:
        so.add_provider_for_devices(fusebox_dev, {"device": "cuda"})
        return ort.InferenceSession(model, sess_options=so)
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def run_ort(ort, sess, layers, past, steps, prompt, profile=None):
    """Prefill the prompt (past tokens) in one run, then a greedy decode of `steps` tokens;
    tokens/s of the decode (host buffers: ORT copies in and out each run)."""
    ids = np.array([prompt[:past]], dtype=np.int64)
    heads_dim = [i for i in sess.get_inputs() if i.name == "past_key_values.0.key"][0].shape
    N, D = heads_dim[1], heads_dim[3]
    feeds = {"input_ids": ids, "position_ids": np.arange(past, dtype=np.int64)[None],
             "attention_mask": np.ones((1, past), np.int64)}
    for i in range(layers):
        for kv in ("key", "value"):
            feeds["past_key_values.%d.%s" % (i, kv)] = np.zeros((1, N, 0, D), np.float32)
    names = [o.name for o in sess.get_outputs()]
    out = sess.run(None, feeds)
    kvs = out[1:]

    def decode(n, tok, kvs, T):
        toks = []
        logits = None
        for j in range(n):
            f = {"input_ids": np.array([[tok]], np.int64), "position_ids": np.array([[T]], np.int64),
                 "attention_mask": np.ones((1, T + 1), np.int64)}
            for i in range(layers):
                f["past_key_values.%d.key" % i] = kvs[2 * i]
                f["past_key_values.%d.value" % i] = kvs[2 * i + 1]
            o = sess.run(None, f)
            logits, kvs = o[0], o[1:]
            tok = int(logits[0, -1].argmax())
            toks.append(tok)
            T += 1
        return toks, logits

    decode(2, prompt[past - 1], kvs, past)  # warm-up (plans, graphs)
    t0 = time.perf_counter()
    toks, logits = decode(steps, prompt[past - 1], kvs, past)
    dt = time.perf_counter() - t0
    assert names[0] == "logits"
    if profile:
        profile(lambda: decode(8, prompt[past - 1], kvs, past))
    return steps / dt, toks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ep-lib", required=True)
    ap.add_argument("--past", type=int, default=128)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--torch-modes", default="eager,compile")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--ort-cpu", action="store_true", help="also ORT's CPU EP (slow on big models)")
    ap.add_argument("--no-fusebox", action="store_true")
    ap.add_argument("--fusebox-ab", action="store_true", help="also Fusebox without graph segments")
    ap.add_argument("--profile", action="store_true", help="GPU time by kernel of 8 Fusebox decode steps")
    a = ap.parse_args()

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    w, layers, heads = load_weights(a.model)
    hidden = w["model.embed_tokens.weight"].shape[1]
    vocab = w["lm_head.weight"].shape[1]
    d = hidden // heads
    rng = np.random.default_rng(0)
    prompt = [int(v) for v in rng.integers(0, vocab, size=a.past)]
    bw = read_bandwidth(torch, dev)
    print("[bench] %s: %d layers, hidden %d, heads %d, vocab %d; past %d, %d decode steps; "
          "GPU %s; HBM read bandwidth (sum over 4 GiB) %.2f TB/s"
          % (a.model, layers, hidden, heads, vocab, a.past, a.steps, torch.cuda.get_device_name(0), bw / 1e12),
          flush=True)
    T_avg = a.past + a.steps / 2.0

    def bytes_per_token(elem):
        return weight_bytes(w, layers, elem) + 2 * layers * heads * T_avg * d * elem

    rows = []

    def report(name, tps, elem, extra=""):
        b = bytes_per_token(elem)
        frac = tps * b / bw
        rows.append((name, tps, b, frac))
        print("[bench] %-34s %8.1f tok/s  %7.1f MB/token  %5.1f%% of the HBM read limit %s"
              % (name, tps, b / 1e6, 100 * frac, extra), flush=True)

    toks_ref = None
    if not a.no_fusebox:
        import onnxruntime as ort
        ort.register_execution_provider_library("Fusebox", a.ep_lib)
        fdev = [x for x in ort.get_ep_devices() if x.ep_name == "FuseboxExecutionProvider"]
        import os
        variants = [("1", "fusebox device=cuda fp32")]
        if a.fusebox_ab:  # the same build without graph segments (FUSEBOX_GRAPH_SEGMENTS=0: src/exec/exec_run.c)
            variants.append(("0", "fusebox fp32, no graph segments"))
        for seg, name in variants:
            os.environ["FUSEBOX_GRAPH_SEGMENTS"] = seg  # read when a plan is built (first run)
            t0 = time.time()
            sess = ort_session(ort, a.model, fdev)
            print("[bench] Fusebox session %.1f s, providers %s" % (time.time() - t0, sess.get_providers()),
                  flush=True)
            prof = (lambda fn: gpu_profile(torch, fn)) if a.profile and seg == "1" else None
            tps, toks = run_ort(ort, sess, layers, a.past, a.steps, prompt, prof)
            toks_ref = toks_ref or toks
            report(name, tps, 4, "(host buffers: ORT copies the KV cache each run; tokens %s)"
                   % ("same" if toks == toks_ref else "DIFFER"))
            del sess
        if a.ort_cpu:
            sess = ort_session(ort, a.model, None)
            tps, toks_cpu = run_ort(ort, sess, layers, a.past, a.steps, prompt)
            report("onnxruntime CPU EP fp32", tps, 4, "tokens %s Fusebox's" % ("==" if toks_cpu == toks_ref else "!="))
            del sess
    for dt in [x for x in a.dtypes.split(",") if x and x != "none"]:
        for mode in a.torch_modes.split(","):
            try:
                tps, warm, toks = run_torch(torch, w, layers, heads, dt, mode, a.past, a.steps, dev, prompt)
            except Exception as e:  # one failed configuration does not hide the others
                print("[bench] torch %s %s failed: %s" % (mode, dt, str(e)[:400]), flush=True)
                continue
            same = ""
            if toks_ref is not None and dt == "fp32":
                agree = sum(1 for x, y in zip(toks, toks_ref) if x == y)
                same = "(greedy tokens: %d/%d equal to Fusebox's)" % (agree, len(toks))
            name = "torch %s %s" % ("eager" if mode == "eager" else 'compile("reduce-overhead")', dt)
            report(name, tps, 4 if dt == "fp32" else 2, "warm-up %.1f s %s" % (warm, same))
    print("\n| configuration | tok/s | MB read/token | % of HBM read limit |")
    print("|---|---:|---:|---:|")
    for name, tps, b, frac in rows:
        print("| %s | %.1f | %.1f | %.1f%% |" % (name, tps, b / 1e6, 100 * frac))
    return 0


if __name__ == "__main__":
    sys.exit(main())
