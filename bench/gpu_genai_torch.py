"""Batch-1 decode of GenAI-style decoders (models/gen_genai.py: MatMulNBits int4 or, with --float,
plain MatMul fp32; GroupQueryAttention with rotary; skip RMSNorms) on one GPU, side by side in one
process: Fusebox device=cuda through stock onnxruntime's Python client with the KV cache as ONE
shared max-length buffer per cache on the GPU (bound as both past_key_values.* and present.*, as
ONNX Runtime GenAI's past_present_share_buffer), ORT's CPU EP the same way on host buffers, and
PyTorch eager and torch.compile(mode="reduce-overhead") with a static KV cache on the same weights
(read from the ONNX initializers, MatMulNBits dequantised per ORT's contrib-op docs), fp32 with TF32
off and bf16.

Per model: (1) a check: torch fp32 (and Fusebox) logits against ORT's CPU EP on the ONNX model,
prefill of 16 tokens + 4 decode steps teacher-forced with ORT's greedy tokens (and, with --cases,
torch fp32 against models/gen_genai.py's float64 reference); (2) decode tokens/s at each --past
(prefill of `past` prompt tokens, 3 warm-up steps, then --steps timed greedy steps), greedy tokens
compared with Fusebox's; bytes read per token and the fraction of the HBM read bandwidth measured
in the same run. Prints one line per configuration, Fusebox's session summary lines, and a markdown
table. A later model of the same shape as an earlier one reuses its torch timings (torch's speed
does not depend on the weight values) and runs torch eager fp32 only, for the token check.

usage: python3 bench/gpu_genai_torch.py --model M.onnx [--model M2.onnx ...] --ep-lib libfusebox_ep.so
         [--past 128,512] [--steps 64] [--torch-modes eager,compile] [--dtypes fp32,bf16]
         [--no-fusebox] [--no-ort-cpu] [--cases DIR (per model, in order; '-' for none)] [--device cuda|cpu]
Driver: bench/gpu_genai_torch.sh. Local check without a GPU (Debian's torch, no torch.compile, no
onnxruntime module): --device cpu --no-fusebox --no-ort-cpu --cases DIR.
"""
import argparse
import gc
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_bench_common import copy_bandwidth, read_bandwidth  # noqa: E402

CHECK_PROMPT, CHECK_STEPS = 16, 4
WARM_STEPS = 3
TOL = 1e-3  # max |x - ref| / max |ref| of fp32 logits: summation order only (TF32 off)


# ------------------------------------------------------------------- the ONNX model, read back
def mnb_dequant(node, init):
    """MatMulNBits' B as float (K, N) for y = x @ W: B (N, k_blocks, block*bits/8) uint8, value k
    of a block in the low nibble for even k; scales (N * k_blocks); zero points packed the same
    way (N, ceil(k_blocks/2)) uint8, absent = 2^(bits-1); w = (q - zp) * scale (ORT's
    docs/ContribOperators.md). 4 bits only (what gen_genai.py writes)."""
    at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    K, N, bits, blk = at["K"], at["N"], at["bits"], at["block_size"]
    if bits != 4:
        raise ValueError("%s: bits=%d (this script dequantises 4 bits)" % (node.name, bits))
    B = init[node.input[1]]
    kb = (K + blk - 1) // blk
    B = B.reshape(N, kb, blk // 2)
    q = np.empty((N, kb, blk), np.float32)
    q[..., 0::2] = B & 0x0F
    q[..., 1::2] = B >> 4
    scale = init[node.input[2]].astype(np.float32).reshape(N, kb)
    if len(node.input) > 3 and node.input[3]:
        zpp = init[node.input[3]]
        if zpp.dtype != np.uint8:
            raise ValueError("%s: float zero points are not read here" % node.name)
        zpp = zpp.reshape(N, (kb + 1) // 2)
        zp = np.empty((N, kb), np.float32)
        zp[:, 0::2] = zpp[:, : (kb + 1) // 2] & 0x0F
        zp[:, 1::2] = (zpp >> 4)[:, : kb // 2]
    else:
        zp = np.full((N, kb), 8.0, np.float32)
    w = ((q - zp[..., None]) * scale[..., None]).reshape(N, kb * blk)[:, :K]
    bias = init[node.input[5]] if len(node.input) > 5 and node.input[5] else None
    return np.ascontiguousarray(w.T), bias


def load_genai(path):
    """The decoder's shape, weights (float32, y = x @ W with W (in, out)) and bytes read per
    decode step, from the ONNX model written by models/gen_genai.py (int4 or --float)."""
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    lin = {}  # prefix (l0.q_proj, lm_head, ...) -> (W (in, out), bias or None)
    gqa = None
    eps = None
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            pre = n.input[1].rsplit(".", 1)[0]
            lin[pre] = mnb_dequant(n, init)
        elif n.op_type == "MatMul" and n.input[1] in init:
            pre = n.input[1].rsplit(".", 1)[0]
            bias = None
            for c in m.graph.node:  # --float: Add(MatMul, prefix.bias)
                if c.op_type == "Add" and c.input[0] == n.output[0] and c.input[1] == pre + ".bias":
                    bias = init[c.input[1]]
            lin[pre] = (init[n.input[1]].astype(np.float32), bias)
        elif n.op_type == "GroupQueryAttention" and gqa is None:
            gqa = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        elif n.op_type.endswith("SimplifiedLayerNormalization") and eps is None:
            eps = [onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "epsilon"][0]
    if gqa is None or not gqa.get("do_rotary") or gqa.get("rotary_interleaved", 0):
        raise ValueError("%s: expected GroupQueryAttention with do_rotary=1, rotary_interleaved=0" % path)
    layers = 0
    while "l%d.q_proj" % layers in lin:
        layers += 1
    emb = init["model.embed_tokens.weight"]
    hidden = emb.shape[1]
    nh, nkv = gqa["num_heads"], gqa["kv_num_heads"]
    d = hidden // nh
    cfg = dict(layers=layers, hidden=hidden, heads=nh, kv_heads=nkv, head_dim=d, vocab=emb.shape[0],
               ffn=lin["l0.gate_proj"][0].shape[1], eps=float(eps), scale=float(gqa.get("scale") or 1 / math.sqrt(d)),
               max_pos=init["cos_cache"].shape[0], int4=any(n.op_type == "MatMulNBits" for n in m.graph.node))
    # bytes one decode step reads: every initializer but the embedding (one row of it) and the
    # rotary caches (one row each); the int4 model's are the packed weights, scales and zero points
    skip = ("model.embed_tokens.weight", "cos_cache", "sin_cache")
    onnx_bytes = sum(a.nbytes for k, a in init.items() if k not in skip) + emb[0].nbytes
    n_weights = sum(w.size + (b.size if b is not None else 0) for w, b in lin.values())
    n_weights += hidden * (2 * layers + 2)  # norms + one embedding row
    cfg.update(onnx_bytes=onnx_bytes, n_weights=n_weights)
    w = dict(lin=lin, embed=emb, cos=init["cos_cache"], sin=init["sin_cache"], norm=init["norm.weight"],
             ln1=[init["l%d.ln1.weight" % i] for i in range(layers)],
             ln2=[init["l%d.ln2.weight" % i] for i in range(layers)])
    return cfg, w


def shape_key(cfg):
    return tuple(cfg[k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"))


# ------------------------------------------------------------------------------ PyTorch model
class TorchDecoder:
    """The decoder in PyTorch with a static KV cache (layers, 2, 1, kv_heads, max_len, head_dim):
    forward(ids (1, S), pos0 (1,) int64 tensor) writes positions pos0..pos0+S-1 and attends over
    positions <= each query's own through an additive mask, so a decode step's shapes never change
    (reduce-overhead's CUDA graphs replay it). GQA without copying the cache: the g = heads/kv_heads
    query heads of a group are rows of one (g*S, d) x (d, max_len) product per KV head."""

    def __init__(self, torch, cfg, w, dtype, max_len, dev):
        self.torch, self.cfg, self.dtype, self.dev, self.max_len = torch, cfg, dtype, dev, max_len
        t = lambda a: torch.from_numpy(np.array(a, copy=True)).to(dev, dtype)  # noqa: E731 (a writable copy)
        lin = w["lin"]
        zero = lambda n: torch.zeros(n, device=dev, dtype=dtype)  # noqa: E731
        self.L = []
        for i in range(cfg["layers"]):
            p = "l%d." % i
            bq = [lin[p + n + "_proj"][1] for n in "qkv"]
            self.L.append(dict(
                n1=t(w["ln1"][i]), n2=t(w["ln2"][i]),
                qkv=torch.cat([t(lin[p + n + "_proj"][0]) for n in "qkv"], dim=1),
                qkv_b=torch.cat([t(b) if b is not None else zero(lin[p + n + "_proj"][0].shape[1])
                                 for n, b in zip("qkv", bq)]),
                o=t(lin[p + "o_proj"][0]),
                gu=torch.cat([t(lin[p + "gate_proj"][0]), t(lin[p + "up_proj"][0])], dim=1),
                dn=t(lin[p + "down_proj"][0])))
        self.emb = t(w["embed"])
        self.norm = t(w["norm"])
        self.head = t(lin["lm_head"][0])
        self.cos = torch.from_numpy(np.array(w["cos"], np.float32)).to(dev)  # (max_pos, d/2)
        self.sin = torch.from_numpy(np.array(w["sin"], np.float32)).to(dev)
        self.cache = torch.zeros(cfg["layers"], 2, 1, cfg["kv_heads"], max_len, cfg["head_dim"], device=dev, dtype=dtype)
        self.ar = torch.arange(max_len, device=dev)
        mark = getattr(getattr(torch, "_dynamo", None), "mark_static_address", None)
        if mark:  # static addresses: reduce-overhead's graphs keep weights and the mutated cache in place
            for tt in [self.emb, self.norm, self.head, self.cos, self.sin, self.cache] + \
                      [v for l in self.L for v in l.values()]:
                mark(tt)

    def rms(self, x, wt):
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg["eps"])).to(self.dtype) * wt

    def forward(self, ids, pos0):
        """ids (1, S) int64, pos0 (1,) int64 -> logits (1, S, V) in self.dtype."""
        torch, c = self.torch, self.cfg
        S = ids.shape[1]
        nh, nkv, d = c["heads"], c["kv_heads"], c["head_dim"]
        g, half = nh // nkv, d // 2
        pos = pos0 + torch.arange(S, device=self.dev)  # (S,)
        cos = self.cos[pos].view(1, 1, S, half)  # float32
        sin = self.sin[pos].view(1, 1, S, half)
        mask = torch.where(self.ar[None, :] <= pos[:, None], 0.0, -1.0e9).view(1, 1, 1, S, self.max_len)

        def rope(x):  # (1, heads, S, d), half-split (GPT-NeoX / Llama / Qwen) layout
            xf = x.float()
            a, b = xf[..., :half], xf[..., half:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(self.dtype)

        x = self.emb[ids]  # (1, S, H)
        for i, l in enumerate(self.L):
            h = self.rms(x, l["n1"])
            qkv = h @ l["qkv"] + l["qkv_b"]
            q = qkv[..., : nh * d].view(1, S, nh, d).transpose(1, 2)
            k = qkv[..., nh * d: (nh + nkv) * d].view(1, S, nkv, d).transpose(1, 2)
            v = qkv[..., (nh + nkv) * d:].view(1, S, nkv, d).transpose(1, 2)
            q, k = rope(q), rope(k)
            self.cache[i, 0].index_copy_(2, pos, k)
            self.cache[i, 1].index_copy_(2, pos, v)
            qg = q.reshape(1, nkv, g * S, d)  # query heads of a KV group, then positions
            s = (qg @ self.cache[i, 0].transpose(-1, -2)).float() * c["scale"]  # (1, nkv, g*S, max_len)
            s = s.view(1, nkv, g, S, self.max_len) + mask
            p = torch.softmax(s, dim=-1).to(self.dtype).view(1, nkv, g * S, self.max_len)
            a = (p @ self.cache[i, 1]).view(1, nh, S, d).transpose(1, 2).reshape(1, S, nh * d)
            x = x + a @ l["o"]
            h = self.rms(x, l["n2"])
            gt, up = (h @ l["gu"]).split(c["ffn"], dim=-1)
            x = x + (torch.nn.functional.silu(gt) * up) @ l["dn"]
        return self.rms(x, self.norm) @ self.head

    def next_token(self, tok, pos):
        """Greedy decode step: tok (1, 1), pos (1,) -> next token (1, 1), on the device."""
        return self.forward(tok, pos)[:, -1].argmax(-1).view(1, 1)


class TorchDriver:
    """prefill/step/decode on a TorchDecoder; fn is the (maybe compiled) next_token."""

    def __init__(self, torch, model, compiled):
        self.torch, self.m = torch, model
        self.fn = model.next_token
        if compiled:
            self.fn = torch.compile(model.next_token, mode="reduce-overhead", fullgraph=True)

    def pos(self, p):
        return self.torch.tensor([p], device=self.m.dev)

    def logits(self, ids, pos0):
        """Logits (S, V) float64 numpy of ids after pos0 cached tokens (the uncompiled model)."""
        with self.torch.no_grad():
            ids_t = self.torch.tensor([list(ids)], device=self.m.dev)
            return self.m.forward(ids_t, self.pos(pos0))[0].double().cpu().numpy()

    def decode(self, tok, T, n):
        """n greedy steps from token tok at position T; returns the tokens (host ints)."""
        torch = self.torch
        with torch.no_grad():
            t = torch.tensor([[tok]], device=self.m.dev)
            out = []
            for j in range(n):
                t = self.fn(t, self.pos(T + j)).clone()  # clone: a graph's output is overwritten by the next replay
                out.append(t)
            return [int(x.item()) for x in out]

    def sync(self):
        if self.m.dev.type == "cuda":
            self.torch.cuda.synchronize()


# ---------------------------------------------------------------- ONNX Runtime, shared KV buffer
class _CudaArray:
    """A float32 vector in device memory at ptr, for torch.as_tensor (__cuda_array_interface__)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 2}


class OrtDriver:
    """A session driven as GenAI does with past_present_share_buffer: one (1, kv_heads, cap, d)
    buffer per cache (on the GPU when gpu is given: Fusebox's device memory; else host memory),
    bound as both past_key_values.<i>.* and present.<i>.*; attention_mask (1, past + S) grows;
    input_ids, attention_mask and logits are host buffers (ORT copies them to and from the
    device, 8 bytes / T*8 bytes / V*4 bytes a step), except with torch given (and gpu): then the
    one-token logits are bound in the GPU's memory and the greedy step's argmax runs there, through
    torch (a zero-copy view of the buffer), as torch's own decode loop does."""

    def __init__(self, ort, sess, cfg, cap, gpu=None, torch=None):
        self.ort, self.sess, self.cfg, self.cap = ort, sess, cfg, cap
        self.torch = torch if gpu is not None else None
        self.bind = sess.io_binding()
        shape = (1, cfg["kv_heads"], cap, cfg["head_dim"])
        self.kv = []
        for i in range(cfg["layers"]):
            for kv in ("key", "value"):
                z = np.zeros(shape, np.float32)
                if gpu is not None:
                    gio, dev, mi = gpu
                    ov = gio.to_device(z, mi, dev)
                else:
                    ov = ort.OrtValue.ortvalue_from_numpy(z)  # wraps z: z must outlive it (kept below)
                self.kv.append((ov, z))
                self.bind.bind_ortvalue_input("past_key_values.%d.%s" % (i, kv), ov)
                self.bind.bind_ortvalue_output("present.%d.%s" % (i, kv), ov)
        self.masks = {}
        self.ids1 = np.zeros((1, 1), np.int64)
        self.ids1_ov = ort.OrtValue.ortvalue_from_numpy(self.ids1)
        self.logits1 = np.zeros((1, 1, cfg["vocab"]), np.float32)
        if self.torch is not None:
            gio, dev, mi = gpu
            self.logits1_ov = gio.empty_on_device(self.logits1.shape, np.float32, mi, dev)
            self.logits1_t = self.torch.as_tensor(_CudaArray(self.logits1_ov.data_ptr(), cfg["vocab"]), device="cuda")
        else:
            self.logits1_ov = ort.OrtValue.ortvalue_from_numpy(self.logits1)

    def mask(self, T):
        if T not in self.masks:
            a = np.ones((1, T), np.int64)
            self.masks[T] = (self.ort.OrtValue.ortvalue_from_numpy(a), a)
        return self.masks[T][0]

    def logits(self, ids, pos0):
        """Run ids after pos0 cached tokens; logits (S, V) float64."""
        if pos0 + len(ids) > self.cap:
            raise ValueError("%d + %d tokens exceed the KV capacity %d" % (pos0, len(ids), self.cap))
        if len(ids) == 1:
            return self.step(ids[0], pos0)[None].astype(np.float64)
        a = np.array([list(ids)], np.int64)
        lg_ov = self.ort.OrtValue.ortvalue_from_numpy(np.zeros((1, len(ids), self.cfg["vocab"]), np.float32))
        self.bind.bind_ortvalue_input("input_ids", self.ort.OrtValue.ortvalue_from_numpy(a))
        self.bind.bind_ortvalue_input("attention_mask", self.mask(pos0 + len(ids)))
        self.bind.bind_ortvalue_output("logits", lg_ov)
        self.sess.run_with_iobinding(self.bind)
        return lg_ov.numpy()[0].astype(np.float64)

    def run1(self, tok, T):
        self.ids1[0, 0] = tok
        self.ids1_ov.update_inplace(self.ids1)  # whether or not the OrtValue wraps ids1
        self.bind.bind_ortvalue_input("input_ids", self.ids1_ov)
        self.bind.bind_ortvalue_input("attention_mask", self.mask(T + 1))
        self.bind.bind_ortvalue_output("logits", self.logits1_ov)
        self.sess.run_with_iobinding(self.bind)
        if self.torch is not None:
            self.torch.cuda.synchronize()  # the whole device: orders torch's stream after Fusebox's

    def step(self, tok, T):
        """One token at position T (T tokens cached before it): its logits (V,) float32."""
        self.run1(tok, T)
        if self.torch is not None:
            return self.logits1_t.cpu().numpy()
        return self.logits1_ov.numpy()[0, 0]

    def decode(self, tok, T, n):
        out = []
        for j in range(n):
            if self.torch is not None:
                self.run1(tok, T + j)
                tok = int(self.logits1_t.argmax())
            else:
                tok = int(self.step(tok, T + j).argmax())
            out.append(tok)
        return out

    def sync(self):
        pass


# ---------------------------------------------------------------------------------- measuring
def rel_err(x, ref):
    return float(np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-30))


def check_against(name, drv, ref_prefill, ref_decode, prompt, toks):
    """Prefill `prompt` from position 0, then teacher-forced steps fed toks; worst relative error
    against the reference logits (prefill (S, V), decode [(V,)...])."""
    errs = [rel_err(drv.logits(prompt, 0), ref_prefill)]
    for j, t in enumerate(toks):
        errs.append(rel_err(drv.logits([t], len(prompt) + j)[0], ref_decode[j]))
    worst = max(errs)
    print("[check] %-44s worst max|x-ref|/max|ref| %.2e over prefill %d + %d steps  %s"
          % (name, worst, len(prompt), len(toks), "PASS" if worst <= TOL else "FAIL (tolerance %.0e)" % TOL),
          flush=True)
    return worst <= TOL


def reference_run(drv, prompt, steps):
    """The reference's own logits: prefill then greedy teacher tokens (its argmax)."""
    pre = drv.logits(prompt, 0)
    toks, dec = [], []
    t = int(pre[-1].argmax())
    for j in range(steps):
        toks.append(t)
        lg = drv.logits([t], len(prompt) + j)[0]
        dec.append(lg)
        t = int(lg.argmax())
    return pre, dec, toks


def time_decode(drv, prompt_all, past, steps):
    """Prefill prompt_all[:past], WARM_STEPS warm-up steps, then `steps` timed greedy steps from the
    same state (the rows the warm-up wrote are rewritten). Returns (tok/s, tokens)."""
    first = int(drv.logits(prompt_all[:past], 0)[-1].argmax())
    warm = drv.decode(first, past, WARM_STEPS)
    drv.sync()
    t0 = time.perf_counter()
    toks = drv.decode(first, past, steps)
    drv.sync()
    dt = time.perf_counter() - t0
    if toks[:WARM_STEPS] != warm:
        print("[bench] note: warm-up tokens %s != timed %s" % (warm, toks[:WARM_STEPS]))
    return steps / dt, [first] + toks


class Summary:
    """Fusebox's session summary (FUSEBOX_VERBOSE=1 prints it to stderr at session teardown):
    fd 2 goes to a file while the session is released, and comes back."""

    def __init__(self):
        self.f = tempfile.TemporaryFile(mode="w+b")
        sys.stderr.flush()
        self.saved = os.dup(2)
        os.dup2(self.f.fileno(), 2)

    def close(self):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.f.seek(0)
        text = self.f.read().decode("utf-8", "replace")
        sys.stderr.write(text)
        return [l.strip() for l in text.splitlines()
                if l.strip().startswith(("claim:", "compute:", "(graph:", "memory:", "timing:"))]


# ---------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--cases", action="append", default=[], help="per --model: its gen_genai.py --cases DIR or -")
    ap.add_argument("--ep-lib")
    ap.add_argument("--past", default="128,512")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--torch-modes", default="eager,compile")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--no-fusebox", action="store_true")
    ap.add_argument("--fusebox-logits", default="host,device",
                    help="Fusebox configurations: host (numpy logits, ORT copies them out, numpy argmax), "
                         "device (logits bound on the GPU, argmax by torch there, as torch's loop)")
    ap.add_argument("--no-ort-cpu", action="store_true", help="skip ORT's CPU EP (the check then has no ORT reference)")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    pasts = [int(p) for p in a.past.split(",")]

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")
    dev = torch.device(a.device)
    can_compile = hasattr(torch, "compile") and dev.type == "cuda"
    bw = read_bandwidth(torch, dev) if dev.type == "cuda" else None
    cbw = copy_bandwidth(torch, dev) if dev.type == "cuda" else None
    print("[bench] torch %s on %s; HBM read bandwidth (sum over 4 GiB) %s (a 2 GiB copy reads %s); pasts %s, "
          "%d timed decode steps" % (torch.__version__, torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                                     "%.2f TB/s" % (bw / 1e12) if bw else "n/a",
                                     "%.2f TB/s" % (cbw / 1e12) if cbw else "n/a", pasts, a.steps), flush=True)

    ort = gio = gpu = None
    if not (a.no_fusebox and a.no_ort_cpu):
        import onnxruntime as ort
        sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
        import gpu_python_iobinding as gio
    if not a.no_fusebox:
        ort.register_execution_provider_library("Fusebox", os.path.abspath(a.ep_lib))
        fdev = gio.gpu_device()
        gpu = (gio, fdev, gio.device_memory_info(fdev))

    rows, summaries, torch_rows, failed = [], [], {}, 0
    for mi, model in enumerate(a.model):
        cases = a.cases[mi] if mi < len(a.cases) and a.cases[mi] != "-" else None
        t0 = time.time()
        cfg, w = load_genai(model)
        name = os.path.basename(model)
        kind = "int4" if cfg["int4"] else "fp32"
        print("\n[bench] %s (%s): %d layers, hidden %d, heads %d/%d kv, ffn %d, vocab %d; read in %.1f s"
              % (name, kind, cfg["layers"], cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["vocab"],
                 time.time() - t0), flush=True)
        cap = max(pasts) + a.steps + WARM_STEPS + 2
        if cap > cfg["max_pos"]:
            sys.exit("%s: past %d + steps needs %d positions, the cos/sin caches have %d (gen_genai.py --max-pos)"
                     % (model, max(pasts), cap, cfg["max_pos"]))
        kv_elems = lambda T: 2 * cfg["layers"] * cfg["kv_heads"] * T * cfg["head_dim"]  # noqa: E731

        def report(label, past, tps, wbytes, kv_elem, tokens, ref_tokens, extra=""):
            T_avg = past + a.steps / 2.0
            b = wbytes + kv_elems(T_avg) * kv_elem
            frac = tps * b / bw if bw else float("nan")
            same = ""
            if ref_tokens is not None and tokens is not None:
                same = "%d/%d" % (sum(1 for x, y in zip(tokens, ref_tokens) if x == y), len(ref_tokens))
            rows.append((name, label, past, tps, b, frac, same))
            print("[bench] %-22s past %4d  %-34s %9.1f tok/s  %7.1f MB/token  %5.1f%% of HBM read  tokens==Fusebox %s %s"
                  % (name, past, label, tps, b / 1e6, 100 * frac, same or "-", extra), flush=True)

        prompt_all = [int(v) for v in np.random.default_rng(0).integers(0, cfg["vocab"], size=max(pasts))]
        ck_prompt = prompt_all[:CHECK_PROMPT]
        t32 = TorchDriver(torch, TorchDecoder(torch, cfg, w, torch.float32, cap, dev), False)

        # ---- checks
        if cases:
            pr = np.load(os.path.join(cases, "prompt.npy"))[0].tolist()
            tk = np.load(os.path.join(cases, "tokens.npy")).tolist()
            pl = np.load(os.path.join(cases, "prefill_logits.npy"))[0].astype(np.float64)
            dl = np.load(os.path.join(cases, "decode_logits.npy")).astype(np.float64)
            failed += not check_against("torch fp32 vs gen_genai float64 reference", t32, pl, dl, pr, tk)
        cpu = fb = fbd = sess = sessd = None
        ref_toks = None
        if not a.no_ort_cpu:
            try:
                so = ort.SessionOptions()
                cpu = OrtDriver(ort, ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"]),
                                cfg, cap)
                pre, dec, ref_toks = reference_run(cpu, ck_prompt, CHECK_STEPS)
                failed += not check_against("torch fp32 vs ORT CPU EP", t32, pre, dec, ck_prompt, ref_toks)
            except Exception:  # report and go on: the other configurations still run
                traceback.print_exc()
                failed += 1
                cpu = None
        if gpu:
            try:
                t0 = time.time()
                so = ort.SessionOptions()
                so.add_provider_for_devices([gpu[1]], {"device": "cuda"})
                sess = ort.InferenceSession(model, sess_options=so)
                print("[bench] Fusebox session %.1f s, providers %s" % (time.time() - t0, sess.get_providers()),
                      flush=True)
                kinds = a.fusebox_logits.split(",")
                if "host" in kinds:
                    fb = OrtDriver(ort, sess, cfg, cap, gpu)
                    if cpu is not None:
                        failed += not check_against("Fusebox device=cuda vs ORT CPU EP", fb, pre, dec, ck_prompt,
                                                    ref_toks)
                if "device" in kinds and dev.type == "cuda":
                    sessd = ort.InferenceSession(model, sess_options=so)
                    fbd = OrtDriver(ort, sessd, cfg, cap, gpu, torch)
                    if cpu is not None:
                        failed += not check_against("Fusebox device=cuda, logits on the GPU, vs ORT CPU EP", fbd, pre,
                                                    dec, ck_prompt, ref_toks)
            except Exception:
                traceback.print_exc()
                failed += 1
                fb = fbd = None

        # ---- decode speed
        onnx_b = cfg["onnx_bytes"]
        fb_toks = {}
        for past in pasts:
            for drv in (fb, fbd, cpu):
                if drv is None:
                    continue
                label = {id(fb): "Fusebox device=cuda", id(fbd): "Fusebox cuda, logits+argmax on GPU"}.get(
                    id(drv), "ORT CPU EP") + " (%s weights)" % kind
                try:
                    tps, toks = time_decode(drv, prompt_all, past, a.steps)
                except Exception:
                    traceback.print_exc()
                    failed += 1
                    continue
                if drv is fb or (drv is fbd and fb is None):
                    fb_toks[past] = toks
                    report(label, past, tps, onnx_b, 4, None, None)
                elif drv is fbd:
                    report(label, past, tps, onnx_b, 4, toks, fb_toks.get(past))
                else:
                    report(label, past, tps, onnx_b, 4, toks, fb_toks.get(past))
        if sess is not None:  # its summary prints when the session goes
            summ = Summary()
            try:
                del fb, fbd, sess, sessd
                gc.collect()
            finally:
                summaries.append((name, summ.close()))
        del cpu
        gc.collect()

        key = shape_key(cfg)
        reuse = key in torch_rows
        for dt in [x for x in a.dtypes.split(",") if x and x != "none"]:
            for mode in a.torch_modes.split(","):
                label = "torch %s %s" % ("eager" if mode == "eager" else 'compile("reduce-overhead")', dt)
                if reuse and not (mode == "eager" and dt == "fp32"):
                    for past, tps in torch_rows[key].get(label, []):
                        report(label, past, tps, cfg["n_weights"] * (4 if dt == "fp32" else 2), 4 if dt == "fp32" else 2,
                               None, None, "(same shape: timed on %s)" % torch_rows[key]["model"])
                    continue
                if mode == "compile" and not can_compile:
                    print("[bench] %s skipped: torch.compile needs torch >= 2 and a CUDA device" % label)
                    continue
                try:
                    dtype = torch.float32 if dt == "fp32" else torch.bfloat16
                    m = t32.m if dtype == torch.float32 else TorchDecoder(torch, cfg, w, dtype, cap, dev)
                    drv = TorchDriver(torch, m, mode == "compile")
                    t0 = time.time()
                    drv.decode(prompt_all[0], 0, WARM_STEPS)  # compiles and captures outside the timings
                    drv.sync()
                    warm = time.time() - t0
                    for past in pasts:
                        tps, toks = time_decode(drv, prompt_all, past, a.steps)
                        elem = 4 if dt == "fp32" else 2
                        report(label, past, tps, cfg["n_weights"] * elem, elem, toks, fb_toks.get(past),
                               "(warm-up %.1f s)" % warm)
                        torch_rows.setdefault(key, {"model": name}).setdefault(label, []).append((past, tps))
                    del drv, m
                except Exception as e:  # one failed configuration does not hide the others
                    print("[bench] %s failed: %s" % (label, str(e)[:600]), flush=True)
                    failed += 1
                gc.collect()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
        del t32, w
        gc.collect()

    print("\n| model | configuration | past | tok/s | Fusebox / this | Fusebox, GPU argmax / this | MB read/token "
          "| % of HBM read | greedy tokens == Fusebox |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    fbx = {(r[0], r[2]): r[3] for r in rows if r[1].startswith("Fusebox device=cuda")}
    fbg = {(r[0], r[2]): r[3] for r in rows if r[1].startswith("Fusebox cuda, logits")}
    ratio = lambda f, tps: "%.2fx" % (f / tps) if f else "-"  # noqa: E731
    for name, label, past, tps, b, frac, same in rows:
        print("| %s | %s | %d | %.1f | %s | %s | %.1f | %s | %s |"
              % (name, label, past, tps, ratio(fbx.get((name, past)), tps), ratio(fbg.get((name, past)), tps),
                 b / 1e6, "%.1f%%" % (100 * frac) if frac == frac else "-", same or "-"))
    for name, lines in summaries:
        print("\nFusebox session summary, %s (one session: checks, prefills, warm-ups and timed steps):" % name)
        for l in lines:
            print("    " + l)
    print("\n%s: %d check(s) or configuration(s) failed" % ("FAIL" if failed else "PASS", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
