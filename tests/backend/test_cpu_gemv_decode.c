/* The decode GEMVs (cpu_gemv.c, cpu_gemv_avx512.c) against a naive double
 * reference written here, on no pool and on pools of 1, 2 and 3 threads:
 *   - fbx_cpu_gemv_packed on B packed from (K, N) and from (N, K) (trans_b),
 *     odd N (panel tails of 16) and K (tails of the 8-row and 4-row k
 *     loops), alpha; sentinels past N must survive (the masked / copied
 *     last panel), and every output is written (outputs start as NaN: a
 *     panel left out by the byte-balanced unit split shows);
 *   - decode-sized matrices (768 x 768 .. 768 x 32000, 2048 x 768) whose
 *     units cross threads, and matrices just above / below the size that
 *     runs inline;
 *   - fbx_cpu_gemv_plain with B (N, K) (the four-row dot products that read
 *     the key cache in place: N tails of 4, K tails of 8) and (K, N);
 *   - MATMUL through the backend at M = 1 with a constant B (node_prepare
 *     packs it, from either layout: variant gemv_f32_packed), and with a
 *     dynamic transposed B (variant gemv_f32).
 * Where the CPU has AVX-512 the program runs itself again with
 * FUSEBOX_AVX512=0, so the AVX2 kernel is checked by the same run. */
#include <math.h>
#include <unistd.h>

#include "backend/cpu/cpu_gemm_avx512.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu_test_util.h"
#include "common/isa_rerun.h"

/* Relative tolerance (floor 1) of a float32 sum of K products of uniform
 * [-1, 1) values: ~eps * sqrt(K) * |sum| rounding, with a 10x margin; a
 * missed k or a wrong column is off by >= 1e-2. */
static double tol_k(int64_t K) { return 2e-6 * sqrt((double)(K > 1 ? K : 1)); }

static float *frandn(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)rnd();
  return p;
}

/* R(N) = alpha * x(K) @ B, B (K, N) or, tb, (N, K). */
static void ref_gemv(const float *x, const float *B, double *R, int64_t K, int64_t N, int tb, double alpha) {
  for (int64_t n = 0; n < N; n++) {
    double s = 0;
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * (double)(tb ? B[n * K + k] : B[k * N + n]);
    R[n] = alpha * s;
  }
}

#define SENT 16 /* sentinels past the output */

/* layout 0: packed from (K, N); 1: packed from (N, K); 2: plain (K, N); 3: plain (N, K). */
static void gemv_case(fbx_cpu_ctx *c, int64_t N, int64_t K, int layout, float alpha) {
  static const char *names[] = {"packed (K,N)", "packed (N,K)", "plain (K,N)", "plain (N,K)"};
  char what[160];
  snprintf(what, sizeof what, "gemv %s N %lld K %lld alpha %g threads %d", names[layout], (long long)N, (long long)K,
           alpha, c ? c->threads : 0);
  int tb = layout == 1 || layout == 3;
  float *x = frandn(K), *B = frandn(K * N), *y = malloc(sizeof(float) * (size_t)(N + SENT));
  for (int64_t n = 0; n < N; n++) y[n] = NAN;
  for (int64_t n = N; n < N + SENT; n++) y[n] = 777.f;
  if (layout < 2) {
    float *pk = NULL;
    fbx_status *st = fbx_cpu_gemv_pack(B, K, N, tb, &pk);
    check(!st, "%s: pack", what);
    fbx_status_free(st);
    if (pk) fbx_cpu_gemv_packed(c, x, pk, y, K, N, alpha);
    fbx_free_aligned(pk);
  } else {
    if (!c) fbx_cpu_gemv_plain_st(x, B, y, K, N, tb, alpha);
    else fbx_cpu_gemv_plain(c, x, B, y, K, N, tb, alpha);
  }
  double *R = malloc(sizeof(double) * (size_t)N);
  ref_gemv(x, B, R, K, N, tb, alpha);
  fclose_arr(y, R, N, tol_k(K), what);
  int sent_ok = 1;
  for (int64_t n = N; n < N + SENT; n++) sent_ok &= y[n] == 777.f;
  check(sent_ok, "%s: wrote past N", what);
  free(x); free(B); free(y); free(R);
}

/* MATMUL (1, K) x B through the backend: constant B prepared (packed) or dynamic. */
static void matmul_case(int64_t N, int64_t K, int tb, int constant, const char *want) {
  char what[160];
  snprintf(what, sizeof what, "MATMUL 1x%lld x %s N %lld %s", (long long)K, tb ? "(N,K)^T" : "(K,N)", (long long)N,
           constant ? "constant (packed)" : "dynamic");
  fbx_tensor in[2] = {T(FBX_DTYPE_F32, 1, K), tb ? T(FBX_DTYPE_F32, N, K) : T(FBX_DTYPE_F32, K, N)};
  fbx_tensor y = T(FBX_DTYPE_F32, 1, N);
  frand(&in[0]);
  frand(&in[1]);
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1,
                    .params = {.matmul = {.trans_b = tb, .alpha = 1.5f}}};
  void *state = NULL;
  if (constant) {
    const fbx_tensor *ci[2] = {NULL, &in[1]};
    fbx_status *st = g_be->vt->node_prepare(g_be, &nd, ci, in, &state);
    check(!st && state, "%s: prepare %s", what, st ? fbx_status_message(st) : "(no state)");
    fbx_status_free(st);
  }
  fbx_kernel_info info = {0};
  fbx_status *st = g_be->vt->run_node(g_be, &nd, state, in, 2, &y, 1, &info);
  check(!st, "%s: run %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  double *R = malloc(sizeof(double) * (size_t)N);
  ref_gemv(F(&in[0]), F(&in[1]), R, K, N, tb, 1.5);
  fclose_arr(F(&y), R, N, tol_k(K), what);
  check(info.variant && strcmp(info.variant, want) == 0, "%s: variant %s, want %s", what, info.variant, want);
  if (state) g_be->vt->node_release(g_be, &nd, state);
  free(R);
  tfree(&in[0]); tfree(&in[1]); tfree(&y);
}

static void run_all(fbx_cpu_ctx *c) {
  static const int64_t ns[] = {1, 3, 4, 5, 15, 16, 17, 33, 63, 65, 100};
  static const int64_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 129};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
      for (int layout = 0; layout < 4; layout++) gemv_case(c, ns[i], ks[k], layout, layout % 2 ? -0.75f : 1.f);
  /* decode shapes (q/k/v/o, gate/up, down, lm_head) and sizes around the
   * inline limit (8 units of 16 KiB per thread): units cut across threads */
  static const int64_t big[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}, {100, 2049},
                                   {33, 997},  {17, 1031},  {48, 64},    {16, 4096},   {2050, 300}};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    for (int layout = 0; layout < 4; layout++) gemv_case(c, big[i][0], big[i][1], layout, 1.f);
}

int main(int argc, char **argv) {
  (void)argc;
  const char *isa = fbx_cpu_avx512_enabled() ? "AVX-512" : "AVX2";
  printf("gemv kernels: %s\n", isa);
  run_all(NULL);
  static const int threads[] = {1, 2, 3};
  for (int t = 0; t < 3; t++) {
    test_setup(threads[t]);
    run_all(g_be->ctx);
    matmul_case(769, 768, 0, 1, "gemv_f32_packed");
    matmul_case(769, 768, 1, 1, "gemv_f32_packed");
    matmul_case(31, 5, 1, 1, "gemv_f32_packed");
    matmul_case(1000, 300, 1, 0, "gemv_f32");
    matmul_case(1000, 300, 0, 0, "gemv_f32");
    if (t < 2) fbx_backend_destroy(g_be);
  }
  char name[64];
  snprintf(name, sizeof name, "cpu gemv decode (%s)", isa);
  int rc = test_finish(name);
  return fbx_test_rerun_avx2(fbx_cpu_avx512_enabled(), argv, rc);
}
