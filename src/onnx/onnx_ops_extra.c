/* Ops composed from existing IR ops (no kernels of their own): Size, Shrink,
 * EyeLike (static shape -> constant), Compress (NON_ZERO + GATHER), Einsum
 * (1-2 operands, no ellipsis/diagonals: TRANSPOSE + UNSQUEEZE + MUL +
 * REDUCE_SUM). The quantisation ops are onnx_ops_quant.c. */
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

/* ======================= Size ======================= */

bool fbx__onnx_claim_size(const fbx_onnx_cctx *c) {
  if (!fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_ALL, "input")) return false;
  return fbx__onnx_dt_ok(c, fbx__onnx_cout(c, 0), FBX__DT(I64), "output");
}

/* REDUCE_PROD(SHAPE(x)) over all axes, keepdims 0 -> int64 scalar. */
fbx_status *fbx__onnx_tr_size(fbx_onnx_tctx *t) {
  int x, shp;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  fbx_ir_params sp = fbx__onnx_px();
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_SHAPE, &x, 1, &sp, FBX_DTYPE_I64, 1, &shp));
  fbx_ir_params rp = fbx__onnx_px();
  rp.reduce.axes_mask = 1u;
  rp.reduce.keepdims = 0;
  return fbx__onnx_emit_out(t, FBX_IR_OP_REDUCE_PROD, &shp, 1, &rp);
}

/* ======================= Shrink ======================= */

bool fbx__onnx_claim_shrink(const fbx_onnx_cctx *c) {
  return fbx__onnx_dt_ok(c, fbx__onnx_cin(c, 0), FBX_ONNX_DT_F32_F64, "input");
}

/* y = x < -l ? x + b : (x > l ? x - b : 0), the 0 written as x * 0 so that a
 * NaN x stays NaN (README "Numerics": NaN in, NaN out) */
fbx_status *fbx__onnx_tr_shrink(fbx_onnx_tctx *t) {
  const fbx_onnx_value *xv = fbx__onnx_tin_value(t, 0);
  fbx_dtype dt = xv->dtype;
  int r = xv->rank;
  double l = fbx_onnx_attr_float(t->n, "lambd", 0.5f), b = fbx_onnx_attr_float(t->n, "bias", 0.0f);
  int x, nl, pl, bb, zero, xz, lt, gt, xp, xm, w1;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  FBX_TRY(fbx__onnx_const_scalar(t, dt, -l, &nl));
  FBX_TRY(fbx__onnx_const_scalar(t, dt, l, &pl));
  FBX_TRY(fbx__onnx_const_scalar(t, dt, b, &bb));
  FBX_TRY(fbx__onnx_const_scalar(t, dt, 0, &zero));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_LESS, x, nl, FBX_DTYPE_BOOL, r, &lt));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_GREATER, x, pl, FBX_DTYPE_BOOL, r, &gt));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_ADD, x, bb, dt, r, &xp));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_SUB, x, bb, dt, r, &xm));
  FBX_TRY(fbx__onnx_x(t, FBX_IR_OP_MUL, x, zero, dt, r, &xz));
  int i1[3] = {gt, xm, xz};
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_WHERE, i1, 3, NULL, dt, r, &w1));
  int i2[3] = {lt, xp, w1};
  return fbx__onnx_emit_out(t, FBX_IR_OP_WHERE, i2, 3, NULL);
}

/* ======================= EyeLike ======================= */

bool fbx__onnx_claim_eyelike(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *y = fbx__onnx_cout(c, 0);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "input") || !fbx__onnx_dt_ok(c, y, FBX_ONNX_DT_ALL, "output"))
    return false;
  if (x->rank != 2 || x->dims[0] < 0 || x->dims[1] < 0) return fbx__onnx_fail(c, "input must be 2-D with a static shape");
  if (x->dims[0] * x->dims[1] > (1 << 24)) return fbx__onnx_fail(c, "input too large to fold into a constant");
  return true;
}

fbx_status *fbx__onnx_tr_eyelike(fbx_onnx_tctx *t) {
  const fbx_onnx_value *x = fbx__onnx_tin_value(t, 0), *y = fbx__onnx_tout_value(t, 0);
  int64_t rows = x->dims[0], cols = x->dims[1], k = fbx_onnx_attr_int(t->n, "k", 0);
  double *v = fbx_calloc((size_t)(rows * cols > 0 ? rows * cols : 1), sizeof(double));
  if (!v) return FBX_ERR_OOM();
  for (int64_t i = 0; i < rows; i++)
    if (i + k >= 0 && i + k < cols) v[i * cols + i + k] = 1.0;
  int id;
  fbx_status *st = fbx__onnx_const_f64s(t, y->dtype, v, 2, x->dims, &id);
  fbx_free(v);
  if (st) return st;
  t->vmap[t->n->outputs[0]] = id;
  return NULL;
}

/* ======================= Compress ======================= */

bool fbx__onnx_claim_compress(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *cond = fbx__onnx_cin(c, 1);
  if (!fbx__onnx_dt_ok(c, x, FBX_ONNX_DT_ALL, "input")) return false;
  if (!fbx__onnx_dt_ok(c, cond, FBX__DT(BOOL), "condition")) return false;
  if (cond->rank != 1) return fbx__onnx_fail(c, "condition must be 1-D");
  const fbx_onnx_attr *a = fbx_onnx_attr_find(c->n, "axis");
  int ax;
  if (a && (x->rank < 1 || !fbx__onnx_axis(a->i, x->rank, false, &ax))) return fbx__onnx_fail(c, "axis out of range");
  return true;
}

/* idx = RESHAPE(NON_ZERO(cond), [-1]); y = GATHER(x or flat x, idx, axis). */
fbx_status *fbx__onnx_tr_compress(fbx_onnx_tctx *t) {
  const fbx_onnx_value *xv = fbx__onnx_tin_value(t, 0);
  int x, cond, nz, idx, m1;
  FBX_TRY(fbx__onnx_tin(t, 0, &x));
  FBX_TRY(fbx__onnx_tin(t, 1, &cond));
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_NON_ZERO, &cond, 1, NULL, FBX_DTYPE_I64, 2, &nz));
  int64_t minus1 = -1;
  FBX_TRY(fbx__onnx_const_i64s(t, &minus1, 1, &m1));
  fbx_ir_params rp = fbx__onnx_px();
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_RESHAPE, (int[]){nz, m1}, 2, &rp, FBX_DTYPE_I64, 1, &idx));
  fbx_ir_params gp = fbx__onnx_px();
  const fbx_onnx_attr *a = fbx_onnx_attr_find(t->n, "axis");
  if (a) {
    fbx__onnx_axis(a->i, xv->rank, false, &gp.axis.axis);
  } else {
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_RESHAPE, (int[]){x, m1}, 2, &rp, xv->dtype, 1, &x));
  }
  int ins[2] = {x, idx};
  return fbx__onnx_emit_out(t, FBX_IR_OP_GATHER, ins, 2, &gp);
}

/* ======================= Einsum ======================= */

typedef struct fbx__onnx_ein {
  int n_ops;
  char op[2][FBX_MAX_RANK + 1]; /* letters of each operand */
  char out[FBX_MAX_RANK + 1];
  char full[FBX_MAX_RANK + 1];  /* out letters, then contracted letters */
  int n_full, n_out;
} fbx__onnx_ein;

/* Parse "ab,bc->ac" (letters only; spaces ignored). false on anything else. */
static bool fbx__onnx_ein_parse(const char *eq, fbx__onnx_ein *e) {
  memset(e, 0, sizeof *e);
  int k = 0, cur = 0;
  const char *p = eq;
  bool explicit_out = false;
  for (; *p; p++) {
    char ch = *p;
    if (ch == ' ') continue;
    if (ch == ',') {
      if (++cur >= 2) return false;
      k = 0;
      continue;
    }
    if (ch == '-') {
      if (p[1] != '>') return false;
      explicit_out = true;
      p += 2;
      break;
    }
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return false; /* '.' (ellipsis) too */
    if (k >= FBX_MAX_RANK || strchr(e->op[cur], ch)) return false;           /* diagonal */
    e->op[cur][k++] = ch;
  }
  e->n_ops = cur + 1;
  int no = 0;
  if (explicit_out) {
    for (; *p; p++) {
      char ch = *p;
      if (ch == ' ') continue;
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return false;
      if (no >= FBX_MAX_RANK || strchr(e->out, ch)) return false;
      if (!strchr(e->op[0], ch) && !(e->n_ops > 1 && strchr(e->op[1], ch))) return false;
      e->out[no++] = ch;
    }
  } else { /* implicit: letters appearing exactly once, alphabetical */
    for (int ch = 'A'; ch <= 'z'; ch++) {
      int cnt = (strchr(e->op[0], ch) ? 1 : 0) + (e->n_ops > 1 && strchr(e->op[1], ch) ? 1 : 0);
      if (ch == 0 || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) continue;
      if (cnt == 1) {
        if (no >= FBX_MAX_RANK) return false;
        e->out[no++] = (char)ch;
      }
    }
  }
  e->n_out = no;
  memcpy(e->full, e->out, (size_t)no);
  int nf = no;
  for (int i = 0; i < e->n_ops; i++)
    for (const char *q = e->op[i]; *q; q++)
      if (!memchr(e->full, *q, (size_t)nf)) {
        if (nf >= FBX_MAX_RANK) return false;
        e->full[nf++] = *q;
      }
  e->n_full = nf;
  return true;
}

static int fbx__onnx_ein_pos(const fbx__onnx_ein *e, char ch) {
  const char *q = memchr(e->full, ch, (size_t)e->n_full);
  return q ? (int)(q - e->full) : -1;
}

bool fbx__onnx_claim_einsum(const fbx_onnx_cctx *c) {
  fbx__onnx_ein e;
  const char *eq = fbx_onnx_attr_string(c->n, "equation", "");
  if (!fbx__onnx_ein_parse(eq, &e))
    return fbx__onnx_fail(c, "equation '%s' not supported (1-2 operands, letters only, no ellipsis or diagonal)", eq);
  if (c->n->n_inputs != e.n_ops) return fbx__onnx_fail(c, "equation has %d operands, node %d inputs", e.n_ops, c->n->n_inputs);
  const fbx_onnx_value *x0 = fbx__onnx_cin(c, 0);
  if (!fbx__onnx_dt_ok(c, x0, FBX_ONNX_DT_F32_F64 | FBX__DT(I32) | FBX__DT(I64), "input")) return false;
  int64_t dim_of[128];
  for (int i = 0; i < 128; i++) dim_of[i] = -2;
  for (int i = 0; i < e.n_ops; i++) {
    const fbx_onnx_value *v = fbx__onnx_cin(c, i);
    if (!v || v->dtype != x0->dtype) return fbx__onnx_fail(c, "operands must share one dtype");
    if (v->rank != (int)strlen(e.op[i])) return fbx__onnx_fail(c, "operand %d rank %d does not match '%s'", i, v->rank, e.op[i]);
    for (int d = 0; d < v->rank; d++) {
      int ch = (unsigned char)e.op[i][d];
      if (e.n_ops > 1 && v->dims[d] < 0) return fbx__onnx_fail(c, "two-operand einsum needs static shapes");
      if (dim_of[ch] >= 0 && v->dims[d] != dim_of[ch])
        return fbx__onnx_fail(c, "operands disagree on the size of '%c'", ch);
      dim_of[ch] = v->dims[d];
    }
  }
  if (e.n_ops > 1) { /* the composed product materialises the full index space */
    double full = 1;
    for (int i = 0; i < e.n_full; i++) full *= (double)dim_of[(unsigned char)e.full[i]];
    if (full > (double)(1 << 24)) return fbx__onnx_fail(c, "product space of %.0f elements too large to compose", full);
  }
  return true;
}

/* Each operand: TRANSPOSE into full order, UNSQUEEZE the missing letters;
 * MUL the two; REDUCE_SUM over the contracted letters. */
fbx_status *fbx__onnx_tr_einsum(fbx_onnx_tctx *t) {
  fbx__onnx_ein e;
  if (!fbx__onnx_ein_parse(fbx_onnx_attr_string(t->n, "equation", ""), &e)) return FBX_ERR_NOTIMPL("Einsum: equation");
  fbx_dtype dt = fbx__onnx_tin_value(t, 0)->dtype;
  int opnd[2];
  for (int i = 0; i < e.n_ops; i++) {
    int x, r = (int)strlen(e.op[i]);
    FBX_TRY(fbx__onnx_tin(t, i, &x));
    /* order of this operand's letters in full order */
    int pos[FBX_MAX_RANK], perm[FBX_MAX_RANK];
    for (int d = 0; d < r; d++) pos[d] = fbx__onnx_ein_pos(&e, e.op[i][d]);
    for (int d = 0; d < r; d++) perm[d] = d;
    for (int a = 0; a < r; a++) /* sort perm by pos */
      for (int b = a + 1; b < r; b++)
        if (pos[perm[b]] < pos[perm[a]]) { int tmp = perm[a]; perm[a] = perm[b]; perm[b] = tmp; }
    bool ident = true;
    for (int d = 0; d < r; d++) ident = ident && perm[d] == d;
    if (!ident) {
      fbx_ir_params tp = fbx__onnx_px();
      for (int d = 0; d < r; d++) tp.transpose.perm[d] = perm[d];
      FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_TRANSPOSE, &x, 1, &tp, dt, r, &x));
    }
    if (r < e.n_full) {
      fbx_ir_params up = fbx__onnx_px();
      for (int f = 0; f < e.n_full; f++)
        if (!strchr(e.op[i], e.full[f])) up.axes.axes_mask |= 1u << f;
      FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_UNSQUEEZE, &x, 1, &up, dt, e.n_full, &x));
    }
    opnd[i] = x;
  }
  int acc = opnd[0];
  bool reduce = e.n_full > e.n_out;
  if (e.n_ops == 2) {
    if (!reduce) return fbx__onnx_emit_out(t, FBX_IR_OP_MUL, opnd, 2, NULL);
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MUL, opnd, 2, NULL, dt, e.n_full, &acc));
  }
  if (!reduce) return fbx__onnx_emit_out(t, FBX_IR_OP_IDENTITY, &acc, 1, NULL);
  fbx_ir_params rp = fbx__onnx_px();
  for (int f = e.n_out; f < e.n_full; f++) rp.reduce.axes_mask |= 1u << f;
  rp.reduce.keepdims = 0;
  return fbx__onnx_emit_out(t, FBX_IR_OP_REDUCE_SUM, &acc, 1, &rp);
}

/* ======================= Unique (declined) ======================= */

/* Registered only so that the decline reason is precise. */
bool fbx__onnx_claim_unique(const fbx_onnx_cctx *c) {
  return fbx__onnx_fail(c,
                        "not implemented: its four outputs (values, first indices, inverse indices, counts) have "
                        "data-dependent sizes and need a stable sort + dedupe (+ row compare for 'axis'), which "
                        "no IR op provides; left to ORT");
}

fbx_status *fbx__onnx_tr_unique(fbx_onnx_tctx *t) {
  return FBX_ERR_NOTIMPL("%s: not implemented", t->n->op_type);
}
