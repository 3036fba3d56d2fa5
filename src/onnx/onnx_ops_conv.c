/* Conv, ConvTranspose, MaxPool/AveragePool/LpPool, GlobalAverage/MaxPool,
 * (ConvInteger and QLinearConv are onnx_ops_quant.c). */
#include <string.h>

#include "../base/alloc.h"
#include "onnx_ops.h"

/* Reads an INTS attribute of exactly n entries into out (default dflt when absent). */
static bool fbx__onnx_ints_n(const fbx_onnx_node *node, const char *name, int n, int64_t dflt, int64_t *out,
                             bool *present) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(node, name);
  if (present) *present = a != NULL;
  if (!a) {
    for (int i = 0; i < n; i++) out[i] = dflt;
    return true;
  }
  if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints != n) return false;
  for (int i = 0; i < n; i++) out[i] = a->ints[i];
  return true;
}

/* Fills p.conv from the attributes; reason on failure. W (may be NULL for pools) gives the kernel when
 * kernel_shape is absent. */
bool fbx__onnx_conv_params(const fbx_onnx_cctx *c, const fbx_onnx_value *w, fbx_ir_params *p) {
  const fbx_onnx_node *n = c->n;
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  fbx_ir_op op = (fbx_ir_op)c->e->aux;
  memset(p, 0, sizeof *p);
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3) return fbx__onnx_fail(c, "input rank %d not supported (3..5)", x->rank);
  p->conv.nd = nd;
  bool has_k;
  if (!fbx__onnx_ints_n(n, "kernel_shape", nd, 0, p->conv.kernel, &has_k)) return fbx__onnx_fail(c, "bad kernel_shape");
  if (w) {
    for (int i = 0; i < nd; i++) {
      int64_t wd = w->dims[2 + i];
      if (!has_k) {
        if (wd < 0) return fbx__onnx_fail(c, "kernel shape unknown (no kernel_shape, dynamic W)");
        p->conv.kernel[i] = wd;
      } else if (wd >= 0 && wd != p->conv.kernel[i]) {
        return fbx__onnx_fail(c, "kernel_shape differs from W");
      }
    }
  } else if (!has_k) {
    return fbx__onnx_fail(c, "kernel_shape missing");
  }
  if (!fbx__onnx_ints_n(n, "strides", nd, 1, p->conv.strides, NULL)) return fbx__onnx_fail(c, "bad strides");
  if (!fbx__onnx_ints_n(n, "dilations", nd, 1, p->conv.dilations, NULL)) return fbx__onnx_fail(c, "bad dilations");
  if (!fbx__onnx_ints_n(n, "pads", 2 * nd, 0, p->conv.pads, NULL)) return fbx__onnx_fail(c, "bad pads");
  if (!fbx__onnx_ints_n(n, "output_padding", nd, 0, p->conv.output_padding, NULL))
    return fbx__onnx_fail(c, "bad output_padding");
  if (!fbx__onnx_ints_n(n, "output_shape", nd, 0, p->conv.output_shape, NULL))
    return fbx__onnx_fail(c, "output_shape must list the %d spatial dims", nd);
  p->conv.group = fbx_onnx_attr_int(n, "group", 1);
  if (p->conv.group < 1) return fbx__onnx_fail(c, "group must be >= 1");
  const char *ap = fbx_onnx_attr_string(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") == 0) p->conv.auto_pad = FBX_IR_PAD_NOTSET;
  else if (strcmp(ap, "VALID") == 0) p->conv.auto_pad = FBX_IR_PAD_VALID;
  else if (strcmp(ap, "SAME_UPPER") == 0) p->conv.auto_pad = FBX_IR_PAD_SAME_UPPER;
  else if (strcmp(ap, "SAME_LOWER") == 0) p->conv.auto_pad = FBX_IR_PAD_SAME_LOWER;
  else return fbx__onnx_fail(c, "auto_pad '%s' not supported", ap);
  bool pool = op != FBX_IR_OP_CONV && op != FBX_IR_OP_CONV_TRANSPOSE && op != FBX_IR_OP_CONV_INT;
  for (int i = 0; i < nd; i++) {
    if (p->conv.kernel[i] < 1 || p->conv.strides[i] < 1 || p->conv.dilations[i] < 1)
      return fbx__onnx_fail(c, "kernel/strides/dilations must be >= 1");
    if (p->conv.pads[i] < 0 || p->conv.pads[nd + i] < 0 || p->conv.output_padding[i] < 0 || p->conv.output_shape[i] < 0)
      return fbx__onnx_fail(c, "negative pads/output_padding not supported");
    /* invalid models (ONNX Runtime rejects them; declined so that it reports its own error) */
    if (pool && (p->conv.pads[i] >= p->conv.kernel[i] || p->conv.pads[nd + i] >= p->conv.kernel[i]))
      return fbx__onnx_fail(c, "pads (%lld, %lld) of dim %d must be smaller than the kernel (%lld)",
                            (long long)p->conv.pads[i], (long long)p->conv.pads[nd + i], i, (long long)p->conv.kernel[i]);
    /* AveragePool/LpPool SAME_* with a kernel shorter than the stride can need a negative
     * pad, which ORT rejects at run (MaxPool it accepts, as a pad of 0) */
    bool same = p->conv.auto_pad == FBX_IR_PAD_SAME_UPPER || p->conv.auto_pad == FBX_IR_PAD_SAME_LOWER;
    if (same && (op == FBX_IR_OP_AVGPOOL || op == FBX_IR_OP_LPPOOL) &&
        (__int128)p->conv.dilations[i] * (p->conv.kernel[i] - 1) + 1 < p->conv.strides[i])
      return fbx__onnx_fail(c, "auto_pad SAME with kernel extent < stride in dim %d (ORT rejects the negative pad)", i);
    if (op == FBX_IR_OP_CONV_TRANSPOSE && p->conv.output_padding[i] >= p->conv.strides[i])
      return fbx__onnx_fail(c, "output_padding %lld of dim %d must be smaller than the stride (%lld)",
                            (long long)p->conv.output_padding[i], i, (long long)p->conv.strides[i]);
  }
  p->conv.ceil_mode = fbx_onnx_attr_int(n, "ceil_mode", 0) != 0;
  p->conv.count_include_pad = fbx_onnx_attr_int(n, "count_include_pad", 0) != 0;
  p->conv.p = fbx_onnx_attr_int(n, "p", 2);
  if (op == FBX_IR_OP_LPPOOL && p->conv.p < 1) return fbx__onnx_fail(c, "p must be >= 1");
  return true;
}

/* ======================= Conv / ConvTranspose ======================= */

bool fbx__onnx_claim_conv(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *w = fbx__onnx_cin(c, 1), *b = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!w || w->dtype != x->dtype || w->rank != x->rank) return fbx__onnx_fail(c, "W missing or dtype/rank differs from X");
  if (b && (b->dtype != x->dtype || b->rank != 1)) return fbx__onnx_fail(c, "B must be 1-D of the input dtype");
  fbx_ir_params p;
  if (!fbx__onnx_conv_params(c, w, &p)) return false;
  if (c->e->aux == FBX_IR_OP_CONV) {
    int64_t wc;
    if (w->dims[1] >= 0 && !fbx_i64_mul(w->dims[1], p.conv.group, &wc)) return fbx__onnx_fail(c, "W dim 1 x group overflows");
    if (x->dims[1] >= 0 && w->dims[1] >= 0 && x->dims[1] != wc)
      return fbx__onnx_fail(c, "channels %lld != W C/group %lld * group %lld", (long long)x->dims[1],
                            (long long)w->dims[1], (long long)p.conv.group);
  } else if (x->dims[1] >= 0 && w->dims[0] >= 0 && x->dims[1] != w->dims[0]) {
    return fbx__onnx_fail(c, "channels %lld != W dim 0 %lld", (long long)x->dims[1], (long long)w->dims[0]);
  }
  /* invalid models ORT rejects: channels that the group does not divide, a bias of the wrong length */
  bool tr = c->e->aux == FBX_IR_OP_CONV_TRANSPOSE;
  int64_t grouped = w->dims[0]; /* Conv: M; ConvTranspose: C */
  if (grouped >= 0 && grouped % p.conv.group)
    return fbx__onnx_fail(c, "%s %lld not divisible by group %lld", tr ? "input channels" : "output channels",
                          (long long)grouped, (long long)p.conv.group);
  int64_t M = w->dims[0];
  if (tr && (w->dims[1] < 0 || !fbx_i64_mul(w->dims[1], p.conv.group, &M))) M = -1;
  if (b && b->dims[0] >= 0 && M >= 0 && b->dims[0] != M)
    return fbx__onnx_fail(c, "B has %lld elements, expected %lld output channels", (long long)b->dims[0], (long long)M);
  return true;
}

fbx_status *fbx__onnx_tr_conv(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p;
  if (!fbx__onnx_conv_params(&c, fbx__onnx_tin_value(t, 1), &p)) return FBX_ERR_NOTIMPL("%s: bad attributes", t->n->op_type);
  int ins[3];
  for (int i = 0; i < 3; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, ins, ins[2] == FBX_IR_NONE ? 2 : 3, &p);
}

/* ======================= pools ======================= */

/* MaxPool on small ints runs in float32 (exact: every value fits the mantissa). */
#define FBX__ONNX_POOL_SMALL_INT (FBX__DT(I8) | FBX__DT(U8) | FBX__DT(I16) | FBX__DT(U16))

bool fbx__onnx_claim_pool(const fbx_onnx_cctx *c) {
  uint32_t dts = FBX__DT(F32) | (c->e->aux == FBX_IR_OP_MAXPOOL ? FBX__ONNX_POOL_SMALL_INT : 0u);
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), dts, "input")) return false;
  if (!fbx__onnx_no_out(c, 1, "Indices")) return false;
  fbx_ir_params p;
  return fbx__onnx_conv_params(c, NULL, &p);
}

fbx_status *fbx__onnx_tr_pool(fbx_onnx_tctx *t) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p;
  if (!fbx__onnx_conv_params(&c, NULL, &p)) return FBX_ERR_NOTIMPL("%s: bad attributes", t->n->op_type);
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  fbx_dtype dt = fbx__onnx_tin_value(t, 0)->dtype;
  if (dt == FBX_DTYPE_F32) return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &x, 1, &p);
  int rank = fbx__onnx_tin_value(t, 0)->rank, xf, yf;
  fbx_ir_params cp;
  memset(&cp, 0, sizeof cp);
  cp.ew.to = FBX_DTYPE_F32;
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CAST, &x, 1, &cp, FBX_DTYPE_F32, rank, &xf));
  FBX_TRY(fbx__onnx_emit(t, (fbx_ir_op)t->e->aux, &xf, 1, &p, FBX_DTYPE_F32, rank, &yf));
  cp.ew.to = dt;
  return fbx__onnx_emit_out(t, FBX_IR_OP_CAST, &yf, 1, &cp);
}

bool fbx__onnx_claim_gpool(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (x->rank < 3) return fbx__onnx_fail(c, "input rank %d < 3", x->rank);
  return true;
}

fbx_status *fbx__onnx_tr_gpool(fbx_onnx_tctx *t) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.conv.nd = fbx__onnx_tin_value(t, 0)->rank - 2;
  int x;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  return fbx__onnx_emit_out(t, (fbx_ir_op)t->e->aux, &x, 1, &p);
}
