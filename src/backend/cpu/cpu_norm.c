/* SOFTMAX / LOG_SOFTMAX / HARDMAX over one axis, LAYER_NORM, INSTANCE_NORM,
 * LRN. F32. The last-axis softmax (attention) is vectorised with the AVX2 exp.
 * Special values follow the ONNX reference formula exp(x - max) / sum: a row
 * with a NaN, a +inf, or only -inf is all NaN (inf - inf, 0/0). Softmax
 * probabilities below FLT_MIN are flushed to +0 (no denormals into the next
 * GEMM: an absolute error < 1.2e-38). HARDMAX: one-hot at the first maximum,
 * NaN counting as the maximum (np.argmax). */

#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simd.h"

/* v beats the current best b for HARDMAX (first maximum, NaN the largest) */
static inline bool fbx__hm_better(float v, float b) { return b == b && (v != v || v > b); }

typedef struct fbx__sm_job {
  const float *x;
  float *y;
  int64_t A, inner;
  fbx_ir_op op;
} fbx__sm_job;

/* One contiguous row of length A. */
static void fbx__sm_row(const float *x, float *y, int64_t A, fbx_ir_op op) {
  int64_t i = 0;
  __m256 vm = _mm256_set1_ps(-INFINITY);
  /* max ignoring NaN (maxps returns its second operand when one is NaN): a NaN
   * still reaches the sum through exp(NaN - m) and makes the row NaN */
  for (; i + 8 <= A; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm);
  float m = fbx__hmax256(vm);
  for (; i < A; i++) m = x[i] > m ? x[i] : m;
  if (op == FBX_IR_OP_HARDMAX) {
    int64_t best = 0;
    for (int64_t k = 1; k < A; k++)
      if (fbx__hm_better(x[k], x[best])) best = k;
    for (int64_t k = 0; k < A; k++) y[k] = k == best ? 1.f : 0.f;
    return;
  }
  if (m == -INFINITY) m = 0;
  __m256 vs = _mm256_setzero_ps(), mm = _mm256_set1_ps(m);
  i = 0;
  for (; i + 8 <= A; i += 8) {
    __m256 e = fbx__exp256_ftz(_mm256_sub_ps(_mm256_loadu_ps(x + i), mm));
    vs = _mm256_add_ps(vs, e);
    if (op == FBX_IR_OP_SOFTMAX) _mm256_storeu_ps(y + i, e);
  }
  float s = fbx__hsum256(vs);
  for (; i < A; i++) {
    float e = expf(x[i] - m);
    s += e;
    if (op == FBX_IR_OP_SOFTMAX) y[i] = e;
  }
  if (op == FBX_IR_OP_SOFTMAX) {
    /* probabilities below FLT_MIN flush to 0: no denormals into the next GEMM */
    __m256 inv = _mm256_set1_ps(1.f / s), tiny = _mm256_set1_ps(FLT_MIN);
    for (i = 0; i + 8 <= A; i += 8) {
      __m256 p = _mm256_mul_ps(inv, _mm256_loadu_ps(y + i));
      _mm256_storeu_ps(y + i, _mm256_andnot_ps(_mm256_cmp_ps(p, tiny, _CMP_LT_OQ), p));
    }
    for (; i < A; i++) {
      float p = y[i] * (1.f / s);
      y[i] = p < FLT_MIN ? 0.f : p;
    }
  } else {
    /* (x - m) - log(s), not x - (m + log(s)): m + log(s) would round log(s)
     * away when m is large (m = 1e4: ulp 1e-3) */
    float ls = logf(s);
    for (i = 0; i < A; i++) y[i] = (x[i] - m) - ls;
  }
}

static void fbx__sm_task(void *arg, int64_t r0, int64_t r1, int worker) {
  const fbx__sm_job *j = arg;
  int64_t A = j->A, inner = j->inner;
  for (int64_t r = r0; r < r1; r++) {
    if (inner == 1) {
      fbx__sm_row(j->x + r * A, j->y + r * A, A, j->op);
      continue;
    }
    int64_t o = r / inner, i = r % inner;
    const float *x = j->x + o * A * inner + i;
    float *y = j->y + o * A * inner + i;
    float m = -INFINITY;
    int64_t best = 0;
    for (int64_t a = 0; a < A; a++) {
      float v = x[a * inner];
      if (v > m) m = v;
      if (a > 0 && fbx__hm_better(v, x[best * inner])) best = a;
    }
    if (j->op == FBX_IR_OP_HARDMAX) {
      for (int64_t a = 0; a < A; a++) y[a * inner] = a == best ? 1.f : 0.f;
      continue;
    }
    if (m == -INFINITY) m = 0;
    double s = 0;
    for (int64_t a = 0; a < A; a++) s += expf(x[a * inner] - m);
    if (j->op == FBX_IR_OP_SOFTMAX) {
      float inv = (float)(1.0 / s);
      for (int64_t a = 0; a < A; a++) { /* flushed below FLT_MIN as on the last-axis path */
        float p = expf(x[a * inner] - m) * inv;
        y[a * inner] = p < FLT_MIN ? 0.f : p;
      }
    } else {
      float ls = (float)log(s);
      for (int64_t a = 0; a < A; a++) y[a * inner] = (x[a * inner] - m) - ls;
    }
  }
}

static fbx_status *fbx__softmax(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->dtype != FBX_DTYPE_F32 || out[0].dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("%s: dtype %s (F32 only)", fbx_ir_op_name(node->op), fbx_dtype_name(x->dtype));
  int axis = node->params.axis.axis;
  if (x->rank == 0) axis = 0;
  else if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("%s: axis %d", fbx_ir_op_name(node->op), axis);
  fbx__sm_job j = {.x = x->data, .y = out[0].data, .A = x->rank ? x->dims[axis] : 1, .inner = 1, .op = node->op};
  int64_t outer = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) j.inner *= x->dims[d];
  int64_t rows = outer * j.inner;
  info->variant = j.inner == 1 ? "softmax_lastaxis_avx2" : "softmax_strided";
  if (rows * j.A >= 32768) fbx_cpu_par(c, rows, 1 + 8192 / (j.A + 1), fbx__sm_task, &j);
  else fbx__sm_task(&j, 0, rows, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_SOFTMAX(FBX_CPU_KERNEL_ARGS) { return fbx__softmax(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_LOG_SOFTMAX(FBX_CPU_KERNEL_ARGS) { return fbx__softmax(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_HARDMAX(FBX_CPU_KERNEL_ARGS) { return fbx__softmax(c, node, state, in, n_in, out, n_out, info); }

typedef struct fbx__ln_job {
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  int64_t cols;
  int64_t scale_n, bias_n;
  float eps;
} fbx__ln_job;

static void fbx__ln_task(void *arg, int64_t r0, int64_t r1, int worker) {
  const fbx__ln_job *j = arg;
  int64_t n = j->cols;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->x + r * n;
    float *y = j->y + r * n;
    __m256 vs = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vs = _mm256_add_ps(vs, _mm256_loadu_ps(x + i));
    double s = fbx__hsum256(vs);
    for (; i < n; i++) s += x[i];
    float mean = (float)(s / (double)n);
    __m256 vm = _mm256_set1_ps(mean), vq = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
      __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
      vq = _mm256_fmadd_ps(d, d, vq);
    }
    double q = fbx__hsum256(vq);
    for (; i < n; i++) q += (double)(x[i] - mean) * (x[i] - mean);
    float inv = (float)(1.0 / sqrt(q / (double)n + j->eps));
    if (j->mean) j->mean[r] = mean;
    if (j->inv) j->inv[r] = inv;
    if (j->scale_n == n && (!j->bias || j->bias_n == n)) {
      __m256 vi = _mm256_set1_ps(inv);
      for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vi);
        v = _mm256_mul_ps(v, _mm256_loadu_ps(j->scale + i));
        if (j->bias) v = _mm256_add_ps(v, _mm256_loadu_ps(j->bias + i));
        _mm256_storeu_ps(y + i, v);
      }
      for (; i < n; i++) y[i] = (x[i] - mean) * inv * j->scale[i] + (j->bias ? j->bias[i] : 0.f);
    } else {
      for (i = 0; i < n; i++)
        y[i] = (x[i] - mean) * inv * j->scale[i % j->scale_n] + (j->bias ? j->bias[i % j->bias_n] : 0.f);
    }
  }
}

fbx_status *fbx_cpu_k_LAYER_NORM(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (n_in < 2) return FBX_ERR_ARG("LAYER_NORM: needs X and scale");
  if (x->dtype != FBX_DTYPE_F32 || in[1].dtype != FBX_DTYPE_F32)
    return FBX_ERR_NOTIMPL("LAYER_NORM: dtype %s (F32 only)", fbx_dtype_name(x->dtype));
  int axis = node->params.norm.axis;
  if (axis < 0 || axis > x->rank) return FBX_ERR_ARG("LAYER_NORM: axis %d", axis);
  fbx__ln_job j = {.x = x->data, .y = out[0].data, .scale = in[1].data, .cols = 1, .eps = node->params.norm.epsilon};
  int64_t rows = 1;
  for (int d = 0; d < axis; d++) rows *= x->dims[d];
  for (int d = axis; d < x->rank; d++) j.cols *= x->dims[d];
  j.scale_n = fbx_cpu_numel(&in[1]);
  if (fbx_cpu_present(in, n_in, 2)) {
    if (in[2].dtype != FBX_DTYPE_F32) return FBX_ERR_NOTIMPL("LAYER_NORM: bias dtype");
    j.bias = in[2].data;
    j.bias_n = fbx_cpu_numel(&in[2]);
  }
  /* scale/bias broadcast over the normalised dims: trailing-suffix shapes only */
  if (j.scale_n < 1 || j.cols % j.scale_n || (j.bias && (j.bias_n < 1 || j.cols % j.bias_n)))
    return FBX_ERR_NOTIMPL("LAYER_NORM: scale/bias shape does not broadcast as a suffix");
  if (n_out > 1 && out[1].data && out[1].dtype == FBX_DTYPE_F32) j.mean = out[1].data;
  if (n_out > 2 && out[2].data && out[2].dtype == FBX_DTYPE_F32) j.inv = out[2].data;
  info->variant = "layernorm_avx2";
  if (rows * j.cols >= 32768) fbx_cpu_par(c, rows, 1 + 8192 / (j.cols + 1), fbx__ln_task, &j);
  else fbx__ln_task(&j, 0, rows, 0);
  return NULL;
}

fbx_status *fbx_cpu_k_INSTANCE_NORM(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (n_in < 3) return FBX_ERR_ARG("INSTANCE_NORM: needs X, scale, bias");
  if (x->dtype != FBX_DTYPE_F32) return FBX_ERR_NOTIMPL("INSTANCE_NORM: dtype %s (F32 only)", fbx_dtype_name(x->dtype));
  if (x->rank < 2) return FBX_ERR_ARG("INSTANCE_NORM: rank < 2");
  int64_t N = x->dims[0], C = x->dims[1], S = 1;
  for (int d = 2; d < x->rank; d++) S *= x->dims[d];
  const float *xp = x->data, *sc = in[1].data, *bi = in[2].data;
  float *yp = out[0].data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      const float *xr = xp + (n * C + ch) * S;
      float *yr = yp + (n * C + ch) * S;
      double s = 0, q = 0;
      for (int64_t i = 0; i < S; i++) s += xr[i];
      double mean = S ? s / (double)S : 0;
      for (int64_t i = 0; i < S; i++) q += (xr[i] - mean) * (xr[i] - mean);
      float inv = (float)(1.0 / sqrt((S ? q / (double)S : 0) + node->params.norm.epsilon));
      for (int64_t i = 0; i < S; i++) yr[i] = ((float)(xr[i] - mean)) * inv * sc[ch] + bi[ch];
    }
  return NULL;
}

fbx_status *fbx_cpu_k_LRN(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (x->dtype != FBX_DTYPE_F32 || x->rank < 2) return FBX_ERR_NOTIMPL("LRN: F32 NC... only");
  int64_t N = x->dims[0], C = x->dims[1], S = 1;
  for (int d = 2; d < x->rank; d++) S *= x->dims[d];
  int size = node->params.lrn.size;
  if (size < 1) return FBX_ERR_ARG("LRN: size %d", size);
  float alpha = node->params.lrn.alpha, beta = node->params.lrn.beta, bias = node->params.lrn.bias;
  int64_t lo = (size - 1) / 2, hi = (size - 1) - lo; /* floor((size-1)/2), ceil((size-1)/2) */
  const float *xp = x->data;
  float *yp = out[0].data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t i = 0; i < S; i++) {
        double sq = 0;
        for (int64_t k = ch - lo; k <= ch + hi; k++)
          if (k >= 0 && k < C) {
            float v = xp[(n * C + k) * S + i];
            sq += (double)v * v;
          }
        yp[(n * C + ch) * S + i] = xp[(n * C + ch) * S + i] / powf(bias + alpha / (float)size * (float)sq, beta);
      }
  return NULL;
}
