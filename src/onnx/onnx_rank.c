/* Rank inference (see onnx_rank.h): per registered op (any domain), the
 * output rank (and static dims where cheap) from the inputs' ranks/dims,
 * attributes and constant inputs, following the ONNX operator spec (or ORT's
 * contrib-op docs for com.microsoft). The rule is a column of the op's
 * registry row, so an op is never registered without one. Rules only decide when
 * they are sure; otherwise the output keeps rank -1 and the registry
 * declines its consumers as before. */
#include "onnx_rank.h"

#include "../base/checked.h"
#include "onnx_ops.h"

#include <stdio.h>
#include <string.h>

/* An output shape being inferred: rank -1 = undecided; d[i] -1 = dynamic. */
typedef struct fbx__rank_shape {
  int rank;
  int64_t d[FBX_MAX_RANK];
} fbx__rank_shape;

#define FBX__RANK_MAX_OUT 8

/* ---------------------------------------------------------------- helpers -- */

static const fbx_onnx_value *fbx__rank_in(const fbx_onnx_graph *g, const fbx_onnx_node *n, int i) {
  if (i < 0 || i >= n->n_inputs) return NULL;
  int v = n->inputs[i];
  if (v < 0 || v >= g->n_values) return NULL;
  return &g->values[v];
}

/* Rank of input i, -1 when absent or unknown. */
static int fbx__rank_in_rank(const fbx_onnx_graph *g, const fbx_onnx_node *n, int i) {
  const fbx_onnx_value *v = fbx__rank_in(g, n, i);
  if (!v || v->kind != FBX_ONNX_VALUE_TENSOR || v->rank < 0 || v->rank > FBX_MAX_RANK) return -1;
  return v->rank;
}

/* out = input i's shape (rank and dims). */
static void fbx__rank_copy_in(const fbx_onnx_graph *g, const fbx_onnx_node *n, int i, fbx__rank_shape *out) {
  int r = fbx__rank_in_rank(g, n, i);
  if (r < 0) return;
  const fbx_onnx_value *v = fbx__rank_in(g, n, i);
  out->rank = r;
  for (int k = 0; k < r; k++) out->d[k] = v->dims[k] >= 0 ? v->dims[k] : -1;
}

static void fbx__rank_set_dynamic(fbx__rank_shape *s, int rank) {
  s->rank = rank;
  for (int k = 0; k < FBX_MAX_RANK; k++) s->d[k] = -1;
}

/* Integer contents of a constant 0-D/1-D int64/int32 input (initializer with
 * readable data). Returns the element count, -1 when not constant. */
static int fbx__rank_const_ints(const fbx_onnx_graph *g, const fbx_onnx_node *n, int i, int64_t *out, int max) {
  const fbx_onnx_value *v = fbx__rank_in(g, n, i);
  if (!v || !v->is_initializer || v->is_graph_input || !v->init || !v->init->data) return -1;
  const fbx_onnx_tensor *t = v->init;
  if (t->rank > 1) return -1;
  int64_t cnt = t->rank == 0 ? 1 : t->dims[0];
  size_t es = t->dtype == FBX_DTYPE_I64 ? 8 : t->dtype == FBX_DTYPE_I32 ? 4 : 0;
  if (!es || cnt < 0 || cnt > max || (size_t)cnt * es > t->nbytes) return -1;
  for (int64_t k = 0; k < cnt; k++) {
    if (es == 8) memcpy(&out[k], (const char *)t->data + k * 8, 8);
    else {
      int32_t x;
      memcpy(&x, (const char *)t->data + k * 4, 4);
      out[k] = x;
    }
  }
  return (int)cnt;
}

/* Length of 1-D input i (a shape vector): constant numel, or static dims[0]. -1 unknown. */
static int64_t fbx__rank_vec_len(const fbx_onnx_graph *g, const fbx_onnx_node *n, int i) {
  int64_t tmp[FBX_MAX_RANK * 4];
  int c = fbx__rank_const_ints(g, n, i, tmp, (int)(sizeof tmp / sizeof tmp[0]));
  if (c >= 0) return c;
  const fbx_onnx_value *v = fbx__rank_in(g, n, i);
  if (v && v->kind == FBX_ONNX_VALUE_TENSOR && v->rank == 1 && v->dims[0] >= 0) return v->dims[0];
  return -1;
}

/* Axes from attribute "axes" (when attr_ok) or constant input idx. Returns
 * count, -1 unknown, -2 absent (neither attribute nor input given). */
static int fbx__rank_axes(const fbx_onnx_graph *g, const fbx_onnx_node *n, bool attr_ok, int idx, int64_t *axes,
                          int max) {
  const fbx_onnx_attr *a = fbx_onnx_attr_find(n, "axes");
  if (attr_ok && a) {
    if (a->type != FBX_ONNX_ATTR_INTS || a->n_ints > max) return -1;
    for (int k = 0; k < a->n_ints; k++) axes[k] = a->ints[k];
    return a->n_ints;
  }
  if (idx >= n->n_inputs || n->inputs[idx] < 0) return -2;
  return fbx__rank_const_ints(g, n, idx, axes, max);
}

/* Normalize axes to [0, rank) in place and mark them; false on bad/duplicate axes. */
static bool fbx__rank_axes_mark(const int64_t *axes, int n_axes, int rank, bool *mark) {
  for (int k = 0; k < rank; k++) mark[k] = false;
  for (int k = 0; k < n_axes; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank || mark[a]) return false;
    mark[a] = true;
  }
  return true;
}

/* ------------------------------------------------------------------ rules -- */

/* numpy broadcasting of inputs [first, last]; undecided when any rank is unknown. */
static void fbx__rank_broadcast(const fbx_onnx_graph *g, const fbx_onnx_node *n, int first, int last,
                                fbx__rank_shape *out) {
  int r = 0;
  for (int i = first; i <= last && i < n->n_inputs; i++) {
    if (n->inputs[i] < 0) continue;
    int ri = fbx__rank_in_rank(g, n, i);
    if (ri < 0) return;
    if (ri > r) r = ri;
  }
  fbx__rank_set_dynamic(out, r);
  for (int k = 0; k < r; k++) { /* k counts from the right */
    int64_t d = 1;     /* the broadcast dim so far */
    bool dyn = false;  /* some input has a dynamic dim here */
    for (int i = first; i <= last && i < n->n_inputs; i++) {
      const fbx_onnx_value *v = fbx__rank_in(g, n, i);
      if (!v || k >= v->rank) continue;
      int64_t x = v->dims[v->rank - 1 - k];
      if (x < 0) dyn = true;
      else if (x != 1) d = x;
    }
    /* a static dim > 1 fixes the result (a dynamic one must be 1 or equal); all 1s fix 1 */
    out->d[r - 1 - k] = d != 1 ? d : dyn ? -1 : 1;
  }
}

static void fbx__rank_matmul(const fbx_onnx_graph *g, const fbx_onnx_node *n, int ia, int ib, fbx__rank_shape *out) {
  int ra = fbx__rank_in_rank(g, n, ia), rb = fbx__rank_in_rank(g, n, ib);
  if (ra < 1 || rb < 1) return;
  const fbx_onnx_value *a = fbx__rank_in(g, n, ia), *b = fbx__rank_in(g, n, ib);
  if (ra == 1 && rb == 1) { fbx__rank_set_dynamic(out, 0); return; }
  if (ra == 1) { /* (k) x (..., k, n) -> (..., n) */
    fbx__rank_set_dynamic(out, rb - 1);
    for (int k = 0; k < rb - 2; k++) out->d[k] = b->dims[k];
    out->d[rb - 2] = b->dims[rb - 1];
    return;
  }
  if (rb == 1) { /* (..., m, k) x (k) -> (..., m) */
    fbx__rank_set_dynamic(out, ra - 1);
    for (int k = 0; k < ra - 1; k++) out->d[k] = a->dims[k];
    return;
  }
  int r = ra > rb ? ra : rb;
  fbx__rank_set_dynamic(out, r);
  for (int k = 0; k < r - 2; k++) { /* batch dims, broadcast from the right */
    int ka = k - (r - ra), kb = k - (r - rb);
    int64_t x = ka >= 0 ? a->dims[ka] : 1, y = kb >= 0 ? b->dims[kb] : 1;
    out->d[k] = (x > 1) ? x : (y > 1) ? y : (x == 1 && y == 1) ? 1 : -1;
  }
  out->d[r - 2] = a->dims[ra - 2];
  out->d[r - 1] = b->dims[rb - 1];
  for (int k = 0; k < r; k++)
    if (out->d[k] < 0) out->d[k] = -1;
}

static void fbx__rank_reshape(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out) {
  int64_t s[FBX_MAX_RANK];
  int c = -1;
  const fbx_onnx_attr *sa = fbx_onnx_attr_find(n, "shape"); /* opset < 5 */
  if (n->n_inputs < 2 && sa && sa->type == FBX_ONNX_ATTR_INTS && sa->n_ints <= FBX_MAX_RANK) {
    c = sa->n_ints;
    for (int k = 0; k < c; k++) s[k] = sa->ints[k];
  } else if (n->n_inputs >= 2) {
    c = fbx__rank_const_ints(g, n, 1, s, FBX_MAX_RANK);
    if (c < 0) { /* shape computed at run time: only its length */
      int64_t len = fbx__rank_vec_len(g, n, 1);
      if (len >= 0 && len <= FBX_MAX_RANK) fbx__rank_set_dynamic(out, (int)len);
      return;
    }
  }
  if (c < 0) return;
  fbx__rank_set_dynamic(out, c);
  bool allowzero = fbx_onnx_attr_int(n, "allowzero", 0) != 0;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  int rx = fbx__rank_in_rank(g, n, 0);
  int infer = -1;
  for (int k = 0; k < c; k++) {
    if (s[k] > 0) out->d[k] = s[k];
    else if (s[k] == 0) out->d[k] = allowzero ? 0 : (rx > k && x->dims[k] >= 0) ? x->dims[k] : -1;
    else if (s[k] == -1 && infer < 0) infer = k;
    else { fbx__rank_set_dynamic(out, c); return; } /* malformed: rank only */
  }
  if (infer >= 0 && rx >= 0) { /* the -1 dim, when everything is static */
    int64_t total = 1, rest = 1;
    for (int k = 0; k < rx; k++) {
      if (x->dims[k] < 0 || !fbx_i64_mul(total, x->dims[k], &total)) return;
    }
    for (int k = 0; k < c; k++) {
      if (k == infer) continue;
      if (out->d[k] < 0 || !fbx_i64_mul(rest, out->d[k], &rest)) return;
    }
    if (rest > 0 && total % rest == 0) out->d[infer] = total / rest;
  }
}

static void fbx__rank_squeeze(const fbx_onnx_graph *g, const fbx_onnx_node *n, bool unsq, fbx__rank_shape *out) {
  int r = fbx__rank_in_rank(g, n, 0);
  if (r < 0) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  int64_t axes[FBX_MAX_RANK];
  int na = fbx__rank_axes(g, n, n->opset < 13, 1, axes, FBX_MAX_RANK);
  bool mark[FBX_MAX_RANK];
  if (unsq) {
    if (na < 0) return;
    int ro = r + na;
    if (ro > FBX_MAX_RANK || !fbx__rank_axes_mark(axes, na, ro, mark)) return;
    fbx__rank_set_dynamic(out, ro);
    for (int k = 0, j = 0; k < ro; k++) out->d[k] = mark[k] ? 1 : x->dims[j++];
    return;
  }
  if (na == -2) { /* no axes: every dim of size 1, decidable only when all are static */
    int ro = 0;
    for (int k = 0; k < r; k++) {
      if (x->dims[k] < 0) return;
      if (x->dims[k] != 1) out->d[ro++] = x->dims[k];
    }
    out->rank = ro;
    return;
  }
  if (na < 0 || !fbx__rank_axes_mark(axes, na, r, mark)) return;
  fbx__rank_set_dynamic(out, r - na);
  for (int k = 0, j = 0; k < r; k++)
    if (!mark[k]) out->d[j++] = x->dims[k];
}

static void fbx__rank_concat(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out) {
  int r = -1;
  for (int i = 0; i < n->n_inputs; i++) {
    int ri = fbx__rank_in_rank(g, n, i);
    if (ri >= 0) { r = ri; break; }
  }
  if (r < 0) return;
  fbx__rank_set_dynamic(out, r);
  int64_t axis = fbx_onnx_attr_int(n, "axis", n->opset < 4 ? 1 : 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return;
  int64_t sum = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    const fbx_onnx_value *v = fbx__rank_in(g, n, i);
    if (!v || v->rank != r) { sum = -1; continue; }
    if (sum >= 0) sum = v->dims[axis] >= 0 ? sum + v->dims[axis] : -1;
    for (int k = 0; k < r; k++)
      if (k != axis && v->dims[k] >= 0) out->d[k] = v->dims[k];
  }
  out->d[axis] = sum;
}

static void fbx__rank_reduce(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out) {
  int r = fbx__rank_in_rank(g, n, 0);
  if (r < 0) return;
  bool keep = fbx_onnx_attr_int(n, "keepdims", 1) != 0;
  bool axes_input = strcmp(n->op_type, "ReduceSum") == 0 ? n->opset >= 13 : n->opset >= 18;
  int64_t axes[FBX_MAX_RANK];
  int na = fbx__rank_axes(g, n, !axes_input, axes_input ? 1 : 1 << 20, axes, FBX_MAX_RANK);
  bool mark[FBX_MAX_RANK];
  if (na == -2 || na == 0) {
    if (axes_input && fbx_onnx_attr_int(n, "noop_with_empty_axes", 0)) { fbx__rank_copy_in(g, n, 0, out); return; }
    for (int k = 0; k < r; k++) mark[k] = true; /* reduce all */
  } else if (na < 0) {
    if (keep) fbx__rank_set_dynamic(out, r); /* axes unknown: keepdims fixes the rank only */
    return;
  } else if (!fbx__rank_axes_mark(axes, na, r, mark)) {
    return;
  }
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  fbx__rank_set_dynamic(out, 0);
  for (int k = 0; k < r; k++) {
    if (mark[k] && !keep) continue;
    out->d[out->rank++] = mark[k] ? 1 : x->dims[k];
  }
}

/* Slice: rank of input 0; a sliced dim is static when the input dim and
 * starts/ends/steps are (opset < 10: attributes; else constant inputs). */
static void fbx__rank_slice(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out) {
  int r = fbx__rank_in_rank(g, n, 0);
  if (r < 0) return;
  fbx__rank_copy_in(g, n, 0, out);
  int64_t st[FBX_MAX_RANK], en[FBX_MAX_RANK], ax[FBX_MAX_RANK], sp[FBX_MAX_RANK];
  int ns = -1, ne = -1, na = -2, np = -2;
  if (n->opset < 10) {
    const fbx_onnx_attr *a = fbx_onnx_attr_find(n, "starts"), *b = fbx_onnx_attr_find(n, "ends");
    if (!a || !b || a->type != FBX_ONNX_ATTR_INTS || b->type != FBX_ONNX_ATTR_INTS || a->n_ints > r ||
        b->n_ints > r) {
      fbx__rank_set_dynamic(out, r);
      return;
    }
    ns = a->n_ints, ne = b->n_ints;
    for (int k = 0; k < ns; k++) st[k] = a->ints[k];
    for (int k = 0; k < ne; k++) en[k] = b->ints[k];
    na = fbx__rank_axes(g, n, true, 1 << 20, ax, FBX_MAX_RANK);
  } else {
    ns = fbx__rank_const_ints(g, n, 1, st, FBX_MAX_RANK);
    ne = fbx__rank_const_ints(g, n, 2, en, FBX_MAX_RANK);
    na = n->n_inputs > 3 && n->inputs[3] >= 0 ? fbx__rank_const_ints(g, n, 3, ax, FBX_MAX_RANK) : -2;
    np = n->n_inputs > 4 && n->inputs[4] >= 0 ? fbx__rank_const_ints(g, n, 4, sp, FBX_MAX_RANK) : -2;
  }
  if (ns < 0 || ne != ns || na == -1 || np == -1 || (na >= 0 && na != ns) || (np >= 0 && np != ns)) {
    fbx__rank_set_dynamic(out, r); /* which axes are sliced is unknown */
    return;
  }
  bool mark[FBX_MAX_RANK];
  if (na == -2)
    for (int k = 0; k < ns; k++) ax[k] = k;
  if (!fbx__rank_axes_mark(ax, ns, r, mark)) {
    fbx__rank_set_dynamic(out, r);
    return;
  }
  for (int k = 0; k < ns; k++) {
    int a = (int)(ax[k] < 0 ? ax[k] + r : ax[k]);
    int64_t d = out->d[a], step = np >= 0 ? sp[k] : 1, s = st[k], e = en[k];
    out->d[a] = -1;
    if (d < 0 || step == 0) continue;
    if (s < 0) s = s < -d ? 0 : s + d;
    if (e < 0) e = e < -d ? -1 : e + d;
    int64_t len;
    if (step > 0) {
      s = s > d ? d : s < 0 ? 0 : s;
      e = e > d ? d : e < 0 ? 0 : e;
      len = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = s > d - 1 ? d - 1 : s;
      e = e > d - 1 ? d - 1 : e;
      len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    out->d[a] = len;
  }
}

/* One function per rank rule of FBX_ONNX_RANK_RULES (onnx_ops.h): the output
 * shapes of node n into out[0..min(n_outputs, FBX__RANK_MAX_OUT)). */
typedef void (*fbx__rank_rule_fn)(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out);
#define FBX__RANK_RULE(name) \
  static void fbx__rank_rule_##name(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out)

static int fbx__rank_n_out(const fbx_onnx_node *n) {
  return n->n_outputs < FBX__RANK_MAX_OUT ? n->n_outputs : FBX__RANK_MAX_OUT;
}

FBX__RANK_RULE(NONE) { (void)g, (void)n, (void)out; }
FBX__RANK_RULE(SAME) { fbx__rank_copy_in(g, n, 0, &out[0]); }
FBX__RANK_RULE(SAME_ALL) {
  for (int k = 0; k < fbx__rank_n_out(n); k++) fbx__rank_copy_in(g, n, 0, &out[k]);
}
FBX__RANK_RULE(BCAST) { fbx__rank_broadcast(g, n, 0, n->n_inputs - 1, &out[0]); }
FBX__RANK_RULE(KEEP) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 0) return;
  for (int k = 0; k < fbx__rank_n_out(n); k++) fbx__rank_set_dynamic(&out[k], r0);
}
FBX__RANK_RULE(RANK1) { (void)g, (void)n, fbx__rank_set_dynamic(&out[0], 1); }
FBX__RANK_RULE(RANK2) { (void)g, (void)n, fbx__rank_set_dynamic(&out[0], 2); }
FBX__RANK_RULE(SCALAR) { (void)g, (void)n, fbx__rank_set_dynamic(&out[0], 0); }
/* Y like X; the other outputs (Mean / InvStdDev) keep the rank. */
FBX__RANK_RULE(LAYERNORM) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  fbx__rank_copy_in(g, n, 0, &out[0]);
  for (int k = 1; r0 >= 0 && k < fbx__rank_n_out(n); k++) fbx__rank_set_dynamic(&out[k], r0);
}
FBX__RANK_RULE(MATMUL) { fbx__rank_matmul(g, n, 0, 1, &out[0]); }
FBX__RANK_RULE(QLMATMUL) { fbx__rank_matmul(g, n, 0, 3, &out[0]); }
FBX__RANK_RULE(SLICE) { fbx__rank_slice(g, n, &out[0]); }
FBX__RANK_RULE(RESHAPE) { fbx__rank_reshape(g, n, &out[0]); }
FBX__RANK_RULE(SQUEEZE) { fbx__rank_squeeze(g, n, false, &out[0]); }
FBX__RANK_RULE(UNSQUEEZE) { fbx__rank_squeeze(g, n, true, &out[0]); }
FBX__RANK_RULE(CONCAT) { fbx__rank_concat(g, n, &out[0]); }
FBX__RANK_RULE(REDUCE) { fbx__rank_reduce(g, n, &out[0]); }
FBX__RANK_RULE(TRANSPOSE) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 0) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  const fbx_onnx_attr *p = fbx_onnx_attr_find(n, "perm");
  fbx__rank_set_dynamic(&out[0], r0);
  if (p && (p->type != FBX_ONNX_ATTR_INTS || p->n_ints != r0)) return;
  for (int k = 0; k < r0; k++) {
    int64_t src = p ? p->ints[k] : r0 - 1 - k;
    if (src < 0 || src >= r0) { fbx__rank_set_dynamic(&out[0], r0); return; }
    out[0].d[k] = x->dims[src] >= 0 ? x->dims[src] : -1;
  }
}
FBX__RANK_RULE(SHAPE) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  fbx__rank_set_dynamic(&out[0], 1);
  if (r0 < 0) return;
  int64_t s = fbx_onnx_attr_int(n, "start", 0), e = fbx_onnx_attr_int(n, "end", r0);
  if (s < 0) s += r0;
  if (e < 0) e += r0;
  s = s < 0 ? 0 : s > r0 ? r0 : s;
  e = e < 0 ? 0 : e > r0 ? r0 : e;
  out[0].d[0] = e > s ? e - s : 0;
}
FBX__RANK_RULE(NONZERO) {
  fbx__rank_set_dynamic(&out[0], 2);
  out[0].d[0] = fbx__rank_in_rank(g, n, 0);
}
FBX__RANK_RULE(FLATTEN) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  fbx__rank_set_dynamic(&out[0], 2);
  int64_t axis = fbx_onnx_attr_int(n, "axis", 1);
  if (r0 < 0) return;
  if (axis < 0) axis += r0;
  if (axis < 0 || axis > r0) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  int64_t a = 1, b = 1;
  for (int k = 0; k < r0; k++) {
    int64_t *p = k < axis ? &a : &b;
    *p = (*p < 0 || x->dims[k] < 0) ? -1 : *p * x->dims[k];
  }
  out[0].d[0] = a, out[0].d[1] = b;
}
FBX__RANK_RULE(GATHER) {
  int r0 = fbx__rank_in_rank(g, n, 0), ri = fbx__rank_in_rank(g, n, 1);
  if (r0 < 1 || ri < 0 || r0 + ri - 1 > FBX_MAX_RANK) return;
  int64_t axis = fbx_onnx_attr_int(n, "axis", 0);
  if (axis < 0) axis += r0;
  if (axis < 0 || axis >= r0) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0), *idx = fbx__rank_in(g, n, 1);
  fbx__rank_set_dynamic(&out[0], r0 + ri - 1);
  int j = 0;
  for (int k = 0; k < axis; k++) out[0].d[j++] = x->dims[k];
  for (int k = 0; k < ri; k++) out[0].d[j++] = idx->dims[k];
  for (int k = (int)axis + 1; k < r0; k++) out[0].d[j++] = x->dims[k];
  for (int k = 0; k < j; k++)
    if (out[0].d[k] < 0) out[0].d[k] = -1;
}
FBX__RANK_RULE(GATHER_ELEMENTS) { fbx__rank_copy_in(g, n, 1, &out[0]); }
FBX__RANK_RULE(GATHER_ND) {
  int r0 = fbx__rank_in_rank(g, n, 0), ri = fbx__rank_in_rank(g, n, 1);
  const fbx_onnx_value *idx = fbx__rank_in(g, n, 1);
  if (r0 < 0 || ri < 1 || idx->dims[ri - 1] < 0) return;
  int64_t ro = (int64_t)r0 + ri - idx->dims[ri - 1] - 1 - fbx_onnx_attr_int(n, "batch_dims", 0);
  if (ro >= 0 && ro <= FBX_MAX_RANK) fbx__rank_set_dynamic(&out[0], (int)ro);
}
FBX__RANK_RULE(ARG) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 0) return;
  bool keep = fbx_onnx_attr_int(n, "keepdims", 1) != 0;
  if (!keep && r0 < 1) return;
  fbx__rank_set_dynamic(&out[0], keep ? r0 : r0 - 1);
}
/* Conv / pools: input 0's rank and batch dim (MaxPool's Indices too). */
FBX__RANK_RULE(CONV) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 0) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  int no = n->n_outputs < 2 ? n->n_outputs : 2;
  for (int k = 0; k < no; k++) {
    fbx__rank_set_dynamic(&out[k], r0);
    if (r0 >= 1 && x->dims[0] >= 0) out[k].d[0] = x->dims[0];
  }
}
FBX__RANK_RULE(GPOOL) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 2) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  fbx__rank_set_dynamic(&out[0], r0);
  out[0].d[0] = x->dims[0] >= 0 ? x->dims[0] : -1;
  out[0].d[1] = x->dims[1] >= 0 ? x->dims[1] : -1;
  for (int k = 2; k < r0; k++) out[0].d[k] = 1;
}
FBX__RANK_RULE(EXPAND) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  int64_t len = fbx__rank_vec_len(g, n, 1);
  if (r0 < 0 || len < 0) return;
  int64_t r = len > r0 ? len : r0;
  if (r <= FBX_MAX_RANK) fbx__rank_set_dynamic(&out[0], (int)r);
}
FBX__RANK_RULE(COFS) {
  int64_t s[FBX_MAX_RANK];
  int c = fbx__rank_const_ints(g, n, 0, s, FBX_MAX_RANK);
  if (c >= 0) {
    fbx__rank_set_dynamic(&out[0], c);
    for (int k = 0; k < c; k++) out[0].d[k] = s[k] >= 0 ? s[k] : -1;
    return;
  }
  int64_t len = fbx__rank_vec_len(g, n, 0);
  if (len >= 0 && len <= FBX_MAX_RANK) fbx__rank_set_dynamic(&out[0], (int)len);
}
FBX__RANK_RULE(ONEHOT) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 >= 0 && r0 + 1 <= FBX_MAX_RANK) fbx__rank_set_dynamic(&out[0], r0 + 1);
}
FBX__RANK_RULE(COMPRESS) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (!fbx_onnx_attr_find(n, "axis")) fbx__rank_set_dynamic(&out[0], 1);
  else if (r0 >= 0) fbx__rank_set_dynamic(&out[0], r0);
}
/* Skip(Simplified)LayerNormalization: output and input_skip_bias_sum (0, 3)
 * like the input; mean / inv_std_var (1, 2) keep its rank. */
FBX__RANK_RULE(SKIPNORM) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  fbx__rank_copy_in(g, n, 0, &out[0]);
  if (fbx__rank_n_out(n) > 3) fbx__rank_copy_in(g, n, 0, &out[3]);
  for (int k = 1; r0 >= 0 && k < 3 && k < fbx__rank_n_out(n); k++) fbx__rank_set_dynamic(&out[k], r0);
}
/* MatMulNBits: A's shape with the last dim replaced by attribute N. */
FBX__RANK_RULE(MNB) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 < 1) return;
  fbx__rank_copy_in(g, n, 0, &out[0]);
  int64_t N = fbx_onnx_attr_int(n, "N", -1);
  out[0].d[r0 - 1] = N > 0 ? N : -1;
}
/* GroupQueryAttention: output like the query (rank 3), presents rank 4. */
FBX__RANK_RULE(GQA) {
  int r0 = fbx__rank_in_rank(g, n, 0);
  if (r0 != 3) return;
  fbx__rank_set_dynamic(&out[0], 3);
  for (int k = 1; k < 3 && k < fbx__rank_n_out(n); k++) fbx__rank_set_dynamic(&out[k], 4);
}

/* LSTM/GRU/RNN: Y (seq, dirs, batch, hidden) or, layout 1, (batch, seq, dirs,
 * hidden); Y_h / Y_c (dirs, batch, hidden) or (batch, dirs, hidden). */
FBX__RANK_RULE(RNN) {
  if (fbx__rank_in_rank(g, n, 0) != 3) return;
  const fbx_onnx_value *x = fbx__rank_in(g, n, 0);
  const char *dir = fbx_onnx_attr_string(n, "direction", "forward");
  int64_t D = strcmp(dir, "bidirectional") == 0 ? 2 : 1, H = fbx_onnx_attr_int(n, "hidden_size", -1);
  int layout = (int)fbx_onnx_attr_int(n, "layout", 0);
  int64_t S = x->dims[layout ? 1 : 0], B = x->dims[layout ? 0 : 1];
  if (H < 1) H = -1;
  S = S >= 0 ? S : -1, B = B >= 0 ? B : -1;
  fbx__rank_set_dynamic(&out[0], 4);
  out[0].d[0] = layout ? B : S, out[0].d[1] = layout ? S : D, out[0].d[2] = layout ? D : B, out[0].d[3] = H;
  for (int k = 1; k < 3 && k < fbx__rank_n_out(n); k++) {
    fbx__rank_set_dynamic(&out[k], 3);
    out[k].d[0] = layout ? B : D, out[k].d[1] = layout ? D : B, out[k].d[2] = H;
  }
}

/* Loop / Scan whose body is described: a carried (state) output as the body
 * makes it (its rank; a dim where it equals the initial value's); a scan
 * output the body's slice with the iteration count inserted (Loop: at axis 0,
 * unknown; Scan: at scan_output_axes[k], the first scan input's length along
 * its scan axis). */
FBX__RANK_RULE(CF) {
  (void)g;
  const fbx_onnx_graph *b = NULL;
  for (int k = 0; k < n->n_subgraphs; k++)
    if (n->subgraph_names && n->subgraph_names[k] && !strcmp(n->subgraph_names[k], "body")) b = n->subgraphs[k];
  if (!b) return;
  const bool loop = !strcmp(n->op_type, "Loop");
  const int S = loop ? 0 : (int)fbx_onnx_attr_int(n, "num_scan_inputs", -1);
  const int N = loop ? n->n_inputs - 2 : n->n_inputs - S, K = n->n_outputs - N, bf = loop ? 1 : 0;
  const int first = loop ? 2 : 0;
  if (S < 0 || N < 0 || K < 0 || b->n_outputs != bf + N + K) return;
  int64_t T = -1;
  if (!loop && S >= 1) {
    const fbx_onnx_attr *ax = fbx_onnx_attr_find(n, "scan_input_axes");
    const fbx_onnx_value *x = fbx__rank_in(g, n, N);
    int a = 0;
    if (x && x->rank > 0 && fbx__onnx_axis(ax && ax->n_ints > 0 ? ax->ints[0] : 0, x->rank, false, &a))
      T = x->dims[a] >= 0 ? x->dims[a] : -1;
  }
  const fbx_onnx_attr *oax = loop ? NULL : fbx_onnx_attr_find(n, "scan_output_axes");
  for (int o = 0; o < N + K && o < fbx__rank_n_out(n); o++) {
    const fbx_onnx_value *bv = &b->values[b->outputs[bf + o]];
    if (bv->kind != FBX_ONNX_VALUE_TENSOR || bv->rank < 0) continue;
    if (o < N) {
      const fbx_onnx_value *iv = fbx__rank_in(g, n, first + o);
      fbx__rank_set_dynamic(&out[o], bv->rank);
      for (int d = 0; d < bv->rank; d++)
        if (iv && iv->rank == bv->rank && iv->dims[d] == bv->dims[d]) out[o].d[d] = bv->dims[d];
      continue;
    }
    int r = bv->rank + 1, axis = 0, k = o - N;
    if (r > FBX_MAX_RANK) continue;
    if (oax && k < oax->n_ints && !fbx__onnx_axis(oax->ints[k], r, false, &axis)) continue;
    fbx__rank_set_dynamic(&out[o], r);
    for (int d = 0, j = 0; d < r; d++) out[o].d[d] = d == axis ? T : bv->dims[j++];
  }
}

static const fbx__rank_rule_fn fbx__rank_rules[] = {
#define X(r) fbx__rank_rule_##r,
    FBX_ONNX_RANK_RULES(X)
#undef X
};
_Static_assert(sizeof fbx__rank_rules / sizeof fbx__rank_rules[0] == FBX_ONNX_RANK_COUNT,
               "one function per rank rule");

/* Output shapes of node n from its registry row's rule (any opset of that op
 * and domain: the rule follows the op, not the version Fusebox claims). */
static void fbx__rank_node(const fbx_onnx_graph *g, const fbx_onnx_node *n, fbx__rank_shape *out) {
  const fbx_onnx_entry *any, *e = fbx__onnx_registry_find(n, &any);
  if (!e) e = any;
  if (!e || (unsigned)e->rank >= FBX_ONNX_RANK_COUNT) return;
  fbx__rank_rules[e->rank](g, n, out);
}


/* --------------------------------------------------------------- the pass -- */

/* Merge inferred shape s into value val: a rank -1 value takes s whole; a value
 * of the same rank takes s's static dims where its own are dynamic. Returns
 * whether val changed. */
static bool fbx__rank_apply(fbx_onnx_value *val, const fbx__rank_shape *s) {
  if (s->rank < 0 || s->rank > FBX_MAX_RANK) return false;
  if (val->kind != FBX_ONNX_VALUE_TENSOR || val->is_graph_input || val->is_initializer) return false;
  bool changed = false;
  if (val->rank < 0) {
    val->rank = s->rank;
    for (int d = 0; d < FBX_MAX_RANK; d++) {
      val->dims[d] = -1;
      val->dim_sym[d] = NULL;
    }
    changed = true;
  }
  if (val->rank != s->rank) return changed; /* disagreement: trust ORT */
  for (int d = 0; d < s->rank; d++)
    if (val->dims[d] < 0 && s->d[d] >= 0) {
      val->dims[d] = s->d[d];
      val->dim_sym[d] = NULL;
      changed = true;
    }
  return changed;
}

fbx_status *fbx_onnx_graph_infer_shapes(fbx_onnx_graph *g, bool *changed) {
  if (!g) return FBX_ERR_ARG("fbx_onnx_graph_infer_shapes: NULL graph");
  for (int ni = 0; ni < g->n_nodes; ni++) {
    const fbx_onnx_node *n = &g->nodes[ni];
    if (!n->op_type) continue;
    bool need = false; /* some output of unknown rank or with a dynamic dim */
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v < 0 || v >= g->n_values || g->values[v].kind != FBX_ONNX_VALUE_TENSOR) continue;
      const fbx_onnx_value *val = &g->values[v];
      if (val->rank < 0) need = true;
      for (int d = 0; d < val->rank && d < FBX_MAX_RANK; d++) need |= val->dims[d] < 0;
    }
    if (!need || (n->has_subgraph && !n->n_subgraphs)) continue; /* bodies described: Loop/Scan have a rule */
    fbx__rank_shape out[FBX__RANK_MAX_OUT];
    for (int k = 0; k < FBX__RANK_MAX_OUT; k++) out[k].rank = -1;
    fbx__rank_node(g, n, out);
    for (int k = 0; k < n->n_outputs && k < FBX__RANK_MAX_OUT; k++) {
      int v = n->outputs[k];
      if (v < 0 || v >= g->n_values) continue;
      if (fbx__rank_apply(&g->values[v], &out[k]) && changed) changed[v] = true;
    }
  }
  return NULL;
}

fbx_status *fbx_onnx_graph_infer_ranks(fbx_onnx_graph *g) { return fbx_onnx_graph_infer_shapes(g, NULL); }

/* ------------------------------------------------------------------ guard -- */

int fbx_onnx_rank_guard(const fbx_onnx_graph *g, const bool *inferred, const int *cluster_of, bool *claimed,
                        char *reasons, size_t reason_size) {
  int declined = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (!claimed[i] || cluster_of[i] < 0) continue;
    const fbx_onnx_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0 || v >= g->n_values || !inferred[v]) continue;
      int prod = -1; /* producers come earlier in topological order */
      for (int j = i - 1; j >= 0 && prod < 0; j--)
        for (int o = 0; o < g->nodes[j].n_outputs; o++)
          if (g->nodes[j].outputs[o] == v) prod = j;
      if (prod >= 0 && cluster_of[prod] == cluster_of[i]) continue;
      claimed[i] = false;
      declined++;
      if (reasons && reason_size)
        snprintf(reasons + (size_t)i * reason_size, reason_size,
                 "%s: input %d ('%s') rank only inferred and produced outside the fused group", n->op_type, k,
                 g->values[v].name ? g->values[v].name : "");
      break;
    }
  }
  return declined;
}
