/* The GQA decode row kernel (src/backend/cpu/cpu_gqa_rows.c) on a Qwen2.5-0.5B-shaped KV
 * cache: 24 layers x 2 KV groups, 7 query heads per group, head size 64, `past` keys per
 * group (13 MB at past 528: more than the caches, as in a decode step), one thread, CPU
 * time. Per rep: a 64 MB sweep (the cache out of L2/L3), then one pass of every layer's two
 * groups, either whole (fbx__gqa_group_row, the kernel of one task per group) or split into
 * nc chunks of keys (fbx__gqa_group_part + fbx__gqa_combine, what the threads share in
 * split decode). Prints us per layer (2 groups) and GB/s of K/V per CPU-second, min and
 * median, the two variants alternating.
 * Usage: bench_gqa_rows [past=513] [nc=4] [reps=9] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/cpu_gqa.h"

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 513, nc = argc > 2 ? atoll(argv[2]) : 4;
  const int reps = argc > 3 ? atoi(argv[3]) : 9;
  const int64_t G = 24 * 2, H = 64, hpg = 7; /* layers x groups */
  if (n < 1 || nc < 1 || nc > FBX__GQA_MAX_CHUNKS || reps < 1 || reps > 100) {
    fprintf(stderr, "usage: bench_gqa_rows [past >= 1] [1 <= nc <= %d] [reps <= 100]\n", FBX__GQA_MAX_CHUNKS);
    return 2;
  }
  float *K = malloc(sizeof(float) * (size_t)(G * n * H)), *V = malloc(sizeof(float) * (size_t)(G * n * H));
  float *q = malloc(sizeof(float) * (size_t)(hpg * H)), *o = malloc(sizeof(float) * (size_t)(hpg * H));
  float *po = malloc(sizeof(float) * (size_t)(nc * hpg * H)), *pm = malloc(sizeof(float) * (size_t)(nc * hpg));
  float *pl = malloc(sizeof(float) * (size_t)(nc * hpg)), *sc = malloc(sizeof(float) * (size_t)(hpg * (n + 8)));
  const size_t EV = (size_t)64 << 20;
  volatile char *ev = malloc(EV);
  if (!K || !V || !q || !o || !po || !pm || !pl || !sc || !ev) return 1;
  for (int64_t i = 0; i < G * n * H; i++) K[i] = (float)(rand() % 200 - 100) * 1e-2f, V[i] = (float)(rand() % 200) * 1e-2f;
  for (int64_t i = 0; i < hpg * H; i++) q[i] = (float)(i % 13) * 1e-2f;
  double t[2][100];
  for (int r = 0; r < reps; r++)
    for (int v = 0; v < 2; v++) {
      const int split = (v + r) & 1; /* alternate which variant goes first */
      for (size_t i = 0; i < EV; i += 64) ev[i]++;
      const double c0 = cpu_s();
      for (int64_t g = 0; g < G; g++) {
        const float *Kg = K + g * n * H, *Vg = V + g * n * H;
        if (!split) {
          fbx__gqa_group_row(q, Kg, Vg, n, hpg, H, 0.125f, 0.0f, sc, n, o);
          continue;
        }
        const int64_t ck = ((n + nc - 1) / nc + 7) & ~(int64_t)7;
        for (int64_t c = 0; c < nc; c++) {
          const int64_t t0 = c * ck < n ? c * ck : n, t1 = t0 + ck < n ? t0 + ck : n;
          fbx__gqa_group_part(q, Kg + t0 * H, Vg + t0 * H, t1 - t0, hpg, H, 0.125f, 0.0f, sc, n, po + c * hpg * H,
                              pm + c * hpg, pl + c * hpg);
        }
        fbx__gqa_combine(po, pm, pl, nc, hpg, H, o);
      }
      t[split][r] = cpu_s() - c0;
    }
  const double bytes = (double)(G * n * H) * 8.0;
  printf("bench_gqa_rows: 24 layers x 2 KV groups x 7 heads, head 64, %lld keys (%.1f MB of K/V), 1 thread, %d reps\n",
         (long long)n, bytes / 1e6, reps);
  for (int v = 0; v < 2; v++) {
    qsort(t[v], (size_t)reps, sizeof(double), cmpd);
    printf("  %-22s min %7.1f us per layer (%.2f GB/s per CPU-second), median %7.1f us\n",
           v ? "split (part + combine)" : "whole row", t[v][0] / 24 * 1e6, bytes / t[v][0] / 1e9,
           t[v][reps / 2] / 24 * 1e6);
    if (v) printf("  (split: %lld chunks of %lld keys)\n", (long long)nc, (long long)(((n + nc - 1) / nc + 7) & ~7));
  }
  return 0;
}
