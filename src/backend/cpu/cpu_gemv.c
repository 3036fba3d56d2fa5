/* Bandwidth-tuned f32 GEMV for batch-1 decode: y(N) = alpha * x(K) @ B.
 *
 * A constant B is packed once (node_prepare) into panels of 16 columns,
 * K-major, so each panel is one contiguous stream of K*64 bytes and a thread
 * reads one contiguous run of panels. The inner loop keeps 8 independent
 * accumulators (16 columns x 4-way k unroll) so FMA latency never limits the
 * stream rate. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define P FBX_CPU_GEMV_PANEL

fbx_status *fbx_cpu_gemv_pack(const float *b, int64_t K, int64_t N, bool trans_b, float **out) {
  *out = NULL;
  int64_t np = (N + P - 1) / P;
  size_t bytes = (size_t)(np * K * P) * sizeof(float) + 64;
  float *pk = fbx_malloc_huge(bytes); /* streamed once per decode token: huge pages */
  if (!pk) return FBX_ERR_OOM();
  for (int64_t p = 0; p < np; p++) {
    float *dst = pk + p * K * P;
    int64_t n0 = p * P, w = N - n0 < P ? N - n0 : P;
    if (!trans_b) {
      for (int64_t k = 0; k < K; k++) {
        memcpy(dst + k * P, b + k * N + n0, (size_t)w * sizeof(float));
        for (int64_t j = w; j < P; j++) dst[k * P + j] = 0.f;
      }
    } else {
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < P; j++) dst[k * P + j] = j < w ? b[(n0 + j) * K + k] : 0.f;
    }
  }
  *out = pk;
  return NULL;
}

typedef struct fbx__gemv_job {
  const float *x, *b;
  float *y;
  int64_t K, N;
  float alpha;
  bool trans_b;
} fbx__gemv_job;

static void fbx__gemv_packed_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__gemv_job *j = arg;
  const int64_t K = j->K;
  const float *x = j->x;
  const __m256 al = _mm256_set1_ps(j->alpha);
  for (int64_t p = p0; p < p1; p++) {
    const float *bp = j->b + p * K * P;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4, bp += 4 * P) {
      _mm_prefetch((const char *)(bp + 64 * P), _MM_HINT_T0);
      _mm_prefetch((const char *)(bp + 64 * P + 32), _MM_HINT_T0);
      __m256 x0 = _mm256_broadcast_ss(x + k), x1 = _mm256_broadcast_ss(x + k + 1);
      __m256 x2 = _mm256_broadcast_ss(x + k + 2), x3 = _mm256_broadcast_ss(x + k + 3);
      c0 = _mm256_fmadd_ps(x0, _mm256_load_ps(bp), c0);
      c1 = _mm256_fmadd_ps(x0, _mm256_load_ps(bp + 8), c1);
      c2 = _mm256_fmadd_ps(x1, _mm256_load_ps(bp + 16), c2);
      c3 = _mm256_fmadd_ps(x1, _mm256_load_ps(bp + 24), c3);
      c4 = _mm256_fmadd_ps(x2, _mm256_load_ps(bp + 32), c4);
      c5 = _mm256_fmadd_ps(x2, _mm256_load_ps(bp + 40), c5);
      c6 = _mm256_fmadd_ps(x3, _mm256_load_ps(bp + 48), c6);
      c7 = _mm256_fmadd_ps(x3, _mm256_load_ps(bp + 56), c7);
    }
    for (; k < K; k++, bp += P) {
      __m256 x0 = _mm256_broadcast_ss(x + k);
      c0 = _mm256_fmadd_ps(x0, _mm256_load_ps(bp), c0);
      c1 = _mm256_fmadd_ps(x0, _mm256_load_ps(bp + 8), c1);
    }
    __m256 lo = _mm256_mul_ps(al, _mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c4, c6)));
    __m256 hi = _mm256_mul_ps(al, _mm256_add_ps(_mm256_add_ps(c1, c3), _mm256_add_ps(c5, c7)));
    int64_t n0 = p * P;
    if (n0 + P <= j->N) {
      _mm256_storeu_ps(j->y + n0, lo);
      _mm256_storeu_ps(j->y + n0 + 8, hi);
    } else {
      float t[P];
      _mm256_storeu_ps(t, lo);
      _mm256_storeu_ps(t + 8, hi);
      memcpy(j->y + n0, t, (size_t)(j->N - n0) * sizeof(float));
    }
  }
}

/* Chunks of at least ~256 KiB of weights per thread; smaller runs inline. */
static int64_t fbx__gemv_grain(int64_t K, int64_t cols_per_item) {
  int64_t bytes = K * cols_per_item * 4;
  int64_t g = (256 * 1024) / (bytes > 0 ? bytes : 1);
  return g < 1 ? 1 : g;
}

void fbx_cpu_gemv_packed(fbx_cpu_ctx *c, const float *x, const float *packed, float *y, int64_t K,
                         int64_t N, float alpha) {
  fbx__gemv_job j = {.x = x, .b = packed, .y = y, .K = K, .N = N, .alpha = alpha};
  int64_t np = (N + P - 1) / P;
  fbx_cpu_par(c, np, fbx__gemv_grain(K, P), fbx__gemv_packed_task, &j);
}

/* B row-major (K,N): column tiles of 32, all of K per tile. */
static void fbx__gemv_nt_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__gemv_job *j = arg;
  const int64_t K = j->K, N = j->N;
  for (int64_t t = t0; t < t1; t++) {
    int64_t n0 = t * 32;
    if (n0 + 32 <= N) {
      __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
      const float *b = j->b + n0;
      for (int64_t k = 0; k < K; k++, b += N) {
        __m256 xk = _mm256_broadcast_ss(j->x + k);
        c0 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b), c0);
        c1 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8), c1);
        c2 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 16), c2);
        c3 = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 24), c3);
      }
      __m256 al = _mm256_set1_ps(j->alpha);
      _mm256_storeu_ps(j->y + n0, _mm256_mul_ps(al, c0));
      _mm256_storeu_ps(j->y + n0 + 8, _mm256_mul_ps(al, c1));
      _mm256_storeu_ps(j->y + n0 + 16, _mm256_mul_ps(al, c2));
      _mm256_storeu_ps(j->y + n0 + 24, _mm256_mul_ps(al, c3));
    } else {
      float acc[32] = {0};
      int64_t w = N - n0;
      for (int64_t k = 0; k < K; k++) {
        const float *b = j->b + k * N + n0;
        float xk = j->x[k];
        for (int64_t q = 0; q < w; q++) acc[q] += xk * b[q];
      }
      for (int64_t q = 0; q < w; q++) j->y[n0 + q] = j->alpha * acc[q];
    }
  }
}

static inline float fbx__hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* B row-major (N,K): one dot product per output. */
static void fbx__gemv_t_task(void *arg, int64_t n0, int64_t n1, int worker) {
  const fbx__gemv_job *j = arg;
  const int64_t K = j->K;
  for (int64_t n = n0; n < n1; n++) {
    const float *b = j->b + n * K;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      c0 = _mm256_fmadd_ps(_mm256_loadu_ps(j->x + k), _mm256_loadu_ps(b + k), c0);
      c1 = _mm256_fmadd_ps(_mm256_loadu_ps(j->x + k + 8), _mm256_loadu_ps(b + k + 8), c1);
      c2 = _mm256_fmadd_ps(_mm256_loadu_ps(j->x + k + 16), _mm256_loadu_ps(b + k + 16), c2);
      c3 = _mm256_fmadd_ps(_mm256_loadu_ps(j->x + k + 24), _mm256_loadu_ps(b + k + 24), c3);
    }
    for (; k + 8 <= K; k += 8) c0 = _mm256_fmadd_ps(_mm256_loadu_ps(j->x + k), _mm256_loadu_ps(b + k), c0);
    float s = fbx__hsum(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)));
    for (; k < K; k++) s += j->x[k] * b[k];
    j->y[n] = j->alpha * s;
  }
}

void fbx_cpu_gemv_plain(fbx_cpu_ctx *c, const float *x, const float *b, float *y, int64_t K,
                        int64_t N, bool trans_b, float alpha) {
  fbx__gemv_job j = {.x = x, .b = b, .y = y, .K = K, .N = N, .alpha = alpha, .trans_b = trans_b};
  if (trans_b)
    fbx_cpu_par(c, N, fbx__gemv_grain(K, 1), fbx__gemv_t_task, &j);
  else
    fbx_cpu_par(c, (N + 31) / 32, fbx__gemv_grain(K, 32), fbx__gemv_nt_task, &j);
}
