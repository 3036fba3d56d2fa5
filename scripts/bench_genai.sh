#!/usr/bin/env bash
# GenAI-style decode and prefill of the Qwen2.5-0.5B-shaped int4 decoders (scripts/make_models.sh
# --bench), Fusebox against ORT's CPU EP in the same process and at the same thread count
# (`fusebox generate`: interleaved whole loops, medians), beside the machine's read bandwidth
# measured with the same number of threads on Fusebox's own pool (bench_mnb --bw), before and
# after the runs.
#
# Decode is bandwidth-bound: a token must read every MatMulNBits weight (packed values, scales,
# zero points, biases: counted from the model file, in ORT's layout), the norm weights and one
# embedding row, plus the KV cache (2 x layers x kv_heads x past x head_dim x 4 bytes). The floor
# is bytes per token / read bandwidth; the script prints each EP's decode as a fraction of it.
#
#   scripts/bench_genai.sh [BUILD_DIR=build] [--threads T=2] [--past "128 512"] [--new N=16]
#                          [--rounds R=2] [--models "genai_qwen05b_q4 genai_qwen05b"]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
THREADS=2
PASTS="128 512"
NEW=16
ROUNDS=2
MODELS="genai_qwen05b_q4 genai_qwen05b"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --past) PASTS=$2; shift 2 ;;
    --new) NEW=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    -*) echo "usage: $0 [BUILD_DIR] [--threads T] [--past \"P ...\"] [--new N] [--rounds R] [--models \"M ...\"]" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
  esac
done
bw() { "$BUILD/bench/bench_mnb" --bw "$THREADS" | sed -n 's/.*best \([0-9.]*\) GB\/s.*/\1/p'; }

echo "[bench_genai] $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, threads $THREADS, $(date -u +%FT%TZ)"
BW0=$(bw)
echo "[bench_genai] read bandwidth before: $BW0 GB/s"
for m in $MODELS; do
  f="models/gen/$m.onnx"
  [ -e "$f" ] || { echo "missing $f (scripts/make_models.sh --bench)" >&2; exit 1; }
  # bytes every decode step reads, excluding the KV cache: MatMulNBits inputs 1.. (B, scales,
  # zero points, bias), norm weights, one embedding row; and the KV geometry
  read -r WB KVB < <(/usr/bin/python3 - "$f" <<'EOF'
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
init = {t.name: t for t in m.graph.initializer}
size = lambda n: numpy_helper.to_array(init[n]).nbytes if n in init else 0
wb, seen = 0, set()
for nd in m.graph.node:
    names = list(nd.input[1:]) if nd.op_type == "MatMulNBits" else \
            list(nd.input[1:]) if "LayerNormalization" in nd.op_type else []
    for n in names:
        if n and n in init and n not in seen and not n.startswith("past"):
            seen.add(n); wb += size(n)
emb = numpy_helper.to_array(init["model.embed_tokens.weight"])
wb += emb.nbytes // emb.shape[0]
kv = 0
for i in m.graph.input:
    if i.name.startswith("past_key_values."):
        d = i.type.tensor_type.shape.dim
        kv += d[1].dim_value * d[3].dim_value * 4  # per position: kv_heads x head_dim floats
print(wb, kv)
EOF
)
  for p in $PASTS; do
    out=$("$BUILD/fusebox" generate "$f" --prompt-len "$p" --new-tokens "$NEW" --threads "$THREADS" --rounds "$ROUNDS" 2>&1 || true)
    echo "----- $m, prompt $p (decode at past $p..$((p + NEW - 1))), $NEW new tokens, $ROUNDS rounds"
    echo "$out" | sed -n '/timing:/,$p'
    past_mean=$((p + NEW / 2)) # bytes per token at the mean past of the decode steps
    for ep in Fusebox "ORT CPU"; do
      ms=$(echo "$out" | sed -n "s/^  $ep *prefill.*decode *[0-9.]* tok\/s (\([0-9.]*\) ms\/token).*/\1/p")
      [ -n "$ms" ] || continue
      awk -v ep="$ep" -v w="$WB" -v kv="$((KVB * past_mean))" -v pm="$past_mean" -v ms="$ms" -v bw="$BW0" 'BEGIN {
        gbs = (w + kv) / (ms * 1e-3) / 1e9;
        printf "  %-8s decode reads %.1f MB/token (weights %.1f MB + KV %.1f MB at mean past %d): %.2f GB/s = %.0f%% of %.2f GB/s read bandwidth\n",
               ep, (w + kv) / 1e6, w / 1e6, kv / 1e6, pm, gbs, 100 * gbs / bw, bw }'
    done
  done
done
BW1=$(bw)
echo "[bench_genai] read bandwidth after: $BW1 GB/s (fractions above use the one before)"
