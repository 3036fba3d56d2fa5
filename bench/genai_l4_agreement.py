#!/usr/bin/python3
"""Level-4 agreement of a GenAI-style int4 decoder (models/gen_genai.py): Fusebox and ORT's CPU EP
against the float64 reference of the same weights, on the prefill of the reference's prompt.

  bench/genai_l4_agreement.py MODEL.onnx CASES_DIR [--fusebox build/fusebox] [--work DIR]

CASES_DIR is what gen_genai.py --cases writes (prompt.npy, prefill_logits.npy: the float64
forward over the dequantised weights with float activations, i.e. without the int8
quantisation of activations that accuracy_level 4 adds). Both EPs run the model through
`fusebox run` (Fusebox, then --cpu) on the same inputs; printed per prompt position: the
largest |logit| difference Fusebox-ORT, each EP's largest and RMS difference from the
reference, and whether the arg-max agrees with the reference's. Reading: at level 4 both EPs
quantise activations, so their distance to the reference is the quantisation's own error;
Fusebox-ORT differences far below it are bucket flips of single int8 codes (the same rounding
rule on inputs one ulp apart), not a difference in what is computed.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("cases")
    ap.add_argument("--fusebox", default="build/fusebox")
    ap.add_argument("--work", default="/tmp/genai_l4_agreement")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    prompt = np.load(os.path.join(a.cases, "prompt.npy"))
    ref = np.load(os.path.join(a.cases, "prefill_logits.npy")).astype(np.float64)[0]  # (S, V)
    S = prompt.shape[1]
    m = onnx.load(a.model, load_external_data=False)
    args = []
    for i in m.graph.input:
        d = i.type.tensor_type.shape.dim
        if i.name == "input_ids":
            arr = prompt.astype(np.int64)
        elif i.name == "attention_mask":
            arr = np.ones((1, S), np.int64)
        elif i.name.startswith("past_key_values."):
            arr = np.zeros((1, d[1].dim_value, 0, d[3].dim_value), np.float32)
        else:
            sys.exit("unexpected input %s" % i.name)
        path = os.path.join(a.work, i.name + ".npy")
        np.save(path, arr)
        args += ["--input", "%s=%s" % (i.name, path)]
    out = {}
    for ep, extra in (("fusebox", []), ("ort", ["--cpu"])):
        d = os.path.join(a.work, ep)
        os.makedirs(d, exist_ok=True)
        r = subprocess.run([a.fusebox, "run", a.model] + args + ["--save-dir", d] + extra, capture_output=True,
                           text=True)
        if r.returncode:
            sys.exit("%s run failed:\n%s%s" % (ep, r.stdout, r.stderr))
        out[ep] = np.load(os.path.join(d, "logits.npy")).astype(np.float64)[0]
    f, o = out["fusebox"], out["ort"]
    scale = np.abs(ref).max()
    print("model %s, prompt %d tokens, max |ref logit| %.3f" % (os.path.basename(a.model), S, scale))
    print("pos  max|F-O|  max|F-ref| rms|F-ref|  max|O-ref| rms|O-ref|  argmax F/O/ref")
    for s in range(S):
        ef, eo = f[s] - ref[s], o[s] - ref[s]
        print("%3d  %8.4f  %9.4f  %9.4f  %9.4f  %9.4f  %d/%d/%d" % (
            s, np.abs(f[s] - o[s]).max(), np.abs(ef).max(), np.sqrt((ef ** 2).mean()), np.abs(eo).max(),
            np.sqrt((eo ** 2).mean()), f[s].argmax(), o[s].argmax(), ref[s].argmax()))
    ef, eo = f - ref, o - ref
    print("all: max|F-O| %.4f; Fusebox vs ref max %.4f rms %.4f; ORT vs ref max %.4f rms %.4f; "
          "argmax = ref: Fusebox %d/%d, ORT %d/%d; Fusebox = ORT %d/%d" % (
              np.abs(f - o).max(), np.abs(ef).max(), np.sqrt((ef ** 2).mean()), np.abs(eo).max(),
              np.sqrt((eo ** 2).mean()), (f.argmax(1) == ref.argmax(1)).sum(), S,
              (o.argmax(1) == ref.argmax(1)).sum(), S, (f.argmax(1) == o.argmax(1)).sum(), S))


if __name__ == "__main__":
    main()
