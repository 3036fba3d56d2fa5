/* The prepacked-B GEMM (cpu_gemm_packed.c: A packed per call into k-major
 * slivers, B from fbx_cpu_gemv_pack's panels, balanced K blocks of <= 1024) against a
 * naive triple loop in double precision written here:
 *   - every M from 1 to 300 (every sliver count and remainder split of the
 *     12- and 6-row kernels) at odd N and K (column tails of 16 and 32, K
 *     tails of the 128 block, K below one block), on no pool, 1 and 3 threads;
 *   - transposed A, alpha, beta (C read; beta 0: C starts as NaN and must not
 *     leak), a row bias, leading dimensions larger than the matrix (the pad
 *     columns must survive);
 *   - the thread split that cuts rows as well as columns (N of one column
 *     group, many threads);
 *   - K of 2 and 3 blocks (later blocks add to C: from C itself at alpha 1,
 *     scaled otherwise);
 *   - MATMUL's route to it for a constant B at prefill-sized M (AVX-512; the
 *     AVX2 pass expects the small-M kernel, which stays AVX2's route).
 * Where the CPU has AVX-512 the program runs itself again with
 * FUSEBOX_AVX512=0, so the 12x32 and the 6x16 kernels are both checked. */
#include <math.h>
#include <unistd.h>

#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/cpu_gemm_avx512.h"
#include "backend/cpu_test_util.h"
#include "common/isa_rerun.h"

static float *frandn(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)rnd();
  return p;
}

typedef struct pcase {
  int64_t M, N, K;
  int ta;
  float alpha, beta;
  int bias, pad;
} pcase;

/* Returns 0 when C matches; the message names the case. */
static int run_case(fbx_cpu_ctx *c, const pcase *p) {
  const int64_t M = p->M, N = p->N, K = p->K;
  int64_t lda = (p->ta ? M : K) + p->pad, ldc = N + p->pad;
  float *A = frandn((p->ta ? K : M) * lda), *B = frandn(K * N), *C = malloc(sizeof(float) * (size_t)(M * ldc));
  float *C0 = malloc(sizeof(float) * (size_t)(M * ldc)), *rb = p->bias ? frandn(M) : NULL;
  for (int64_t i = 0; i < M * ldc; i++) {
    C0[i] = i % ldc >= N ? 12345.f : p->beta == 0.f ? NAN : (float)rnd();
    C[i] = C0[i];
  }
  float *pk = NULL;
  fbx_status *st = fbx_cpu_gemv_pack(B, K, N, false, &pk);
  int bad = st != NULL;
  fbx_status_free(st);
  fbx_cpu_gemm_desc d = {.ta = p->ta, .M = M, .N = N, .K = K, .alpha = p->alpha, .beta = p->beta, .A = A,
                         .lda = lda, .B = B, .ldb = N, .Bpk = pk, .C = C, .ldc = ldc, .row_bias = rb};
  if (!bad) {
    st = fbx_cpu_gemm(c, &d);
    bad = st != NULL;
    fbx_status_free(st);
  }
  double worst = 0;
  int64_t bad_pad = 0;
  for (int64_t m = 0; m < M && !bad; m++)
    for (int64_t n = 0; n < ldc; n++) {
      if (n >= N) {
        bad_pad += C[m * ldc + n] != 12345.f;
        continue;
      }
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)A[p->ta ? k * lda + m : m * lda + k] * (double)B[k * N + n];
      double r = p->alpha * s + (p->beta != 0.f ? (double)p->beta * C0[m * ldc + n] : 0.0) + (rb ? rb[m] : 0.0);
      double e = fabs((double)C[m * ldc + n] - r) / fmax(1.0, fabs(r));
      if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
  bad = bad || !(worst <= 1e-5 * (1 + (double)K / 256)) || bad_pad;
  check(!bad, "prepacked gemm %lldx%lldx%lld ta%d alpha %g beta %g bias%d pad%d pool%d: max rel err %g, %lld pad "
              "elements written",
        (long long)M, (long long)N, (long long)K, p->ta, p->alpha, p->beta, p->bias, p->pad, c ? c->threads : 0,
        worst, (long long)bad_pad);
  free(A); free(B); free(C); free(C0); free(rb);
  fbx_free_aligned(pk);
  return bad;
}

/* Every M of 1..300 at one (N, K): one check line per failing M, one pass
 * line for the sweep. */
static void sweep_m(fbx_cpu_ctx *c, int64_t N, int64_t K, int ta, int step) {
  int fails = 0;
  for (int64_t M = 1; M <= 300; M += step) {
    pcase p = {.M = M, .N = N, .K = K, .ta = ta, .alpha = 1.f};
    fails += run_case(c, &p);
  }
  check(fails == 0, "sweep M=1..300 step %d, N %lld, K %lld, ta%d, pool%d: %d failing M", step, (long long)N,
        (long long)K, ta, c ? c->threads : 0, fails);
}

static void test_all(fbx_cpu_ctx *c) {
  sweep_m(c, 47, 131, 0, 1);  /* column tail 15 of 16/32; K = one block + 3 */
  sweep_m(c, 97, 40, 0, 1);   /* K below one block; 3 groups of 32 + 1 column */
  sweep_m(c, 33, 300, 1, 7);  /* transposed A */
  sweep_m(c, 40, 1300, 0, 13); /* 2 balanced K blocks (640 + 660) */
  sweep_m(c, 17, 2100, 1, 29); /* transposed A, 3 K blocks (688 + 704 + 708) */
  pcase more[] = {
      {.M = 29, .N = 45, .K = 70, .alpha = 0.5f, .beta = 1.f, .pad = 3},
      {.M = 131, .N = 77, .K = 290, .ta = 1, .alpha = -2.f, .beta = 0.7f, .bias = 1, .pad = 5},
      {.M = 128, .N = 768, .K = 257, .alpha = 1.f},                 /* prefill-shaped, K tail of 1 */
      {.M = 128, .N = 1040, .K = 128, .alpha = 1.f, .beta = 0.f, .bias = 1}, /* > one item of 512 columns */
      {.M = 300, .N = 16, .K = 33, .alpha = 1.f},                    /* one group: rows split over threads */
      {.M = 64, .N = 32, .K = 520, .alpha = 1.5f, .beta = -1.f, .pad = 1},
      {.M = 50, .N = 70, .K = 2049, .alpha = 0.5f, .beta = 0.5f, .bias = 1, .pad = 2}, /* later K blocks, alpha != 1 */
      {.M = 25, .N = 33, .K = 3000, .alpha = 1.f, .beta = 2.f},          /* later K blocks start from C */
      {.M = 1, .N = 1, .K = 1, .alpha = 1.f},
  };
  for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) run_case(c, &more[i]);
}

/* MATMUL with a constant B at prefill-sized M: the prepacked route. */
static void mm_case(int64_t M, int64_t N, int64_t K, const char *want) {
  char what[96];
  snprintf(what, sizeof what, "MATMUL %lldx%lldx%lld const B", (long long)M, (long long)N, (long long)K);
  fbx_tensor in[2] = {T(FBX_DTYPE_F32, 1, M, K), T(FBX_DTYPE_F32, K, N)};
  fbx_tensor y = T(FBX_DTYPE_F32, 1, M, N);
  frand(&in[0]);
  frand(&in[1]);
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1};
  void *state = NULL;
  const fbx_tensor *ci[2] = {NULL, &in[1]};
  fbx_status *st = g_be->vt->node_prepare(g_be, &nd, ci, in, &state);
  check(!st, "%s: prepare", what);
  fbx_status_free(st);
  fbx_kernel_info info = {0};
  st = g_be->vt->run_node(g_be, &nd, state, in, 2, &y, 1, &info);
  check(!st, "%s: run %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  double worst = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)F(&in[0])[m * K + k] * (double)F(&in[1])[k * N + n];
      double e = fabs((double)F(&y)[m * N + n] - s) / fmax(1.0, fabs(s));
      if (!(e <= worst)) worst = e;
    }
  check(worst <= 1e-5 * (1 + (double)K / 256), "%s: max rel err %g", what, worst);
  check(info.variant && strcmp(info.variant, want) == 0, "%s: variant %s, want %s", what, info.variant, want);
  if (state) g_be->vt->node_release(g_be, &nd, state);
  tfree(&in[0]); tfree(&in[1]); tfree(&y);
}

int main(int argc, char **argv) {
  (void)argc;
  printf("kernels: %s\n", fbx_cpu_avx512_enabled() ? "AVX-512 (12x32)" : "AVX2 (6x16)");
  test_all(NULL);
  test_setup(1);
  test_all(g_be->ctx);
  fbx_backend_destroy(g_be);
  test_setup(3);
  test_all(g_be->ctx);
  const char *route = fbx_cpu_avx512_enabled() ? "gemm_f32_blocked_packed_b" : "gemm_f32_packed_small_m";
  mm_case(128, 200, 300, route);
  mm_case(77, 100, 64, route);
  mm_case(16, 300, 40, route);
  mm_case(12, 300, 40, "gemm_f32_packed_small_m");
  int rc = test_finish(fbx_cpu_avx512_enabled() ? "cpu prepacked gemm (AVX-512)" : "cpu prepacked gemm (AVX2)");
  return fbx_test_rerun_avx2(fbx_cpu_avx512_enabled(), argv, rc);
}
