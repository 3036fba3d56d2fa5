/* test_cpu_gqa_rows: the GQA row kernel (cpu_gqa_rows.c: 8-key score blocks, vector
 * softmax, register-held output rows) against a naive double-precision reference written
 * here from the definition: o_h = softmax_t(score(q_h . k_t)) @ V, score(x) = scale x or
 * softcap tanh(scale x / softcap). Cases: key counts 1..1030 (below, at and past a multiple
 * of 8: the vector blocks and the scalar tail), head sizes 64 and 128 (the 64-float register
 * chunks), 32, and 20 / 36 (not a multiple of 8: the plain loops), 1..7 heads per group,
 * softcap on and off, score magnitudes that make most probabilities flush to zero.
 * Tolerance per output: 2e-6 * (sum_t p_t |v_t|) + 1e-6 (float accumulation over <= 1030
 * keys, the exp within 1.25 ulp).
 * The split decode (fbx__gqa_group_part over nc chunks of the keys, then fbx__gqa_combine) is
 * held to the same reference and bound, with 2..9 chunks of unequal sizes (multiples of 8 and
 * not), one of them empty where n allows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/cpu_gqa.h"
#include "cpu_test_util.h"

/* o = the split decode over nc chunks: chunk c has keys [b_c, b_c+1), sizes n / nc rounded
 * up to 8 except the last; with chunk 1 left empty when the first one takes all (nc >= 3). */
static void split_row(const float *q, const float *K, const float *V, int64_t n, int64_t hpg, int64_t H, float scale,
                      float softcap, int64_t nc, float *o) {
  float *po = malloc(sizeof(float) * (size_t)(nc * hpg * H)), *pm = malloc(sizeof(float) * (size_t)(nc * hpg));
  float *pl = malloc(sizeof(float) * (size_t)(nc * hpg)), *sc = malloc(sizeof(float) * (size_t)(hpg * n + 8));
  int64_t ck = ((n + nc - 1) / nc + 7) & ~(int64_t)7, t0 = 0;
  for (int64_t c = 0; c < nc; c++) {
    int64_t len = c == nc - 1 ? n - t0 : (c == 1 && nc >= 3 ? 0 : ck);
    if (t0 + len > n) len = n - t0;
    fbx__gqa_group_part(q, K + t0 * H, V + t0 * H, len, hpg, H, scale, softcap, sc, len + 1, po + c * hpg * H,
                        pm + c * hpg, pl + c * hpg);
    t0 += len;
  }
  fbx__gqa_combine(po, pm, pl, nc, hpg, H, o);
  free(po), free(pm), free(pl), free(sc);
}

static void run_case(int64_t n, int64_t hpg, int64_t H, float scale, float softcap, double amp, int64_t nc) {
  float *q = malloc(sizeof(float) * (size_t)(hpg * H)), *K = malloc(sizeof(float) * (size_t)(n * H));
  float *V = malloc(sizeof(float) * (size_t)(n * H)), *o = malloc(sizeof(float) * (size_t)(hpg * H));
  const int64_t ldsc = n + 3; /* a row stride that is not a multiple of 8 */
  float *sc = malloc(sizeof(float) * (size_t)(hpg * ldsc));
  double *p = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < hpg * H; i++) q[i] = (float)(amp * rnd());
  for (int64_t i = 0; i < n * H; i++) K[i] = (float)rnd(), V[i] = (float)rnd();
  if (nc > 1) split_row(q, K, V, n, hpg, H, scale, softcap, nc, o);
  else fbx__gqa_group_row(q, K, V, n, hpg, H, scale, softcap, sc, ldsc, o);
  int64_t bad = 0;
  double worst = 0;
  for (int64_t h = 0; h < hpg; h++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t t = 0; t < n; t++) {
      double x = 0;
      for (int64_t d = 0; d < H; d++) x += (double)q[h * H + d] * K[t * H + d];
      x *= scale;
      if (softcap > 0) x = softcap * tanh(x / softcap);
      p[t] = x;
      mx = x > mx ? x : mx;
    }
    for (int64_t t = 0; t < n; t++) sum += p[t] = exp(p[t] - mx);
    for (int64_t d = 0; d < H; d++) {
      double ref = 0, mag = 0;
      for (int64_t t = 0; t < n; t++) ref += p[t] / sum * V[t * H + d], mag += p[t] / sum * fabs(V[t * H + d]);
      double err = fabs(o[h * H + d] - ref), tol = 2e-6 * mag + 1e-6;
      if (!(err <= tol)) bad++;
      if (err / tol > worst) worst = err / tol;
    }
  }
  check(bad == 0, "n=%lld hpg=%lld H=%lld scale=%g softcap=%g amp=%g nc=%lld: %lld outputs outside the bound (worst %.3g)",
        (long long)n, (long long)hpg, (long long)H, scale, softcap, amp, (long long)nc, (long long)bad, worst);
  free(q), free(K), free(V), free(o), free(sc), free(p);
}

int main(void) {
  static const int64_t ns[] = {1, 7, 8, 9, 16, 63, 130, 513, 1030};
  static const int64_t Hs[] = {64, 128, 32, 20, 36};
  int cases = 0;
  for (int hi = 0; hi < 5; hi++)
    for (int ni = 0; ni < 9; ni++)
      for (int64_t hpg = 1; hpg <= 7; hpg += 3) {
        const float scale = 1.0f / sqrtf((float)Hs[hi]);
        const int64_t nc = 2 + (hi * 9 + ni + hpg) % 8; /* 2..9 chunks for the split decode */
        run_case(ns[ni], hpg, Hs[hi], scale, 0.0f, 1.0, 1);
        run_case(ns[ni], hpg, Hs[hi], scale, (ni & 1) ? 5.0f : 0.0f, 8.0, 1); /* sharp: most p flush to 0 */
        run_case(ns[ni], hpg, Hs[hi], scale, 0.0f, 1.0, nc);
        run_case(ns[ni], hpg, Hs[hi], scale, (ni & 1) ? 5.0f : 0.0f, 8.0, nc);
        cases += 4;
      }
  run_case(300, 7, 64, 0.125f, 30.0f, 40.0, 1); /* softcap bounds very large scores */
  run_case(300, 7, 64, 0.125f, 30.0f, 40.0, 5);
  run_case(1030, 7, 64, 0.125f, 0.0f, 8.0, 64); /* the most chunks */
  cases += 3;
  printf("test_cpu_gqa_rows: %d cases, %d checks passed, %d failed\n", cases, g_pass, g_fail);
  return g_fail ? 1 : 0;
}
