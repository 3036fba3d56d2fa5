/* Data movement: Reshape, Squeeze/Unsqueeze (attr < 13, input >= 13),
 * Flatten, Transpose, Concat, Split (attr < 13, input >= 13, num_outputs 18),
 * Slice (attrs v1, inputs >= 10), DepthToSpace / SpaceToDepth. */
#include <string.h>

#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_pz(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

static bool fbx__onnx_any_dtype(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  if (fbx__onnx_cout(c, 0)->dtype != fbx__onnx_cin(c, 0)->dtype) return fbx__onnx_fail(c, "output dtype differs");
  return true;
}

/* ======================= Reshape ======================= */

bool fbx__onnx_claim_reshape(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_any_dtype(c)) return false;
  const fbx_onnx_value *s = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(I64), "shape")) return false;
  if (s->rank != 1) return fbx__onnx_fail(c, "shape must be 1-D");
  return true;
}

fbx_status *fbx__onnx_tr_reshape(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pz();
  p.reshape.allowzero = fbx_onnx_attr_int(t->n, "allowzero", 0) != 0;
  int ins[2];
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_RESHAPE, ins, 2, &p);
}

/* ======================= Squeeze / Unsqueeze ======================= */

/* axes from the attribute (< 13) or a constant input (>= 13). *present = false if none given. */
static bool fbx__onnx_sq_axes(const fbx_onnx_cctx *c, int64_t *axes, int *n, bool *present) {
  *n = 0;
  *present = false;
  if (c->n->opset >= 13) {
    if (fbx_onnx_attr_find(c->n, "axes")) return fbx__onnx_fail(c, "axes attribute not valid at opset %d", c->n->opset);
    if (!fbx__onnx_cin(c, 1)) return true;
    const fbx_onnx_tensor *t = fbx__onnx_cconst(c, 1, "axes input");
    if (!t) return false;
    if (!fbx__onnx_tensor_ints(t, axes, FBX_MAX_RANK, n)) return fbx__onnx_fail(c, "axes input unreadable or too long");
    *present = true;
    return true;
  }
  if (c->n->n_inputs > 1) return fbx__onnx_fail(c, "axes input not valid at opset %d", c->n->opset);
  const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "axes");
  if (!a) return true;
  if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints > FBX_MAX_RANK) return fbx__onnx_fail(c, "bad axes attribute");
  for (int i = 0; i < a->n_ints; i++) axes[i] = a->ints[i];
  *n = a->n_ints;
  *present = true;
  return true;
}

/* The mask (over input dims for Squeeze, output dims for Unsqueeze). */
static bool fbx__onnx_sq_mask(const fbx_onnx_cctx *c, uint32_t *mask) {
  bool unsq = c->e->aux == FBX_IR_OP_UNSQUEEZE;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  int64_t axes[FBX_MAX_RANK];
  int n;
  bool present;
  if (!fbx__onnx_sq_axes(c, axes, &n, &present)) return false;
  *mask = 0;
  if (!present || n == 0) {
    if (unsq) return fbx__onnx_fail(c, "axes missing");
    for (int d = 0; d < x->rank; d++) {
      if (x->dims[d] < 0) return fbx__onnx_fail(c, "no axes given and input dim %d is dynamic", d);
      if (x->dims[d] == 1) *mask |= 1u << d;
    }
    return true;
  }
  int r = unsq ? x->rank + n : x->rank;
  if (r > FBX_MAX_RANK) return fbx__onnx_fail(c, "output rank %d exceeds %d", r, FBX_MAX_RANK);
  for (int i = 0; i < n; i++) {
    int a;
    if (!fbx__onnx_axis(axes[i], r, false, &a)) return fbx__onnx_fail(c, "axis %lld out of range", (long long)axes[i]);
    if (*mask & (1u << a)) return fbx__onnx_fail(c, "duplicate axis %d", a);
    if (!unsq && x->dims[a] >= 0 && x->dims[a] != 1)
      return fbx__onnx_fail(c, "cannot squeeze dim %d of size %lld", a, (long long)x->dims[a]);
    *mask |= 1u << a;
  }
  return true;
}

bool fbx__onnx_claim_squeeze(const fbx_onnx_cctx *c) {
  uint32_t m;
  return fbx__onnx_any_dtype(c) && fbx__onnx_sq_mask(c, &m);
}

fbx_status *fbx__onnx_tr_squeeze(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p = fbx__onnx_pz();
  if (!fbx__onnx_sq_mask(&c, &p.axes.axes_mask)) return FBX_ERR_NOTIMPL("%s: axes not translatable", t->n->op_type);
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &x, 1, &p);
}

/* ======================= Flatten ======================= */

bool fbx__onnx_claim_flatten(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_any_dtype(c)) return false;
  int a;
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 1), fbx__onnx_cin(c, 0)->rank, true, &a))
    return fbx__onnx_fail(c, "axis out of range");
  return true;
}

fbx_status *fbx__onnx_tr_flatten(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pz();
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 1), fbx__onnx_tin_value(t, 0)->rank, true, &p.axis.axis);
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_FLATTEN, &x, 1, &p);
}

/* ======================= Transpose ======================= */

static bool fbx__onnx_perm(const fbx_onnx_node *n, int r, int *perm) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, "perm");
  if (!a) {
    for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    return true;
  }
  if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints != r) return false;
  uint32_t seen = 0;
  for (int i = 0; i < r; i++) {
    if (!fbx__onnx_axis(a->ints[i], r, false, &perm[i]) || (seen & (1u << perm[i]))) return false;
    seen |= 1u << perm[i];
  }
  return true;
}

bool fbx__onnx_claim_transpose(const fbx_onnx_cctx *c) {
  int perm[FBX_MAX_RANK];
  if (!fbx__onnx_any_dtype(c)) return false;
  if (!fbx__onnx_perm(c->n, fbx__onnx_cin(c, 0)->rank, perm)) return fbx__onnx_fail(c, "invalid perm");
  return true;
}

fbx_status *fbx__onnx_tr_transpose(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pz();
  fbx__onnx_perm(t->n, fbx__onnx_tin_value(t, 0)->rank, p.transpose.perm);
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, FBX_IR_OP_TRANSPOSE, &x, 1, &p);
}

/* ======================= Concat ======================= */

bool fbx__onnx_claim_concat(const fbx_onnx_cctx *c) {
  if (c->n->n_inputs < 1) return fbx__onnx_fail(c, "needs inputs");
  const fbx_onnx_value *x0 = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_any_dtype(c)) return false;
  for (int i = 0; i < c->n->n_inputs; i++) {
    const fbx_onnx_value *x = fbx__onnx_cin(c, i);
    if (!x) return fbx__onnx_fail(c, "input %d missing", i);
    if (x->dtype != x0->dtype || x->rank != x0->rank) return fbx__onnx_fail(c, "inputs differ in dtype or rank");
  }
  const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "axis");
  int ax;
  if (!a || a->type != FBX_ONNX_ATTR_INT) return fbx__onnx_fail(c, "axis attribute missing");
  if (!fbx__onnx_axis(a->i, x0->rank, false, &ax)) return fbx__onnx_fail(c, "axis out of range");
  return true;
}

fbx_status *fbx__onnx_tr_concat(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pz();
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 0), fbx__onnx_tin_value(t, 0)->rank, false, &p.axis.axis);
  int ins[FBX_IR_MAX_INPUTS];
  for (int i = 0; i < t->n->n_inputs; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, FBX_IR_OP_CONCAT, ins, t->n->n_inputs, &p);
}

/* ======================= Split ======================= */

/* Decide the sizes. *mode: 0 = equal parts (IR default), 1 = constant sizes[], 2 = runtime input. */
static bool fbx__onnx_split_plan(const fbx_onnx_cctx *c, int *axis, int *mode, int64_t *sizes) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  int nout = c->n->n_outputs;
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 0), x->rank, false, axis))
    return fbx__onnx_fail(c, "axis out of range");
  for (int i = 0; i < nout; i++)
    if (!fbx__onnx_cout(c, i)) return fbx__onnx_fail(c, "output %d missing", i);
  int64_t dim = x->dims[*axis];
  int n = 0;
  *mode = 0;
  if (c->n->opset < 13) {
    if (c->n->n_inputs > 1) return fbx__onnx_fail(c, "split input not valid at opset %d", c->n->opset);
    const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "split");
    if (a) {
      if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints != nout) return fbx__onnx_fail(c, "split attribute count mismatch");
      for (int i = 0; i < nout; i++) sizes[i] = a->ints[i];
      n = nout;
      *mode = 1;
    }
  } else {
    if (fbx_onnx_attr_find(c->n, "split")) return fbx__onnx_fail(c, "split attribute not valid at opset %d", c->n->opset);
    if (fbx__onnx_cin(c, 1)) {
      const fbx_onnx_value *s = fbx__onnx_cin(c, 1);
      if (!fbx__onnx_dt_ok(c, s, FBX__DT(I64), "split")) return false;
      const fbx_onnx_tensor *st = fbx__onnx_value_const(c->g, c->n->inputs[1]);
      if (st) {
        if (!fbx__onnx_tensor_ints(st, sizes, FBX_IR_MAX_OUTPUTS, &n) || n != nout)
          return fbx__onnx_fail(c, "split sizes count does not match %d outputs", nout);
        *mode = 1;
      } else {
        *mode = 2;
      }
    }
  }
  const fbx_onnx_attr *no = fbx_onnx_attr_find(c->n, "num_outputs");
  if (no) {
    if (c->n->opset < 18) return fbx__onnx_fail(c, "num_outputs not valid at opset %d", c->n->opset);
    if (*mode != 0) return fbx__onnx_fail(c, "both split and num_outputs given");
    if (no->i != nout) return fbx__onnx_fail(c, "num_outputs %lld != %d outputs", (long long)no->i, nout);
    if (dim < 0) {
      if (nout != 1) return fbx__onnx_fail(c, "num_outputs with a dynamic split dim not supported");
    } else if (dim % nout != 0) {
      int64_t chunk = (dim + nout - 1) / nout;
      for (int i = 0; i < nout - 1; i++) sizes[i] = chunk;
      sizes[nout - 1] = dim - chunk * (nout - 1);
      if (sizes[nout - 1] <= 0) return fbx__onnx_fail(c, "num_outputs %d leaves an empty chunk of dim %lld", nout,
                                                       (long long)dim);
      *mode = 1;
    }
  } else if (*mode == 0 && dim >= 0 && dim % nout != 0) {
    return fbx__onnx_fail(c, "dim %lld not divisible into %d equal parts", (long long)dim, nout);
  }
  if (*mode == 1) {
    int64_t sum = 0;
    for (int i = 0; i < nout; i++) {
      if (sizes[i] < 0) return fbx__onnx_fail(c, "negative split size");
      sum += sizes[i];
    }
    if (dim >= 0 && sum != dim) return fbx__onnx_fail(c, "split sizes sum %lld != dim %lld", (long long)sum, (long long)dim);
  }
  return true;
}

bool fbx__onnx_claim_split(const fbx_onnx_cctx *c) {
  int axis, mode;
  int64_t sizes[FBX_IR_MAX_OUTPUTS];
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  return fbx__onnx_split_plan(c, &axis, &mode, sizes);
}

fbx_status *fbx__onnx_tr_split(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  int axis, mode;
  int64_t sizes[FBX_IR_MAX_OUTPUTS];
  if (!fbx__onnx_split_plan(&c, &axis, &mode, sizes)) return FBX_ERR_NOTIMPL("Split: not translatable");
  int nout = t->n->n_outputs;
  int ins[2] = {0, FBX_IR_NONE};
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  if (mode == 1) FBX_TRY(fbx__onnx_const_i64s(t, sizes, nout, &ins[1]));
  if (mode == 2) FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  int outs[FBX_IR_MAX_OUTPUTS];
  for (int i = 0; i < nout; i++) {
    const fbx_onnx_value *o = fbx__onnx_tout_value(t, i);
    FBX_TRY(fbx_ir_graph_add_value(t->ir, o->name, o->dtype, o->rank, &outs[i]));
  }
  fbx_ir_params p = fbx__onnx_pz();
  p.axis.axis = axis;
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_SPLIT, ins, mode ? 2 : 1, outs, nout, &p, t->n->name ? t->n->name : "",
                                t->n->op_type, t->node_index, NULL));
  for (int i = 0; i < nout; i++) fbx__onnx_bind(t, i, outs[i]);
  return NULL;
}

/* ======================= Slice ======================= */

static bool fbx__onnx_slice_check(const fbx_onnx_cctx *c, int64_t *axes, int *n_axes) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  *n_axes = -1;
  if (c->n->opset < 10) {
    const fbx_onnx_attr *s = fbx_onnx_attr_find(c->n, "starts"), *e = fbx_onnx_attr_find(c->n, "ends");
    const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "axes");
    if (!s || !e || s->type != FBX_ONNX_ATTR_INTS || e->type != FBX_ONNX_ATTR_INTS || s->n_ints != e->n_ints)
      return fbx__onnx_fail(c, "starts/ends attributes missing or mismatched");
    if (s->n_ints > FBX_MAX_RANK) return fbx__onnx_fail(c, "too many starts");
    if (a) {
      if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints != s->n_ints) return fbx__onnx_fail(c, "axes count mismatch");
      for (int i = 0; i < a->n_ints; i++) axes[i] = a->ints[i];
      *n_axes = a->n_ints;
    }
  } else {
    if (fbx_onnx_attr_find(c->n, "starts") || fbx_onnx_attr_find(c->n, "ends") || fbx_onnx_attr_find(c->n, "axes"))
      return fbx__onnx_fail(c, "attributes not valid at opset %d", c->n->opset);
    for (int i = 1; i <= 4; i++) {
      const fbx_onnx_value *v = fbx__onnx_cin(c, i);
      if (i <= 2 && !v) return fbx__onnx_fail(c, "starts/ends missing");
      if (v && !fbx__onnx_dt_ok(c, v, FBX_ONNX_DT_IDX, i == 1 ? "starts" : i == 2 ? "ends" : i == 3 ? "axes" : "steps"))
        return false;
      if (v && v->rank != 1) return fbx__onnx_fail(c, "starts/ends/axes/steps must be 1-D");
    }
    if (fbx__onnx_cin(c, 3)) {
      /* runtime axes: the IR SLICE reads them at run time (*n_axes = -2) */
      const fbx_onnx_tensor *at = fbx__onnx_value_const(c->g, c->n->inputs[3]);
      if (!at) *n_axes = -2;
      else if (!fbx__onnx_tensor_ints(at, axes, FBX_MAX_RANK, n_axes)) return fbx__onnx_fail(c, "axes unreadable");
    }
    const fbx_onnx_tensor *st = fbx__onnx_cin(c, 4) ? fbx__onnx_value_const(c->g, c->n->inputs[4]) : NULL;
    if (st) {
      int64_t steps[FBX_MAX_RANK];
      int ns;
      if (!fbx__onnx_tensor_ints(st, steps, FBX_MAX_RANK, &ns)) return fbx__onnx_fail(c, "steps unreadable");
      for (int i = 0; i < ns; i++)
        if (steps[i] == 0) return fbx__onnx_fail(c, "step 0 invalid");
    }
  }
  uint32_t seen = 0;
  for (int i = 0; i < *n_axes; i++) {
    int a;
    if (!fbx__onnx_axis(axes[i], x->rank, false, &a)) return fbx__onnx_fail(c, "axis out of range");
    if (seen & (1u << a)) return fbx__onnx_fail(c, "duplicate axis");
    seen |= 1u << a;
    axes[i] = a;
  }
  return true;
}

bool fbx__onnx_claim_slice(const fbx_onnx_cctx *c) {
  int64_t axes[FBX_MAX_RANK];
  int n;
  return fbx__onnx_any_dtype(c) && fbx__onnx_slice_check(c, axes, &n);
}

fbx_status *fbx__onnx_tr_slice(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  int64_t axes[FBX_MAX_RANK];
  int n_axes;
  if (!fbx__onnx_slice_check(&c, axes, &n_axes)) return FBX_ERR_NOTIMPL("Slice: not translatable");
  int ins[5];
  int nin = 3;
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  if (t->n->opset < 10) {
    const fbx_onnx_attr *s = fbx_onnx_attr_find(t->n, "starts"), *e = fbx_onnx_attr_find(t->n, "ends");
    FBX_TRY(fbx__onnx_const_i64s(t, s->ints, s->n_ints, &ins[1]));
    FBX_TRY(fbx__onnx_const_i64s(t, e->ints, e->n_ints, &ins[2]));
  } else {
    for (int i = 1; i <= 2; i++) {
      int id;
      FBX_TRY(fbx__onnx_tin(t, i, &id));
      FBX_TRY(fbx__onnx_to_i64(t, id, &ins[i]));
    }
    int sid;
    FBX_TRY(fbx__onnx_tin(t, 4, &sid));
    if (sid != FBX_IR_NONE) {
      FBX_TRY(fbx__onnx_to_i64(t, sid, &ins[4]));
      nin = 5;
    }
  }
  if (n_axes >= 0) {
    FBX_TRY(fbx__onnx_const_i64s(t, axes, n_axes, &ins[3]));
    if (nin < 4) nin = 4;
  } else if (n_axes == -2) {
    int aid;
    FBX_TRY(fbx__onnx_tin(t, 3, &aid));
    FBX_TRY(fbx__onnx_to_i64(t, aid, &ins[3]));
    if (nin < 4) nin = 4;
  } else if (nin == 5) {
    ins[3] = FBX_IR_NONE;
  }
  return fbx__onnx_emit_out(t, FBX_IR_OP_SLICE, ins, nin, NULL);
}

/* ======================= DepthToSpace / SpaceToDepth ======================= */

bool fbx__onnx_claim_d2s(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_any_dtype(c)) return false;
  if (fbx__onnx_cin(c, 0)->rank != 4) return fbx__onnx_fail(c, "input must be 4-D");
  int64_t bs = fbx_onnx_attr_int(c->n, "blocksize", 0);
  if (bs < 1 || bs > 1024) return fbx__onnx_fail(c, "blocksize %lld invalid", (long long)bs);
  const char *m = fbx_onnx_attr_string(c->n, "mode", "DCR");
  if (strcmp(m, "DCR") != 0 && strcmp(m, "CRD") != 0) return fbx__onnx_fail(c, "mode '%s' not supported", m);
  return true;
}

fbx_status *fbx__onnx_tr_d2s(fbx_onnx_tctx *t) {
  fbx_ir_params p = fbx__onnx_pz();
  p.d2s.blocksize = (int)fbx_onnx_attr_int(t->n, "blocksize", 1);
  p.d2s.crd = strcmp(fbx_onnx_attr_string(t->n, "mode", "DCR"), "CRD") == 0;
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &x, 1, &p);
}
