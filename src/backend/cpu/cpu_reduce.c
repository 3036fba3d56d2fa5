/* Reductions (REDUCE_*), ARGMAX/ARGMIN, CUMSUM. Accumulation in double for
 * float inputs (the reduced extent can be large), int64 for integer ones.
 * NaN (numpy semantics, README "Numerics"): REDUCE_MAX/MIN of a set with a
 * NaN is NaN (np.max); ARGMAX/ARGMIN treat NaN as the extreme value: the
 * first NaN's index (np.argmax), the last one's with select_last_index. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct fbx__red_job {
  const fbx_tensor *x;
  fbx_tensor *y;
  fbx_ir_op op;
  int nk, nr;                     /* kept / reduced dims */
  int64_t kd[FBX_MAX_RANK], ks[FBX_MAX_RANK];
  int64_t rd[FBX_MAX_RANK], rs[FBX_MAX_RANK];
  int64_t rcount;
} fbx__red_job;

static inline double fbx__rd_get(const fbx_tensor *x, int64_t i) {
  switch (x->dtype) {
    case FBX_DTYPE_F32: return ((const float *)x->data)[i];
    case FBX_DTYPE_F64: return ((const double *)x->data)[i];
    case FBX_DTYPE_I32: return ((const int32_t *)x->data)[i];
    default: return (double)((const int64_t *)x->data)[i];
  }
}

static void fbx__red_task(void *arg, int64_t o0, int64_t o1, int worker) {
  const fbx__red_job *j = arg;
  bool is_int = j->x->dtype == FBX_DTYPE_I32 || j->x->dtype == FBX_DTYPE_I64;
  for (int64_t o = o0; o < o1; o++) {
    int64_t rem = o, base = 0;
    for (int d = j->nk - 1; d >= 0; d--) {
      base += (rem % j->kd[d]) * j->ks[d];
      rem /= j->kd[d];
    }
    int64_t idx[FBX_MAX_RANK] = {0};
    double acc, mx = -INFINITY;
    int64_t iacc;
    switch (j->op) {
      case FBX_IR_OP_REDUCE_MAX: acc = -INFINITY; iacc = INT64_MIN; break;
      case FBX_IR_OP_REDUCE_MIN: acc = INFINITY; iacc = INT64_MAX; break;
      case FBX_IR_OP_REDUCE_PROD: acc = 1; iacc = 1; break;
      default: acc = 0; iacc = 0; break;
    }
    if (j->op == FBX_IR_OP_REDUCE_LOG_SUM_EXP) { /* first pass: max */
      int64_t off = base;
      for (int64_t t = 0; t < j->rcount; t++) {
        double v = fbx__rd_get(j->x, off);
        if (v > mx) mx = v;
        for (int d = j->nr - 1; d >= 0; d--) {
          off += j->rs[d];
          if (++idx[d] < j->rd[d]) break;
          off -= idx[d] * j->rs[d];
          idx[d] = 0;
        }
      }
      /* shift by the max for range, except an infinite max: all -inf rows give
       * log(0) = -inf, a +inf gives exp(+inf) = +inf -> +inf (NaN if the row
       * has a NaN too); shifting by it would make inf - inf = NaN */
      if (isinf(mx) || mx != mx) mx = 0;
    }
    int64_t off = base;
    for (int64_t t = 0; t < j->rcount; t++) {
      if (is_int) {
        int64_t v = j->x->dtype == FBX_DTYPE_I32 ? ((const int32_t *)j->x->data)[off] : ((const int64_t *)j->x->data)[off];
        switch (j->op) {
          case FBX_IR_OP_REDUCE_MAX: iacc = v > iacc ? v : iacc; break;
          case FBX_IR_OP_REDUCE_MIN: iacc = v < iacc ? v : iacc; break;
          case FBX_IR_OP_REDUCE_PROD: iacc = (int64_t)((uint64_t)iacc * (uint64_t)v); break;
          default: iacc = (int64_t)((uint64_t)iacc + (uint64_t)v); break;
        }
      } else {
        double v = fbx__rd_get(j->x, off);
        switch (j->op) {
          case FBX_IR_OP_REDUCE_MAX: acc = (v > acc || v != v) ? v : acc; break;
          case FBX_IR_OP_REDUCE_MIN: acc = (v < acc || v != v) ? v : acc; break;
          case FBX_IR_OP_REDUCE_PROD: acc *= v; break;
          case FBX_IR_OP_REDUCE_L1: acc += fabs(v); break;
          case FBX_IR_OP_REDUCE_L2: case FBX_IR_OP_REDUCE_SUM_SQUARE: acc += v * v; break;
          case FBX_IR_OP_REDUCE_LOG_SUM_EXP: acc += exp(v - mx); break;
          default: acc += v; break;
        }
      }
      for (int d = j->nr - 1; d >= 0; d--) {
        off += j->rs[d];
        if (++idx[d] < j->rd[d]) break;
        off -= idx[d] * j->rs[d];
        idx[d] = 0;
      }
    }
    if (is_int) {
      if (j->op == FBX_IR_OP_REDUCE_MEAN) iacc = j->rcount ? iacc / j->rcount : 0;
      if (j->y->dtype == FBX_DTYPE_I32) ((int32_t *)j->y->data)[o] = (int32_t)iacc;
      else ((int64_t *)j->y->data)[o] = iacc;
      continue;
    }
    switch (j->op) {
      case FBX_IR_OP_REDUCE_MEAN: acc = acc / (double)j->rcount; break;
      case FBX_IR_OP_REDUCE_L2: acc = sqrt(acc); break;
      case FBX_IR_OP_REDUCE_LOG_SUM: acc = log(acc); break;
      case FBX_IR_OP_REDUCE_LOG_SUM_EXP: acc = log(acc) + mx; break;
      default: break;
    }
    if (j->y->dtype == FBX_DTYPE_F32) ((float *)j->y->data)[o] = (float)acc;
    else ((double *)j->y->data)[o] = acc;
  }
}

/* F32 SUM / MEAN / SUM_SQUARE over one contiguous innermost run per output
 * (e.g. LayerNorm / RMSNorm means over the hidden size): AVX2, double
 * accumulators like the generic path. */
typedef struct fbx__redrow_job {
  const float *x;
  float *y;
  int64_t n;
  fbx_ir_op op;
} fbx__redrow_job;

static void fbx__redrow_task(void *arg, int64_t o0, int64_t o1, int worker) {
  const fbx__redrow_job *j = arg;
  bool sq = j->op == FBX_IR_OP_REDUCE_SUM_SQUARE;
  for (int64_t o = o0; o < o1; o++) {
    const float *x = j->x + o * j->n;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0;
    int64_t i = 0;
    for (; i + 8 <= j->n; i += 8) {
      __m256 v = _mm256_loadu_ps(x + i);
      if (sq) v = _mm256_mul_ps(v, v);
      a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
      a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    double acc = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < j->n; i++) acc += sq ? (double)x[i] * x[i] : (double)x[i];
    if (j->op == FBX_IR_OP_REDUCE_MEAN) acc /= (double)j->n;
    j->y[o] = (float)acc;
  }
}

static fbx_status *fbx__reduce(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  fbx_ir_op op = node->op;
  bool is_int = x->dtype == FBX_DTYPE_I32 || x->dtype == FBX_DTYPE_I64;
  bool int_ok = op == FBX_IR_OP_REDUCE_SUM || op == FBX_IR_OP_REDUCE_MAX || op == FBX_IR_OP_REDUCE_MIN ||
                op == FBX_IR_OP_REDUCE_PROD || op == FBX_IR_OP_REDUCE_MEAN;
  if (!(x->dtype == FBX_DTYPE_F32 || x->dtype == FBX_DTYPE_F64 || (is_int && int_ok)) || y->dtype != x->dtype)
    return FBX_ERR_NOTIMPL("%s: dtype %s not implemented on cpu", fbx_ir_op_name(op), fbx_dtype_name(x->dtype));
  fbx__red_job j = {.x = x, .y = y, .op = op, .rcount = 1};
  int64_t xs[FBX_MAX_RANK];
  fbx_cpu_strides(x, xs);
  uint32_t mask = node->params.reduce.axes_mask;
  if (mask == 0) mask = (1u << x->rank) - 1;
  for (int d = 0; d < x->rank; d++) {
    if (mask & (1u << d)) {
      j.rd[j.nr] = x->dims[d];
      j.rs[j.nr++] = xs[d];
      j.rcount *= x->dims[d];
    } else {
      j.kd[j.nk] = x->dims[d];
      j.ks[j.nk++] = xs[d];
    }
  }
  int64_t nout = fbx_cpu_numel(y);
  /* reduced dims = one contiguous innermost block (strides multiply out to 1) */
  bool inner = j.nr > 0 && x->dtype == FBX_DTYPE_F32 && j.rcount > 0;
  for (int q = 0, d = x->rank - 1; inner && q < j.nr; q++, d--) inner = (mask & (1u << d)) != 0;
  if (inner && (op == FBX_IR_OP_REDUCE_SUM || op == FBX_IR_OP_REDUCE_MEAN || op == FBX_IR_OP_REDUCE_SUM_SQUARE)) {
    info->variant = "reduce_rows_avx2";
    fbx__redrow_job rj = {.x = x->data, .y = y->data, .n = j.rcount, .op = op};
    if (nout * j.rcount >= 65536)
      fbx_cpu_par(c, nout, 1 + 16384 / j.rcount, fbx__redrow_task, &rj);
    else
      fbx__redrow_task(&rj, 0, nout, 0);
    return NULL;
  }
  info->variant = "reduce_generic";
  if (nout * (j.rcount + 1) >= 65536)
    fbx_cpu_par(c, nout, 1 + 16384 / (j.rcount + 1), fbx__red_task, &j);
  else
    fbx__red_task(&j, 0, nout, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_REDUCE_SUM(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_MEAN(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_MAX(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_MIN(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_PROD(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_L1(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_L2(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_LOG_SUM(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_LOG_SUM_EXP(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_REDUCE_SUM_SQUARE(FBX_CPU_KERNEL_ARGS) { return fbx__reduce(c, node, state, in, n_in, out, n_out, info); }

static fbx_status *fbx__arg(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  if (!(x->dtype == FBX_DTYPE_F32 || x->dtype == FBX_DTYPE_F64 || x->dtype == FBX_DTYPE_I32 ||
        x->dtype == FBX_DTYPE_I64) || y->dtype != FBX_DTYPE_I64)
    return FBX_ERR_NOTIMPL("%s: dtype %s not implemented on cpu", fbx_ir_op_name(node->op), fbx_dtype_name(x->dtype));
  int axis = node->params.arg.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("ARG*: axis %d", axis);
  int64_t A = x->dims[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  bool mx = node->op == FBX_IR_OP_ARGMAX, last = node->params.arg.select_last != 0;
  int64_t *yp = y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      double bv = 0;
      for (int64_t a = 0; a < A; a++) {
        double v = fbx__rd_get(x, (o * A + a) * inner + i);
        bool better;
        if (a == 0) better = true;
        else if (bv != bv) better = last && v != v; /* a NaN is held: only a later NaN (select_last) */
        else if (v != v) better = true;
        else better = mx ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv);
        if (better) {
          bv = v;
          best = a;
        }
      }
      yp[o * inner + i] = best;
    }
  return NULL;
}

fbx_status *fbx_cpu_k_ARGMAX(FBX_CPU_KERNEL_ARGS) { return fbx__arg(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_ARGMIN(FBX_CPU_KERNEL_ARGS) { return fbx__arg(c, node, state, in, n_in, out, n_out, info); }

fbx_status *fbx_cpu_k_CUMSUM(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  int axis = node->params.cumsum.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("CUMSUM: axis %d", axis);
  /* in[1], when given: the ONNX axis known only at run time (onnx_ops_reduce.c puts it on
   * the last-axis CUMSUM of its Where chain, which is what an out-of-range axis would
   * select). ONNX allows [-rank, rank); outside it the run fails, as ORT's does, instead of
   * returning the last axis' sum. A scalar or 1-element int32/int64 tensor. */
  if (n_in > 1 && in[1].data) {
    const fbx_tensor *a = &in[1];
    if (fbx_tensor_numel(a) != 1 || (a->dtype != FBX_DTYPE_I64 && a->dtype != FBX_DTYPE_I32))
      return FBX_ERR_ARG("CumSum: axis must be one int32/int64 value");
    int64_t v = a->dtype == FBX_DTYPE_I64 ? *(const int64_t *)a->data : *(const int32_t *)a->data;
    if (v < -(int64_t)x->rank || v >= x->rank)
      return FBX_ERR_ARG("CumSum: axis %lld out of range for rank %d", (long long)v, x->rank);
  }
  int64_t A = x->dims[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  bool ex = node->params.cumsum.exclusive != 0, rev = node->params.cumsum.reverse != 0;
#define CS(T, ACC)                                                         \
  do {                                                                     \
    const T *xp = x->data;                                                 \
    T *yp = y->data;                                                       \
    for (int64_t o = 0; o < outer; o++)                                    \
      for (int64_t i = 0; i < inner; i++) {                                \
        ACC s = 0;                                                         \
        for (int64_t t = 0; t < A; t++) {                                  \
          int64_t a = rev ? A - 1 - t : t;                                 \
          int64_t k = (o * A + a) * inner + i;                             \
          T v = xp[k];                                                     \
          if (ex) { yp[k] = (T)s; s += v; } else { s += v; yp[k] = (T)s; } \
        }                                                                  \
      }                                                                    \
  } while (0)
  switch (x->dtype) {
    case FBX_DTYPE_F32: CS(float, double); break;
    case FBX_DTYPE_F64: CS(double, double); break;
    case FBX_DTYPE_I32: CS(int32_t, int64_t); break;
    case FBX_DTYPE_I64: CS(int64_t, int64_t); break;
    default: return FBX_ERR_NOTIMPL("CUMSUM: dtype %s", fbx_dtype_name(x->dtype));
  }
#undef CS
  return NULL;
}
