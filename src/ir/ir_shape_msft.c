/* Shape inference for the decoder ops (ORT contrib-op semantics):
 * SKIP_NORM, MATMUL_NBITS, GQA, ROTARY. Dispatch lives in ir_shape.c. */
#include <string.h>

#include "ir_shape_util.h"

/* Y and the sum like X; inv_std like X with the last dim 1. Every output float32. */
static fbx_status *fbx__ir_infer_skip_norm(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                                           int n_out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  const fbx_tensor *x = &in[0];
  if (x->rank < 1) return FBX__IR_FAIL(node, "input must have a hidden dim");
  int64_t h = x->dims[x->rank - 1];
  if (!fbx__ir_present(in, n_in, 2) || fbx__ir_numel(&in[2]) != h)
    return FBX__IR_FAIL(node, "gamma must have hidden_size (%lld) elements", (long long)h);
  if (fbx__ir_present(in, n_in, 1)) {
    int64_t sn = fbx__ir_numel(&in[1]), xn = fbx__ir_numel(x);
    if (in[1].rank < 1 || in[1].dims[in[1].rank - 1] != h || sn == 0 || xn % sn)
      return FBX__IR_FAIL(node, "skip does not broadcast over the input rows");
  }
  int want = 1 + node->params.skipnorm.has_sum + node->params.skipnorm.has_inv;
  if (n_out != want) return FBX__IR_FAIL(node, "%d outputs, params say %d", n_out, want);
  for (int o = 0; o < n_out; o++) {
    out[o].rank = x->rank;
    memcpy(out[o].dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    out[o].dtype = FBX_DTYPE_F32;
  }
  if (node->params.skipnorm.has_inv) out[n_out - 1].dims[x->rank - 1] = 1;
  return NULL;
}

/* Y = A's shape with the last dim K replaced by N (glu: N / 2). */
static fbx_status *fbx__ir_infer_nbits(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 3);
  const fbx_tensor *a = &in[0];
  if (a->rank < 1 || a->dims[a->rank - 1] != node->params.nbits.K)
    return FBX__IR_FAIL(node, "A's last dim must be K=%lld", (long long)node->params.nbits.K);
  out->rank = a->rank;
  memcpy(out->dims, a->dims, sizeof(int64_t) * (size_t)a->rank);
  if (node->params.nbits.glu && node->params.nbits.N % 2)
    return FBX__IR_FAIL(node, "glu with an odd N=%lld", (long long)node->params.nbits.N);
  out->dims[a->rank - 1] = node->params.nbits.glu ? node->params.nbits.N / 2 : node->params.nbits.N;
  out->dtype = a->dtype;
  return NULL;
}

/* GQA: out (B, S, nh*H); present (B, kvh, max(total_len, past_len), H),
 * total_len read from input 6 (host data). */
static fbx_status *fbx__ir_infer_gqa(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                                     int n_out) {
  FBX__IR_NEED_IN(node, n_in, 7);
  const int nh = node->params.gqa.num_heads, kvh = node->params.gqa.kv_num_heads;
  const fbx_tensor *q = &in[0];
  if (q->rank != 3 || nh < 1 || kvh < 1 || nh % kvh)
    return FBX__IR_FAIL(node, "query must be (B, S, D), heads %d/%d", nh, kvh);
  bool packed = !fbx__ir_present(in, n_in, 1);
  int64_t hd = q->dims[2] / (packed ? nh + 2 * kvh : nh);
  if (hd < 1 || q->dims[2] != hd * (packed ? nh + 2 * kvh : nh)) return FBX__IR_FAIL(node, "query hidden size");
  int64_t past = 0;
  if (fbx__ir_present(in, n_in, 3)) {
    const fbx_tensor *pk = &in[3];
    if (pk->rank != 4 || pk->dims[0] != q->dims[0] || pk->dims[1] != kvh || pk->dims[3] != hd)
      return FBX__IR_FAIL(node, "past_key must be (B, kv_num_heads, past, head_size)");
    past = pk->dims[2];
  }
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 6));
  if (fbx__ir_numel(&in[6]) != 1) return FBX__IR_FAIL(node, "total_sequence_length must have one element");
  int64_t total = fbx__ir_read_i64(&in[6], 0), len = total > past ? total : past;
  if (total < q->dims[1]) return FBX__IR_FAIL(node, "total_sequence_length %lld < sequence length", (long long)total);
  if (n_out != 3) return FBX__IR_FAIL(node, "needs output, present_key, present_value");
  out[0].rank = 3, out[0].dims[0] = q->dims[0], out[0].dims[1] = q->dims[1], out[0].dims[2] = nh * hd;
  for (int o = 1; o < 3; o++) {
    out[o].rank = 4;
    out[o].dims[0] = q->dims[0], out[o].dims[1] = kvh, out[o].dims[2] = len, out[o].dims[3] = hd;
  }
  for (int o = 0; o < 3; o++) out[o].dtype = q->dtype;
  return NULL;
}

fbx_status *fbx_ir_append_rows(const fbx_ir_node *node, int out, const fbx_tensor *in, int n_in,
                               const fbx_tensor *output, int64_t b, int64_t *first, int64_t *count) {
  *first = *count = 0;
  if (node->op != FBX_IR_OP_GQA || fbx_ir_op_append_input(node->op, out) < 0)
    return FBX__IR_FAIL(node, "output %d does not append rows to an input", out);
  FBX__IR_NEED_IN(node, n_in, 7);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 5));
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 6));
  const fbx_tensor *q = &in[0];
  if (q->rank != 3 || output->rank != 4 || b < 0 || b >= q->dims[0] || fbx__ir_numel(&in[5]) < q->dims[0] ||
      fbx__ir_numel(&in[6]) != 1)
    return FBX__IR_FAIL(node, "append rows: query (B, S, D), present (B, heads, len, H), seqlens_k (B)");
  const int64_t S = q->dims[1], total = fbx__ir_read_i64(&in[6], 0), L = output->dims[2];
  const int64_t r0 = S == total ? 0 : fbx__ir_read_i64(&in[5], b) + 1 - S;
  if (r0 < 0 || r0 + S > L)
    return FBX__IR_FAIL(node, "new rows [%lld, %lld) of batch %lld outside present's %lld rows", (long long)r0,
                        (long long)(r0 + S), (long long)b, (long long)L);
  *first = r0;
  *count = S;
  return NULL;
}

fbx_status *fbx_ir_append_row_count(const fbx_ir_node *node, int out, const fbx_tensor *in, int n_in,
                                    int64_t *count) {
  *count = 0;
  if (node->op != FBX_IR_OP_GQA || fbx_ir_op_append_input(node->op, out) < 0)
    return FBX__IR_FAIL(node, "output %d does not append rows to an input", out);
  FBX__IR_NEED_IN(node, n_in, 1);
  if (in[0].rank != 3) return FBX__IR_FAIL(node, "append rows: query must be (B, S, D)");
  *count = in[0].dims[1]; /* S new rows, as fbx_ir_append_rows */
  return NULL;
}

fbx_status *fbx__ir_infer_msft(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out, int n_out) {
  switch (node->op) {
    case FBX_IR_OP_SKIP_NORM: return fbx__ir_infer_skip_norm(node, in, n_in, out, n_out);
    case FBX_IR_OP_MATMUL_NBITS: return fbx__ir_infer_nbits(node, in, n_in, out);
    case FBX_IR_OP_GQA: return fbx__ir_infer_gqa(node, in, n_in, out, n_out);
    case FBX_IR_OP_ROTARY:
      FBX__IR_NEED_IN(node, n_in, 4);
      if (in[0].rank != 3 && in[0].rank != 4) return FBX__IR_FAIL(node, "input must be 3-D or 4-D");
      out[0].rank = in[0].rank;
      memcpy(out[0].dims, in[0].dims, sizeof(int64_t) * (size_t)in[0].rank);
      out[0].dtype = in[0].dtype;
      return NULL;
    default: return FBX_ERR_NOTIMPL("not a decoder op");
  }
}
