/* The thread-split kernels of prefill and decode, against naive loops in
 * double precision written here, at 1, 2, 3 and 16 pool threads and without a
 * pool:
 *   - fbx_cpu_gemm_packed (small-M GEMM on a packed constant B, split in 2-D
 *     over column panels x row slivers): M = 1..25 and around 12/6-row
 *     sliver edges (127, 128, 129, 160), N tails of the 16/32-column panels,
 *     K = 1, 7, 64, 300, alpha, leading dimensions larger than the matrix
 *     (sentinels beside the output must survive), A row strides a multiple
 *     of 4 KiB (A first copied with a padded stride);
 *   - fbx_cpu_gemv_packed and fbx_cpu_gemv_plain (both B layouts; on a pool
 *     only): the chunking by threads (N = 1..1100, K = 1..2048);
 *   - CONCAT through the backend, big enough to run on the pool (row x 32 KiB
 *     block items, pieces of inputs across block edges, an empty input), on
 *     float32 and int64, against a copy loop written here;
 *   - the pool's piecewise 1-D copy (RESHAPE, a 1-D SLICE with step 3);
 *   - MATMUL with M = 1 on batched dynamic B (decode attention), broadcast batch.
 * Where the CPU has AVX-512 the program runs itself a second time with
 * FUSEBOX_AVX512=0, so the AVX2 kernels are checked by the same run. */
#include <math.h>
#include <unistd.h>

#include "backend/cpu/cpu_gemm_avx512.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu_test_util.h"
#include "common/isa_rerun.h"

/* Tolerance (relative, floor 1): a float32 sum of K products of uniform
 * [-1, 1) values carries a rounding error of about eps * sqrt(K) * |sum|
 * (random-walk accumulation; |sum| ~ sqrt(K/9)); 2e-6 * sqrt(K) keeps a
 * margin of ~10x over what the kernels show, and any wrong element (a
 * missed k, a wrong column) is off by >= 1e-2. */
static double tol_k(int64_t K) { return 2e-6 * sqrt((double)(K > 1 ? K : 1)); }

static float *frandn(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)rnd();
  return p;
}

/* Y(M,N) = alpha * A(M,K) @ B(K,N), B row-major (K,N). */
static void ref_mm(const float *A, int64_t lda, const float *B, double *R, int64_t M, int64_t N, int64_t K,
                   double alpha) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)A[m * lda + k] * (double)B[k * N + n];
      R[m * N + n] = alpha * s;
    }
}

static void packed_case(fbx_cpu_ctx *c, int64_t M, int64_t N, int64_t K, float alpha, int pad) {
  char what[128];
  snprintf(what, sizeof what, "gemm_packed %lldx%lldx%lld alpha %g pad %d threads %d", (long long)M,
           (long long)N, (long long)K, alpha, pad, c ? c->threads : 0);
  int64_t lda = K + pad, ldy = N + pad;
  float *A = frandn(M * lda), *B = frandn(K * N), *Y = malloc(sizeof(float) * (size_t)(M * ldy));
  for (int64_t i = 0; i < M * ldy; i++) Y[i] = i % ldy < N ? NAN : 777.f;
  float *pk = NULL;
  fbx_status *st = fbx_cpu_gemv_pack(B, K, N, false, &pk);
  check(!st, "%s: pack", what);
  fbx_status_free(st);
  if (!pk) return;
  fbx_cpu_gemm_packed(c, A, lda, pk, Y, ldy, M, K, N, alpha);
  double *R = malloc(sizeof(double) * (size_t)(M * N));
  ref_mm(A, lda, B, R, M, N, K, alpha);
  double worst = 0;
  int pad_ok = 1;
  for (int64_t m = 0; m < M; m++) {
    for (int64_t n = 0; n < N; n++) {
      double e = fabs((double)Y[m * ldy + n] - R[m * N + n]) / fmax(1.0, fabs(R[m * N + n]));
      if (!(e <= worst)) worst = e;
    }
    for (int64_t n = N; n < ldy; n++) pad_ok &= Y[m * ldy + n] == 777.f;
  }
  check(worst <= tol_k(K), "%s: max rel err %g", what, worst);
  check(pad_ok, "%s: wrote outside the output", what);
  fbx_free_aligned(pk);
  free(A); free(B); free(Y); free(R);
}

static void gemv_case(fbx_cpu_ctx *c, int64_t N, int64_t K, int layout) {
  char what[128];
  static const char *names[] = {"gemv_packed", "gemv_plain (K,N)", "gemv_plain (N,K)"};
  snprintf(what, sizeof what, "%s N %lld K %lld threads %d", names[layout], (long long)N, (long long)K,
           c ? c->threads : 0);
  float *x = frandn(K), *B = frandn(K * N), *y = malloc(sizeof(float) * (size_t)N);
  double *R = malloc(sizeof(double) * (size_t)N);
  for (int64_t n = 0; n < N; n++) {
    double s = 0;
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * (double)(layout == 2 ? B[n * K + k] : B[k * N + n]);
    R[n] = 0.5 * s;
  }
  if (layout == 0) {
    float *pk = NULL;
    fbx_status *st = fbx_cpu_gemv_pack(B, K, N, false, &pk);
    check(!st, "%s: pack", what);
    fbx_status_free(st);
    if (pk) fbx_cpu_gemv_packed(c, x, pk, y, K, N, 0.5f);
    fbx_free_aligned(pk);
  } else {
    fbx_cpu_gemv_plain(c, x, B, y, K, N, layout == 2, 0.5f);
  }
  fclose_arr(y, R, N, tol_k(K), what);
  free(x); free(B); free(y); free(R);
}

/* CONCAT of n parts along axis 1 of (outer, parts[i], inner) tensors. */
static void concat_case(fbx_dtype dt, int64_t outer, const int64_t *parts, int n, int64_t inner) {
  char what[128];
  snprintf(what, sizeof what, "CONCAT %s outer %lld inner %lld parts %d", fbx_dtype_name(dt), (long long)outer,
           (long long)inner, n);
  fbx_tensor in[4];
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    in[i] = T(dt, outer, parts[i], inner);
    int64_t ne = fbx_tensor_numel(&in[i]);
    for (int64_t e = 0; e < ne; e++) {
      if (dt == FBX_DTYPE_F32) F(&in[i])[e] = (float)(i * 1000003 + e);
      else L(&in[i])[e] = (int64_t)i << 40 | e;
    }
    total += parts[i];
  }
  fbx_tensor y = T(dt, outer, total, inner);
  fbx_ir_params p = {.axis = {.axis = 1}};
  fbx_status *st = run_node(FBX_IR_OP_CONCAT, &p, in, n, &y, 1, NULL);
  check(!st, "%s: run", what);
  fbx_status_free(st);
  size_t e = fbx_dtype_size(dt);
  int ok = 1;
  unsigned char *yp = y.data;
  for (int64_t r = 0; r < outer; r++)
    for (int i = 0; i < n; i++) {
      size_t len = (size_t)(parts[i] * inner) * e;
      ok &= memcmp(yp, (unsigned char *)in[i].data + (size_t)r * len, len) == 0;
      yp += len;
    }
  check(ok, "%s: matches the copy loop", what);
  for (int i = 0; i < n; i++) tfree(&in[i]);
  tfree(&y);
}

/* RESHAPE (a contiguous copy) and a 1-D SLICE with step 3 (one strided run):
 * big enough for the pool's piecewise copy, against the index formula. */
static void copy1_cases(void) {
  fbx_tensor x = T(FBX_DTYPE_F32, 300001), y = T(FBX_DTYPE_F32, 300001);
  for (int64_t i = 0; i < 300001; i++) F(&x)[i] = (float)i;
  fbx_status *st = run_node(FBX_IR_OP_RESHAPE, NULL, &x, 1, &y, 1, NULL);
  check(!st && memcmp(x.data, y.data, 300001 * sizeof(float)) == 0, "RESHAPE 300001 floats: a copy");
  fbx_status_free(st);
  fbx_tensor s[5] = {x, T(FBX_DTYPE_I64, 1), T(FBX_DTYPE_I64, 1), T(FBX_DTYPE_I64, 1), T(FBX_DTYPE_I64, 1)};
  L(&s[1])[0] = 1;      /* starts */
  L(&s[2])[0] = 300001; /* ends */
  L(&s[3])[0] = 0;      /* axes */
  L(&s[4])[0] = 3;      /* steps: elements 1, 4, 7, ... (100000 of them) */
  fbx_tensor sy = T(FBX_DTYPE_F32, 100000);
  st = run_node(FBX_IR_OP_SLICE, NULL, s, 5, &sy, 1, NULL);
  int ok = !st;
  for (int64_t i = 0; ok && i < 100000; i++) ok = F(&sy)[i] == (float)(1 + 3 * i);
  check(ok, "SLICE 1-D step 3 of 300001 floats");
  fbx_status_free(st);
  for (int i = 1; i < 5; i++) tfree(&s[i]);
  tfree(&x); tfree(&y); tfree(&sy);
}

/* MATMUL with M = 1 on dynamic batched B (decode attention: q . K^T and
 * p . V per head), batch dims (2, 3) with A broadcast over the second:
 * one matrix per thread (variant gemv_f32_batched) or, for a big B, the
 * per-matrix GEMV. */
static void bgemv_case(int64_t N, int64_t K, int tb, const char *want) {
  char what[128];
  snprintf(what, sizeof what, "MATMUL (2,1,1,%lld) x (2,3,..) N %lld tb %d", (long long)K, (long long)N, tb);
  fbx_tensor in[2] = {T(FBX_DTYPE_F32, 2, 1, 1, K), tb ? T(FBX_DTYPE_F32, 2, 3, N, K) : T(FBX_DTYPE_F32, 2, 3, K, N)};
  fbx_tensor y = T(FBX_DTYPE_F32, 2, 3, 1, N);
  frand(&in[0]);
  frand(&in[1]);
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1,
                    .params = {.matmul = {.trans_b = tb, .alpha = 0.25f}}};
  fbx_kernel_info info = {0};
  fbx_status *st = g_be->vt->run_node(g_be, &nd, NULL, in, 2, &y, 1, &info);
  check(!st, "%s: run %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  double *R = malloc(sizeof(double) * (size_t)N);
  for (int64_t bi = 0; bi < 6; bi++) {
    const float *x = F(&in[0]) + (bi / 3) * K, *B = F(&in[1]) + bi * K * N;
    for (int64_t n = 0; n < N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (double)x[k] * (double)(tb ? B[n * K + k] : B[k * N + n]);
      R[n] = 0.25 * acc;
    }
    fclose_arr(F(&y) + bi * N, R, N, tol_k(K), what);
  }
  check(info.variant && strcmp(info.variant, want) == 0, "%s: variant %s, want %s", what, info.variant, want);
  free(R);
  tfree(&in[0]); tfree(&in[1]); tfree(&y);
}

static void run_all(fbx_cpu_ctx *c) {
  static const int64_t ms[] = {1, 2, 5, 6, 7, 11, 12, 13, 17, 23, 24, 25, 127, 128, 129, 160};
  static const int64_t ns[] = {1, 15, 16, 17, 31, 32, 33, 100, 768};
  static const int64_t ks[] = {1, 7, 64, 300};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
      int64_t K = ks[(i + j) % 4];
      if (ms[i] * ns[j] * K > 128 * 768 * 64) K = 64; /* keep the naive reference quick */
      packed_case(c, ms[i], ns[j], K, 1.f, 0);
    }
  packed_case(c, 128, 768, 768, 1.f, 0); /* a prefill projection: many units per thread */
  packed_case(c, 37, 200, 129, -0.5f, 5);
  packed_case(c, 128, 2050, 64, 2.f, 3);
  /* A rows a multiple of 4 KiB apart: A copied with a padded stride first */
  packed_case(c, 128, 100, 2048, 1.f, 0);
  packed_case(c, 29, 33, 1000, 1.f, 24); /* lda 1024 > K */
  if (!c) return; /* the GEMVs always run on a context */
  static const int64_t gn[] = {1, 16, 31, 768, 1100}, gk[] = {1, 17, 768, 2048};
  for (size_t i = 0; i < 5; i++)
    for (size_t k = 0; k < 4; k++)
      for (int layout = 0; layout < 3; layout++) gemv_case(c, gn[i], gk[k], layout);
}

int main(int argc, char **argv) {
  (void)argc;
  printf("kernels: %s\n", fbx_cpu_avx512_enabled() ? "AVX-512 (12x32)" : "AVX2 (6x16)");
  run_all(NULL);
  static const int threads[] = {1, 2, 3, 16};
  for (int t = 0; t < 4; t++) {
    test_setup(threads[t]);
    fbx_cpu_ctx *c = g_be->ctx;
    run_all(c);
    /* KV-cache shaped (12 heads, 129 x 64 floats), a small one (inline), parts across block edges */
    concat_case(FBX_DTYPE_F32, 12, (const int64_t[]){128, 1}, 2, 64);
    concat_case(FBX_DTYPE_F32, 3, (const int64_t[]){2, 3}, 2, 5);
    concat_case(FBX_DTYPE_I64, 5, (const int64_t[]){1000, 0, 4097, 3}, 4, 3);
    concat_case(FBX_DTYPE_F32, 4096, (const int64_t[]){7, 9}, 2, 1);
    copy1_cases();
    bgemv_case(129, 64, 1, "gemv_f32_batched"); /* q . K^T at past 128 */
    bgemv_case(64, 129, 0, "gemv_f32_batched"); /* p . V */
    bgemv_case(33, 7, 0, "gemv_f32_batched");
    bgemv_case(1000, 300, 1, "gemv_f32");      /* 1.2 MB per matrix: the per-matrix parallel GEMV */
    if (t < 3) fbx_backend_destroy(g_be);
  }
  int rc = test_finish(fbx_cpu_avx512_enabled() ? "cpu gemm threads (AVX-512)" : "cpu gemm threads (AVX2)");
  return fbx_test_rerun_avx2(fbx_cpu_avx512_enabled(), argv, rc);
}
