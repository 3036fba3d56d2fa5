/* Quantisation ops. DequantizeLinear / QuantizeLinear / DynamicQuantizeLinear
 * are composed from float elementwise ops (CAST + EW) and DynamicQuantizeLinear
 * is one DYN_QUANT node (cpu_qquant.c), each in the spec's float formulas and order. MatMulInteger, ConvInteger,
 * QLinearMatMul and QLinearConv run on the integer IR ops MATMUL_INT /
 * CONV_INT (int32 accumulation, exact for every input range and every K:
 * cpu_qgemm.h), then the QLinear* requantisation in float:
 *   y = saturate(round_half_even(float(acc [+ bias]) * (s_x * s_w / s_y)) + zp_y),
 * the multiplier computed as (s_x * s_w) / s_y like ONNX Runtime. */
#include <math.h>
#include <string.h>

#include "../base/alloc.h"
#include "onnx_ops.h"

static fbx_ir_params fbx__onnx_px(void) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  return p;
}

/* out := op(ins) with dtype dt and rank r. */
static fbx_status *fbx__onnx_x(fbx_onnx_tctx *t, fbx_ir_op op, int a, int b, fbx_dtype dt, int r, int *out) {
  int ins[2] = {a, b};
  return fbx__onnx_emit(t, op, ins, b == FBX_IR_NONE ? 1 : 2, NULL, dt, r, out);
}

static fbx_status *fbx__onnx_cast_to(fbx_onnx_tctx *t, int id, fbx_dtype to, int *out) {
  if (t->ir->values[id].dtype == to) { *out = id; return NULL; }
  fbx_ir_params p = fbx__onnx_px();
  p.ew.to = to;
  return fbx__onnx_emit(t, FBX_IR_OP_CAST, &id, 1, &p, to, t->ir->values[id].rank, out);
}

static bool fbx__onnx_numel1(const fbx_onnx_value *v) {
  if (!v || v->rank < 0) return false;
  for (int i = 0; i < v->rank; i++)
    if (v->dims[i] != 1) return false;
  return true;
}

/* ======================= quantisation helpers ======================= */

#define FBX__ONNX_DT_Q8 (FBX__DT(I8) | FBX__DT(U8))
#define FBX__ONNX_DT_Q (FBX__DT(I8) | FBX__DT(U8) | FBX__DT(I16) | FBX__DT(U16))

static void fbx__onnx_qrange(fbx_dtype dt, double *lo, double *hi) {
  switch (dt) {
    case FBX_DTYPE_I8: *lo = -128; *hi = 127; break;
    case FBX_DTYPE_I16: *lo = -32768; *hi = 32767; break;
    case FBX_DTYPE_U16: *lo = 0; *hi = 65535; break;
    default: *lo = 0; *hi = 255; break;
  }
}

/* Per-axis scale/zero point: a 1-D [C] param broadcast along axis of an
 * r-D tensor (scalars pass through). Claim side: ok? */
static bool fbx__onnx_qparam_ok(const fbx_onnx_cctx *c, const fbx_onnx_value *p, const fbx_onnx_value *x, int *axis) {
  if (!p) return true;
  if (p->rank == 0 || (p->rank == 1 && p->dims[0] == 1)) return true;
  if (p->rank != 1) return fbx__onnx_fail(c, "scale/zero point must be a scalar or 1-D");
  if (!fbx__onnx_axis(fbx_onnx_attr_int(c->n, "axis", 1), x->rank, false, axis))
    return fbx__onnx_fail(c, "axis out of range");
  if (p->dims[0] < 0 || (x->dims[*axis] >= 0 && x->dims[*axis] != p->dims[0]))
    return fbx__onnx_fail(c, "per-axis parameter length does not match the axis");
  return true;
}

/* IR value of param input i, reshaped to [C,1,..] for per-axis use. */
static fbx_status *fbx__onnx_qparam(fbx_onnx_tctx *t, int i, int xrank, int *out) {
  FBX_TRY(fbx__onnx_tin(t, i, out));
  const fbx_onnx_value *p = fbx__onnx_tin_value(t, i);
  if (*out == FBX_IR_NONE || !p || p->rank == 0 || fbx__onnx_numel1(p)) return NULL;
  int axis;
  fbx__onnx_axis(fbx_onnx_attr_int(t->n, "axis", 1), xrank, false, &axis);
  int64_t shp[FBX_MAX_RANK];
  int r = xrank - axis;
  shp[0] = -1;
  for (int d = 1; d < r; d++) shp[d] = 1;
  int sid;
  FBX_TRY(fbx__onnx_const_i64s(t, shp, r, &sid));
  return fbx__onnx_x(t, FBX_IR_OP_RESHAPE, *out, sid, t->ir->values[*out].dtype, r, out);
}

/* clamp(round_half_even(v) + zp, lo, hi) cast to dt; v, zp float32 (zp may be NONE). */
static fbx_status *fbx__onnx_requant(fbx_onnx_tctx *t, int v, int zp, fbx_dtype dt, int r, int out_index) {
  double lo, hi;
  fbx__onnx_qrange(dt, &lo, &hi);
  int rd, lo_id, hi_id, a, b, c;
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_ROUND, v, FBX_IR_NONE, FBX_DTYPE_F32, r, &rd));
  if (zp != FBX_IR_NONE) FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_ADD, rd, zp, FBX_DTYPE_F32, r, &rd));
  FBX_TRY(fbx__onnx_const_scalar(t, FBX_DTYPE_F32, lo, &lo_id));
  FBX_TRY(fbx__onnx_const_scalar(t, FBX_DTYPE_F32, hi, &hi_id));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_MAX, rd, lo_id, FBX_DTYPE_F32, r, &a));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_MIN, a, hi_id, FBX_DTYPE_F32, r, &b));
  FBX_TRY(fbx__onnx_cast_to(t, b, dt, &c));
  fbx__onnx_bind(t, out_index, c);
  return NULL;
}

/* ======================= DequantizeLinear ======================= */

bool fbx__onnx_claim_dequant(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *s = fbx__onnx_cin(c, 1), *z = fbx__onnx_cin(c, 2);
  if (!fbx__onnx_dt_ok(c, x, FBX__ONNX_DT_Q | FBX__DT(I32), "input")) return false;
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(F32), "scale")) return false;
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cout(c, 0), FBX__DT(F32), "output")) return false;
  if (z && z->dtype != x->dtype) return fbx__onnx_fail(c, "zero point dtype differs from input");
  if (x->dtype == FBX_DTYPE_I32 && z) return fbx__onnx_fail(c, "int32 input with a zero point not supported");
  int axis;
  return fbx__onnx_qparam_ok(c, s, x, &axis) && fbx__onnx_qparam_ok(c, z, x, &axis);
}

/* y = (f32(x) - f32(zp)) * scale (the subtraction is exact in f32 for <= 16-bit ints). */
fbx_status *fbx__onnx_tr_dequant(fbx_onnx_tctx *t) {
  int r = fbx__onnx_tin_value(t, 0)->rank;
  int x, s, z, xf;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  FBX_TRY(fbx__onnx_qparam(t, 1, r, &s));
  FBX_TRY(fbx__onnx_qparam(t, 2, r, &z));
  FBX_TRY(fbx__onnx_cast_to(t, x, FBX_DTYPE_F32, &xf));
  if (z != FBX_IR_NONE) {
    int zf;
    FBX_TRY(fbx__onnx_cast_to(t, z, FBX_DTYPE_F32, &zf));
    FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_SUB, xf, zf, FBX_DTYPE_F32, r, &xf));
  }
  int ins[2] = {xf, s};
  return fbx__onnx_emit_out(t, FBX_IR_OP_MUL, ins, 2, NULL);
}

/* ======================= QuantizeLinear ======================= */

bool fbx__onnx_claim_quant(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *s = fbx__onnx_cin(c, 1), *z = fbx__onnx_cin(c, 2);
  const fbx_onnx_value *y = fbx__onnx_cout(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!fbx__onnx_dt_ok(c, s, FBX__DT(F32), "scale")) return false;
  if (!fbx__onnx_dt_ok(c, y, FBX__ONNX_DT_Q, "output")) return false;
  if (z && z->dtype != y->dtype) return fbx__onnx_fail(c, "zero point dtype differs from output");
  int axis;
  return fbx__onnx_qparam_ok(c, s, x, &axis) && fbx__onnx_qparam_ok(c, z, x, &axis);
}

/* y = saturate(round_half_even(x / scale) + zp) */
fbx_status *fbx__onnx_tr_quant(fbx_onnx_tctx *t) {
  int r = fbx__onnx_tin_value(t, 0)->rank;
  int x, s, z, q, zf = FBX_IR_NONE;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  FBX_TRY(fbx__onnx_qparam(t, 1, r, &s));
  FBX_TRY(fbx__onnx_qparam(t, 2, r, &z));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_DIV, x, s, FBX_DTYPE_F32, r, &q));
  if (z != FBX_IR_NONE) FBX_TRY(fbx__onnx_cast_to(t, z, FBX_DTYPE_F32, &zf));
  return fbx__onnx_requant(t, q, zf, fbx__onnx_tout_value(t, 0)->dtype, r, 0);
}

/* ======================= DynamicQuantizeLinear ======================= */

bool fbx__onnx_claim_dynquant(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX__DT(F32), "input")) return false;
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cout(c, 0), FBX__DT(U8), "output")) return false;
  if (x->rank < 1) return fbx__onnx_fail(c, "scalar input not supported");
  return true;
}

/* One DYN_QUANT node (cpu_qquant.c: two passes over x, the spec's float formulas in its order):
 * lo = min(0, min x), hi = max(0, max x); scale = (hi - lo) / 255;
 * zp = saturate(round(0 - lo / scale)); y = saturate(round(x / scale) + zp). */
fbx_status *fbx__onnx_tr_dynquant(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0);
  int in0, outs[3];
  FBX_TRY(fbx__onnx_tin(t, 0, &in0));
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_U8, x->rank, &outs[0]));
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_F32, 0, &outs[1]));
  FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_U8, 0, &outs[2]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_DYN_QUANT, &in0, 1, outs, 3, NULL, t->n->name ? t->n->name : "",
                                t->n->op_type, t->node_index, NULL));
  for (int i = 0; i < 3; i++) fbx__onnx_bind(t, i, outs[i]);
  return NULL;
}

/* ======================= MatMulInteger / QLinearMatMul ======================= */

/* A zero point / scale that is per-tensor (numel 1, rank <= 1) or 1-D of n
 * entries (n < 0: unknown, checked at run time by the kernel). */
static bool fbx__onnx_q_vec_ok(const fbx_onnx_value *z, int64_t n) {
  if (!z) return true;
  if (z->rank <= 1 && fbx__onnx_numel1(z)) return true;
  return z->rank == 1 && (n < 0 || z->dims[0] < 0 || z->dims[0] == n);
}

static int64_t fbx__onnx_dim_from_end(const fbx_onnx_value *v, int k) {
  return v && v->rank >= k ? v->dims[v->rank - k] : -1;
}

bool fbx__onnx_claim_mmint(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 1);
  const fbx_onnx_value *az = fbx__onnx_cin(c, 2), *bz = fbx__onnx_cin(c, 3);
  if (!fbx__onnx_dt_ok(c, a, FBX__ONNX_DT_Q8, "A") || !fbx__onnx_dt_ok(c, b, FBX__ONNX_DT_Q8, "B")) return false;
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cout(c, 0), FBX__DT(I32), "output")) return false;
  if (a->rank < 1 || b->rank < 1) return fbx__onnx_fail(c, "A and B must have rank >= 1");
  if ((az && az->dtype != a->dtype) || (bz && bz->dtype != b->dtype))
    return fbx__onnx_fail(c, "zero point dtype differs from its input");
  if (!fbx__onnx_q_vec_ok(az, a->rank >= 2 ? fbx__onnx_dim_from_end(a, 2) : 1))
    return fbx__onnx_fail(c, "a_zero_point must be a scalar or 1-D per row of A");
  if (!fbx__onnx_q_vec_ok(bz, b->rank >= 2 ? fbx__onnx_dim_from_end(b, 1) : 1))
    return fbx__onnx_fail(c, "b_zero_point must be a scalar or 1-D per column of B");
  return true;
}

fbx_status *fbx__onnx_tr_mmint(fbx_onnx_tctx *t) {
  int ins[4];
  for (int i = 0; i < 4; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  int n = ins[3] != FBX_IR_NONE ? 4 : ins[2] != FBX_IR_NONE ? 3 : 2;
  return fbx__onnx_emit_out(t, FBX_IR_OP_MATMUL_INT, ins, n, NULL);
}

bool fbx__onnx_claim_qlmm(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 3), *y = fbx__onnx_cout(c, 0);
  if (c->n->n_inputs != 8) return fbx__onnx_fail(c, "expects 8 inputs");
  if (!fbx__onnx_dt_ok(c, a, FBX__ONNX_DT_Q8, "a") || !fbx__onnx_dt_ok(c, b, FBX__ONNX_DT_Q8, "b") ||
      !fbx__onnx_dt_ok(c, y, FBX__ONNX_DT_Q8, "y"))
    return false;
  if (a->rank < 1 || b->rank < 1) return fbx__onnx_fail(c, "a and b must have rank >= 1");
  static const int scales[3] = {1, 4, 6}, zps[3] = {2, 5, 7};
  const fbx_onnx_value *q[3] = {a, b, y};
  for (int i = 0; i < 3; i++) {
    const fbx_onnx_value *s = fbx__onnx_cin(c, scales[i]), *z = fbx__onnx_cin(c, zps[i]);
    if (!s || !z || s->dtype != FBX_DTYPE_F32 || z->dtype != q[i]->dtype)
      return fbx__onnx_fail(c, "scales must be float32 and zero points of the data dtype");
    /* b: per-tensor or per column (1-D [N]); a and y: per-tensor */
    int64_t n = i == 1 ? (b->rank >= 2 ? fbx__onnx_dim_from_end(b, 1) : 1) : 1;
    bool ok = i == 1 ? fbx__onnx_q_vec_ok(s, n) && fbx__onnx_q_vec_ok(z, n)
                     : fbx__onnx_numel1(s) && fbx__onnx_numel1(z) && s->rank <= 1 && z->rank <= 1;
    if (!ok) return fbx__onnx_fail(c, "scales/zero points must be per-tensor (b: or per column)");
  }
  return true;
}

/* float(acc) * m, m = (sa * sb) / sy (float32, ORT's order), then requantised. */
static fbx_status *fbx__onnx_qlinear_out(fbx_onnx_tctx *t, int acc, int sa, int sb, int sy, int zy) {
  const fbx_onnx_value *y = fbx__onnx_tout_value(t, 0);
  int af, m1, m2, v, zyf;
  FBX_TRY(fbx__onnx_cast_to(t, acc, FBX_DTYPE_F32, &af));
  int sr = t->ir->values[sa].rank > t->ir->values[sb].rank ? t->ir->values[sa].rank : t->ir->values[sb].rank;
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_MUL, sa, sb, FBX_DTYPE_F32, sr, &m1));
  if (t->ir->values[sy].rank > sr) sr = t->ir->values[sy].rank;
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_DIV, m1, sy, FBX_DTYPE_F32, sr, &m2));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_MUL, af, m2, FBX_DTYPE_F32, y->rank > sr ? y->rank : sr, &v));
  FBX_TRY(fbx__onnx_cast_to(t, zy, FBX_DTYPE_F32, &zyf));
  return fbx__onnx_requant(t, v, zyf, y->dtype, t->ir->values[v].rank, 0);
}

fbx_status *fbx__onnx_tr_qlmm(fbx_onnx_tctx *t) {
  int ins[4], sa, sb, sy, zy, acc;
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 3, &ins[1]));
  FBX_TRY(fbx__onnx_tin(t, 2, &ins[2]));
  FBX_TRY(fbx__onnx_tin(t, 5, &ins[3]));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MATMUL_INT, ins, 4, NULL, FBX_DTYPE_I32, fbx__onnx_tout_value(t, 0)->rank, &acc));
  FBX_TRY(fbx__onnx_tin(t, 1, &sa));
  FBX_TRY(fbx__onnx_tin(t, 4, &sb));
  FBX_TRY(fbx__onnx_tin(t, 6, &sy));
  FBX_TRY(fbx__onnx_tin(t, 7, &zy));
  return fbx__onnx_qlinear_out(t, acc, sa, sb, sy, zy);
}

/* ======================= ConvInteger / QLinearConv ======================= */

/* x (input xi), w (wi) and their zero points (xzi, wzi); geometry checks shared by both ops. */
static bool fbx__onnx_qconv_ok(const fbx_onnx_cctx *c, int xi, int wi, int xzi, int wzi) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, xi), *w = fbx__onnx_cin(c, wi);
  const fbx_onnx_value *xz = fbx__onnx_cin(c, xzi), *wz = fbx__onnx_cin(c, wzi);
  if (!fbx__onnx_dt_ok(c, x, FBX__ONNX_DT_Q8, "x") || !fbx__onnx_dt_ok(c, w, FBX__ONNX_DT_Q8, "w")) return false;
  if (x->rank < 3 || x->rank > 5) return fbx__onnx_fail(c, "x rank %d (1..3 spatial dims supported)", x->rank);
  if (w->rank != x->rank) return fbx__onnx_fail(c, "w rank %d differs from x rank %d", w->rank, x->rank);
  if (xz && (xz->dtype != x->dtype || !fbx__onnx_numel1(xz) || xz->rank > 1))
    return fbx__onnx_fail(c, "x_zero_point must be a per-tensor scalar of the x dtype");
  if (wz && wz->dtype != w->dtype) return fbx__onnx_fail(c, "w_zero_point dtype differs from w");
  if (!fbx__onnx_q_vec_ok(wz, w->dims[0]))
    return fbx__onnx_fail(c, "w_zero_point must be a scalar or 1-D of length M (output channels)");
  fbx_ir_params p;
  if (!fbx__onnx_conv_params(c, w, &p)) return false;
  int64_t wc;
  if (x->dims[1] >= 0 && w->dims[1] >= 0 && (!fbx_i64_mul(w->dims[1], p.conv.group, &wc) || x->dims[1] != wc))
    return fbx__onnx_fail(c, "channels %lld != W C/group %lld * group %lld", (long long)x->dims[1],
                          (long long)w->dims[1], (long long)p.conv.group);
  return true;
}

bool fbx__onnx_claim_convint(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cout(c, 0), FBX__DT(I32), "output")) return false;
  return fbx__onnx_qconv_ok(c, 0, 1, 2, 3);
}

/* CONV_INT(x, w[, x_zp][, w_zp]) -> int32 (rank of y). */
static fbx_status *fbx__onnx_qconv_emit(fbx_onnx_tctx *t, int xi, int wi, int xzi, int wzi, int *acc) {
  fbx_onnx_cctx c = {t->g, t->n, t->e, NULL, 0};
  fbx_ir_params p;
  if (!fbx__onnx_conv_params(&c, fbx__onnx_tin_value(t, wi), &p))
    return FBX_ERR_NOTIMPL("%s: bad attributes", t->n->op_type);
  p.conv.nd = fbx__onnx_tin_value(t, xi)->rank - 2;
  int ins[4];
  FBX_TRY(fbx__onnx_tin(t, xi, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, wi, &ins[1]));
  FBX_TRY(fbx__onnx_tin(t, xzi, &ins[2]));
  FBX_TRY(fbx__onnx_tin(t, wzi, &ins[3]));
  int n = ins[3] != FBX_IR_NONE ? 4 : ins[2] != FBX_IR_NONE ? 3 : 2;
  return fbx__onnx_emit(t, FBX_IR_OP_CONV_INT, ins, n, &p, FBX_DTYPE_I32, fbx__onnx_tin_value(t, xi)->rank, acc);
}

fbx_status *fbx__onnx_tr_convint(fbx_onnx_tctx *t) {
  int acc;
  FBX_TRY(fbx__onnx_qconv_emit(t, 0, 1, 2, 3, &acc));
  fbx__onnx_bind(t, 0, acc);
  return NULL;
}

/* QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B int32 [M]]). */
bool fbx__onnx_claim_qlconv(const fbx_onnx_cctx *c) {
  if (c->n->n_inputs < 8 || c->n->n_inputs > 9) return fbx__onnx_fail(c, "expects 8 or 9 inputs");
  const fbx_onnx_value *w = fbx__onnx_cin(c, 3), *y = fbx__onnx_cout(c, 0);
  const fbx_onnx_value *xs = fbx__onnx_cin(c, 1), *ws = fbx__onnx_cin(c, 4), *ys = fbx__onnx_cin(c, 6);
  const fbx_onnx_value *yz = fbx__onnx_cin(c, 7), *b = fbx__onnx_cin(c, 8);
  if (!fbx__onnx_dt_ok(c, y, FBX__ONNX_DT_Q8, "y")) return false;
  if (!fbx__onnx_qconv_ok(c, 0, 3, 2, 5)) return false;
  if (!xs || !ws || !ys || !yz) return fbx__onnx_fail(c, "scales and the y zero point must be present");
  if (xs->dtype != FBX_DTYPE_F32 || ws->dtype != FBX_DTYPE_F32 || ys->dtype != FBX_DTYPE_F32)
    return fbx__onnx_fail(c, "scales must be float32");
  if (yz->dtype != y->dtype) return fbx__onnx_fail(c, "y_zero_point dtype differs from y");
  if (!fbx__onnx_numel1(xs) || xs->rank > 1 || !fbx__onnx_numel1(ys) || ys->rank > 1 || !fbx__onnx_numel1(yz) ||
      yz->rank > 1)
    return fbx__onnx_fail(c, "x_scale, y_scale and y_zero_point must be per-tensor");
  if (!fbx__onnx_q_vec_ok(ws, w->dims[0])) return fbx__onnx_fail(c, "w_scale must be a scalar or 1-D of length M");
  if (b && (b->dtype != FBX_DTYPE_I32 || b->rank != 1 || (b->dims[0] >= 0 && w->dims[0] >= 0 && b->dims[0] != w->dims[0])))
    return fbx__onnx_fail(c, "B must be int32 1-D of length M");
  return true;
}

/* A 1-D [M] value as [M, 1, ...] (rank r) for a per-channel broadcast; scalars pass through. */
static fbx_status *fbx__onnx_per_channel(fbx_onnx_tctx *t, int i, int r, int *out) {
  FBX_TRY(fbx__onnx_tin(t, i, out));
  const fbx_onnx_value *v = fbx__onnx_tin_value(t, i);
  if (*out == FBX_IR_NONE || !v || v->rank == 0 || fbx__onnx_numel1(v)) return NULL;
  int64_t shp[FBX_MAX_RANK];
  shp[0] = -1;
  for (int d = 1; d < r - 1; d++) shp[d] = 1;
  int sid;
  FBX_TRY(fbx__onnx_const_i64s(t, shp, r - 1, &sid));
  return fbx__onnx_x(t, FBX_IR_OP_RESHAPE, *out, sid, t->ir->values[*out].dtype, r - 1, out);
}

fbx_status *fbx__onnx_tr_qlconv(fbx_onnx_tctx *t) {
  int r = fbx__onnx_tin_value(t, 0)->rank;
  int acc, xs, ws, ys, yz, b;
  FBX_TRY(fbx__onnx_qconv_emit(t, 0, 3, 2, 5, &acc));
  FBX_TRY(fbx__onnx_per_channel(t, 8, r, &b)); /* [M, 1, ...] against (N, M, spatial...) */
  if (b != FBX_IR_NONE) FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_ADD, acc, b, FBX_DTYPE_I32, r, &acc));
  FBX_TRY(fbx__onnx_tin(t, 1, &xs));
  FBX_TRY(fbx__onnx_per_channel(t, 4, r, &ws));
  FBX_TRY(fbx__onnx_tin(t, 6, &ys));
  FBX_TRY(fbx__onnx_tin(t, 7, &yz));
  return fbx__onnx_qlinear_out(t, acc, xs, ws, ys, yz);
}
