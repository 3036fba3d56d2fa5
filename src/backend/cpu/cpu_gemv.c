/* Bandwidth-tuned f32 GEMV for batch-1 decode: y(N) = alpha * x(K) @ B.
 *
 * A constant B is packed once (node_prepare) into panels of 16 columns,
 * K-major, in huge pages, so each panel is one contiguous stream of K*64
 * bytes and the whole matrix one stream. Threads take byte-balanced units of
 * consecutive panels (large first, small last: fbx__gemv_unit_at). Per panel
 * 8 independent accumulators keep FMA latency off the stream rate, and every
 * 64-byte line is prefetched FBX_CPU_GEMV_PF_LINES ahead. AVX-512 where the
 * CPU has it (cpu_gemv_avx512.c: one zmm per line), else AVX2. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm_avx512.h"
#include "cpu_gemv.h"
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
  int64_t np, nt; /* packed: panels, threads the units are cut for (fbx__gemv_unit_at) */
} fbx__gemv_job;

#define FBX__PF(p) _mm_prefetch((const char *)(p) + FBX_CPU_GEMV_PF_LINES * 64, _MM_HINT_T0)

/* AVX2: two ymm per 64-byte k row; 8 accumulators (4 k x 2 halves), every
 * line prefetched FBX_CPU_GEMV_PF_LINES ahead. Panels [p0, p1). */
static void fbx__gemv_panels_avx2(const float *x, const float *packed, float *y, int64_t K, int64_t N, float alpha,
                                  int64_t p0, int64_t p1) {
  const __m256 al = _mm256_set1_ps(alpha);
  for (int64_t p = p0; p < p1; p++) {
    const float *bp = packed + p * K * P; /* (K, 16) */
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4, bp += 4 * P) {
      FBX__PF(bp);
      FBX__PF(bp + P);
      FBX__PF(bp + 2 * P);
      FBX__PF(bp + 3 * P);
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
    if (n0 + P <= N) {
      _mm256_storeu_ps(y + n0, lo);
      _mm256_storeu_ps(y + n0 + 8, hi);
    } else {
      float t[P];
      _mm256_storeu_ps(t, lo);
      _mm256_storeu_ps(t + 8, hi);
      memcpy(y + n0, t, (size_t)(N - n0) * sizeof(float));
    }
  }
}

/* The packed GEMV's work units, balanced by bytes (every panel is K*64
 * bytes): 4 rounds of nt units holding 1/2, 1/4, 1/8 and 1/8 of the panels,
 * handed out in order by the pool, so a thread that starts late or streams
 * slower (a neighbour on its core) finds small units at the end instead of
 * a large one, and the others do not wait long for it. Unit u is panels
 * [fbx__gemv_unit_at(u), fbx__gemv_unit_at(u + 1)); there are 4 * nt. */
static int64_t fbx__gemv_unit_at(int64_t u, int64_t nt, int64_t np) {
  static const int64_t eighths[5] = {0, 4, 6, 7, 8}; /* cumulative, per round */
  int64_t r = u / nt, i = u % nt;
  if (r >= 4) return np;
  return np * (eighths[r] * nt + (eighths[r + 1] - eighths[r]) * i) / (8 * nt);
}

static void fbx__gemv_packed_task(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  const fbx__gemv_job *j = arg;
  int64_t p0 = fbx__gemv_unit_at(u0, j->nt, j->np), p1 = fbx__gemv_unit_at(u1, j->nt, j->np);
  if (fbx_cpu_avx512_enabled())
    fbx_cpu_gemv_panels_avx512(j->x, j->b, j->y, j->K, j->N, j->alpha, p0, p1);
  else
    fbx__gemv_panels_avx2(j->x, j->b, j->y, j->K, j->N, j->alpha, p0, p1);
}

/* Chunks of at least ~256 KiB of weights per thread; smaller runs inline. */
static int64_t fbx__gemv_grain(int64_t K, int64_t cols_per_item) {
  int64_t bytes = K * cols_per_item * 4;
  int64_t g = (256 * 1024) / (bytes > 0 ? bytes : 1);
  return g < 1 ? 1 : g;
}

/* Grain of a streaming GEMV over n items: the 256 KiB one, but small enough
 * that every thread gets at least two chunks (at 16 threads a 768-column
 * GEMV has 48 panels: 256 KiB chunks would leave 6 threads idle), and never
 * under 32 KiB of weights (dispatch and prefetch ramp-up). */
static int64_t fbx__gemv_grain_par(const fbx_cpu_ctx *c, int64_t n, int64_t K, int64_t cols_per_item) {
  int64_t g = fbx__gemv_grain(K, cols_per_item), nt = c ? c->threads : 1;
  int64_t share = n / (2 * (nt > 0 ? nt : 1));
  int64_t bytes = K * cols_per_item * 4, lo = (32 * 1024 + bytes - 1) / (bytes > 0 ? bytes : 1);
  if (share < g) g = share;
  if (g < lo) g = lo;
  return g < 1 ? 1 : g;
}

/* Smallest unit worth a hand-off (the last round's units are 1/(8 nt) of the
 * weights): fewer threads' worth of units below this, inline under 2. */
#define FBX__GEMV_MIN_UNIT_BYTES (16 * 1024)

void fbx_cpu_gemv_packed(fbx_cpu_ctx *c, const float *x, const float *packed, float *y, int64_t K,
                         int64_t N, float alpha) {
  int64_t np = (N + P - 1) / P, bytes = np * K * P * (int64_t)sizeof(float);
  int64_t nt = c ? c->threads : 1, cap = bytes / (8 * FBX__GEMV_MIN_UNIT_BYTES);
  if (nt > cap) nt = cap;
  if (nt > np) nt = np;
  fbx__gemv_job j = {.x = x, .b = packed, .y = y, .K = K, .N = N, .alpha = alpha, .np = np, .nt = nt < 1 ? 1 : nt};
  if (!c || nt < 2) {
    fbx__gemv_packed_task(&j, 0, 4 * j.nt, 0);
    return;
  }
  fbx_cpu_par(c, 4 * nt, 1, fbx__gemv_packed_task, &j); /* 4*nt <= the pool's chunk target: one unit a chunk */
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
  int64_t ns;          /* row slivers (see the tasks) */
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

/* AVX2 units: unit u = (panel u / ns, sliver u % ns of ns = ceil(M/6)
 * balanced slivers, rows [s*M/ns, (s+1)*M/ns)); the same walk and prefetch
 * as the AVX-512 units (cpu_gemm_avx512.c). */
static void fbx__gemm_pk_task(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  const fbx__gemm_pk_job *j = arg;
  const int64_t K = j->K, M = j->M, ns = j->ns, np = (j->N + P - 1) / P;
  for (int64_t u = u0; u < u1;) {
    int64_t p = u / ns, s0 = u % ns, s1 = s0 + (u1 - u) < ns ? s0 + (u1 - u) : ns;
    const float *bp = j->b + p * K * P;
    int64_t n0 = p * P, w = j->N - n0 < P ? j->N - n0 : P;
    const float *ahead = bp + 64 * P, *next = p + 1 < np && (p + 1) * ns < u1 ? bp + K * P : NULL;
    for (int64_t s = s0; s < s1; s++) {
      int64_t m0 = s * M / ns, m1 = (s + 1) * M / ns;
      const float *pf0 = s == s0 ? ahead : NULL, *pf1 = s == s0 + 1 ? next : NULL;
      const float *a = j->a + m0 * j->lda;
      float *y = j->y + m0 * j->ldy + n0;
      switch (m1 - m0) {
        case 6: fbx__gemm_pk_block(6, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        case 5: fbx__gemm_pk_block(5, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        case 4: fbx__gemm_pk_block(4, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        case 3: fbx__gemm_pk_block(3, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        case 2: fbx__gemm_pk_block(2, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        case 1: fbx__gemm_pk_block(1, a, j->lda, bp, K, y, j->ldy, w, j->alpha, pf0, pf1); break;
        default: break;
      }
    }
    u += s1 - s0;
  }
}

static void fbx__gemm_pk_task512(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  const fbx__gemm_pk_job *j = arg;
  fbx_cpu_gemm_packed_units_avx512(j->a, j->lda, j->b, j->y, j->ldy, j->M, j->K, j->N, j->alpha, j->ns, u0, u1);
}

/* Work is split in 2-D (column panel [pair] x row sliver), not over columns
 * alone: at M = 128, N = 768 the old split had 24 items for 16 threads (a
 * third idle); now 24 x 11 units, handed out in chunks of consecutive units
 * (one pair, several slivers) by the pool. Below FBX__GEMM_PK_INLINE_FLOPS the
 * product runs on the calling thread (a dispatch costs more). */
#define FBX__GEMM_PK_INLINE_FLOPS 2e6

/* A copied with a padded row stride (ffn-down: K = 2048, rows 8 KiB apart).
 * A tile broadcasts from 12 rows at once; rows a multiple of 4 KiB apart all
 * map to one L1 set (and 4K-alias the loads), which the padding spreads. */
typedef struct fbx__gemm_pk_acopy {
  const float *src;
  float *dst;
  int64_t K, lds, ldd;
} fbx__gemm_pk_acopy;

static void fbx__gemm_pk_acopy_task(void *arg, int64_t r0, int64_t r1, int worker) {
  (void)worker;
  const fbx__gemm_pk_acopy *j = arg;
  for (int64_t r = r0; r < r1; r++) memcpy(j->dst + r * j->ldd, j->src + r * j->lds, (size_t)j->K * sizeof(float));
}

void fbx_cpu_gemm_packed(fbx_cpu_ctx *c, const float *a, int64_t lda, const float *packed, float *y,
                         int64_t ldy, int64_t M, int64_t K, int64_t N, float alpha) {
  if (M <= 0 || N <= 0) return;
  bool z = fbx_cpu_avx512_enabled();
  int64_t mr = z ? 12 : 6, cols = z ? 2 * P : P;
  fbx__gemm_pk_job j = {.a = a, .b = packed, .y = y, .M = M, .K = K, .N = N, .lda = lda, .ldy = ldy,
                        .alpha = alpha, .ns = (M + mr - 1) / mr};
  int64_t units = (N + cols - 1) / cols * j.ns;
  fbx_cpu_task_fn fn = z ? fbx__gemm_pk_task512 : fbx__gemm_pk_task;
  if (c && M > 1 && K >= 256 && lda % 1024 == 0) {
    fbx__gemm_pk_acopy cj = {.src = a, .K = K, .lds = lda, .ldd = K + P};
    cj.dst = fbx_cpu_gemm_ws(c, (size_t)(M * cj.ldd) * sizeof(float));
    if (cj.dst) { /* else (OOM): A read in place, slower but right */
      fbx_cpu_par(c, M, 1 + 16384 / K, fbx__gemm_pk_acopy_task, &cj);
      j.a = cj.dst;
      j.lda = cj.ldd;
    }
  }
  if (!c || 2.0 * (double)M * (double)N * (double)K < FBX__GEMM_PK_INLINE_FLOPS)
    fn(&j, 0, units, 0);
  else
    fbx_cpu_par(c, units, 1, fn, &j);
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

/* Sums of the 8 lanes of each of a, b, c, d, as lanes 0-3. */
static inline __m128 fbx__hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d); /* a01 a23 b01 b23 | a45 a67 b45 b67 ... */
  __m256 abcd = _mm256_hadd_ps(ab, cd);                         /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... */
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* B row-major (N,K): dot products of x with B's rows, four rows at a time
 * (decode attention q . K^T reads the key cache in place: rows of head_dim
 * = 64 floats, where a dot product per row would spend as long on its
 * horizontal sum as on its loads). */
static void fbx__gemv_t_task(void *arg, int64_t n0, int64_t n1, int worker) {
  (void)worker;
  const fbx__gemv_job *j = arg;
  const int64_t K = j->K;
  const float *x = j->x;
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const float *b0 = j->b + n * K, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      __m256 xv = _mm256_loadu_ps(x + k);
      c0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + k), c0);
      c1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1 + k), c1);
      c2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2 + k), c2);
      c3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3 + k), c3);
    }
    float s[4];
    _mm_storeu_ps(s, fbx__hsum4(c0, c1, c2, c3));
    for (; k < K; k++) {
      s[0] += x[k] * b0[k];
      s[1] += x[k] * b1[k];
      s[2] += x[k] * b2[k];
      s[3] += x[k] * b3[k];
    }
    for (int q = 0; q < 4; q++) j->y[n + q] = j->alpha * s[q];
  }
  for (; n < n1; n++) {
    const float *b = j->b + n * K;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      c0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(b + k), c0);
      c1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(b + k + 8), c1);
    }
    for (; k + 8 <= K; k += 8) c0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(b + k), c0);
    float s = fbx__hsum(_mm256_add_ps(c0, c1));
    for (; k < K; k++) s += x[k] * b[k];
    j->y[n] = j->alpha * s;
  }
}

void fbx_cpu_gemv_plain_st(const float *x, const float *b, float *y, int64_t K, int64_t N, bool trans_b,
                           float alpha) {
  fbx__gemv_job j = {.x = x, .b = b, .y = y, .K = K, .N = N, .alpha = alpha, .trans_b = trans_b};
  if (trans_b)
    fbx__gemv_t_task(&j, 0, N, 0);
  else
    fbx__gemv_nt_task(&j, 0, (N + 31) / 32, 0);
}

void fbx_cpu_gemv_plain(fbx_cpu_ctx *c, const float *x, const float *b, float *y, int64_t K,
                        int64_t N, bool trans_b, float alpha) {
  fbx__gemv_job j = {.x = x, .b = b, .y = y, .K = K, .N = N, .alpha = alpha, .trans_b = trans_b};
  if (trans_b)
    fbx_cpu_par(c, N, fbx__gemv_grain_par(c, N, K, 1), fbx__gemv_t_task, &j);
  else
    fbx_cpu_par(c, (N + 31) / 32, fbx__gemv_grain_par(c, (N + 31) / 32, K, 32), fbx__gemv_nt_task, &j);
}
