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

#include "cpu_gemm_avx512.h"
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

/* ---- small-M GEMM on packed B (prefill: M = prompt rows, typically <= 64):
 * Y(M,N) = alpha * A(M,K) @ B. Parallel over 16-column panels; per panel,
 * blocks of up to 6 rows of A x 16 columns in 12 AVX2 accumulators (the
 * panel, K*64 bytes, stays in L1/L2 across the row blocks). Reads the packed
 * weights once (no per-call packing as in sgemm). ---- */
typedef struct fbx__gemm_pk_job {
  const float *a, *b;
  float *y;
  int64_t M, K, N, lda, ldy;
  float alpha;
} fbx__gemm_pk_job;

static inline __attribute__((always_inline)) void fbx__gemm_pk_block(const int MR, const float *a, int64_t lda,
                                                                     const float *bp, int64_t K, float *y,
                                                                     int64_t ldy, int64_t w, float alpha,
                                                                     const float *pf0, const float *pf1) {
  __m256 c0[6], c1[6];
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++, bp += P) {
    /* one 64-byte line (one k row of a panel) per k: pf0 streams ahead of
     * this panel into L1, pf1 pulls the next panel into L2 meanwhile */
    if (pf0) _mm_prefetch((const char *)(pf0 + k * P), _MM_HINT_T0);
    if (pf1) _mm_prefetch((const char *)(pf1 + k * P), _MM_HINT_T1);
    __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      __m256 av = _mm256_broadcast_ss(a + r * lda + k);
      c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
    }
  }
  const __m256 al = _mm256_set1_ps(alpha);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    float *yr = y + r * ldy;
    if (w == P) {
      _mm256_storeu_ps(yr, _mm256_mul_ps(al, c0[r]));
      _mm256_storeu_ps(yr + 8, _mm256_mul_ps(al, c1[r]));
    } else {
      float t[P];
      _mm256_storeu_ps(t, _mm256_mul_ps(al, c0[r]));
      _mm256_storeu_ps(t + 8, _mm256_mul_ps(al, c1[r]));
      memcpy(yr, t, (size_t)w * sizeof(float));
    }
  }
}

static void fbx__gemm_pk_task(void *arg, int64_t p0, int64_t p1, int worker) {
  const fbx__gemm_pk_job *j = arg;
  const int64_t K = j->K;
  for (int64_t p = p0; p < p1; p++) {
    const float *bp = j->b + p * K * P;
    int64_t n0 = p * P, w = j->N - n0 < P ? j->N - n0 : P;
    int64_t m = 0;
    const float *ahead = bp + 64 * P, *next = p + 1 < p1 ? bp + K * P : NULL;
    for (; m + 6 <= j->M; m += 6)
      fbx__gemm_pk_block(6, j->a + m * j->lda, j->lda, bp, K, j->y + m * j->ldy + n0, j->ldy, w, j->alpha,
                         m == 0 ? ahead : NULL, m == 6 ? next : NULL);
    const float *pf0 = m == 0 ? ahead : NULL, *pf1 = m == 6 ? next : NULL;
    const float *a = j->a + m * j->lda;
    float *y = j->y + m * j->ldy + n0;
    switch (j->M - m) {
      case 5: fbx__gemm_pk_block(5, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
      case 4: fbx__gemm_pk_block(4, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
      case 3: fbx__gemm_pk_block(3, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
      case 2: fbx__gemm_pk_block(2, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
      case 1: fbx__gemm_pk_block(1, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
      default: break;
    }
  }
}

/* AVX-512 path: items are pairs of panels (the 12x32 tile spans two). */
static void fbx__gemm_pk_task512(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__gemm_pk_job *j = arg;
  int64_t np = (j->N + P - 1) / P, p1 = 2 * t1 < np ? 2 * t1 : np;
  fbx_cpu_gemm_packed_avx512(j->a, j->lda, j->b, j->y, j->ldy, j->M, j->K, j->N, j->alpha, 2 * t0, p1);
}

void fbx_cpu_gemm_packed(fbx_cpu_ctx *c, const float *a, int64_t lda, const float *packed, float *y,
                         int64_t ldy, int64_t M, int64_t K, int64_t N, float alpha) {
  fbx__gemm_pk_job j = {.a = a, .b = packed, .y = y, .M = M, .K = K, .N = N, .lda = lda, .ldy = ldy,
                        .alpha = alpha};
  int64_t np = (N + P - 1) / P;
  int64_t g = fbx__gemv_grain(K, P) / (M > 0 ? M : 1);
  if (fbx_cpu_avx512_enabled()) {
    int64_t g2 = g / 2;
    fbx_cpu_par(c, (np + 1) / 2, g2 < 1 ? 1 : g2, fbx__gemm_pk_task512, &j);
    return;
  }
  fbx_cpu_par(c, np, g < 1 ? 1 : g, fbx__gemm_pk_task, &j);
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
