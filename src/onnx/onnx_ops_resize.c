/* Resize (v10: scales; v11+: roi/scales/sizes; v18 attrs) and Upsample (v7
 * attr scales, v9 input scales), all as IR RESIZE (X, roi, scales, sizes). */
#include <string.h>

#include "onnx_ops.h"

static int fbx__onnx_lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static const char *const fbx__onnx_coord_names[] = {"half_pixel", "asymmetric", "pytorch_half_pixel",
                                                     "align_corners", "tf_half_pixel_for_nn"};
static const char *const fbx__onnx_nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* Opset < 11 (Resize-10, Upsample): asymmetric coordinates and, for
 * nearest, ORT's "simple" rounding, which is floor when upsampling; so
 * nearest needs constant scales >= 1. */
static bool fbx__onnx_resize_old(const fbx_onnx_cctx *c, bool upsample7) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  const char *mode = fbx_onnx_attr_string(c->n, "mode", "nearest");
  if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0)
    return fbx__onnx_fail(c, "mode '%s' not supported", mode);
  double sc[FBX_MAX_RANK];
  int ns = 0;
  if (upsample7) {
    const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "scales");
    if (!a || a->type != FBX_ONNX_ATTR_FLOATS || a->n_floats != x->rank)
      return fbx__onnx_fail(c, "scales attribute missing or not rank long");
    for (int i = 0; i < a->n_floats; i++) sc[i] = a->floats[i];
    ns = a->n_floats;
  } else {
    if (fbx_onnx_attr_find(c->n, "scales")) return fbx__onnx_fail(c, "scales attribute not valid at opset %d", c->n->opset);
    if (c->n->n_inputs != 2) return fbx__onnx_fail(c, "expects inputs X, scales");
    const fbx_onnx_value *s = fbx__onnx_cin(c, 1);
    if (!fbx__onnx_dt_ok(c, s, FBX__DT(F32), "scales")) return false;
    const fbx_onnx_tensor *st = fbx__onnx_value_const(c->g, c->n->inputs[1]);
    if (st && (!fbx__onnx_tensor_f64s(st, sc, FBX_MAX_RANK, &ns) || ns != x->rank))
      return fbx__onnx_fail(c, "scales must have rank entries");
    if (!st && strcmp(mode, "nearest") == 0) return fbx__onnx_fail(c, "nearest at opset < 11 needs constant scales");
  }
  for (int i = 0; i < ns; i++) {
    if (!(sc[i] > 0) || sc[i] > 1e9) return fbx__onnx_fail(c, "scales must be finite and > 0");
    if (strcmp(mode, "nearest") == 0 && sc[i] < 1)
      return fbx__onnx_fail(c, "nearest downsampling at opset < 11 not supported");
  }
  return true;
}

bool fbx__onnx_claim_resize(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  bool upsample = strcmp(c->n->op_type, "Upsample") == 0;
  if (upsample || c->n->opset < 11) {
    for (int i = 0; i < c->n->n_attrs; i++)
      if (strcmp(c->n->attrs[i].name, "mode") != 0 && strcmp(c->n->attrs[i].name, "scales") != 0)
        return fbx__onnx_fail(c, "attribute '%s' not valid at opset %d", c->n->attrs[i].name, c->n->opset);
    return fbx__onnx_resize_old(c, upsample && c->n->opset < 9);
  }
  const char *mode = fbx_onnx_attr_string(c->n, "mode", "nearest");
  if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0)
    return fbx__onnx_fail(c, "mode '%s' not supported (nearest, linear)", mode);
  const char *ct = fbx_onnx_attr_string(c->n, "coordinate_transformation_mode", "half_pixel");
  if (fbx__onnx_lookup(ct, fbx__onnx_coord_names, 5) < 0)
    return fbx__onnx_fail(c, "coordinate_transformation_mode '%s' not supported", ct);
  const char *nm = fbx_onnx_attr_string(c->n, "nearest_mode", "round_prefer_floor");
  if (fbx__onnx_lookup(nm, fbx__onnx_nearest_names, 4) < 0) return fbx__onnx_fail(c, "nearest_mode '%s' not supported", nm);
  if (fbx_onnx_attr_int(c->n, "antialias", 0) != 0) return fbx__onnx_fail(c, "antialias=1 not supported");
  if (fbx_onnx_attr_find(c->n, "axes")) return fbx__onnx_fail(c, "axes attribute not supported");
  const char *kar = fbx_onnx_attr_string(c->n, "keep_aspect_ratio_policy", "stretch");
  if (strcmp(kar, "stretch") != 0) return fbx__onnx_fail(c, "keep_aspect_ratio_policy '%s' not supported", kar);
  const fbx_onnx_value *sv = fbx__onnx_cin(c, 2), *zv = fbx__onnx_cin(c, 3);
  if (sv && !fbx__onnx_dt_ok(c, sv, FBX__DT(F32), "scales")) return false;
  if (zv && !fbx__onnx_dt_ok(c, zv, FBX__DT(I64), "sizes")) return false;
  const fbx_onnx_tensor *st = sv ? fbx__onnx_value_const(c->g, c->n->inputs[2]) : NULL;
  bool scales_empty = !sv || (st && fbx__onnx_tensor_numel(st) == 0) || (sv->rank == 1 && sv->dims[0] == 0);
  if (scales_empty && !zv) return fbx__onnx_fail(c, "neither scales nor sizes given");
  if (!scales_empty && zv) return fbx__onnx_fail(c, "both scales and sizes given");
  /* With scales, the ONNX reference divides by the fractional resized length
   * (in*scale - 1) while ORT divides by the integer output length - 1: they
   * disagree whenever in*scale is not whole. Declined rather than be wrong for one. */
  if (!scales_empty && strcmp(ct, "align_corners") == 0)
    return fbx__onnx_fail(c, "align_corners with scales not supported (ONNX and ORT disagree on the resized length; give sizes)");
  if (st && !scales_empty) {
    double sc[FBX_MAX_RANK];
    int ns;
    if (!fbx__onnx_tensor_f64s(st, sc, FBX_MAX_RANK, &ns) || ns != x->rank)
      return fbx__onnx_fail(c, "scales must have rank entries");
    for (int i = 0; i < ns; i++)
      if (!(sc[i] > 0) || sc[i] > 1e9) return fbx__onnx_fail(c, "scales must be finite and > 0");
  }
  /* constant sizes: rank entries, each >= 1 (ONNX Runtime rejects a 0 or a
   * negative size; declined so that it reports its own error) */
  const fbx_onnx_tensor *zt = zv ? fbx__onnx_value_const(c->g, c->n->inputs[3]) : NULL;
  if (zt) {
    int64_t sz[FBX_MAX_RANK];
    int nz;
    if (!fbx__onnx_tensor_ints(zt, sz, FBX_MAX_RANK, &nz) || nz != x->rank)
      return fbx__onnx_fail(c, "sizes must have rank (%d) entries", x->rank);
    for (int i = 0; i < nz; i++)
      if (sz[i] < 1) return fbx__onnx_fail(c, "sizes[%d] is %lld: must be >= 1", i, (long long)sz[i]);
  }
  return true;
}

fbx_status *fbx__onnx_tr_resize(fbx_onnx_tctx *t) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  const char *mode = fbx_onnx_attr_string(t->n, "mode", "nearest");
  p.resize.mode = strcmp(mode, "linear") == 0 ? FBX_IR_RESIZE_LINEAR : FBX_IR_RESIZE_NEAREST;
  int ins[4] = {0, FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE};
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  bool upsample = strcmp(t->n->op_type, "Upsample") == 0;
  if (upsample || t->n->opset < 11) {
    p.resize.coord = FBX_IR_COORD_ASYMMETRIC;
    p.resize.nearest = FBX_IR_NEAREST_FLOOR;
    p.resize.cubic_a = -0.75f;
    if (upsample && t->n->opset < 9) {
      const fbx_onnx_attr *a = fbx_onnx_attr_find(t->n, "scales");
      double sc[FBX_MAX_RANK];
      int64_t d = a->n_floats;
      for (int i = 0; i < a->n_floats; i++) sc[i] = a->floats[i];
      FBX_TRY(fbx__onnx_const_f64s(t, FBX_DTYPE_F32, sc, 1, &d, &ins[2]));
    } else {
      FBX_TRY(fbx__onnx_tin(t, 1, &ins[2]));
    }
    return fbx__onnx_emit_out(t, FBX_IR_OP_RESIZE, ins, 4, &p);
  }
  p.resize.coord = (fbx_ir_resize_coord)fbx__onnx_lookup(
      fbx_onnx_attr_string(t->n, "coordinate_transformation_mode", "half_pixel"), fbx__onnx_coord_names, 5);
  p.resize.nearest = (fbx_ir_resize_nearest)fbx__onnx_lookup(
      fbx_onnx_attr_string(t->n, "nearest_mode", "round_prefer_floor"), fbx__onnx_nearest_names, 4);
  p.resize.cubic_a = fbx_onnx_attr_float(t->n, "cubic_coeff_a", -0.75f);
  p.resize.exclude_outside = fbx_onnx_attr_int(t->n, "exclude_outside", 0) != 0;
  p.resize.extrapolation_value = fbx_onnx_attr_float(t->n, "extrapolation_value", 0.0f);
  /* roi only matters for tf_crop_and_resize, which is declined */
  const fbx_onnx_value *sv = fbx__onnx_tin_value(t, 2);
  const fbx_onnx_tensor *st = sv ? fbx__onnx_value_const(t->g, t->n->inputs[2]) : NULL;
  bool scales_empty = !sv || (st && fbx__onnx_tensor_numel(st) == 0) || (sv->rank == 1 && sv->dims[0] == 0);
  if (!scales_empty) FBX_TRY(fbx__onnx_tin(t, 2, &ins[2]));
  FBX_TRY(fbx__onnx_tin(t, 3, &ins[3]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_RESIZE, ins, 4, &p);
}
