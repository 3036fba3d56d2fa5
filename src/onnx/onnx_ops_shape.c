/* Shape ops: Shape, Expand, ConstantOfShape, Range, Tile, Pad (attrs v2,
 * inputs v11+), Constant. */
#include <math.h>
#include <string.h>

#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_ps(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* ======================= Shape ======================= */

bool fbx__onnx_claim_shape(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  if (fbx__onnx_cout(c, 0)->dtype != FBX_DTYPE_I64) return fbx__onnx_fail(c, "output must be int64");
  return true;
}

fbx_status *fbx__onnx_tr_shape(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_ps();
  p.shape.start = fbx_onnx_attr_int(t->n, "start", 0);
  p.shape.has_end = fbx_onnx_attr_find(t->n, "end") != NULL;
  p.shape.end = fbx_onnx_attr_int(t->n, "end", 0);
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_SHAPE, &x, 1, &p);
}

/* ======================= Expand / Tile ======================= */

static bool fbx__onnx_data_plus_i64(const fbx_onnx_cctx *c, const char *what) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  const fbx_onnx_value *s = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(I64), what)) return false;
  if (s->rank != 1) return fbx__onnx_fail(c, "%s must be 1-D", what);
  return true;
}

static fbx_status *fbx__onnx_tr_two(fbx_onnx_tctx *t, fbx_ir_op op) {
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  return fbx__onnx_emit_out(t, op, ins, 2, NULL);
}

bool fbx__onnx_claim_expand(const fbx_onnx_cctx *c) { return fbx__onnx_data_plus_i64(c, "shape"); }
fbx_status *fbx__onnx_tr_expand(fbx_onnx_tctx *t) { return fbx__onnx_tr_two(t, FBX_IR_OP_EXPAND); }
bool fbx__onnx_claim_tile(const fbx_onnx_cctx *c) { return fbx__onnx_data_plus_i64(c, "repeats"); }
fbx_status *fbx__onnx_tr_tile(fbx_onnx_tctx *t) { return fbx__onnx_tr_two(t, FBX_IR_OP_TILE); }

/* ======================= ConstantOfShape ======================= */

static bool fbx__onnx_cofs_value(const fbx_onnx_cctx *c, fbx_dtype *dt, double *v) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "value");
  *dt = FBX_DTYPE_F32;
  *v = 0.0;
  if (!a) return true;
  if (a->type != FBX_ONNX_ATTR_TENSOR || !a->t.data || fbx__onnx_tensor_numel(&a->t) != 1)
    return fbx__onnx_fail(c, "value must be a one-element tensor");
  *dt = a->t.dtype;
  size_t es = fbx_dtype_size(*dt);
  if (!es || a->t.nbytes < es) return fbx__onnx_fail(c, "value dtype (onnx type %d) not supported", a->t.onnx_type);
  const void *p = a->t.data;
  switch (*dt) {
#define X(name, onnx, bytes, ctype, str) \
    case FBX_DTYPE_##name: { ctype x; memcpy(&x, p, bytes); *v = (double)x; break; }
    FBX_DTYPE_LIST(X)
#undef X
    default: break;
  }
  if (*dt == FBX_DTYPE_F16) { uint16_t h; memcpy(&h, p, 2); *v = fbx_f16_to_f32(h); }
  if (*dt == FBX_DTYPE_BOOL) *v = *(const uint8_t *)p != 0;
  if ((*dt == FBX_DTYPE_I64 || *dt == FBX_DTYPE_U64) && fabs(*v) > 9007199254740992.0)
    return fbx__onnx_fail(c, "64-bit fill value beyond 2^53 not supported");
  return true;
}

bool fbx__onnx_claim_cofs(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *s = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(I64), "shape")) return false;
  if (s->rank != 1) return fbx__onnx_fail(c, "shape must be 1-D");
  fbx_dtype dt;
  double v;
  if (!fbx__onnx_cofs_value(c, &dt, &v)) return false;
  if (fbx__onnx_cout(c, 0)->dtype != dt) return fbx__onnx_fail(c, "output dtype differs from value dtype");
  return true;
}

fbx_status *fbx__onnx_tr_cofs(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p = fbx__onnx_ps();
  if (!fbx__onnx_cofs_value(&c, &p.fill.dtype, &p.fill.value)) return FBX_ERR_NOTIMPL("ConstantOfShape: bad value");
  int s;
  FBX_TRY(fbx__onnx_tin(t, 0, &s));
  return fbx__onnx_emit_out(t, FBX_IR_OP_CONSTANT_OF_SHAPE, &s, 1, &p);
}

/* ======================= Range ======================= */

bool fbx__onnx_claim_range(const fbx_onnx_cctx *c) {
  const uint32_t mask = FBX_ONNX_DT_F32_F64 | FBX__DT(I16) | FBX_ONNX_DT_IDX;
  const fbx_onnx_value *s = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, s, mask, "start")) return false;
  for (int i = 0; i < 3; i++) {
    const fbx_onnx_value *v = fbx__onnx_cin(c, i);
    if (!v || v->dtype != s->dtype) return fbx__onnx_fail(c, "start/limit/delta dtypes differ");
    if (v->rank != 0 && !(v->rank == 1 && v->dims[0] == 1)) return fbx__onnx_fail(c, "inputs must be scalars");
  }
  return true;
}

fbx_status *fbx__onnx_tr_range(fbx_onnx_tctx *t) {
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_RANGE, ins, 3, NULL);
}

/* ======================= Pad ======================= */

static int fbx__onnx_pad_mode(const char *m, int opset) {
  if (strcmp(m, "constant") == 0) return FBX_IR_PADMODE_CONSTANT;
  if (strcmp(m, "reflect") == 0) return FBX_IR_PADMODE_REFLECT;
  if (strcmp(m, "edge") == 0) return FBX_IR_PADMODE_EDGE;
  if (strcmp(m, "wrap") == 0 && opset >= 19) return FBX_IR_PADMODE_WRAP;
  return -1;
}

bool fbx__onnx_claim_pad(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  const char *m = fbx_onnx_attr_string(c->n, "mode", "constant");
  if (fbx__onnx_pad_mode(m, c->n->opset) < 0) return fbx__onnx_fail(c, "mode '%s' not supported", m);
  int64_t pads[2 * FBX_MAX_RANK];
  int np = 0;
  if (c->n->opset < 11) {
    if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_FLOAT, "input")) return false;
    const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "pads");
    if (!a || a->type != FBX_ONNX_ATTR_INTS || a->n_ints != 2 * x->rank)
      return fbx__onnx_fail(c, "pads attribute missing or not 2*rank long");
    for (int i = 0; i < a->n_ints; i++) pads[i] = a->ints[i];
    np = a->n_ints;
  } else {
    if (fbx_onnx_attr_find(c->n, "pads") || fbx_onnx_attr_find(c->n, "value"))
      return fbx__onnx_fail(c, "pads/value attributes not valid at opset %d", c->n->opset);
    if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "input")) return false;
    const fbx_onnx_value *pv = fbx__onnx_cin(c, 1), *cv = fbx__onnx_cin(c, 2);
    if (!fbx__onnx_dt_ok(c, pv, FBX__DT(I64), "pads")) return false;
    if (pv->rank != 1 || (pv->dims[0] >= 0 && pv->dims[0] != 2 * x->rank))
      return fbx__onnx_fail(c, "pads must be 1-D with 2*rank elements");
    if (cv && (cv->dtype != x->dtype || cv->rank > 1)) return fbx__onnx_fail(c, "constant_value dtype/rank invalid");
    if (fbx__onnx_cin(c, 3)) return fbx__onnx_fail(c, "axes input not supported");
    const fbx_onnx_tensor *pt = fbx__onnx_value_const(c->g, c->n->inputs[1]);
    if (pt && !fbx__onnx_tensor_ints(pt, pads, 2 * FBX_MAX_RANK, &np)) return fbx__onnx_fail(c, "pads unreadable");
  }
  for (int i = 0; i < np; i++)
    if (pads[i] < 0) return fbx__onnx_fail(c, "negative pads not supported");
  return true;
}

fbx_status *fbx__onnx_tr_pad(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_ir_params p = fbx__onnx_ps();
  p.pad.mode = (fbx_ir_pad_mode)fbx__onnx_pad_mode(fbx_onnx_attr_string(t->n, "mode", "constant"), t->n->opset);
  int ins[3] = {0, 0, FBX_IR_NONE};
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  if (t->n->opset < 11) {
    const fbx_onnx_attr *a = fbx_onnx_attr_find(t->n, "pads");
    FBX_TRY(fbx__onnx_const_i64s(t, a->ints, a->n_ints, &ins[1]));
    FBX_TRY(fbx__onnx_const_scalar(t, x->dtype, fbx_onnx_attr_float(t->n, "value", 0.0f), &ins[2]));
  } else {
    FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
    FBX_TRY(fbx__onnx_tin(t, 2, &ins[2]));
  }
  return fbx__onnx_emit_out(t, FBX_IR_OP_PAD, ins, ins[2] == FBX_IR_NONE ? 2 : 3, &p);
}

/* ======================= Constant ======================= */

bool fbx__onnx_claim_constant(const fbx_onnx_cctx *c) {
  if (c->n->n_attrs != 1) return fbx__onnx_fail(c, "expects exactly one value attribute");
  const fbx_onnx_attr *a = &c->n->attrs[0];
  if (strcmp(a->name, "value") == 0) {
    if (a->type != FBX_ONNX_ATTR_TENSOR) return fbx__onnx_fail(c, "value is not a tensor");
    if (a->t.dtype == FBX_DTYPE_UNDEFINED) return fbx__onnx_fail(c, "value dtype (onnx type %d) not supported", a->t.onnx_type);
    if (a->t.rank < 0 || a->t.rank > FBX_MAX_RANK) return fbx__onnx_fail(c, "value rank unsupported");
    int64_t numel = fbx__onnx_tensor_numel(&a->t);
    size_t need;
    if (numel < 0 || !fbx_size_mul((size_t)numel, fbx_dtype_size(a->t.dtype), &need))
      return fbx__onnx_fail(c, "value shape is not valid (negative dim or element count overflows int64)");
    if ((numel > 0 && !a->t.data) || a->t.nbytes < need) return fbx__onnx_fail(c, "value data not readable");
  }
  return true;
}

fbx_status *fbx__onnx_tr_constant(fbx_onnx_tctx *t) {
  const fbx_onnx_attr *a = &t->n->attrs[0];
  const fbx_onnx_value *o = fbx__onnx_tout_value(t, 0);
  int id;
  if (strcmp(a->name, "value") == 0) {
    static const char zero[8];
    FBX_TRY(fbx_ir_graph_add_const(t->ir, o->name, a->t.dtype, a->t.rank, a->t.dims, a->t.data ? a->t.data : zero, &id));
  } else if (strcmp(a->name, "value_float") == 0) {
    FBX_TRY(fbx_ir_graph_add_const(t->ir, o->name, FBX_DTYPE_F32, 0, NULL, &a->f, &id));
  } else if (strcmp(a->name, "value_int") == 0) {
    FBX_TRY(fbx_ir_graph_add_const(t->ir, o->name, FBX_DTYPE_I64, 0, NULL, &a->i, &id));
  } else if (strcmp(a->name, "value_ints") == 0) {
    FBX_TRY(fbx__onnx_const_i64s(t, a->ints, a->n_ints, &id));
  } else { /* value_floats */
    int64_t d = a->n_floats;
    static const float zf = 0;
    FBX_TRY(fbx_ir_graph_add_const(t->ir, o->name, FBX_DTYPE_F32, 1, &d, a->n_floats ? (const void *)a->floats : &zf, &id));
  }
  t->vmap[t->n->outputs[0]] = id;
  return NULL;
}
