/* The integer GEMM's float epilogue (cpu_qgemm.h fbx_qg_out: MATMUL_INT's Cast -> Mul -> Add
 * [-> Erf Gelu] chain done in registers) on every path this CPU has, against
 *   - a naive reference written here: the int64 sum of (a - za)(b - zb), then the chain in double
 *     with libm's erf (tolerance: a few float roundings and the erf polynomial's ulp);
 *   - bit equality between the SIMD paths that share one erf (AVX2's fbx__erf256 and the AVX-512
 *     paths' fbx__erf512 on 16 lanes, VNNI and AMX): the epilogue runs a group of rows together,
 *     so M covers whole groups, remainders and the AMX kernel's 16-row tiles with a VNNI tail.
 * Chains: the GELU of a quantized BERT's FFN (COL scale and bias, SCALAR, SAVE/SLOT, Erf, a
 * TENSOR residual) and one with every other op (SUB, RSUB, RDIV, DIV). */
#include <stdint.h>

#include "backend/cpu/cpu_qgemm.h"
#include "base/alloc.h"
#include "cpu_test_util.h"

enum { CHAINS = 2 };

typedef struct chain_data {
  float scale[64], bias[64], *resid; /* per column (N <= 64), residual M x N */
  float c_sqrt2, c_one, c_half, c_k, c_d;
} chain_data;

static fbx_qg_out make_chain(int which, const chain_data *d, int64_t ldt) {
  fbx_qg_out o = {.ldt = ldt};
#define STEP(K, OP, SRC, SLOT, P) \
  o.step[o.n_steps++] = (typeof(o.step[0])){.kind = (K), .op = (OP), .src = (SRC), .slot = (SLOT), .p = (P)}
  STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_MUL, FBX_QG_OUT_COL, 0, d->scale);
  STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_ADD, FBX_QG_OUT_COL, 0, d->bias);
  if (which == 0) { /* x * 0.5 * (1 + erf(x / sqrt 2)) + residual */
    STEP(FBX_QG_OUT_SAVE, 0, 0, 1, NULL);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_DIV, FBX_QG_OUT_SCALAR, 0, &d->c_sqrt2);
    STEP(FBX_QG_OUT_ERF, 0, 0, 0, NULL);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_ADD, FBX_QG_OUT_SCALAR, 0, &d->c_one);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_MUL, FBX_QG_OUT_SLOT, 1, NULL);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_MUL, FBX_QG_OUT_SCALAR, 0, &d->c_half);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_ADD, FBX_QG_OUT_TENSOR, 0, d->resid);
  } else { /* k / (k - (x - resid)) / c * x: every other op once, no cancellation (k = 30 >> |x - resid|) */
    STEP(FBX_QG_OUT_SAVE, 0, 0, 2, NULL);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_SUB, FBX_QG_OUT_TENSOR, 0, d->resid);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_RSUB, FBX_QG_OUT_SCALAR, 0, &d->c_k);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_RDIV, FBX_QG_OUT_SCALAR, 0, &d->c_k);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_DIV, FBX_QG_OUT_SCALAR, 0, &d->c_d);
    STEP(FBX_QG_OUT_BIN, FBX_QG_OUT_MUL, FBX_QG_OUT_SLOT, 2, NULL);
  }
#undef STEP
  return o;
}

/* The chain in double on the exact accumulator. */
static double ref_chain(int which, const chain_data *d, int64_t acc, int64_t m, int64_t n, int64_t ldt) {
  double v = (double)(float)acc * d->scale[n] + d->bias[n];
  double r = d->resid[m * ldt + n];
  if (which == 0) return v * 0.5 * (1.0 + erf(v / d->c_sqrt2)) + r;
  return d->c_k / (d->c_k - (v - r)) / d->c_d * v;
}

/* One GEMM + epilogue on path p; y (M x N floats) out; *bad counts reference misses. */
static void run_case(fbx_qg_path p, int which, int64_t M, int64_t N, int64_t K, const uint8_t *a, const uint8_t *b,
                     const chain_data *d, float *y, int64_t *bad, double *worst) {
  const bool as = false, bs = true; /* u8 activations, s8 weights: quantize_dynamic's pair */
  const int32_t za = 128, zb = 0;
  int64_t NP = (N + 15) / 16 * 16, kp = fbx_cpu_qg_kpad(p, K);
  void *ap = fbx_malloc_aligned((size_t)(M * kp) * fbx_cpu_qg_esz(p) + 64);
  void *panels = fbx_malloc_aligned((size_t)(NP / 16) * fbx_cpu_qg_panel_bytes(p, K) + 64);
  int32_t *rs = malloc(sizeof(int32_t) * (size_t)M), *alpha = malloc(sizeof(int32_t) * (size_t)M);
  int32_t *cs = malloc(sizeof(int32_t) * (size_t)NP), *beta = malloc(sizeof(int32_t) * (size_t)NP);
  int32_t *cb = malloc(sizeof(int32_t) * (size_t)NP);
  const uint8_t **rows = malloc(sizeof(void *) * (size_t)K);
  for (int64_t k = 0; k < K; k++) rows[k] = b + k * N;
  fbx_cpu_qg_pack_a(p, a, K, as, M, K, ap, rs);
  fbx_cpu_qg_pack_b(p, rows, bs, K, N, panels, cs);
  int oa = fbx_cpu_qg_oa(p, as), ob = fbx_cpu_qg_ob(p, bs);
  for (int64_t m = 0; m < M; m++) alpha[m] = oa - za;
  for (int64_t n = 0; n < NP; n++) {
    beta[n] = ob - zb;
    cb[n] = (int32_t)((uint32_t)cs[n] + (uint32_t)K * (uint32_t)beta[n]);
  }
  fbx_qg_out o = make_chain(which, d, N);
  fbx_cpu_qg_kernel_out(p, ap, M, K, rs, alpha, panels, N, beta, cb, (int32_t *)(void *)y, N, &o);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; k++) acc += ((int64_t)a[m * K + k] - za) * (int64_t)(int8_t)b[k * N + n];
      double want = ref_chain(which, d, acc, m, n, N), got = y[m * N + n];
      /* relative for large values, absolute near 0 (x itself carries float's rounding of acc * scale + bias) */
      double err = fabs(got - want) / (fabs(want) + 1.0);
      if (err > *worst) *worst = err;
      if (!(err <= 4e-6)) (*bad)++;
    }
  fbx_free_aligned(ap);
  fbx_free_aligned(panels);
  free(rs), free(alpha), free(cs), free(beta), free(cb), free(rows);
}

int main(void) {
  static const int64_t Ms[] = {1, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 50};
  static const int64_t Ns[] = {16, 40}, Ks[] = {64, 100};
  int npaths = 0;
  for (int p = FBX_QG_SCALAR; p <= FBX_QG_LAST; p++) npaths += fbx_cpu_qg_available((fbx_qg_path)p);
  for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
        for (int which = 0; which < CHAINS; which++) {
          int64_t M = Ms[mi], N = Ns[ni], K = Ks[ki];
          uint8_t *a = malloc((size_t)(M * K)), *b = malloc((size_t)(K * N));
          for (int64_t i = 0; i < M * K; i++) a[i] = (uint8_t)(int)((rnd() + 1.0) * 127.5);
          for (int64_t i = 0; i < K * N; i++) b[i] = (uint8_t)(int8_t)(int)(rnd() * 127.0);
          chain_data d = {.c_sqrt2 = 1.4142135f, .c_one = 1.0f, .c_half = 0.5f, .c_k = 30.0f, .c_d = 0.7f};
          d.resid = malloc(sizeof(float) * (size_t)(M * N));
          for (int64_t n = 0; n < N; n++) { /* accumulators reach ~1e5: scales bring them to ~[-3, 3] */
            d.scale[n] = (float)(2e-5 * (1.5 + rnd()));
            d.bias[n] = (float)(0.5 * rnd());
          }
          for (int64_t i = 0; i < M * N; i++) d.resid[i] = (float)rnd();
          float *ys[FBX_QG_LAST + 1] = {0};
          for (int p = FBX_QG_SCALAR; p <= FBX_QG_LAST; p++) {
            if (!fbx_cpu_qg_available((fbx_qg_path)p)) continue;
            ys[p] = malloc(sizeof(float) * (size_t)(M * N));
            int64_t bad = 0;
            double worst = 0;
            run_case((fbx_qg_path)p, which, M, N, K, a, b, &d, ys[p], &bad, &worst);
            check(bad == 0, "%s chain %d M=%lld N=%lld K=%lld: %lld of %lld off the double reference (worst rel %g)",
                  fbx_cpu_qg_name((fbx_qg_path)p), which, (long long)M, (long long)N, (long long)K, (long long)bad,
                  (long long)(M * N), worst);
          }
          for (int p = FBX_QG_VNNI; p <= FBX_QG_LAST; p++) /* one erf, one rounding order: the same bits */
            if (ys[p] && ys[FBX_QG_AVX2])
              check(!memcmp(ys[p], ys[FBX_QG_AVX2], sizeof(float) * (size_t)(M * N)),
                    "%s chain %d M=%lld N=%lld K=%lld: bits differ from avx2", fbx_cpu_qg_name((fbx_qg_path)p), which,
                    (long long)M, (long long)N, (long long)K);
          for (int p = 0; p <= FBX_QG_LAST; p++) free(ys[p]);
          free(a), free(b), free(d.resid);
        }
  printf("paths tested: %d\n", npaths);
  return test_finish("test_cpu_qgemm_out");
}
