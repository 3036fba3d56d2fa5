/* Small helpers shared by the CPU kernels. */
#include <cblas.h>
#include <immintrin.h>
#include <string.h>

#include "cpu_internal.h"

int64_t fbx_cpu_numel(const fbx_tensor *t) { return fbx_tensor_numel(t); }

void fbx_cpu_strides(const fbx_tensor *t, int64_t *strides) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= t->dims[i];
  }
}

#define FBX__CPU_READ(T, NAME)                                          \
  T NAME(const fbx_tensor *t, int64_t i) {                              \
    const void *d = t->data;                                            \
    switch (t->dtype) {                                                 \
      case FBX_DTYPE_F32: return (T)((const float *)d)[i];              \
      case FBX_DTYPE_F64: return (T)((const double *)d)[i];             \
      case FBX_DTYPE_F16: return (T)fbx_f16_to_f32(((const uint16_t *)d)[i]); \
      case FBX_DTYPE_I8: return (T)((const int8_t *)d)[i];              \
      case FBX_DTYPE_U8: case FBX_DTYPE_BOOL: return (T)((const uint8_t *)d)[i]; \
      case FBX_DTYPE_I16: return (T)((const int16_t *)d)[i];            \
      case FBX_DTYPE_U16: return (T)((const uint16_t *)d)[i];           \
      case FBX_DTYPE_I32: return (T)((const int32_t *)d)[i];            \
      case FBX_DTYPE_U32: return (T)((const uint32_t *)d)[i];           \
      case FBX_DTYPE_I64: return (T)((const int64_t *)d)[i];            \
      case FBX_DTYPE_U64: return (T)((const uint64_t *)d)[i];           \
      default: return 0;                                                \
    }                                                                   \
  }
FBX__CPU_READ(int64_t, fbx_cpu_read_i64)
FBX__CPU_READ(double, fbx_cpu_read_f64)

void fbx_cpu_write_f64(fbx_tensor *t, int64_t i, double v) {
  void *d = t->data;
  switch (t->dtype) {
    case FBX_DTYPE_F32: ((float *)d)[i] = (float)v; break;
    case FBX_DTYPE_F64: ((double *)d)[i] = v; break;
    case FBX_DTYPE_F16: ((uint16_t *)d)[i] = fbx_f32_to_f16((float)v); break;
    case FBX_DTYPE_I8: ((int8_t *)d)[i] = (int8_t)(int64_t)v; break;
    case FBX_DTYPE_U8: ((uint8_t *)d)[i] = (uint8_t)(int64_t)v; break;
    case FBX_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case FBX_DTYPE_I16: ((int16_t *)d)[i] = (int16_t)(int64_t)v; break;
    case FBX_DTYPE_U16: ((uint16_t *)d)[i] = (uint16_t)(int64_t)v; break;
    case FBX_DTYPE_I32: ((int32_t *)d)[i] = (int32_t)(int64_t)v; break;
    case FBX_DTYPE_U32: ((uint32_t *)d)[i] = (uint32_t)(int64_t)v; break;
    case FBX_DTYPE_I64: ((int64_t *)d)[i] = (int64_t)v; break;
    case FBX_DTYPE_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    default: break;
  }
}

void fbx_cpu_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C,
              (blasint)ldc);
}

typedef struct fbx__sgemm_job {
  bool ta, tb, by_cols;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B, *bias;
  float *C;
} fbx__sgemm_job;

/* C[m0..m1, n0..n1) += bias[m] (row-major, ldc) */
static void fbx__sgemm_add_bias(float *C, int64_t ldc, const float *bias, int64_t m0, int64_t m1,
                                int64_t n0, int64_t n1) {
  for (int64_t m = m0; m < m1; m++) {
    float *r = C + m * ldc;
    const __m256 bv = _mm256_set1_ps(bias[m]);
    int64_t i = n0;
    for (; i + 8 <= n1; i += 8) _mm256_storeu_ps(r + i, _mm256_add_ps(_mm256_loadu_ps(r + i), bv));
    for (; i < n1; i++) r[i] += bias[m];
  }
}

/* by_cols: items are 16-column blocks of C; else rows of C. */
static void fbx__sgemm_task(void *arg, int64_t i0, int64_t i1, int worker) {
  const fbx__sgemm_job *j = arg;
  if (j->by_cols) {
    int64_t n0 = i0 * 16, n1 = i1 * 16 < j->N ? i1 * 16 : j->N;
    const float *B = j->tb ? j->B + n0 * j->ldb : j->B + n0;
    fbx_cpu_sgemm(j->ta, j->tb, j->M, n1 - n0, j->K, j->alpha, j->A, j->lda, B, j->ldb, j->beta,
                  j->C + n0, j->ldc);
    if (j->bias) fbx__sgemm_add_bias(j->C, j->ldc, j->bias, 0, j->M, n0, n1);
  } else {
    const float *A = j->ta ? j->A + i0 : j->A + i0 * j->lda;
    fbx_cpu_sgemm(j->ta, j->tb, i1 - i0, j->N, j->K, j->alpha, A, j->lda, j->B, j->ldb, j->beta,
                  j->C + i0 * j->ldc, j->ldc);
    if (j->bias) fbx__sgemm_add_bias(j->C, j->ldc, j->bias, i0, i1, 0, j->N);
  }
}

void fbx_cpu_sgemm_par(fbx_cpu_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                       float beta, float *C, int64_t ldc, const float *row_bias) {
  if (M <= 0 || N <= 0) return;
  int nt = c ? c->threads : 1;
  double flops = 2.0 * (double)M * (double)N * (double)K;
  if (nt <= 1 || flops < 2e6 || K <= 0) {
    fbx_cpu_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (row_bias) fbx__sgemm_add_bias(C, ldc, row_bias, 0, M, 0, N);
    return;
  }
  fbx__sgemm_job j = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb,
                      .ldc = ldc, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C,
                      .bias = row_bias};
  /* few large blocks (each call packs the other operand again) */
  int64_t nb = (N + 15) / 16;
  j.by_cols = N >= M || M < 8 * nt;
  int64_t items = j.by_cols ? nb : M;
  int64_t grain = (items + 2 * nt - 1) / (2 * nt);
  int64_t gmin = j.by_cols ? 4 : 16;
  if (grain < gmin) grain = gmin;
  fbx_cpu_par(c, items, grain, fbx__sgemm_task, &j);
}
