/* Reductions (Reduce*: axes attribute or input by opset, keepdims,
 * noop_with_empty_axes), ArgMax/ArgMin and CumSum. */
#include <string.h>

#include "onnx_ops.h"

/* The opset from which axes is an input (and noop_with_empty_axes exists). */
static int fbx__onnx_reduce_axes_input_opset(const fbx_onnx_node *n) {
  return strcmp(n->op_type, "ReduceSum") == 0 ? 13 : 18;
}

static uint32_t fbx__onnx_reduce_mask(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_REDUCE_SUM: case FBX_IR_OP_REDUCE_MAX: case FBX_IR_OP_REDUCE_MIN: case FBX_IR_OP_REDUCE_PROD:
      return FBX_ONNX_DT_F32_F64 | FBX_ONNX_DT_IDX;
    default: return FBX_ONNX_DT_F32_F64;
  }
}

/* Reads the reduce axes (attr or constant input). *n = 0 when absent/empty.
 * Returns false with a reason when unreadable. */
static bool fbx__onnx_reduce_axes(const fbx_onnx_cctx *c, int64_t *axes, int *n) {
  *n = 0;
  if (c->n->opset >= fbx__onnx_reduce_axes_input_opset(c->n)) {
    if (fbx_onnx_attr_find(c->n, "axes")) return fbx__onnx_fail(c, "axes attribute not valid at opset %d", c->n->opset);
    if (!fbx__onnx_cin(c, 1)) return true;
    const fbx_onnx_tensor *t = fbx__onnx_cconst(c, 1, "axes input");
    if (!t) return false;
    if (!fbx__onnx_tensor_ints(t, axes, FBX_MAX_RANK, n)) return fbx__onnx_fail(c, "axes input unreadable");
    return true;
  }
  if (c->n->n_inputs > 1) return fbx__onnx_fail(c, "axes input not valid at opset %d", c->n->opset);
  if (fbx_onnx_attr_find(c->n, "noop_with_empty_axes"))
    return fbx__onnx_fail(c, "noop_with_empty_axes not valid at opset %d", c->n->opset);
  const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "axes");
  if (!a) return true;
  if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints > FBX_MAX_RANK) return fbx__onnx_fail(c, "bad axes attribute");
  for (int i = 0; i < a->n_ints; i++) axes[i] = a->ints[i];
  *n = a->n_ints;
  return true;
}

static bool fbx__onnx_axes_mask(const fbx_onnx_cctx *c, const int64_t *axes, int n, int rank, uint32_t *mask) {
  *mask = 0;
  for (int i = 0; i < n; i++) {
    int a;
    if (!fbx__onnx_axis(axes[i], rank, false, &a))
      return fbx__onnx_fail(c, "axis %lld out of range for rank %d", (long long)axes[i], rank);
    if (*mask & (1u << a)) return fbx__onnx_fail(c, "duplicate axis %d", a);
    *mask |= 1u << a;
  }
  return true;
}

bool fbx__onnx_claim_reduce(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, fbx__onnx_reduce_mask((fbx_ir_op)c->e->aux), "input")) return false;
  if (fbx__onnx_cout(c, 0)->dtype != x->dtype) return fbx__onnx_fail(c, "output dtype differs from input");
  int64_t axes[FBX_MAX_RANK];
  int n;
  uint32_t mask;
  if (!fbx__onnx_reduce_axes(c, axes, &n)) return false;
  return fbx__onnx_axes_mask(c, axes, n, x->rank, &mask);
}

fbx_status *fbx__onnx_tr_reduce(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  int64_t axes[FBX_MAX_RANK];
  int n;
  uint32_t mask;
  if (!fbx__onnx_reduce_axes(&c, axes, &n) || !fbx__onnx_axes_mask(&c, axes, n, x->rank, &mask))
    return FBX_ERR_NOTIMPL("%s: axes not translatable", t->n->op_type);
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  if (n == 0) {
    if (fbx_onnx_attr_int(t->n, "noop_with_empty_axes", 0) != 0)
      return fbx__onnx_emit_out(t, FBX_IR_OP_IDENTITY, &xin, 1, NULL);
    mask = x->rank > 0 ? (uint32_t)((1u << x->rank) - 1u) : 0u;
  }
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.reduce.axes_mask = mask;
  p.reduce.keepdims = fbx_onnx_attr_int(t->n, "keepdims", 1) != 0;
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &xin, 1, &p);
}

/* ---- ArgMax / ArgMin ---- */

bool fbx__onnx_claim_argmax(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_F32_F64 | FBX_ONNX_DT_IDX, "input")) return false;
  if (fbx__onnx_cout(c, 0)->dtype != FBX_DTYPE_I64) return fbx__onnx_fail(c, "output must be int64");
  int a;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 0), x->rank, false, &a))
    return fbx__onnx_fail(c, "axis out of range");
  return true;
}

fbx_status *fbx__onnx_tr_argmax(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 0), x->rank, false, &p.arg.axis);
  p.arg.keepdims = fbx_onnx_attr_int(t->n, "keepdims", 1) != 0;
  p.arg.select_last = fbx_onnx_attr_int(t->n, "select_last_index", 0) != 0;
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &xin, 1, &p);
}

/* ---- CumSum: axis is a constant scalar input ---- */

/* A runtime axis selects among one CUMSUM per possible axis (WHERE on
 * axis == k or axis == k - rank): rank CUMSUMs, so the rank is bounded. */
#define FBX__ONNX_CUMSUM_RT_MAXRANK 4

static bool fbx__onnx_cumsum_axis(const fbx_onnx_cctx *c, int *axis) {
  const fbx_onnx_tensor *at = fbx__onnx_cconst(c, 1, "axis input");
  if (!at) return false;
  int64_t v[1];
  int n;
  if (!fbx__onnx_tensor_ints(at, v, 1, &n) || n != 1) return fbx__onnx_fail(c, "axis must be an int scalar");
  if (!fbx__onnx_axis(v[0], fbx__onnx_cin(c, 0)->rank, false, axis)) return fbx__onnx_fail(c, "axis out of range");
  return true;
}

static bool fbx__onnx_cumsum_axis_const(const fbx_onnx_graph *g, const fbx_onnx_node *n) {
  return n->n_inputs > 1 && fbx__onnx_value_const(g, n->inputs[1]) != NULL;
}

bool fbx__onnx_claim_cumsum(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *a = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_F32_F64 | FBX_ONNX_DT_IDX, "input")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  if (!a) return fbx__onnx_fail(c, "axis input missing");
  if (!fbx__onnx_cumsum_axis_const(c->g, c->n)) {
    if (!fbx__onnx_dt_ok(c, a, FBX_ONNX_DT_IDX, "axis")) return false;
    if (a->rank > 1 || (a->rank == 1 && a->dims[0] != 1))
      return fbx__onnx_fail(c, "runtime axis must be a scalar (or a 1-element 1-D tensor)");
    if (x->rank > FBX__ONNX_CUMSUM_RT_MAXRANK)
      return fbx__onnx_fail(c, "runtime axis: input rank %d > %d (one CUMSUM per candidate axis)", x->rank,
                            FBX__ONNX_CUMSUM_RT_MAXRANK);
    return true;
  }
  int axis;
  return fbx__onnx_cumsum_axis(c, &axis);
}

fbx_status *fbx__onnx_tr_cumsum(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.cumsum.exclusive = fbx_onnx_attr_int(t->n, "exclusive", 0) != 0;
  p.cumsum.reverse = fbx_onnx_attr_int(t->n, "reverse", 0) != 0;
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  if (fbx__onnx_cumsum_axis_const(t->g, t->n)) {
    if (!fbx__onnx_cumsum_axis(&c, &p.cumsum.axis)) return FBX_ERR_NOTIMPL("CumSum: bad constant axis");
    return fbx__onnx_emit_out(t, FBX_IR_OP_CUMSUM, &xin, 1, &p);
  }
  /* Runtime axis: y = axis selects k ? cumsum_k : (... : cumsum_{r-1}). The last-axis
   * CUMSUM also takes the axis as its second input: its kernel fails the run on an axis
   * outside [-r, r) (as ORT does), which the Where chain alone would answer with the last
   * axis' sum. */
  t->composed = "axis known only at run time: one CumSum per candidate axis, selected with Where";
  const fbx_onnx_value *xv = fbx__onnx_tin_value(t, 0), *av = fbx__onnx_tin_value(t, 1);
  int r = xv->rank, ax;
  FBX_TRY(fbx__onnx_tin(t, 1, &ax));
  int y;
  p.cumsum.axis = r - 1;
  int base_in[2] = {xin, ax};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CUMSUM, base_in, 2, &p, xv->dtype, r, &y));
  for (int k = r - 2; k >= 0; k--) {
    int ck, kp, kn, ep, en, sel, ins[2], w[3];
    p.cumsum.axis = k;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CUMSUM, &xin, 1, &p, xv->dtype, r, &ck));
    FBX_TRY(fbx__onnx_const_scalar(t, av->dtype, k, &kp));
    FBX_TRY(fbx__onnx_const_scalar(t, av->dtype, k - r, &kn));
    ins[0] = ax; ins[1] = kp;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_EQUAL, ins, 2, NULL, FBX_DTYPE_BOOL, av->rank, &ep));
    ins[1] = kn;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_EQUAL, ins, 2, NULL, FBX_DTYPE_BOOL, av->rank, &en));
    ins[0] = ep; ins[1] = en;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_OR, ins, 2, NULL, FBX_DTYPE_BOOL, av->rank, &sel));
    w[0] = sel; w[1] = ck; w[2] = y;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_WHERE, w, 3, NULL, xv->dtype, r, &y));
  }
  fbx__onnx_bind(t, 0, y);
  return NULL;
}
