#!/usr/bin/python3
"""Bytes a batch-1 decode step reads on Fusebox's CUDA device for a GenAI-style model
(models/gen_genai.py): per MatMulNBits, the packed weights as Fusebox keeps them on the device
(N x col_stride, col_stride = k_blocks * block * bits / 8) plus a float scale and a float
scale*zero point per block (8 bytes per block: cuda_mnb.c's layout, not ONNX's 4.5), plus the bias;
every other float initializer read whole except the embedding table (one row per token) and the
cos/sin caches (one row); plus the KV cache: 2 * layers * kv_heads * past * head_dim * 4 bytes at a
given past length (GQA reads the valid rows only).
usage: genai_bytes.py MODEL.onnx PAST"""
import sys
import onnx
from onnx import numpy_helper

m = onnx.load(sys.argv[1], load_external_data=False)
past = int(sys.argv[2])
g = m.graph
init = {t.name: t for t in g.initializer}
def dims(n): return list(init[n].dims)
def nbytes(n):
    t = init[n]
    return numpy_helper.to_array(t).nbytes if t.data_type != 0 else 0
mnb = w_other = 0
seen = set()
layers = kvh = hd = 0
for n in g.node:
    if n.op_type == "MatMulNBits":
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        N, K, bits, bs = a["N"], a["K"], a["bits"], a["block_size"]
        kb = (K + bs - 1) // bs
        mnb += N * kb * bs * bits // 8 + N * kb * 8 + (N * 4 if len(n.input) > 5 and n.input[5] else 0)
        seen.update(n.input[1:])
    elif n.op_type == "GroupQueryAttention":
        layers += 1
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        kvh = a["kv_num_heads"]
        seen.update(n.input[7:9])
    elif n.op_type == "Gather" and n.input[0] in init:
        w_other += dims(n.input[0])[1] * 4  # one embedding row
        seen.add(n.input[0])
for name in init:
    if name not in seen:
        w_other += nbytes(name)
for i in g.input:
    if i.name == "past_key_values.0.key":
        hd = i.type.tensor_type.shape.dim[3].dim_value
kv = 2 * layers * kvh * past * hd * 4
tot = mnb + w_other + kv
print(f"{sys.argv[1]}: MatMulNBits {mnb/1e6:.1f} MB, other weights {w_other/1e6:.2f} MB, KV at past {past} {kv/1e6:.2f} MB: {tot/1e6:.1f} MB per token")
