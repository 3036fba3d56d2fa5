/* Index ops: Gather, GatherElements, GatherND, ScatterElements/Scatter,
 * ScatterND, OneHot, Trilu, TopK, NonZero. */
#include <string.h>

#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_pg(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* ======================= Gather family ======================= */

bool fbx__onnx_claim_gather(const fbx_onnx_cctx *c) {
  fbx_ir_op op = (fbx_ir_op)c->e->aux;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *idx = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "data")) return false;
  if (!fbx__onnx_dt_ok(c, idx, op == FBX_IR_OP_GATHER_ND ? FBX__DT(I64) : FBX_ONNX_DT_IDX, "indices")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar data not supported");
  if (op == FBX_IR_OP_GATHER_ND) {
    int64_t b = fbx_onnx_attr_int(c->n, "batch_dims", 0);
    if (b < 0 || b >= x->rank || b >= idx->rank) return fbx__onnx_fail(c, "batch_dims %lld invalid", (long long)b);
    /* index depth k = the indices' last dim: 0 (each empty tuple takes a whole batch slice)
     * is not implemented, and an unknown one might be 0 at run time */
    int64_t k = idx->dims[idx->rank - 1];
    if (k <= 0)
      return fbx__onnx_fail(c, "indices' last dim (index depth) %s: only a known depth >= 1 is supported",
                            k == 0 ? "is 0" : "unknown");
    if (b + k > x->rank)
      return fbx__onnx_fail(c, "batch_dims %lld + index depth %lld > data rank %d", (long long)b, (long long)k, x->rank);
    return true;
  }
  if (op == FBX_IR_OP_GATHER_ELEMENTS && idx->rank != x->rank) return fbx__onnx_fail(c, "indices rank differs from data");
  int a;
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 0), x->rank, false, &a)) return fbx__onnx_fail(c, "axis out of range");
  return true;
}

fbx_status *fbx__onnx_tr_gather(fbx_onnx_tctx *t) {
  fbx_ir_op op = (fbx_ir_op)t->e->aux;
  fbx_ir_params p = fbx__onnx_pg();
  if (op == FBX_IR_OP_GATHER_ND)
    p.axis.axis = (int)fbx_onnx_attr_int(t->n, "batch_dims", 0);
  else
    fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 0), fbx__onnx_tin_value(t, 0)->rank, false, &p.axis.axis);
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  return fbx__onnx_emit_out(t, op, ins, 2, &p);
}

/* ======================= Scatter family ======================= */

static int fbx__onnx_reduction(const char *s) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

bool fbx__onnx_claim_scatter(const fbx_onnx_cctx *c) {
  fbx_ir_op op = (fbx_ir_op)c->e->aux;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *idx = fbx__onnx_cin(c, 1), *u = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "data")) return false;
  if (!fbx__onnx_dt_ok(c, idx, op == FBX_IR_OP_SCATTER_ND ? FBX__DT(I64) : FBX_ONNX_DT_IDX, "indices")) return false;
  if (!u || u->dtype != x->dtype) return fbx__onnx_fail(c, "updates missing or dtype differs");
  const char *red = fbx_onnx_attr_string(c->n, "reduction", "none");
  int r = fbx__onnx_reduction(red);
  if (r < 0) return fbx__onnx_fail(c, "reduction '%s' not supported", red);
  if (r > 0 && !fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_NUM, "data (with reduction)")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar data not supported");
  if (op == FBX_IR_OP_SCATTER_ELEMENTS) {
    int a;
    if (idx->rank != x->rank || u->rank != x->rank) return fbx__onnx_fail(c, "indices/updates rank differs from data");
    if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 0), x->rank, false, &a)) return fbx__onnx_fail(c, "axis out of range");
  }
  return true;
}

fbx_status *fbx__onnx_tr_scatter(fbx_onnx_tctx *t) {
  fbx_ir_op op = (fbx_ir_op)t->e->aux;
  fbx_ir_params p = fbx__onnx_pg();
  if (op == FBX_IR_OP_SCATTER_ELEMENTS)
    fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 0), fbx__onnx_tin_value(t, 0)->rank, false, &p.scatter.axis);
  p.scatter.reduction = fbx__onnx_reduction(fbx_onnx_attr_string(t->n, "reduction", "none"));
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, op, ins, 3, &p);
}

/* ======================= OneHot ======================= */

bool fbx__onnx_claim_onehot(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *idx = fbx__onnx_cin(c, 0), *depth = fbx__onnx_cin(c, 1), *vals = fbx__onnx_cin(c, 2);
  /* any numeric indices (the kernel truncates them to int64) and depth (cast to int64) */
  if (!fbx__onnx_dt_ok(c, idx, FBX_ONNX_DT_NUM, "indices")) return false;
  if (!fbx__onnx_dt_ok(c, depth, FBX_ONNX_DT_NUM, "depth")) return false;
  if (!fbx__onnx_dt_ok(c, vals, FBX_ONNX_DT_ALL, "values")) return false;
  if (depth->rank > 1 || vals->rank != 1) return fbx__onnx_fail(c, "depth must be a scalar and values 1-D");
  int a;
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", -1), idx->rank + 1, false, &a))
    return fbx__onnx_fail(c, "axis out of range");
  return true;
}

fbx_status *fbx__onnx_tr_onehot(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pg();
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", -1), fbx__onnx_tin_value(t, 0)->rank + 1, false, &p.axis.axis);
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  if (t->ir->values[ins[1]].dtype != FBX_DTYPE_I64 && t->ir->values[ins[1]].dtype != FBX_DTYPE_I32)
    FBX_TRY(fbx__onnx_to_i64(t, ins[1], &ins[1]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_ONE_HOT, ins, 3, &p);
}

/* ======================= Trilu ======================= */

bool fbx__onnx_claim_trilu(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *k = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "input")) return false;
  if (x->rank < 2) return fbx__onnx_fail(c, "input rank %d < 2", x->rank);
  if (k && (!fbx__onnx_dt_ok(c, k, FBX__DT(I64), "k") || k->rank != 0)) return k->rank == 0 ? false : fbx__onnx_fail(c, "k must be a scalar");
  return true;
}

fbx_status *fbx__onnx_tr_trilu(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pg();
  p.trilu.upper = fbx_onnx_attr_int(t->n, "upper", 1) != 0;
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_TRILU, ins, ins[1] == FBX_IR_NONE ? 1 : 2, &p);
}

/* ======================= TopK ======================= */

bool fbx__onnx_claim_topk(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  int a;
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", -1), x->rank, false, &a)) return fbx__onnx_fail(c, "axis out of range");
  if (c->n->opset < 10) {
    if (fbx_onnx_attr_int(c->n, "k", -1) < 0) return fbx__onnx_fail(c, "attribute k missing");
  } else {
    if (fbx_onnx_attr_find(c->n, "k")) return fbx__onnx_fail(c, "k attribute not valid at opset %d", c->n->opset);
    const fbx_onnx_value *k = fbx__onnx_cin(c, 1);
    if (!fbx__onnx_dt_ok(c, k, FBX__DT(I64), "K")) return false;
    if (k->rank != 1 || (k->dims[0] >= 0 && k->dims[0] != 1)) return fbx__onnx_fail(c, "K must be 1-D with 1 element");
  }
  if (fbx_onnx_attr_int(c->n, "sorted", 1) == 0)
    return fbx__onnx_fail(c, "sorted=0 not supported (output order would differ from the reference)");
  const fbx_onnx_value *vi = fbx__onnx_cout(c, 1);
  if (vi && vi->dtype != FBX_DTYPE_I64) return fbx__onnx_fail(c, "indices output must be int64");
  return true;
}

fbx_status *fbx__onnx_tr_topk(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_ir_params p = fbx__onnx_pg();
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", -1), x->rank, false, &p.topk.axis);
  p.topk.largest = fbx_onnx_attr_int(t->n, "largest", 1) != 0;
  p.topk.sorted = 1;
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  if (t->n->opset < 10) {
    int64_t k = fbx_onnx_attr_int(t->n, "k", 1);
    FBX_TRY(fbx__onnx_const_i64s(t, &k, 1, &ins[1]));
  } else {
    FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  }
  int outs[2];
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, x->dtype, x->rank, &outs[0]));
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_I64, x->rank, &outs[1]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_TOPK, ins, 2, outs, 2, &p, t->n->name ? t->n->name : "", t->n->op_type,
                                t->node_index, NULL));
  fbx__onnx_bind(t, 0, outs[0]);
  fbx__onnx_bind(t, 1, outs[1]);
  return NULL;
}

/* ======================= NonZero ======================= */

bool fbx__onnx_claim_nonzero(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  if (fbx__onnx_cout(c, 0)->dtype != FBX_DTYPE_I64) return fbx__onnx_fail(c, "output must be int64");
  return true;
}

fbx_status *fbx__onnx_tr_nonzero(fbx_onnx_tctx *t) {
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_NON_ZERO, &x, 1, NULL);
}
