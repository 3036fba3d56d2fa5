/* fp32 GEMM throughput over the shapes Fusebox runs (prefill of a hidden-768
 * / vocab-32000 decoder at M=128, im2col-shaped conv GEMMs, small M, batched
 * attention), for Fusebox's blocked GEMM (B packed per call, and B packed
 * once as for constant weights), Fusebox's earlier small-M kernel, OpenBLAS,
 * BLIS and oneDNN, each when its library is installed (dlopen'ed, so this
 * builds and runs without them). GFLOP/s and the fraction of the peak FMA rate
 * measured here with a register-only FMA loop on the same thread count.
 * Usage: bench_gemm [threads=1] [min_seconds_per_shape=1] [shape-name-substring]
 * (FUSEBOX_AVX512=0 measures the AVX2 kernels.) */
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_gemm_avx512.h"

/* BENCH_GEMM_CLOCK=cpu: the process's CPU time instead of the wall clock. On a
 * machine shared with many other processes a 1-thread product is then timed
 * without the intervals it spent descheduled (its cache still suffers from
 * the neighbours); with threads it sums every thread's time, spin-waits
 * included, so it punishes load imbalance. */
static clockid_t g_clock = CLOCK_MONOTONIC;
static double now_s(void) {
  struct timespec t;
  clock_gettime(g_clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- peak: independent FMA chains, no memory traffic ---- */
#define PEAK_ITERS 200000ll
__attribute__((target("avx512f"))) static float peak_avx512(void) {
  __m512 a[24], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
  for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i);
  for (long long n = 0; n < PEAK_ITERS; n++)
    _Pragma("GCC unroll 24") for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}
static float peak_avx2(void) {
  __m256 a[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
  for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
  for (long long n = 0; n < PEAK_ITERS; n++)
    _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
  __m256 s = a[0];
  for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
  float t[8];
  _mm256_storeu_ps(t, s);
  return t[0] + t[7];
}
static volatile float g_sink;
static void peak_task(void *arg, int64_t b, int64_t e, int w) {
  (void)w;
  for (int64_t i = b; i < e; i++) g_sink = *(int *)arg ? peak_avx512() : peak_avx2();
}

/* ---- shapes ---- */
typedef struct {
  const char *name;
  int64_t batch, M, N, K;
  int ta, tb, constb; /* constb: B is a weight (prepacking applies) */
} shape;
static const shape SHAPES[] = {
    {"prefill qkvo 128x768x768", 1, 128, 768, 768, 0, 0, 1},
    {"prefill ffn-up 128x3072x768", 1, 128, 3072, 768, 0, 0, 1},
    {"prefill ffn-down 128x768x3072", 1, 128, 768, 3072, 0, 0, 1},
    {"prefill lm-head 128x32000x768", 1, 128, 32000, 768, 0, 0, 1},
    {"prefill ffn-up 128x2048x768", 1, 128, 2048, 768, 0, 0, 1},   /* the 12-layer hidden-768 decoder */
    {"prefill ffn-down 128x768x2048", 1, 128, 768, 2048, 0, 0, 1}, /* A rows 8 KiB apart */
    {"conv3x3 64ch 56x56 (64x3136x576)", 1, 64, 3136, 576, 0, 0, 0},
    {"conv3x3 128ch 28x28 (128x784x1152)", 1, 128, 784, 1152, 0, 0, 0},
    {"conv3x3 256ch 14x14 (256x196x2304)", 1, 256, 196, 2304, 0, 0, 0},
    {"conv1x1 64->256 56x56 (256x3136x64)", 1, 256, 3136, 64, 0, 0, 0},
    {"small M=2 2x3072x768", 1, 2, 3072, 768, 0, 0, 1},
    {"small M=4 4x3072x768", 1, 4, 3072, 768, 0, 0, 1},
    {"small M=8 8x3072x768", 1, 8, 3072, 768, 0, 0, 1},
    {"small M=16 16x3072x768", 1, 16, 3072, 768, 0, 0, 1},
    {"small M=32 32x2048x768", 1, 32, 2048, 768, 0, 0, 1},
    {"small M=64 64x2048x768", 1, 64, 2048, 768, 0, 0, 1},
    {"attn QK^T 12x(128x128x64) B^T", 12, 128, 128, 64, 0, 1, 0},
    {"attn PV 12x(128x64x128)", 12, 128, 64, 128, 0, 0, 0},
    {"gemm transA 256x256x256", 1, 256, 256, 256, 1, 0, 0},
};
#define NSHAPES ((int)(sizeof(SHAPES) / sizeof(SHAPES[0])))

/* "B-prepacked" is the prepacked-B GEMM (cpu_gemm_packed.c, MatMul's route for a
 * constant B at M >= 13 with AVX-512) with its default K blocks; "KC 256" the
 * same with K blocks of at most 256 (a B micro-panel of 32 KiB that stays in L1),
 * there to choose the default on a CPU not measured yet; "small-M" the kernel
 * without K blocking on row-major A (MatMul's route at small M, and with AVX2). */
enum { I_FBX, I_FBX_PK, I_FBX_PK256, I_FBX_OLD, I_OPENBLAS, I_BLIS, I_DNNL, NIMPL };
static const char *IMPL_NAMES[NIMPL] = {"fusebox", "fusebox B-prepacked", "B-prepacked KC 256", "fusebox small-M",
                                        "OpenBLAS 0.3.21", "BLIS 0.9", "oneDNN 2.6"};

/* BLIS typed API (blis.h): bli_sgemm(transa, transb, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) */
typedef void (*bli_sgemm_fn)(int, int, int64_t, int64_t, int64_t, const float *, const float *, int64_t, int64_t,
                             const float *, int64_t, int64_t, const float *, float *, int64_t, int64_t);
typedef void (*bli_threads_fn)(int64_t);
/* oneDNN: dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), row-major */
typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                             int64_t, float, float *, int64_t);
/* OpenBLAS: cblas_sgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), row-major = 101 */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
typedef void (*openblas_threads_fn)(int);
static cblas_sgemm_fn g_oblas;
static bli_sgemm_fn g_bli;
static dnnl_sgemm_fn g_dnnl;

typedef struct {
  const shape *s;
  float *A, *B, *C, *Bpk;
  fbx_cpu_ctx *ctx;
} cell;

static void run_impl(int impl, const cell *c) {
  const shape *s = c->s;
  int64_t M = s->M, N = s->N, K = s->K;
  int64_t lda = s->ta ? M : K, ldb = s->tb ? K : N;
  if (impl == I_FBX || impl == I_FBX_PK || impl == I_FBX_PK256) {
    fbx_cpu_gemm_prepacked_set_kc(impl == I_FBX_PK256 ? 256 : 0);
    fbx_cpu_gemm_desc d = {.ta = s->ta, .tb = s->tb, .M = M, .N = N, .K = K, .alpha = 1.f, .A = c->A, .lda = lda,
                           .B = c->B, .ldb = ldb, .Bpk = impl != I_FBX ? c->Bpk : NULL, .C = c->C, .ldc = N,
                           .nbatch = s->batch, .brank = 1, .bdims = {s->batch}, .a_st = {M * K}, .b_st = {K * N},
                           .c_batch = M * N};
    fbx_status *st = fbx_cpu_gemm(c->ctx, &d);
    if (st) {
      fprintf(stderr, "%s\n", fbx_status_message(st));
      exit(1);
    }
    return;
  }
  for (int64_t b = 0; b < s->batch; b++) {
    const float *A = c->A + b * M * K, *B = c->B + b * K * N;
    float *C = c->C + b * M * N;
    if (impl == I_FBX_OLD) {
      fbx_cpu_gemm_packed(c->ctx, A, lda, c->Bpk, C, N, M, K, N, 1.f);
    } else if (impl == I_OPENBLAS) {
      g_oblas(101, s->ta ? 112 : 111, s->tb ? 112 : 111, (int)M, (int)N, (int)K, 1.f, A, (int)lda, B, (int)ldb, 0.f,
              C, (int)N);
    } else if (impl == I_BLIS) {
      float one = 1.f, zero = 0.f;
      /* row-major: row stride ld, column stride 1; transposition as BLIS_TRANSPOSE (= 8) */
      g_bli(s->ta ? 8 : 0, s->tb ? 8 : 0, M, N, K, &one, A, lda, 1, B, ldb, 1, &zero, C, N, 1);
    } else if (impl == I_DNNL) {
      g_dnnl(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', M, N, K, 1.f, A, lda, B, ldb, 0.f, C, N);
    }
  }
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  double min_s = argc > 2 ? atof(argv[2]) : 1.0;
  const char *only = argc > 3 ? argv[3] : NULL; /* run only shapes whose name contains this */
  const char *clk = getenv("BENCH_GEMM_CLOCK");
  if (clk && !strcmp(clk, "cpu")) g_clock = CLOCK_PROCESS_CPUTIME_ID;
  char nt[16];
  snprintf(nt, sizeof nt, "%d", threads);
  setenv("OMP_NUM_THREADS", nt, 1); /* oneDNN and BLIS here are OpenMP builds */
  setenv("BLIS_NUM_THREADS", nt, 1);
  void *hb = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  void *hd = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (hb) g_bli = (bli_sgemm_fn)dlsym(hb, "bli_sgemm");
  if (hb && dlsym(hb, "bli_thread_set_num_threads"))
    ((bli_threads_fn)dlsym(hb, "bli_thread_set_num_threads"))(threads);
  if (hd) g_dnnl = (dnnl_sgemm_fn)dlsym(hd, "dnnl_sgemm");
  void *ho = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!ho) ho = dlopen("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (ho) g_oblas = (cblas_sgemm_fn)dlsym(ho, "cblas_sgemm");
  if (ho && dlsym(ho, "openblas_set_num_threads"))
    ((openblas_threads_fn)dlsym(ho, "openblas_set_num_threads"))(threads);

  fbx_backend *be;
  fbx_cpu_options o = {.threads = threads};
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) {
    fprintf(stderr, "%s\n", fbx_status_message(st));
    return 1;
  }
  fbx_cpu_ctx *ctx = be->ctx;
  int z = fbx_cpu_avx512_enabled();

  /* peak: one short kernel run per thread at once, best of 60 (the machine is shared) */
  double tp = 1e30;
  for (int r = 0; r < 60; r++) {
    double t0 = now_s();
    fbx_cpu_pool_for(ctx->pool, threads, 1, peak_task, &z, "peak");
    if (now_s() - t0 < tp) tp = now_s() - t0;
  }
  double peak = threads * (double)PEAK_ITERS * (z ? 24 * 16 : 12 * 8) * 2 / tp / 1e9;
  printf("bench_gemm: %d thread(s), %s kernels, peak FMA rate measured %.1f GFLOP/s (%s, %d thread(s))\n", threads,
         z ? "AVX-512" : "AVX2", peak, z ? "zmm" : "ymm", threads);
  printf("libraries: OpenBLAS %s, BLIS %s, oneDNN %s\n\n", g_oblas ? "loaded" : "absent", g_bli ? "loaded" : "absent",
         g_dnnl ? "loaded" : "absent");
  printf("| shape | ");
  for (int i = 0; i < NIMPL; i++) printf("%s | ", IMPL_NAMES[i]);
  printf("\n|---|");
  for (int i = 0; i < NIMPL; i++) printf("---|");
  printf("\n");

  for (int si = 0; si < NSHAPES; si++) {
    const shape *s = &SHAPES[si];
    if (only && !strstr(s->name, only)) continue;
    int64_t M = s->M, N = s->N, K = s->K, nb = s->batch;
    cell c = {.s = s, .ctx = ctx};
    c.A = fbx_malloc_aligned((size_t)(nb * M * K) * 4);
    c.B = fbx_malloc_aligned((size_t)(nb * K * N) * 4);
    c.C = fbx_malloc_aligned((size_t)(nb * M * N) * 4);
    float *ref = malloc((size_t)(nb * M * N) * 4);
    for (int64_t i = 0; i < nb * M * K; i++) c.A[i] = (float)((i * 7919) % 201) * 0.01f - 1.f;
    for (int64_t i = 0; i < nb * K * N; i++) c.B[i] = (float)((i * 104729) % 199) * 0.01f - 1.f;
    if (nb == 1) {
      st = fbx_cpu_gemv_pack(c.B, K, N, s->tb, &c.Bpk);
      if (st) return 1;
    }
    double flops = 2.0 * (double)(nb * M) * (double)N * (double)K;
    bool ok[NIMPL];
    double best[NIMPL], maxrel[NIMPL] = {0};
    for (int impl = 0; impl < NIMPL; impl++) {
      ok[impl] = ((impl != I_FBX_PK && impl != I_FBX_PK256) || (s->constb && c.Bpk)) && (impl != I_FBX_OLD || (c.Bpk && !s->ta)) &&
                 (impl != I_BLIS || g_bli) && (impl != I_DNNL || g_dnnl) && (impl != I_OPENBLAS || g_oblas);
      best[impl] = 1e30;
      if (!ok[impl]) continue;
      memset(c.C, 0, (size_t)(nb * M * N) * 4);
      run_impl(impl, &c); /* warm-up (workspace, library threads) and the result check */
      if (impl == I_FBX) memcpy(ref, c.C, (size_t)(nb * M * N) * 4);
      for (int64_t i = 0; i < nb * M * N; i++) {
        double dlt = fabs((double)c.C[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (dlt > maxrel[impl]) maxrel[impl] = dlt;
      }
    }
    /* rounds: every implementation once per round, so load from other
     * processes on this shared machine hits all of them alike; best per cell */
    double t_end = now_s() + min_s;
    for (int round = 0; round < 3 || now_s() < t_end; round++)
      for (int impl = 0; impl < NIMPL; impl++) {
        if (!ok[impl]) continue;
        double t0 = now_s();
        run_impl(impl, &c);
        double t = now_s() - t0;
        if (t < best[impl]) best[impl] = t;
      }
    printf("| %s |", s->name);
    for (int impl = 0; impl < NIMPL; impl++) {
      if (!ok[impl]) {
        printf(" - |");
        continue;
      }
      double gf = flops / best[impl] / 1e9;
      printf(" %.1f (%.0f%%)%s |", gf, 100.0 * gf / peak, maxrel[impl] > 1e-3 ? " MISMATCH" : "");
    }
    fflush(stdout);
    printf("\n");
    fbx_free_aligned(c.A);
    fbx_free_aligned(c.B);
    fbx_free_aligned(c.C);
    fbx_free_aligned(c.Bpk);
    free(ref);
  }
  printf("\n(GFLOP/s, best of rounds over >= %.2f s per shape, every implementation once per round; %% of the measured peak)\n", min_s);
  fbx_backend_destroy(be);
  return 0;
}
