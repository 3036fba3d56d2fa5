/* Index-driven movement: gather family, scatter family, one_hot, topk,
 * non_zero. Indices are I32 or I64; negative indices wrap once; anything
 * still out of range is an INVALID_ARG status, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static size_t fbx__esz(const fbx_tensor *t) { return fbx_dtype_size(t->dtype); }

static fbx_status *fbx__gt_index(const fbx_tensor *ind, int64_t i, int64_t dim, const char *op, int64_t *out) {
  int64_t v = ind->dtype == FBX_DTYPE_I32 ? ((const int32_t *)ind->data)[i]
            : ind->dtype == FBX_DTYPE_I64 ? ((const int64_t *)ind->data)[i] : fbx_cpu_read_i64(ind, i);
  if (v < 0) v += dim;
  if (v < 0 || v >= dim) return FBX_ERR_ARG("%s: index %lld out of range [-%lld, %lld)", op, (long long)v, (long long)dim, (long long)dim);
  *out = v;
  return NULL;
}

static fbx_status *fbx__gt_check_ind(const fbx_tensor *ind, const char *op) {
  if (ind->dtype != FBX_DTYPE_I32 && ind->dtype != FBX_DTYPE_I64)
    return FBX_ERR_NOTIMPL("%s: indices dtype %s (I32/I64 only)", op, fbx_dtype_name(ind->dtype));
  return NULL;
}

/* GatherElements / ScatterElements walk `ind` and address data at the same position on every
 * axis but `axis`: each of those index dims must fit data's (else the walk reads or writes past
 * data), and ScatterElements' updates must have indices' shape (else it reads past updates). */
static fbx_status *fbx__el_check_shapes(const fbx_tensor *x, const fbx_tensor *ind, const fbx_tensor *u, int axis,
                                         const char *op) {
  for (int d = 0; d < ind->rank; d++)
    if (d != axis && ind->dims[d] > x->dims[d])
      return FBX_ERR_ARG("%s: indices dim %d is %lld, data's is %lld", op, d, (long long)ind->dims[d],
                         (long long)x->dims[d]);
  if (!u) return NULL;
  int same = u->rank == ind->rank;
  for (int d = 0; same && d < ind->rank; d++) same = u->dims[d] == ind->dims[d];
  if (!same) return FBX_ERR_ARG("%s: updates must have the shape of indices", op);
  return NULL;
}

fbx_status *fbx_cpu_k_GATHER(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ind = &in[1];
  FBX_TRY(fbx__gt_check_ind(ind, "GATHER"));
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("GATHER: axis %d", axis);
  int64_t outer = 1, inner = 1, A = x->dims[axis];
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  int64_t ni = fbx_cpu_numel(ind);
  size_t row = (size_t)inner * fbx__esz(x);
  unsigned char *dp = out[0].data;
  const unsigned char *sp = x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t v = 0;
      FBX_TRY(fbx__gt_index(ind, j, A, "GATHER", &v));
      memcpy(dp, sp + (size_t)(o * A + v) * row, row);
      dp += row;
    }
  return NULL;
}

fbx_status *fbx_cpu_k_GATHER_ELEMENTS(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ind = &in[1];
  FBX_TRY(fbx__gt_check_ind(ind, "GATHER_ELEMENTS"));
  int axis = node->params.axis.axis, r = x->rank;
  if (axis < 0 || axis >= r || ind->rank != r) return FBX_ERR_ARG("GATHER_ELEMENTS: axis/rank");
  FBX_TRY(fbx__el_check_shapes(x, ind, NULL, axis, "GATHER_ELEMENTS"));
  int64_t xs[FBX_MAX_RANK], idx[FBX_MAX_RANK] = {0};
  fbx_cpu_strides(x, xs);
  int64_t n = fbx_cpu_numel(ind);
  size_t e = fbx__esz(x);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = 0, off = 0;
    FBX_TRY(fbx__gt_index(ind, i, x->dims[axis], "GATHER_ELEMENTS", &v));
    for (int d = 0; d < r; d++) off += (d == axis ? v : idx[d]) * xs[d];
    memcpy((unsigned char *)out[0].data + i * (int64_t)e, (const unsigned char *)x->data + off * (int64_t)e, e);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < ind->dims[d]) break;
      idx[d] = 0;
    }
  }
  return NULL;
}

fbx_status *fbx_cpu_k_GATHER_ND(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ind = &in[1];
  FBX_TRY(fbx__gt_check_ind(ind, "GATHER_ND"));
  int b = node->params.axis.axis, r = x->rank, q = ind->rank;
  if (q < 1) return FBX_ERR_ARG("GATHER_ND: indices rank 0");
  int64_t k = ind->dims[q - 1];
  if (b < 0 || b + k > r || b >= q) return FBX_ERR_ARG("GATHER_ND: batch_dims/k");
  int64_t xs[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  int64_t nb = 1, slice = 1, per_batch = 1;
  for (int d = 0; d < b; d++) nb *= x->dims[d];
  for (int d = b + (int)k; d < r; d++) slice *= x->dims[d];
  for (int d = b; d < q - 1; d++) per_batch *= ind->dims[d];
  int64_t xbatch = b > 0 ? xs[b - 1] : fbx_cpu_numel(x);
  size_t e = fbx__esz(x);
  unsigned char *dp = out[0].data;
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t t = 0; t < per_batch; t++) {
      int64_t off = bi * xbatch, base = (bi * per_batch + t) * k;
      for (int64_t j = 0; j < k; j++) {
        int64_t v = 0;
        FBX_TRY(fbx__gt_index(ind, base + j, x->dims[b + j], "GATHER_ND", &v));
        off += v * xs[b + j];
      }
      memcpy(dp, (const unsigned char *)x->data + off * (int64_t)e, (size_t)slice * e);
      dp += slice * (int64_t)e;
    }
  return NULL;
}

/* out[i] = reduce(out[i], upd[j]) for the scatter reductions */
static void fbx__sc_apply(fbx_tensor *y, int64_t oi, const fbx_tensor *u, int64_t ui, int red) {
  size_t e = fbx__esz(y);
  if (red == 0) {
    memcpy((unsigned char *)y->data + oi * (int64_t)e, (const unsigned char *)u->data + ui * (int64_t)e, e);
    return;
  }
  if (y->dtype == FBX_DTYPE_I64) {
    int64_t a = ((int64_t *)y->data)[oi], b = ((const int64_t *)u->data)[ui];
    ((int64_t *)y->data)[oi] = red == 1 ? a + b : red == 2 ? a * b : red == 3 ? (a > b ? a : b) : (a < b ? a : b);
    return;
  }
  double a = fbx_cpu_read_f64(y, oi), b = fbx_cpu_read_f64(u, ui);
  fbx_cpu_write_f64(y, oi, red == 1 ? a + b : red == 2 ? a * b : red == 3 ? (a > b ? a : b) : (a < b ? a : b));
}

static fbx_status *fbx__sc_copy_data(fbx_cpu_ctx *c, const fbx_tensor *x, fbx_tensor *y) {
  if (x->data != y->data) memcpy(y->data, x->data, fbx_tensor_nbytes(x));
  return NULL;
}

fbx_status *fbx_cpu_k_SCATTER_ELEMENTS(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ind = &in[1], *u = &in[2];
  if (n_in < 3) return FBX_ERR_ARG("SCATTER_ELEMENTS: needs 3 inputs");
  FBX_TRY(fbx__gt_check_ind(ind, "SCATTER_ELEMENTS"));
  int axis = node->params.scatter.axis, r = x->rank, red = node->params.scatter.reduction;
  if (axis < 0 || axis >= r || ind->rank != r) return FBX_ERR_ARG("SCATTER_ELEMENTS: axis/rank");
  FBX_TRY(fbx__el_check_shapes(x, ind, u, axis, "SCATTER_ELEMENTS"));
  FBX_TRY(fbx__sc_copy_data(c, x, &out[0]));
  int64_t xs[FBX_MAX_RANK], idx[FBX_MAX_RANK] = {0};
  fbx_cpu_strides(x, xs);
  int64_t n = fbx_cpu_numel(ind);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = 0, off = 0;
    FBX_TRY(fbx__gt_index(ind, i, x->dims[axis], "SCATTER_ELEMENTS", &v));
    for (int d = 0; d < r; d++) off += (d == axis ? v : idx[d]) * xs[d];
    fbx__sc_apply(&out[0], off, u, i, red);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < ind->dims[d]) break;
      idx[d] = 0;
    }
  }
  return NULL;
}

fbx_status *fbx_cpu_k_SCATTER_ND(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *ind = &in[1], *u = &in[2];
  if (n_in < 3) return FBX_ERR_ARG("SCATTER_ND: needs 3 inputs");
  FBX_TRY(fbx__gt_check_ind(ind, "SCATTER_ND"));
  int r = x->rank, q = ind->rank, red = node->params.scatter.reduction;
  if (q < 1) return FBX_ERR_ARG("SCATTER_ND: indices rank 0");
  int64_t k = ind->dims[q - 1];
  if (k > r) return FBX_ERR_ARG("SCATTER_ND: k > rank");
  FBX_TRY(fbx__sc_copy_data(c, x, &out[0]));
  int64_t xs[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  int64_t slice = 1, nt = k ? fbx_cpu_numel(ind) / k : 0;
  for (int d = (int)k; d < r; d++) slice *= x->dims[d];
  /* updates: indices.shape[:-1] + data.shape[k:], read as nt slices of `slice` elements */
  if (k > 0 && fbx_cpu_numel(u) != nt * slice) return FBX_ERR_ARG("SCATTER_ND: updates have %lld elements, want %lld",
                                                        (long long)fbx_cpu_numel(u), (long long)(nt * slice));
  for (int64_t t = 0; t < nt; t++) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t v = 0;
      FBX_TRY(fbx__gt_index(ind, t * k + j, x->dims[j], "SCATTER_ND", &v));
      off += v * xs[j];
    }
    for (int64_t s = 0; s < slice; s++) fbx__sc_apply(&out[0], off + s, u, t * slice + s, red);
  }
  return NULL;
}

fbx_status *fbx_cpu_k_ONE_HOT(FBX_CPU_KERNEL_ARGS) {
  if (n_in < 3) return FBX_ERR_ARG("ONE_HOT: needs indices, depth, values");
  const fbx_tensor *ind = &in[0], *vals = &in[2];
  fbx_tensor *y = &out[0];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= y->rank) return FBX_ERR_ARG("ONE_HOT: axis %d", axis);
  int64_t depth = y->dims[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= y->dims[d];
  for (int d = axis + 1; d < y->rank; d++) inner *= y->dims[d];
  size_t e = fbx__esz(y);
  if (fbx_cpu_numel(vals) < 2 || vals->dtype != y->dtype) return FBX_ERR_ARG("ONE_HOT: values");
  const unsigned char *off = vals->data, *on = off + e;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t d = 0; d < depth; d++)
      for (int64_t i = 0; i < inner; i++) {
        double v = fbx_cpu_read_f64(ind, o * inner + i);
        int64_t iv = (int64_t)v;
        if (iv < 0) iv += depth;
        memcpy((unsigned char *)y->data + ((o * depth + d) * inner + i) * (int64_t)e, iv == d ? on : off, e);
      }
  return NULL;
}

typedef struct fbx__tk_item { float v; int64_t i; } fbx__tk_item;
/* A total order of the values: NaN above +inf (np.sort's order, and the extreme value as in
 * ArgMax/Hardmax), NaNs equal to each other. Before, a NaN compared "after" everything in
 * both directions, an inconsistent comparator that left qsort's order undefined (the fuzz
 * class nan found it: TopK returned numbers ranked below a NaN). -1 / 0 / 1. */
static int fbx__tk_order(float a, float b) {
  bool na = a != a, nb = b != b;
  if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  return a < b ? -1 : a > b;
}
/* largest first (NaN first) / smallest first (NaN last); ties: the lower index first (the spec) */
static int fbx__tk_cmp_large(const void *a, const void *b) {
  const fbx__tk_item *x = a, *y = b;
  int c = fbx__tk_order(x->v, y->v);
  if (c) return -c;
  return x->i < y->i ? -1 : x->i > y->i;
}
static int fbx__tk_cmp_small(const void *a, const void *b) {
  const fbx__tk_item *x = a, *y = b;
  int c = fbx__tk_order(x->v, y->v);
  if (c) return c;
  return x->i < y->i ? -1 : x->i > y->i;
}

fbx_status *fbx_cpu_k_TOPK(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->dtype != FBX_DTYPE_F32 || n_out < 2 || out[1].dtype != FBX_DTYPE_I64)
    return FBX_ERR_NOTIMPL("TOPK: dtype %s (F32 values + I64 indices only)", fbx_dtype_name(x->dtype));
  int axis = node->params.topk.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("TOPK: axis %d", axis);
  int64_t A = x->dims[axis], K = out[0].dims[axis], outer = 1, inner = 1;
  if (K > A) return FBX_ERR_ARG("TOPK: k %lld > dim %lld", (long long)K, (long long)A);
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  fbx__tk_item *it = fbx_cpu_scratch(c, (size_t)(A > 0 ? A : 1) * sizeof(*it));
  if (!it) return FBX_ERR_OOM();
  const float *xp = x->data;
  float *vp = out[0].data;
  int64_t *ip = out[1].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t a = 0; a < A; a++) {
        it[a].v = xp[(o * A + a) * inner + i];
        it[a].i = a;
      }
      qsort(it, (size_t)A, sizeof(*it), node->params.topk.largest ? fbx__tk_cmp_large : fbx__tk_cmp_small);
      for (int64_t k = 0; k < K; k++) {
        vp[(o * K + k) * inner + i] = it[k].v;
        ip[(o * K + k) * inner + i] = it[k].i;
      }
    }
  return NULL;
}

fbx_status *fbx_cpu_k_NON_ZERO(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  int r = x->rank;
  int64_t n = fbx_cpu_numel(x), nnz = 0;
  size_t e = fbx__esz(x);
  static const unsigned char zero[8];
  bool flt = fbx_dtype_is_float(x->dtype);
  for (int64_t i = 0; i < n; i++)
    nnz += flt ? fbx_cpu_read_f64(x, i) != 0 : memcmp((const unsigned char *)x->data + i * (int64_t)e, zero, e) != 0;
  int64_t cols = r == 0 ? y->dims[y->rank - 1] : y->dims[1];
  if (y->dtype != FBX_DTYPE_I64 || cols != nnz)
    return FBX_ERR_ARG("NON_ZERO: output (%lld cols) does not match %lld non-zeros", (long long)cols, (long long)nnz);
  int64_t idx[FBX_MAX_RANK] = {0}, col = 0;
  int64_t *yp = y->data;
  for (int64_t i = 0; i < n; i++) {
    bool nz = flt ? fbx_cpu_read_f64(x, i) != 0 : memcmp((const unsigned char *)x->data + i * (int64_t)e, zero, e) != 0;
    if (nz) {
      for (int d = 0; d < r; d++) yp[d * nnz + col] = idx[d];
      col++;
    }
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < x->dims[d]) break;
      idx[d] = 0;
    }
  }
  return NULL;
}
