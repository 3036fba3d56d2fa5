/* Decoder ops as ONNX Runtime GenAI's model builder emits them, with the
 * semantics of ORT's contrib-op documentation (docs/ContribOperators.md):
 *   SimplifiedLayerNormalization (ai.onnx domain in ORT, opset 1),
 *   com.microsoft SkipSimplifiedLayerNormalization / SkipLayerNormalization
 *     -> SKIP_NORM (one fused pass: skip + bias + norm);
 *   com.microsoft MatMulNBits -> MATMUL_NBITS. */
#include <string.h>

#include "onnx_ops.h"

static fbx_ir_params fbx__msft_p0(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* ======================= (Skip)(Simplified)LayerNormalization ======================= */

/* registry aux of the skipnorm family */
enum { FBX__MSFT_SIMPLIFIED = 0, FBX__MSFT_SKIP_SIMPLIFIED = 1, FBX__MSFT_SKIP_LAYERNORM = 2 };

/* A 1-D float32 vector of h elements (gamma, beta, bias); absent is fine when optional. */
static bool fbx__msft_vec_ok(const fbx_onnx_cctx *c, int i, int64_t h, bool optional, const char *what) {
  const fbx_onnx_value *v = fbx__onnx_cin(c, i);
  if (!v) return optional || fbx__onnx_fail(c, "%s missing", what);
  if (!fbx__onnx_dt_ok(c, v, FBX__DT(F32), what)) return false;
  int64_t n = 1;
  for (int d = 0; d < v->rank; d++) n = v->dims[d] < 0 ? -1 : n * v->dims[d];
  if (n != h) return fbx__onnx_fail(c, "%s must have hidden_size (%lld) elements", what, (long long)h);
  return true;
}

bool fbx__onnx_claim_skipnorm(const fbx_onnx_cctx *c) {
  int kind = c->e->aux;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 1 || x->dims[x->rank - 1] < 1) return fbx__onnx_fail(c, "hidden size (last dim) must be static");
  int64_t h = x->dims[x->rank - 1];
  if (kind == FBX__MSFT_SIMPLIFIED) {
    int a;
    if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", -1), x->rank, false, &a) || a != x->rank - 1)
      return fbx__onnx_fail(c, "only axis = -1 (the last dim) is supported");
    if (fbx_onnx_attr_int(c->n, "stash_type", 1) != 1) return fbx__onnx_fail(c, "stash_type other than float");
    if (!fbx__msft_vec_ok(c, 1, h, false, "scale")) return false;
    if (fbx__onnx_cin(c, 2)) return fbx__onnx_fail(c, "bias input not supported (ORT ignores it)");
    const fbx_onnx_value *inv = fbx__onnx_cout(c, 1);
    if (inv && inv->dtype != FBX_DTYPE_F32) return fbx__onnx_fail(c, "inv_std_var must be float32");
    return true;
  }
  if (x->rank != 2 && x->rank != 3) return fbx__onnx_fail(c, "input rank %d (2 or 3 supported)", x->rank);
  const fbx_onnx_value *s = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(F32), "skip")) return false;
  if (s->rank < 2 || s->rank > x->rank || (s->dims[s->rank - 1] >= 0 && s->dims[s->rank - 1] != h))
    return fbx__onnx_fail(c, "skip must be (batch, seq, hidden), (1, seq, hidden) or (seq, hidden)");
  if (!fbx__msft_vec_ok(c, 2, h, false, "gamma")) return false;
  int bias_in = kind == FBX__MSFT_SKIP_LAYERNORM ? 4 : 3;
  if (kind == FBX__MSFT_SKIP_LAYERNORM && !fbx__msft_vec_ok(c, 3, h, true, "beta")) return false;
  if (!fbx__msft_vec_ok(c, bias_in, h, true, "bias")) return false;
  if (!fbx__onnx_no_out(c, 1, "mean") || !fbx__onnx_no_out(c, 2, "inv_std_var")) return false;
  const fbx_onnx_value *sum = fbx__onnx_cout(c, 3);
  if (sum && sum->dtype != FBX_DTYPE_F32) return fbx__onnx_fail(c, "input_skip_bias_sum must be float32");
  return true;
}

fbx_status *fbx__onnx_tr_skipnorm(fbx_onnx_tctx *t) {
  int kind = t->e->aux;
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_ir_params p = fbx__msft_p0();
  p.skipnorm.epsilon = fbx_onnx_attr_float(t->n, "epsilon", kind == FBX__MSFT_SIMPLIFIED ? 1e-5f : 1e-12f);
  p.skipnorm.simplified = kind != FBX__MSFT_SKIP_LAYERNORM;
  /* IR inputs (X, skip, gamma, beta, bias) from the ONNX positions of each op */
  static const int src[3][5] = {{0, -1, 1, -1, -1}, {0, 1, 2, -1, 3}, {0, 1, 2, 3, 4}};
  int ins[5];
  for (int i = 0; i < 5; i++) {
    ins[i] = FBX_IR_NONE;
    if (src[kind][i] >= 0) FBX_TRY(fbx__onnx_tin(t, src[kind][i], &ins[i]));
  }
  /* outputs: Y, then the sum (ONNX output 3 of the skip ops), then inv_std_var (output 1 of Simplified) */
  int sum_out = kind == FBX__MSFT_SIMPLIFIED ? -1 : 3, inv_out = kind == FBX__MSFT_SIMPLIFIED ? 1 : -1;
  p.skipnorm.has_sum = sum_out >= 0 && fbx__onnx_tout_value(t, sum_out) != NULL;
  p.skipnorm.has_inv = inv_out >= 0 && fbx__onnx_tout_value(t, inv_out) != NULL;
  int outs[3], onnx_of[3], n_outs = 0;
  onnx_of[n_outs++] = 0;
  if (p.skipnorm.has_sum) onnx_of[n_outs++] = sum_out;
  if (p.skipnorm.has_inv) onnx_of[n_outs++] = inv_out;
  for (int i = 0; i < n_outs; i++)
    FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_F32, x->rank, &outs[i]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_SKIP_NORM, ins, 5, outs, n_outs, &p, t->n->name ? t->n->name : "",
                                t->n->op_type, t->node_index, NULL));
  for (int i = 0; i < n_outs; i++) fbx__onnx_bind(t, onnx_of[i], outs[i]);
  return NULL;
}

/* ======================= MatMulNBits ======================= */

bool fbx__onnx_claim_mnb(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  int64_t K = fbx_onnx_attr_int(n, "K", -1), N = fbx_onnx_attr_int(n, "N", -1);
  int64_t bits = fbx_onnx_attr_int(n, "bits", 4), bs = fbx_onnx_attr_int(n, "block_size", -1);
  int64_t level = fbx_onnx_attr_int(n, "accuracy_level", 0);
  if (K < 1 || N < 1) return fbx__onnx_fail(c, "attributes K and N are required");
  if (bits != 4 && bits != 8) return fbx__onnx_fail(c, "bits=%lld (4 and 8 supported)", (long long)bits);
  if (bs < 16 || bs > 128 || (bs & (bs - 1)))
    return fbx__onnx_fail(c, "block_size %lld (16..128, powers of two)", (long long)bs);
  if (level < 0 || level > 4) return fbx__onnx_fail(c, "accuracy_level %lld", (long long)level);
  if (fbx_onnx_attr_int(n, "weight_prepacked", 0) != 0) return fbx__onnx_fail(c, "B prepacked for another EP");
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, a, FBX__DT(F32), "A")) return false;
  if (a->rank < 1 || a->dims[a->rank - 1] != K)
    return fbx__onnx_fail(c, "A's last dim must be K=%lld (static)", (long long)K);
  int64_t kb = (K + bs - 1) / bs;
  const fbx_onnx_tensor *b = fbx__onnx_cconst(c, 1, "B"), *s = b ? fbx__onnx_cconst(c, 2, "scales") : NULL;
  if (!b || !s) return false;
  if (b->dtype != FBX_DTYPE_U8 || fbx__onnx_tensor_numel(b) != N * kb * (bs * bits / 8))
    return fbx__onnx_fail(c, "B must be uint8 (N, k_blocks, blob_size)");
  if (s->dtype != FBX_DTYPE_F32 || fbx__onnx_tensor_numel(s) != N * kb)
    return fbx__onnx_fail(c, "scales must be float32 (N, k_blocks)");
  if (fbx__onnx_cin(c, 3)) {
    const fbx_onnx_tensor *z = fbx__onnx_cconst(c, 3, "zero_points");
    if (!z) return false;
    int64_t want = z->dtype == FBX_DTYPE_U8 ? N * ((kb * bits + 7) / 8) : N * kb;
    if ((z->dtype != FBX_DTYPE_U8 && z->dtype != FBX_DTYPE_F32) || fbx__onnx_tensor_numel(z) != want)
      return fbx__onnx_fail(c, "zero_points must be uint8 packed (N, ceil(k_blocks*bits/8)) or float32 (N, k_blocks)");
  }
  if (fbx__onnx_cin(c, 4)) return fbx__onnx_fail(c, "g_idx not supported");
  const fbx_onnx_value *bias = fbx__onnx_cin(c, 5);
  if (bias && (!fbx__onnx_dt_ok(c, bias, FBX__DT(F32), "bias") || bias->rank != 1 || bias->dims[0] != N))
    return fbx__onnx_fail(c, "bias must be float32 [N]");
  return true;
}

fbx_status *fbx__onnx_tr_mnb(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  fbx_ir_params p = fbx__msft_p0();
  p.nbits.K = fbx_onnx_attr_int(n, "K", 0);
  p.nbits.N = fbx_onnx_attr_int(n, "N", 0);
  p.nbits.bits = (int)fbx_onnx_attr_int(n, "bits", 4);
  p.nbits.block_size = (int)fbx_onnx_attr_int(n, "block_size", 32);
  p.nbits.accuracy_level = (int)fbx_onnx_attr_int(n, "accuracy_level", 0);
  const fbx_onnx_value *z = n->n_inputs > 3 && n->inputs[3] >= 0 ? fbx__onnx_tin_value(t, 3) : NULL;
  p.nbits.zp_u8 = !z || z->dtype == FBX_DTYPE_U8;
  int ins[5];
  for (int i = 0; i < 4; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  FBX_TRY(fbx__onnx_tin(t, 5, &ins[4]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_MATMUL_NBITS, ins, 5, &p);
}

/* ======================= GroupQueryAttention ======================= */

/* Optional attributes ORT fills with their defaults; any other value declines. */
static bool fbx__msft_gqa_attrs_ok(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  /* on when > 0 (ORT fills smooth_softmax with -1 = off) */
  static const char *const off_ints[] = {"smooth_softmax", "qk_output", "sliding_window_cache"};
  for (size_t i = 0; i < sizeof off_ints / sizeof off_ints[0]; i++)
    if (fbx_onnx_attr_int(n, off_ints[i], 0) > 0) return fbx__onnx_fail(c, "attribute %s not supported", off_ints[i]);
  if (fbx_onnx_attr_int(n, "causal", 1) != 1) return fbx__onnx_fail(c, "non-causal attention not supported");
  if (fbx_onnx_attr_int(n, "local_window_size", -1) != -1)
    return fbx__onnx_fail(c, "local_window_size not supported yet");
  static const char *const quant[] = {"k_quant_type", "v_quant_type"};
  for (int i = 0; i < 2; i++)
    if (strcmp(fbx_onnx_attr_string(n, quant[i], "NONE"), "NONE") != 0)
      return fbx__onnx_fail(c, "quantised KV cache (%s) not supported", quant[i]);
  if (fbx_onnx_attr_float(n, "softcap", 0.0f) < 0) return fbx__onnx_fail(c, "negative softcap");
  return true;
}

bool fbx__onnx_claim_gqa(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  int64_t nh = fbx_onnx_attr_int(n, "num_heads", 0), kvh = fbx_onnx_attr_int(n, "kv_num_heads", 0);
  if (nh < 1 || kvh < 1 || nh % kvh) return fbx__onnx_fail(c, "num_heads must be a multiple of kv_num_heads");
  if (!fbx__msft_gqa_attrs_ok(c)) return false;
  const fbx_onnx_value *q = fbx__onnx_cin(c, 0), *k = fbx__onnx_cin(c, 1), *v = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, q, FBX__DT(F32), "query")) return false;
  if (q->rank != 3 || q->dims[2] < 1)
    return fbx__onnx_fail(c, "query must be (batch, seq, hidden) with a static hidden size");
  if (!k != !v) return fbx__onnx_fail(c, "key and value must both be present or both absent (packed QKV)");
  int64_t hd = q->dims[2] / (k ? nh : nh + 2 * kvh);
  if (hd < 1 || q->dims[2] != hd * (k ? nh : nh + 2 * kvh))
    return fbx__onnx_fail(c, "query hidden size is not heads * head_size");
  if (k) {
    for (int i = 1; i <= 2; i++) {
      const fbx_onnx_value *x = fbx__onnx_cin(c, i);
      if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), i == 1 ? "key" : "value")) return false;
      if (x->rank != 3 || x->dims[2] != kvh * hd)
        return fbx__onnx_fail(c, "key/value must be (batch, seq, kv_num_heads*head_size)");
    }
  }
  const fbx_onnx_value *pk = fbx__onnx_cin(c, 3), *pv = fbx__onnx_cin(c, 4);
  if (!pk || !pv) return fbx__onnx_fail(c, "past_key/past_value required");
  for (int i = 3; i <= 4; i++) {
    const fbx_onnx_value *x = fbx__onnx_cin(c, i);
    if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "past key/value")) return false;
    if (x->rank != 4 || (x->dims[1] >= 0 && x->dims[1] != kvh) || (x->dims[3] >= 0 && x->dims[3] != hd))
      return fbx__onnx_fail(c, "past key/value must be BNSH (batch, kv_num_heads, past, head_size)");
  }
  for (int i = 5; i <= 6; i++)
    if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, i), FBX__DT(I32), i == 5 ? "seqlens_k" : "total_sequence_length"))
      return false;
  const fbx_onnx_value *cs = fbx__onnx_cin(c, 7), *sn = fbx__onnx_cin(c, 8);
  bool rot = fbx_onnx_attr_int(n, "do_rotary", 0) != 0;
  if (rot) {
    if (!cs || !sn) return fbx__onnx_fail(c, "do_rotary needs cos_cache and sin_cache");
    for (int i = 7; i <= 8; i++) {
      const fbx_onnx_value *x = fbx__onnx_cin(c, i);
      if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "cos/sin cache")) return false;
      if (x->rank != 2 || x->dims[1] < 1 || 2 * x->dims[1] > hd)
        return fbx__onnx_fail(c, "cos/sin cache must be (max_seq, rotary_dim/2) with rotary_dim <= head_size");
    }
  }
  for (int i = 9; i < n->n_inputs; i++)
    if (fbx__onnx_cin(c, i))
      return fbx__onnx_fail(c, "input %d (position_ids/attention_bias/head_sink/...) not supported", i);
  if (!fbx__onnx_cout(c, 1) || !fbx__onnx_cout(c, 2))
    return fbx__onnx_fail(c, "present_key/present_value outputs required");
  if (!fbx__onnx_no_out(c, 3, "output_qk")) return false;
  return true;
}

fbx_status *fbx__onnx_tr_gqa(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  fbx_ir_params p = fbx__msft_p0();
  p.gqa.num_heads = (int)fbx_onnx_attr_int(n, "num_heads", 0);
  p.gqa.kv_num_heads = (int)fbx_onnx_attr_int(n, "kv_num_heads", 0);
  p.gqa.do_rotary = fbx_onnx_attr_int(n, "do_rotary", 0) != 0;
  p.gqa.interleaved = fbx_onnx_attr_int(n, "rotary_interleaved", 0) != 0;
  p.gqa.scale = fbx_onnx_attr_float(n, "scale", 0.0f);
  p.gqa.softcap = fbx_onnx_attr_float(n, "softcap", 0.0f);
  int ins[9];
  for (int i = 0; i < 9; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  if (!p.gqa.do_rotary) ins[7] = ins[8] = FBX_IR_NONE;
  int outs[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_F32, i ? 4 : 3, &outs[i]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_GQA, ins, 9, outs, 3, &p, n->name ? n->name : "", n->op_type,
                                t->node_index, NULL));
  for (int i = 0; i < 3; i++) fbx__onnx_bind(t, i, outs[i]);
  return NULL;
}

/* ======================= RotaryEmbedding ======================= */

bool fbx__onnx_claim_rope(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *pos = fbx__onnx_cin(c, 1), *cs = fbx__onnx_cin(c, 2),
                       *sn = fbx__onnx_cin(c, 3);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!fbx__onnx_dt_ok(c, pos, FBX__DT(I64), "position_ids")) return false;
  if (!fbx__onnx_dt_ok(c, cs, FBX__DT(F32), "cos_cache") || !fbx__onnx_dt_ok(c, sn, FBX__DT(F32), "sin_cache"))
    return false;
  if (fbx_onnx_attr_int(n, "is_packed_batching", 0) != 0) return fbx__onnx_fail(c, "packed batching not supported");
  if (fbx_onnx_attr_float(n, "scale", 1.0f) != 1.0f) return fbx__onnx_fail(c, "scale != 1 not supported");
  if (x->rank != 3 && x->rank != 4) return fbx__onnx_fail(c, "input must be (B, S, hidden) or (B, N, S, H)");
  if (x->dims[x->rank - 1] < 1 || cs->rank != 2 || cs->dims[1] < 1 || sn->rank != 2 || sn->dims[1] != cs->dims[1])
    return fbx__onnx_fail(c, "static hidden size and (max_pos, rot/2) cos/sin caches required");
  int64_t nh = fbx_onnx_attr_int(n, "num_heads", 0), rd = fbx_onnx_attr_int(n, "rotary_embedding_dim", 0);
  int64_t H = x->rank == 4 ? x->dims[3] : nh > 0 ? x->dims[2] / nh : 2 * cs->dims[1];
  int64_t rot = rd > 0 ? rd : H;
  if (H < 2 || (x->rank == 3 && x->dims[2] % H) || rot > H || rot % 2 || 2 * cs->dims[1] < rot)
    return fbx__onnx_fail(c, "head_size %lld / rotary_embedding_dim %lld do not fit the input and caches", (long long)H,
                          (long long)rot);
  if (pos->rank != 1 && pos->rank != 2) return fbx__onnx_fail(c, "position_ids must be (1) or (B, S)");
  return true;
}

fbx_status *fbx__onnx_tr_rope(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__msft_p0();
  p.rope.num_heads = (int)fbx_onnx_attr_int(t->n, "num_heads", 0);
  p.rope.rot_dim = (int)fbx_onnx_attr_int(t->n, "rotary_embedding_dim", 0);
  p.rope.interleaved = fbx_onnx_attr_int(t->n, "interleaved", 0) != 0;
  int ins[4];
  for (int i = 0; i < 4; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_ROTARY, ins, 4, &p);
}
