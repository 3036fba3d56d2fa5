/* Softmax / LogSoftmax / Hardmax (opset < 13: coerced to 2-D at axis),
 * LayerNormalization, InstanceNormalization, BatchNormalization (inference),
 * LRN, MeanVarianceNormalization (composed). */
#include <math.h>
#include <string.h>

#include "../base/alloc.h"
#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_p0(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* ======================= softmax family ======================= */

static int64_t fbx__onnx_softmax_axis_attr(const fbx_onnx_node *n) {
  return fbx_onnx_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);
}

bool fbx__onnx_claim_softmax(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  int a;
  if (!fbx__onnx_axis(fbx__onnx_softmax_axis_attr(c->n), x->rank, false, &a))
    return fbx__onnx_fail(c, "axis %lld out of range for rank %d", (long long)fbx__onnx_softmax_axis_attr(c->n),
                          x->rank);
  return true;
}

/* opset >= 13: one axis. opset < 13: the input is viewed as 2-D
 * [d0*..*d(axis-1), d(axis)*..*d(r-1)] and normalised over the second dim:
 * RESHAPE to [0,..,0,-1] (axis zeros copy the leading dims) -> op(last) ->
 * RESHAPE back to SHAPE(x). */
fbx_status *fbx__onnx_tr_softmax(fbx_onnx_tctx *t) {
  fbx_ir_op op = (fbx_ir_op)t->e->aux;
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  int axis;
  fbx__onnx_axis(fbx__onnx_softmax_axis_attr(t->n), x->rank, false, &axis);
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  fbx_ir_params p = fbx__onnx_p0();
  if (t->n->opset >= 13 || axis == x->rank - 1) {
    p.axis.axis = axis;
    return fbx__onnx_emit_out(t, op, &xin, 1, &p);
  }
  int64_t shp[FBX_MAX_RANK];
  for (int i = 0; i < axis; i++) shp[i] = 0;
  shp[axis] = -1;
  int shp_id, flat, sm, shape_of_x;
  FBX_TRY(fbx__onnx_const_i64s(t, shp, axis + 1, &shp_id));
  int rins[2] = {xin, shp_id};
  fbx_ir_params rp = fbx__onnx_p0();
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_RESHAPE, rins, 2, &rp, x->dtype, axis + 1, &flat));
  p.axis.axis = axis;
  FBX_TRY(fbx__onnx_emit(t, op, &flat, 1, &p, x->dtype, axis + 1, &sm));
  fbx_ir_params sp = fbx__onnx_p0();
  sp.shape.start = 0;
  sp.shape.has_end = 0;
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SHAPE, &xin, 1, &sp, FBX_DTYPE_I64, 1, &shape_of_x));
  int bins[2] = {sm, shape_of_x};
  return fbx__onnx_emit_out(t, FBX_IR_OP_RESHAPE, bins, 2, &rp);
}

/* ======================= LayerNormalization ======================= */

/* scale/bias v must broadcast as a suffix of x's normalised dims: after its
 * leading 1s, its dims equal x's trailing dims (the kernel indexes i % numel). */
static bool fbx__onnx_ln_suffix(const fbx_onnx_value *v, const fbx_onnx_value *x, int axis) {
  int k = 0;
  while (k < v->rank && v->dims[k] == 1) k++;
  int m = v->rank - k;
  if (m > x->rank - axis) return false;
  for (int i = 0; i < m; i++) {
    int64_t a = v->dims[k + i], b = x->dims[x->rank - m + i];
    if (a < 0 || a != b) return false;
  }
  return true;
}

bool fbx__onnx_claim_layernorm(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *s = fbx__onnx_cin(c, 1), *b = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!s || s->dtype != x->dtype || (b && b->dtype != x->dtype))
    return fbx__onnx_fail(c, "scale/bias must be present (scale) and of the input dtype");
  int a;
  if (x->rank < 1 || !fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", -1), x->rank, false, &a))
    return fbx__onnx_fail(c, "axis out of range");
  if (fbx_onnx_attr_int(c->n, "stash_type", 1) != 1) return fbx__onnx_fail(c, "stash_type other than float not supported");
  if (!fbx__onnx_ln_suffix(s, x, a) || (b && !fbx__onnx_ln_suffix(b, x, a)))
    return fbx__onnx_fail(c, "scale/bias shape is not a static suffix of the normalised dims");
  for (int i = 1; i <= 2; i++) {
    const fbx_onnx_value *o = fbx__onnx_cout(c, i);
    if (o && o->dtype != FBX_DTYPE_F32) return fbx__onnx_fail(c, "output %d must be float32", i);
  }
  return true;
}

/* Y plus the optional Mean / InvStdDev outputs (float32, normalised dims = 1),
 * which the LAYER_NORM kernel fills when present. */
fbx_status *fbx__onnx_tr_layernorm(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_ir_params p = fbx__onnx_p0();
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", -1), x->rank, false, &p.norm.axis);
  p.norm.epsilon = fbx_onnx_attr_float(t->n, "epsilon", 1e-5f);
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  int n_ins = ins[2] == FBX_IR_NONE ? 2 : 3;
  int n_outs = 1;
  for (int i = 1; i < 3 && i < t->n->n_outputs; i++)
    if (fbx__onnx_tout_value(t, i)) n_outs = i + 1;
  if (n_outs == 1) return fbx__onnx_emit_out(t, FBX_IR_OP_LAYER_NORM, ins, n_ins, &p);
  int outs[3];
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, x->dtype, x->rank, &outs[0]));
  for (int i = 1; i < n_outs; i++) FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_F32, x->rank, &outs[i]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_LAYER_NORM, ins, n_ins, outs, n_outs, &p,
                                t->n->name ? t->n->name : "", t->n->op_type, t->node_index, NULL));
  for (int i = 0; i < n_outs; i++) fbx__onnx_bind(t, i, outs[i]);
  return NULL;
}

/* ======================= InstanceNormalization ======================= */

bool fbx__onnx_claim_instnorm(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *s = fbx__onnx_cin(c, 1), *b = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!s || !b || s->dtype != x->dtype || b->dtype != x->dtype) return fbx__onnx_fail(c, "scale/B missing or dtype differs");
  if (x->rank < 3) return fbx__onnx_fail(c, "input rank %d < 3", x->rank);
  /* scale and B are [C]; a wrong length is an invalid model (ORT rejects it).
   * Unknown lengths are checked at run by shape inference. */
  if (s->rank != 1 || b->rank != 1) return fbx__onnx_fail(c, "scale/B must be 1-D");
  int64_t C = x->dims[1];
  for (int i = 0; i < 2; i++) {
    int64_t n = (i ? b : s)->dims[0];
    if (C >= 0 && n >= 0 && n != C)
      return fbx__onnx_fail(c, "%s has %lld elements, the input has %lld channels", i ? "B" : "scale", (long long)n,
                            (long long)C);
  }
  if (s->dims[0] >= 0 && b->dims[0] >= 0 && s->dims[0] != b->dims[0])
    return fbx__onnx_fail(c, "scale and B lengths differ (%lld, %lld)", (long long)s->dims[0], (long long)b->dims[0]);
  return true;
}

fbx_status *fbx__onnx_tr_instnorm(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_p0();
  p.norm.axis = 2;
  p.norm.epsilon = fbx_onnx_attr_float(t->n, "epsilon", 1e-5f);
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_INSTANCE_NORM, ins, 3, &p);
}

/* ======================= BatchNormalization ======================= */

/* All of scale, B, mean, var readable constants with C elements each? */
static bool fbx__onnx_bn_consts(const fbx_onnx_graph *g, const fbx_onnx_node *n, int64_t *C) {
  int64_t c0 = -1;
  for (int i = 1; i <= 4; i++) {
    const fbx_onnx_tensor *t = fbx__onnx_value_const(g, n->inputs[i]);
    if (!t || !fbx_dtype_is_float(t->dtype) || t->rank != 1) return false;
    if (c0 < 0) c0 = t->dims[0];
    if (t->dims[0] != c0) return false;
  }
  *C = c0;
  return c0 > 0 && c0 <= (1 << 24);
}

bool fbx__onnx_claim_batchnorm(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_FLOAT, "input")) return false;
  if (c->n->n_inputs != 5) return fbx__onnx_fail(c, "expects 5 inputs");
  for (int i = 1; i < 5; i++)
    if (!fbx__onnx_cin(c, i)) return fbx__onnx_fail(c, "input %d missing", i);
  if (x->rank < 2) return fbx__onnx_fail(c, "input rank %d < 2", x->rank);
  if (fbx_onnx_attr_int(c->n, "training_mode", 0) != 0) return fbx__onnx_fail(c, "training_mode=1 not supported");
  if (fbx_onnx_attr_int(c->n, "spatial", 1) != 1) return fbx__onnx_fail(c, "spatial=0 not supported");
  for (int i = 1; i < c->n->n_outputs; i++)
    if (!fbx__onnx_no_out(c, i, "training statistics")) return false;
  /* The parameters are [C] and are broadcast as [C, 1, ...]: with an unknown
   * channel count a wrong length could broadcast silently (C = 1, or an input
   * of 1 channel) where ORT reports an invalid model, so C must be known. */
  if (x->dims[1] < 0) return fbx__onnx_fail(c, "input channel count unknown (parameter lengths cannot be checked)");
  int64_t C;
  if (fbx__onnx_bn_consts(c->g, c->n, &C)) {
    if (x->dims[1] != C) return fbx__onnx_fail(c, "channel count mismatch");
    return true;
  }
  for (int i = 1; i < 5; i++) {
    const fbx_onnx_value *v = fbx__onnx_cin(c, i);
    if (v->dtype != x->dtype || v->rank != 1)
      return fbx__onnx_fail(c, "non-constant parameters must be 1-D of the input dtype");
    if (v->dims[0] != x->dims[1])
      return fbx__onnx_fail(c, "parameter %d has %lld elements, the input has %lld channels (or unknown)", i,
                            (long long)v->dims[0], (long long)x->dims[1]);
  }
  return true;
}

/* Constants: y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a
 * (per channel, shaped [C,1,..] to broadcast over NC...). Otherwise composed:
 * y = (x - mean) / sqrt(var + eps) * scale + B. */
fbx_status *fbx__onnx_tr_batchnorm(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_dtype dt = x->dtype;
  double eps = fbx_onnx_attr_float(t->n, "epsilon", 1e-5f);
  int r = x->rank - 1;
  int64_t pdims[FBX_MAX_RANK];
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  int64_t C;
  if (fbx__onnx_bn_consts(t->g, t->n, &C)) {
    double *buf = fbx_malloc(sizeof(double) * (size_t)C * 6);
    if (!buf) return FBX_ERR_OOM();
    double *sc = buf, *bb = buf + C, *mu = buf + 2 * C, *var = buf + 3 * C, *a = buf + 4 * C, *b = buf + 5 * C;
    double *dst[4] = {sc, bb, mu, var};
    for (int i = 0; i < 4; i++) {
      int nread;
      if (!fbx__onnx_tensor_f64s(fbx__onnx_value_const(t->g, t->n->inputs[i + 1]), dst[i], (int)C, &nread) ||
          nread != C) {
        fbx_free(buf);
        return FBX_ERR_ARG("BatchNormalization: parameter %d unreadable", i + 1);
      }
    }
    for (int64_t ch = 0; ch < C; ch++) {
      a[ch] = sc[ch] / sqrt(var[ch] + eps);
      b[ch] = bb[ch] - mu[ch] * a[ch];
    }
    pdims[0] = C;
    for (int i = 1; i < r; i++) pdims[i] = 1;
    int aid, bid, mul;
    fbx_status *st = fbx__onnx_const_f64s(t, dt, a, r, pdims, &aid);
    if (!st) st = fbx__onnx_const_f64s(t, dt, b, r, pdims, &bid);
    fbx_free(buf);
    if (st) return st;
    int mins[2] = {xin, aid};
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MUL, mins, 2, NULL, dt, x->rank, &mul));
    int ains[2] = {mul, bid};
    return fbx__onnx_emit_out(t, FBX_IR_OP_ADD, ains, 2, NULL);
  }
  /* composed path: reshape each parameter to [-1, 1, ..] */
  t->composed = "parameters not constant: composed from Sub/Add/Sqrt/Div/Mul instead of one folded scale+shift";
  pdims[0] = -1;
  for (int i = 1; i < r; i++) pdims[i] = 1;
  int shp, prm[4];
  FBX_TRY(fbx__onnx_const_i64s(t, pdims, r, &shp));
  fbx_ir_params rp = fbx__onnx_p0();
  for (int i = 0; i < 4; i++) {
    int ins[2] = {0, shp};
    FBX_TRY(fbx__onnx_tin(t, i + 1, &ins[0]));
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_RESHAPE, ins, 2, &rp, dt, r, &prm[i]));
  }
  int epsid, v1, sd, xc, xn, xs;
  FBX_TRY(fbx__onnx_const_scalar(t, dt, eps, &epsid));
  int i1[2] = {prm[3], epsid};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_ADD, i1, 2, NULL, dt, r, &v1));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SQRT, &v1, 1, NULL, dt, r, &sd));
  int i2[2] = {xin, prm[2]};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SUB, i2, 2, NULL, dt, x->rank, &xc));
  int i3[2] = {xc, sd};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_DIV, i3, 2, NULL, dt, x->rank, &xn));
  int i4[2] = {xn, prm[0]};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MUL, i4, 2, NULL, dt, x->rank, &xs));
  int i5[2] = {xs, prm[1]};
  return fbx__onnx_emit_out(t, FBX_IR_OP_ADD, i5, 2, NULL);
}

/* ======================= LRN ======================= */

bool fbx__onnx_claim_lrn(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 3) return fbx__onnx_fail(c, "input rank %d < 3", x->rank);
  int64_t size = fbx_onnx_attr_int(c->n, "size", 0);
  if (size < 1 || size > 4096) return fbx__onnx_fail(c, "size %lld invalid", (long long)size);
  return true;
}

fbx_status *fbx__onnx_tr_lrn(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_p0();
  p.lrn.size = (int)fbx_onnx_attr_int(t->n, "size", 1);
  p.lrn.alpha = fbx_onnx_attr_float(t->n, "alpha", 1e-4f);
  p.lrn.beta = fbx_onnx_attr_float(t->n, "beta", 0.75f);
  p.lrn.bias = fbx_onnx_attr_float(t->n, "bias", 1.0f);
  int xin;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  return fbx__onnx_emit_out(t, FBX_IR_OP_LRN, &xin, 1, &p);
}

/* ======================= MeanVarianceNormalization ======================= */

static bool fbx__onnx_mvn_mask(const fbx_onnx_node *n, int rank, uint32_t *mask) {
  static const int64_t dflt[3] = {0, 2, 3};
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, "axes");
  const int64_t *axes = a ? a->ints : dflt;
  int na = a ? a->n_ints : 3;
  if (a && a->type != FBX_ONNX_ATTR_INTS) return false;
  *mask = 0;
  for (int i = 0; i < na; i++) {
    int ax;
    if (!fbx__onnx_axis(axes[i], rank, false, &ax) || (*mask & (1u << ax))) return false;
    *mask |= 1u << ax;
  }
  return *mask != 0;
}

bool fbx__onnx_claim_mvn(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_F32_F64, "input")) return false;
  uint32_t m;
  if (!fbx__onnx_mvn_mask(c->n, x->rank, &m)) return fbx__onnx_fail(c, "axes invalid for rank %d", x->rank);
  return true;
}

/* y = (x - E[x]) / (sqrt(E[(x - E[x])^2]) + 1e-9), reduced over axes. */
fbx_status *fbx__onnx_tr_mvn(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  fbx_dtype dt = x->dtype;
  int r = x->rank;
  fbx_ir_params rp = fbx__onnx_p0();
  if (!fbx__onnx_mvn_mask(t->n, r, &rp.reduce.axes_mask)) return FBX_ERR_NOTIMPL("MVN: bad axes");
  rp.reduce.keepdims = 1;
  int xin, mean, xc, sq, var, sd, epsid, den;
  FBX_TRY(fbx__onnx_tin(t, 0, &xin));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_REDUCE_MEAN, &xin, 1, &rp, dt, r, &mean));
  int i1[2] = {xin, mean};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SUB, i1, 2, NULL, dt, r, &xc));
  int i2[2] = {xc, xc};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MUL, i2, 2, NULL, dt, r, &sq));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_REDUCE_MEAN, &sq, 1, &rp, dt, r, &var));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SQRT, &var, 1, NULL, dt, r, &sd));
  FBX_TRY(fbx__onnx_const_scalar(t, dt, 1e-9, &epsid));
  int i3[2] = {sd, epsid};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_ADD, i3, 2, NULL, dt, r, &den));
  int i4[2] = {xc, den};
  return fbx__onnx_emit_out(t, FBX_IR_OP_DIV, i4, 2, NULL);
}
