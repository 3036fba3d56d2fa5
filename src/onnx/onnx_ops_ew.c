/* Elementwise ops: unary/activation, binary, variadic (Sum/Mean/Max/Min),
 * Clip, Cast/CastLike, Where, Pow, Mod, BitShift, PRelu, Identity, Dropout. */
#include <float.h>
#include <string.h>

#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_params0(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* ======================= unary ======================= */

static uint32_t fbx__onnx_unary_mask(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_NEG: case FBX_IR_OP_RELU: return FBX_ONNX_DT_FLOAT | FBX_ONNX_DT_SINT;
    case FBX_IR_OP_ABS: case FBX_IR_OP_SIGN: return FBX_ONNX_DT_NUM;
    case FBX_IR_OP_NOT: return FBX__DT(BOOL);
    case FBX_IR_OP_BITWISE_NOT: return FBX_ONNX_DT_INT;
    case FBX_IR_OP_IDENTITY: return FBX_ONNX_DT_ALL;
    default: return FBX_ONNX_DT_FLOAT;
  }
}

static bool fbx__onnx_unary_bool_out(fbx_ir_op op) { return op == FBX_IR_OP_ISNAN || op == FBX_IR_OP_ISINF; }

bool fbx__onnx_claim_unary(const fbx_onnx_cctx *c) {
  fbx_ir_op op = (fbx_ir_op)c->e->aux;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *y = fbx__onnx_cout(c, 0);
  if (c->n->n_inputs != 1 || !x) return fbx__onnx_fail(c, "expects 1 input, got %d", c->n->n_inputs);
  if (c->n->n_outputs != 1) return fbx__onnx_fail(c, "expects 1 output");
  if (!fbx__onnx_dt_ok(c, x, fbx__onnx_unary_mask(op), "input")) return false;
  fbx_dtype want = fbx__onnx_unary_bool_out(op) ? FBX_DTYPE_BOOL : x->dtype;
  if (y->dtype != want)
    return fbx__onnx_fail(c, "output dtype %s, expected %s", fbx_dtype_name(y->dtype), fbx_dtype_name(want));
  if (op == FBX_IR_OP_GELU) {
    const char *a = fbx_onnx_attr_string(c->n, "approximate", "none");
    if (strcmp(a, "none") != 0 && strcmp(a, "tanh") != 0)
      return fbx__onnx_fail(c, "approximate '%s' not supported", a);
  }
  return true;
}

fbx_status *fbx__onnx_tr_unary(fbx_onnx_tctx *t) {
  fbx_ir_op op = (fbx_ir_op)t->e->aux;
  const fbx_onnx_node *n = t->n;
  fbx_ir_params p = fbx__onnx_params0();
  switch (op) {
    case FBX_IR_OP_LEAKY_RELU: p.ew.alpha = fbx_onnx_attr_float(n, "alpha", 0.01f); break;
    case FBX_IR_OP_HARD_SIGMOID:
      p.ew.alpha = fbx_onnx_attr_float(n, "alpha", 0.2f);
      p.ew.beta = fbx_onnx_attr_float(n, "beta", 0.5f);
      break;
    case FBX_IR_OP_ELU: case FBX_IR_OP_CELU: case FBX_IR_OP_THRESHOLDED_RELU:
      p.ew.alpha = fbx_onnx_attr_float(n, "alpha", 1.0f);
      break;
    case FBX_IR_OP_SELU:
      p.ew.alpha = fbx_onnx_attr_float(n, "alpha", 1.67326319217681884765625f);
      p.ew.gamma = fbx_onnx_attr_float(n, "gamma", 1.05070102214813232421875f);
      break;
    case FBX_IR_OP_GELU:
      p.ew.alpha = strcmp(fbx_onnx_attr_string(n, "approximate", "none"), "tanh") == 0 ? 1.0f : 0.0f;
      break;
    case FBX_IR_OP_ISINF:
      p.ew.alpha = (float)(fbx_onnx_attr_int(n, "detect_positive", 1) != 0);
      p.ew.beta = (float)(fbx_onnx_attr_int(n, "detect_negative", 1) != 0);
      break;
    default: break;
  }
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, op, &x, 1, &p);
}

/* Identity: any dtype. */
bool fbx__onnx_claim_identity(const fbx_onnx_cctx *c) {
  if (c->n->n_inputs != 1 || !fbx__onnx_cin(c, 0)) return fbx__onnx_fail(c, "expects 1 input");
  return fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input");
}
fbx_status *fbx__onnx_tr_identity(fbx_onnx_tctx *t) {
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_IDENTITY, &x, 1, NULL);
}

/* Dropout (inference): IDENTITY. The mask output and training mode are declined. */
bool fbx__onnx_claim_dropout(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_FLOAT, "input")) return false;
  const fbx_onnx_value *mask = fbx__onnx_cout(c, 1);
  if (mask && mask->dtype != FBX_DTYPE_BOOL) return fbx__onnx_fail(c, "mask output must be bool");
  if (fbx__onnx_cin(c, 2)) {
    const fbx_onnx_tensor *tm = fbx__onnx_cconst(c, 2, "training_mode");
    if (!tm) return false;
    if (tm->dtype != FBX_DTYPE_BOOL || fbx__onnx_tensor_numel(tm) != 1 || !tm->data)
      return fbx__onnx_fail(c, "training_mode must be a bool scalar");
    if (*(const uint8_t *)tm->data) return fbx__onnx_fail(c, "training_mode=true not supported (inference only)");
  }
  return true;
}
/* Inference: y = x; the optional mask is all true: CONSTANT_OF_SHAPE(SHAPE(x), true). */
fbx_status *fbx__onnx_tr_dropout(fbx_onnx_tctx *t) {
  FBX_TRY(fbx__onnx_tr_identity(t));
  const fbx_onnx_value *mask = fbx__onnx_tout_value(t, 1);
  if (!mask) return NULL;
  int x, shp, m;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  fbx_ir_params sp = fbx__onnx_params0();
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SHAPE, &x, 1, &sp, FBX_DTYPE_I64, 1, &shp));
  fbx_ir_params fp = fbx__onnx_params0();
  fp.fill.dtype = FBX_DTYPE_BOOL;
  fp.fill.value = 1.0;
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CONSTANT_OF_SHAPE, &shp, 1, &fp, FBX_DTYPE_BOOL, mask->rank, &m));
  fbx__onnx_bind(t, 1, m);
  return NULL;
}

/* ======================= Cast / CastLike ======================= */

bool fbx__onnx_claim_cast(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *y = fbx__onnx_cout(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "input")) return false;
  fbx_dtype to;
  if (strcmp(c->n->op_type, "CastLike") == 0) {
    const fbx_onnx_value *like = fbx__onnx_cin(c, 1);
    if (!fbx__onnx_dt_ok(c, like, FBX_ONNX_DT_ALL, "target_type")) return false;
    to = like->dtype;
  } else {
    const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "to");
    if (!a || a->type != FBX_ONNX_ATTR_INT) return fbx__onnx_fail(c, "attribute 'to' missing");
    if (!fbx_dtype_is_valid((int)a->i)) return fbx__onnx_fail(c, "to onnx type %lld not supported", (long long)a->i);
    to = (fbx_dtype)a->i;
  }
  if (!fbx__onnx_dt_ok(c, y, FBX_ONNX_DT_ALL, "output")) return false;
  if (y->dtype != to) return fbx__onnx_fail(c, "output dtype %s differs from target %s", fbx_dtype_name(y->dtype),
                                            fbx_dtype_name(to));
  return true;
}

fbx_status *fbx__onnx_tr_cast(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_params0();
  p.ew.to = fbx__onnx_tout_value(t, 0)->dtype;
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_CAST, &x, 1, &p);
}

/* ======================= binary ======================= */

static uint32_t fbx__onnx_binary_mask(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_EQUAL: return FBX_ONNX_DT_ALL;
    case FBX_IR_OP_AND: case FBX_IR_OP_OR: case FBX_IR_OP_XOR: return FBX__DT(BOOL);
    case FBX_IR_OP_BITWISE_AND: case FBX_IR_OP_BITWISE_OR: case FBX_IR_OP_BITWISE_XOR: return FBX_ONNX_DT_INT;
    case FBX_IR_OP_BITSHIFT_LEFT: case FBX_IR_OP_BITSHIFT_RIGHT: return FBX_ONNX_DT_UINT;
    case FBX_IR_OP_PRELU: return FBX_ONNX_DT_FLOAT;
    default: return FBX_ONNX_DT_NUM;
  }
}

static bool fbx__onnx_is_compare(fbx_ir_op op) {
  return op == FBX_IR_OP_EQUAL || op == FBX_IR_OP_LESS || op == FBX_IR_OP_LESS_EQUAL ||
         op == FBX_IR_OP_GREATER || op == FBX_IR_OP_GREATER_EQUAL;
}

static bool fbx__onnx_claim_bin(const fbx_onnx_cctx *c, fbx_ir_op op) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 1), *y = fbx__onnx_cout(c, 0);
  if (c->n->n_inputs != 2 || !a || !b) return fbx__onnx_fail(c, "expects 2 inputs");
  uint32_t mask = fbx__onnx_binary_mask(op);
  if (!fbx__onnx_dt_ok(c, a, mask, "input A") || !fbx__onnx_dt_ok(c, b, mask, "input B")) return false;
  if (a->dtype != b->dtype)
    return fbx__onnx_fail(c, "mixed input dtypes %s and %s", fbx_dtype_name(a->dtype), fbx_dtype_name(b->dtype));
  fbx_dtype want = fbx__onnx_is_compare(op) ? FBX_DTYPE_BOOL : a->dtype;
  if (y->dtype != want)
    return fbx__onnx_fail(c, "output dtype %s, expected %s", fbx_dtype_name(y->dtype), fbx_dtype_name(want));
  return true;
}

bool fbx__onnx_claim_binary(const fbx_onnx_cctx *c) { return fbx__onnx_claim_bin(c, (fbx_ir_op)c->e->aux); }

static fbx_status *fbx__onnx_tr_bin(fbx_onnx_tctx *t, fbx_ir_op op, const fbx_ir_params *p) {
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  return fbx__onnx_emit_out(t, op, ins, 2, p);
}

fbx_status *fbx__onnx_tr_binary(fbx_onnx_tctx *t) { return fbx__onnx_tr_bin(t, (fbx_ir_op)t->e->aux, NULL); }

/* PRelu: slope broadcasts (unidirectionally) to X; output rank = X rank. */
bool fbx__onnx_claim_prelu(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_claim_bin(c, FBX_IR_OP_PRELU)) return false;
  if (fbx__onnx_cin(c, 1)->rank > fbx__onnx_cin(c, 0)->rank)
    return fbx__onnx_fail(c, "slope rank exceeds input rank");
  return true;
}
fbx_status *fbx__onnx_tr_prelu(fbx_onnx_tctx *t) { return fbx__onnx_tr_bin(t, FBX_IR_OP_PRELU, NULL); }

/* Mod: fmod=0 (python semantics) is only defined for integers. */
bool fbx__onnx_claim_mod(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_claim_bin(c, FBX_IR_OP_MOD)) return false;
  int64_t fm = fbx_onnx_attr_int(c->n, "fmod", 0);
  if (fm != 0 && fm != 1) return fbx__onnx_fail(c, "fmod=%lld invalid", (long long)fm);
  if (fm == 0 && fbx_dtype_is_float(fbx__onnx_cin(c, 0)->dtype))
    return fbx__onnx_fail(c, "fmod=0 with float inputs is undefined in ONNX");
  return true;
}
fbx_status *fbx__onnx_tr_mod(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_params0();
  p.ew.alpha = (float)(fbx_onnx_attr_int(t->n, "fmod", 0) != 0);
  return fbx__onnx_tr_bin(t, FBX_IR_OP_MOD, &p);
}

/* BitShift: direction LEFT / RIGHT, unsigned ints only. */
bool fbx__onnx_claim_bitshift(const fbx_onnx_cctx *c) {
  const char *d = fbx_onnx_attr_string(c->n, "direction", "");
  if (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0) return fbx__onnx_fail(c, "direction '%s' not supported", d);
  return fbx__onnx_claim_bin(c, FBX_IR_OP_BITSHIFT_LEFT);
}
fbx_status *fbx__onnx_tr_bitshift(fbx_onnx_tctx *t) {
  bool left = strcmp(fbx_onnx_attr_string(t->n, "direction", ""), "LEFT") == 0;
  return fbx__onnx_tr_bin(t, left ? FBX_IR_OP_BITSHIFT_LEFT : FBX_IR_OP_BITSHIFT_RIGHT, NULL);
}

/* Pow: float base; exponent of the base's dtype, or any int/float for f32/f64 bases. */
bool fbx__onnx_claim_pow(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 1), *y = fbx__onnx_cout(c, 0);
  if (c->n->n_inputs != 2 || !a || !b) return fbx__onnx_fail(c, "expects 2 inputs");
  if (!fbx__onnx_dt_ok(c, a, FBX_ONNX_DT_NUM, "base")) return false;
  if (!fbx_dtype_is_float(a->dtype)) { /* int base: composed in float64 (as ORT: std::pow, truncated) */
    if (!fbx__onnx_dt_ok(c, b, FBX_ONNX_DT_NUM, "exponent")) return false;
    if (y->dtype != a->dtype) return fbx__onnx_fail(c, "output dtype differs from base dtype");
    return true;
  }
  if (a->dtype != b->dtype) {
    if (a->dtype == FBX_DTYPE_F16) return fbx__onnx_fail(c, "float16 base with %s exponent not supported",
                                                        fbx_dtype_name(b->dtype));
    if (!fbx__onnx_dt_ok(c, b, FBX_ONNX_DT_NUM, "exponent")) return false;
  }
  if (y->dtype != a->dtype) return fbx__onnx_fail(c, "output dtype differs from base dtype");
  return true;
}
/* Integer base: CAST(POW(CAST(a, f64), CAST(b, f64)), int) — float->int casts truncate toward
 * zero, which is what ORT's int Pow (std::pow in double, then static_cast) does. */
fbx_status *fbx__onnx_tr_pow(fbx_onnx_tctx *t) {
  const fbx_onnx_value *a = fbx__onnx_tin_value(t, 0), *y = fbx__onnx_tout_value(t, 0);
  if (fbx_dtype_is_float(a->dtype)) return fbx__onnx_tr_bin(t, FBX_IR_OP_POW, NULL);
  int ins[2], cv[2], pw;
  fbx_ir_params p = fbx__onnx_params0();
  p.ew.to = FBX_DTYPE_F64;
  for (int i = 0; i < 2; i++) {
    FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
    if (t->ir->values[ins[i]].dtype == FBX_DTYPE_F64) { cv[i] = ins[i]; continue; }
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CAST, &ins[i], 1, &p, FBX_DTYPE_F64, t->ir->values[ins[i]].rank, &cv[i]));
  }
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_POW, cv, 2, NULL, FBX_DTYPE_F64, y->rank, &pw));
  p.ew.to = y->dtype;
  return fbx__onnx_emit_out(t, FBX_IR_OP_CAST, &pw, 1, &p);
}

/* ======================= Where ======================= */

bool fbx__onnx_claim_where(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *cond = fbx__onnx_cin(c, 0), *x = fbx__onnx_cin(c, 1), *y = fbx__onnx_cin(c, 2);
  if (c->n->n_inputs != 3 || !cond || !x || !y) return fbx__onnx_fail(c, "expects 3 inputs");
  if (!fbx__onnx_dt_ok(c, cond, FBX__DT(BOOL), "condition")) return false;
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "X")) return false;
  if (x->dtype != y->dtype) return fbx__onnx_fail(c, "X/Y dtypes differ");
  return true;
}
fbx_status *fbx__onnx_tr_where(fbx_onnx_tctx *t) {
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_WHERE, ins, 3, NULL);
}

/* ======================= Sum / Mean / Max / Min ======================= */

bool fbx__onnx_claim_variadic(const fbx_onnx_cctx *c) {
  if (c->n->n_inputs < 1) return fbx__onnx_fail(c, "needs at least 1 input");
  bool minmax = c->e->aux == FBX_IR_OP_MAX || c->e->aux == FBX_IR_OP_MIN;
  uint32_t mask = minmax && c->n->opset >= 12 ? FBX_ONNX_DT_NUM : FBX_ONNX_DT_FLOAT;
  const fbx_onnx_value *a0 = fbx__onnx_cin(c, 0);
  for (int i = 0; i < c->n->n_inputs; i++) {
    const fbx_onnx_value *a = fbx__onnx_cin(c, i);
    if (!a) return fbx__onnx_fail(c, "input %d missing", i);
    if (!fbx__onnx_dt_ok(c, a, mask, "input")) return false;
    if (a->dtype != a0->dtype) return fbx__onnx_fail(c, "mixed input dtypes");
  }
  return true;
}

fbx_status *fbx__onnx_tr_variadic(fbx_onnx_tctx *t) {
  fbx_ir_op op = (fbx_ir_op)t->e->aux;
  const fbx_onnx_value *y = fbx__onnx_tout_value(t, 0);
  int n = t->n->n_inputs;
  int acc;
  FBX_TRY(fbx__onnx_tin(t, 0, &acc));
  int rank = fbx__onnx_tin_value(t, 0)->rank;
  bool mean = strcmp(t->n->op_type, "Mean") == 0;
  if (n == 1 && !mean) return fbx__onnx_emit_out(t, FBX_IR_OP_IDENTITY, &acc, 1, NULL);
  for (int i = 1; i < n; i++) {
    int ins[2] = {acc, 0};
    FBX_TRY(fbx__onnx_tin(t, i, &ins[1]));
    int r = fbx__onnx_tin_value(t, i)->rank;
    if (r > rank) rank = r;
    if (i == n - 1 && !mean) return fbx__onnx_emit_out(t, op, ins, 2, NULL);
    FBX_TRY(fbx__onnx_emit(t, op, ins, 2, NULL, y->dtype, rank, &acc));
  }
  /* Mean = sum / n */
  int ins[2] = {acc, 0};
  FBX_TRY(fbx__onnx_const_scalar(t, y->dtype, (double)n, &ins[1]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_DIV, ins, 2, NULL);
}

/* ======================= Clip ======================= */

static bool fbx__onnx_clip_bound_ok(const fbx_onnx_cctx *c, int i, const char *what) {
  const fbx_onnx_value *b = fbx__onnx_cin(c, i), *x = fbx__onnx_cin(c, 0);
  if (!b) return true;
  if (b->dtype != x->dtype) return fbx__onnx_fail(c, "%s dtype %s differs from input", what, fbx_dtype_name(b->dtype));
  if (b->rank > x->rank) return fbx__onnx_fail(c, "%s rank %d exceeds input rank", what, b->rank);
  for (int d = 0; d < b->rank; d++)
    if (b->dims[d] != 1) return fbx__onnx_fail(c, "%s must be a scalar", what);
  return true;
}

bool fbx__onnx_claim_clip(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  uint32_t mask = c->n->opset >= 12 ? FBX_ONNX_DT_NUM : FBX_ONNX_DT_FLOAT;
  if (!fbx__onnx_dt_ok(c, x, mask, "input")) return false;
  if (c->n->opset < 11) {
    if (c->n->n_inputs != 1) return fbx__onnx_fail(c, "opset %d takes 1 input", c->n->opset);
    return true;
  }
  if (fbx_onnx_attr_find(c->n, "min") || fbx_onnx_attr_find(c->n, "max"))
    return fbx__onnx_fail(c, "min/max attributes not valid at opset %d", c->n->opset);
  return fbx__onnx_clip_bound_ok(c, 1, "min") && fbx__onnx_clip_bound_ok(c, 2, "max");
}

/* min(max(x, lo), hi). Absent float bounds are ±FLT_MAX/DBL_MAX as in ORT
 * (so ±inf inputs clamp like the reference); absent int bounds are no-ops. */
fbx_status *fbx__onnx_tr_clip(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0), *y = fbx__onnx_tout_value(t, 0);
  fbx_dtype dt = x->dtype;
  bool is_float = fbx_dtype_is_float(dt);
  double big = dt == FBX_DTYPE_F64 ? DBL_MAX : dt == FBX_DTYPE_F16 ? 65504.0 : (double)FLT_MAX;
  int lo = FBX_IR_NONE, hi = FBX_IR_NONE;
  if (t->n->opset < 11) {
    FBX_TRY(fbx__onnx_const_scalar(t, dt, fbx_onnx_attr_find(t->n, "min") ? fbx_onnx_attr_float(t->n, "min", 0) : -big,
                                   &lo));
    FBX_TRY(fbx__onnx_const_scalar(t, dt, fbx_onnx_attr_find(t->n, "max") ? fbx_onnx_attr_float(t->n, "max", 0) : big,
                                   &hi));
  } else {
    FBX_TRY(fbx__onnx_tin(t, 1, &lo));
    FBX_TRY(fbx__onnx_tin(t, 2, &hi));
    if (lo == FBX_IR_NONE && is_float) FBX_TRY(fbx__onnx_const_scalar(t, dt, -big, &lo));
    if (hi == FBX_IR_NONE && is_float) FBX_TRY(fbx__onnx_const_scalar(t, dt, big, &hi));
  }
  int cur;
  FBX_TRY(fbx__onnx_tin(t, 0, &cur));
  if (lo == FBX_IR_NONE && hi == FBX_IR_NONE) return fbx__onnx_emit_out(t, FBX_IR_OP_IDENTITY, &cur, 1, NULL);
  if (lo != FBX_IR_NONE) {
    int ins[2] = {cur, lo};
    if (hi == FBX_IR_NONE) return fbx__onnx_emit_out(t, FBX_IR_OP_MAX, ins, 2, NULL);
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MAX, ins, 2, NULL, dt, y->rank, &cur));
  }
  int ins[2] = {cur, hi};
  return fbx__onnx_emit_out(t, FBX_IR_OP_MIN, ins, 2, NULL);
}
