/* The blocked GEMM (cpu_gemm.c) and the MATMUL routes through it, against a
 * naive triple loop in double precision written here: shapes with tails of
 * every register block (M, N, K not multiples of 12/6, 32/16, KC = 256),
 * K = 1, N = 1, M = 1, transposed A and/or B, alpha, beta (C read, and not
 * read when beta = 0: C starts as NaN), a row bias, leading dimensions
 * larger than the matrix (nothing written outside it), B prepacked as for
 * constant weights, batches with broadcast dims, 1 and 3 threads and no pool.
 * Where the CPU has AVX-512 the program runs itself a second time with
 * FUSEBOX_AVX512=0, so both the 12x32 AVX-512 and the 6x16 AVX2 kernels are
 * checked by one run (each pass prints which kernels it used). */
#include <math.h>
#include <unistd.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_gemm_avx512.h"
#include "backend/cpu_test_util.h"
#include "common/isa_rerun.h"

/* C_ref(M,N) = alpha * op(A) op(B) + beta * C0 + bias (double accumulation);
 * element (m, k) of op(A) is A[ta ? k*lda + m : m*lda + k]. */
static void ref_gemm(const fbx_cpu_gemm_desc *d, const float *A, const float *B, const float *C0, double *R) {
  for (int64_t m = 0; m < d->M; m++)
    for (int64_t n = 0; n < d->N; n++) {
      double s = 0;
      for (int64_t k = 0; k < d->K; k++)
        s += (double)A[d->ta ? k * d->lda + m : m * d->lda + k] * (double)B[d->tb ? n * d->ldb + k : k * d->ldb + n];
      double v = d->alpha * s + (d->beta != 0.f ? (double)d->beta * C0[m * d->ldc + n] : 0.0);
      R[m * d->N + n] = v + (d->row_bias ? d->row_bias[m] : 0.0);
    }
}

static float *frandn(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)rnd();
  return p;
}

/* One product on ctx c (NULL: no pool). pad: extra columns of every leading
 * dimension, filled with sentinels that must survive. prepack: B through
 * fbx_cpu_gemv_pack (ldb must then be the tight one, as for a weight). */
static void gemm_case(fbx_cpu_ctx *c, int64_t M, int64_t N, int64_t K, int ta, int tb, float alpha, float beta,
                      int bias, int pad, int prepack) {
  char what[160];
  snprintf(what, sizeof what, "gemm %lldx%lldx%lld ta%d tb%d alpha %g beta %g bias%d pad%d prepack%d pool%d",
           (long long)M, (long long)N, (long long)K, ta, tb, alpha, beta, bias, pad, prepack, c ? c->threads : 0);
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + (prepack ? 0 : pad), ldc = N + pad;
  int64_t arows = ta ? K : M, brows = tb ? N : K;
  float *A = frandn(arows * lda), *B = frandn(brows * ldb), *C = malloc(sizeof(float) * (size_t)(M * ldc));
  float *C0 = malloc(sizeof(float) * (size_t)(M * ldc)), *rb = bias ? frandn(M) : NULL;
  for (int64_t i = 0; i < M * ldc; i++) {
    bool inside = i % ldc < N;
    /* beta 0: C is not read, so NaN must not reach the result */
    C0[i] = inside ? (beta == 0.f ? NAN : (float)rnd()) : 12345.f;
    C[i] = C0[i];
  }
  fbx_cpu_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .A = A, .lda = lda,
                         .B = B, .ldb = ldb, .C = C, .ldc = ldc, .row_bias = rb};
  float *pk = NULL;
  if (prepack) {
    fbx_status *st = fbx_cpu_gemv_pack(B, K, N, tb, &pk);
    check(!st, "%s: pack", what);
    fbx_status_free(st);
    d.Bpk = pk;
  }
  double *R = malloc(sizeof(double) * (size_t)(M * N > 0 ? M * N : 1));
  ref_gemm(&d, A, B, C0, R);
  fbx_status *st = fbx_cpu_gemm(c, &d);
  check(!st, "%s: run: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  double worst = 0;
  int64_t bad_pad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < ldc; n++) {
      if (n >= N) {
        bad_pad += C[m * ldc + n] != 12345.f;
        continue;
      }
      double e = fabs((double)C[m * ldc + n] - R[m * N + n]) / fmax(1.0, fabs(R[m * N + n]));
      if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
  check(worst <= 1e-5 * (1 + K / 256), "%s: max rel err %g", what, worst);
  check(bad_pad == 0, "%s: %lld elements outside the N columns written", what, (long long)bad_pad);
  free(A); free(B); free(C); free(C0); free(rb); free(R);
  fbx_free_aligned(pk);
}

/* Batched with broadcast: A (2, 1, M, K) x B (1, 3, K, N) -> C (2, 3, M, N). */
static void batch_case(fbx_cpu_ctx *c, int64_t M, int64_t N, int64_t K, int tb) {
  char what[96];
  snprintf(what, sizeof what, "batched broadcast (2,1,%lld,%lld)x(1,3,..) tb%d", (long long)M, (long long)K, tb);
  float *A = frandn(2 * M * K), *B = frandn(3 * K * N), *C = malloc(sizeof(float) * (size_t)(6 * M * N));
  fbx_cpu_gemm_desc d = {.tb = tb, .M = M, .N = N, .K = K, .alpha = 1.f, .A = A, .lda = K, .B = B,
                         .ldb = tb ? K : N, .C = C, .ldc = N, .nbatch = 6, .brank = 2, .bdims = {2, 3},
                         .a_st = {M * K, 0}, .b_st = {0, K * N}, .c_batch = M * N};
  fbx_status *st = fbx_cpu_gemm(c, &d);
  check(!st, "%s: run", what);
  fbx_status_free(st);
  double *R = malloc(sizeof(double) * (size_t)(M * N));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      fbx_cpu_gemm_desc one = d;
      one.nbatch = 1;
      ref_gemm(&one, A + i * M * K, B + j * K * N, NULL, R);
      fclose_arr(C + (i * 3 + j) * M * N, R, M * N, 1e-5, what);
    }
  free(A); free(B); free(C); free(R);
}

static void test_gemm_shapes(fbx_cpu_ctx *c) {
  static const int64_t dims[][3] = {
      {1, 1, 1},    {1, 37, 5},    {2, 1, 9},     {5, 7, 1},     {11, 33, 17},  {12, 32, 16},  {13, 31, 15},
      {23, 17, 40}, {25, 65, 257}, {40, 100, 3},  {97, 48, 300}, {130, 129, 64}, {7, 600, 513}, {300, 40, 520},
  };
  for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
    for (int t = 0; t < 4; t++) gemm_case(c, dims[i][0], dims[i][1], dims[i][2], t & 1, t >> 1, 1.f, 0.f, 0, 0, 0);
  /* alpha / beta / bias / leading dims / prepacked B */
  gemm_case(c, 29, 45, 70, 0, 0, 0.5f, 1.f, 0, 3, 0);
  gemm_case(c, 29, 45, 300, 1, 0, -2.f, 0.7f, 1, 5, 0);
  gemm_case(c, 14, 70, 33, 0, 1, 1.f, -1.f, 1, 2, 0);
  gemm_case(c, 150, 77, 290, 1, 1, 1.5f, 0.25f, 0, 7, 0);
  gemm_case(c, 3, 50, 20, 0, 0, 1.f, 0.f, 1, 4, 0); /* small M: B read in place, N tail */
  gemm_case(c, 128, 100, 300, 0, 0, 1.f, 0.f, 0, 0, 1);
  gemm_case(c, 100, 33, 600, 0, 1, 0.5f, 1.f, 1, 0, 1);
  gemm_case(c, 6, 1000, 64, 0, 0, 1.f, 0.f, 0, 0, 1);
  gemm_case(c, 20, 40, 0, 0, 0, 1.f, 0.5f, 1, 1, 0); /* K = 0: C = beta*C + bias */
  batch_case(c, 19, 21, 35, 0);
  batch_case(c, 128, 128, 64, 1); /* attention-shaped */
}

/* MATMUL through the backend: M > 160 on a constant B (blocked, prepacked),
 * dynamic B with batches (attention: Q K^T through trans_b), transposed A. */
static void mm_case(int64_t nb, int64_t M, int64_t N, int64_t K, int ta, int tb, int constb, const char *want) {
  char what[128];
  snprintf(what, sizeof what, "MATMUL b%lld %lldx%lldx%lld ta%d tb%d const%d", (long long)nb, (long long)M,
           (long long)N, (long long)K, ta, tb, constb);
  fbx_tensor in[2] = {ta ? T(FBX_DTYPE_F32, nb, K, M) : T(FBX_DTYPE_F32, nb, M, K),
                      constb ? (tb ? T(FBX_DTYPE_F32, N, K) : T(FBX_DTYPE_F32, K, N))
                             : (tb ? T(FBX_DTYPE_F32, nb, N, K) : T(FBX_DTYPE_F32, nb, K, N))};
  fbx_tensor y = T(FBX_DTYPE_F32, nb, M, N);
  frand(&in[0]);
  frand(&in[1]);
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1,
                    .params = {.matmul = {.trans_a = ta, .trans_b = tb, .alpha = 0.5f}}};
  void *state = NULL;
  if (constb) {
    const fbx_tensor *ci[2] = {NULL, &in[1]};
    fbx_status *st = g_be->vt->node_prepare(g_be, &nd, ci, in, &state);
    check(!st, "%s: prepare", what);
    fbx_status_free(st);
  }
  fbx_kernel_info info = {0};
  fbx_status *st = g_be->vt->run_node(g_be, &nd, state, in, 2, &y, 1, &info);
  check(!st, "%s: run %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  double *R = malloc(sizeof(double) * (size_t)(M * N));
  for (int64_t b = 0; b < nb; b++) {
    fbx_cpu_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = 0.5f, .lda = ta ? M : K,
                           .ldb = tb ? K : N, .ldc = N};
    ref_gemm(&d, F(&in[0]) + b * M * K, F(&in[1]) + (constb ? 0 : b * K * N), NULL, R);
    fclose_arr(F(&y) + b * M * N, R, M * N, 1e-5, what);
  }
  check(info.variant && strcmp(info.variant, want) == 0, "%s: variant %s, want %s", what, info.variant, want);
  if (state) g_be->vt->node_release(g_be, &nd, state);
  free(R);
  tfree(&in[0]); tfree(&in[1]); tfree(&y);
}

int main(int argc, char **argv) {
  (void)argc;
  printf("kernels: %s\n", fbx_cpu_avx512_enabled() ? "AVX-512 (12x32)" : "AVX2 (6x16)");
  test_gemm_shapes(NULL);
  test_setup(1);
  test_gemm_shapes(g_be->ctx);
  fbx_backend_destroy(g_be);
  test_setup(3);
  test_gemm_shapes(g_be->ctx);
  mm_case(1, 200, 200, 300, 0, 0, 1, "gemm_f32_blocked_packed_b");
  mm_case(1, 128, 200, 300, 0, 0, 1, fbx_cpu_avx512_enabled() ? "gemm_f32_blocked_packed_b" : "gemm_f32_packed_small_m");
  mm_case(1, 170, 70, 40, 0, 1, 1, "gemm_f32_blocked_packed_b");
  mm_case(3, 20, 50, 30, 1, 0, 1, "gemm_f32_blocked_packed_b");
  mm_case(12, 128, 128, 64, 0, 1, 0, "gemm_f32_blocked");
  mm_case(12, 128, 64, 128, 0, 0, 0, "gemm_f32_blocked");
  mm_case(2, 7, 9, 11, 1, 1, 0, "gemm_f32_blocked");
  mm_case(1, 40, 300, 100, 0, 0, 1, fbx_cpu_avx512_enabled() ? "gemm_f32_blocked_packed_b" : "gemm_f32_packed_small_m");
  mm_case(1, 8, 300, 100, 0, 0, 1, "gemm_f32_packed_small_m");
  mm_case(1, 150, 1, 77, 0, 0, 0, "gemv_f32_mat_vec");
  mm_case(4, 33, 1, 20, 0, 1, 0, "gemv_f32_mat_vec");
  mm_case(2, 33, 1, 20, 1, 0, 0, "gemm_f32_blocked");
  int rc = test_finish(fbx_cpu_avx512_enabled() ? "cpu blocked gemm (AVX-512)" : "cpu blocked gemm (AVX2)");
  return fbx_test_rerun_avx2(fbx_cpu_avx512_enabled(), argv, rc);
}
