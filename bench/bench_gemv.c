/* GEMV bandwidth: Fusebox's packed GEMV (through the CPU backend's MATMUL
 * kernel, B packed by node_prepare) vs OpenBLAS cblas_sgemv on decode-shaped
 * f32 weights (~400 MB streamed per pass, more than any cache), 2 threads,
 * interleaved repetitions. Prints GB/s of weight bytes for both, and the
 * machine's read bandwidth beside them: a plain vectorised read (sum) of a
 * 1 GiB buffer (huge pages, more than any cache) on the same pool, the bound
 * a batch-1 decode GEMV can reach.
 * "decoder": the weight matrices of one decode step of the 12-layer
 * hidden-768 ffn-2048 vocab-32000 decoder (models/gen_decoder.py), in model
 * order (per layer q, k, v, o 768x768, gate, up 768x2048, down 2048x768;
 * then the lm_head 768x32000; 438 MB), so per-call overhead counts as in a
 * real step.
 * Each rep also times a plain read of a buffer as large as the weights
 * (bench_bw.h, huge pages) right after the GEMV pass, and prints the paired
 * fraction (read time / GEMV time): on a shared machine the bound moves with
 * the load, and a fraction of one pass against another pass minutes later
 * means little. The median of the per-rep fractions is the figure.
 * Usage: bench_gemv [reps=7] [threads=2] [decoder] */
#include <cblas.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "bench_bw.h"

#define now_s bench_now_s

typedef struct { int64_t K, N; } shape;
static const shape SHAPES[] = {
    {2048, 8192}, {8192, 2048}, {2048, 8192}, {8192, 2048}, {2048, 2048}, {768, 16384},
    {1024, 3072}, {3072, 1024}, {768, 2304}, {768, 768}, {2048, 6144},
};
#define NS_FIXED ((int)(sizeof(SHAPES) / sizeof(SHAPES[0])))
#define DEC_LAYERS 12
#define NS_MAX (DEC_LAYERS * 7 + 1)
static shape g_shapes[NS_MAX];
static int NS;

static void pick_shapes(int decoder) {
  NS = 0;
  if (!decoder) {
    for (int i = 0; i < NS_FIXED; i++) g_shapes[NS++] = SHAPES[i];
    return;
  }
  for (int l = 0; l < DEC_LAYERS; l++) {
    for (int i = 0; i < 4; i++) g_shapes[NS++] = (shape){768, 768};
    g_shapes[NS++] = (shape){768, 2048};
    g_shapes[NS++] = (shape){768, 2048};
    g_shapes[NS++] = (shape){2048, 768};
  }
  g_shapes[NS++] = (shape){768, 32000};
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  pick_shapes(argc > 3 && strcmp(argv[3], "decoder") == 0);
  fbx_backend *be;
  fbx_cpu_options o = {.threads = threads};
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
  openblas_set_num_threads(threads);
  fbx_tensor x[NS_MAX], w[NS_MAX], y[NS_MAX];
  void *state[NS_MAX];
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL, .n_inputs = 2, .n_outputs = 1, .params = {.matmul = {.alpha = 1.f}}};
  double bytes = 0;
  int64_t maxk = 0;
  for (int i = 0; i < NS; i++) {
    int64_t K = g_shapes[i].K, N = g_shapes[i].N;
    x[i] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, K}, .data = malloc((size_t)K * 4)};
    w[i] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {K, N}, .data = malloc((size_t)(K * N) * 4)};
    y[i] = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, N}, .data = malloc((size_t)N * 4)};
    for (int64_t k = 0; k < K; k++) ((float *)x[i].data)[k] = (float)(k % 7) * 0.1f;
    for (int64_t k = 0; k < K * N; k++) ((float *)w[i].data)[k] = (float)((k * 2654435761u) % 1000) * 1e-3f;
    fbx_tensor in[2] = {x[i], w[i]};
    const fbx_tensor *ci[2] = {NULL, &w[i]};
    st = be->vt->node_prepare(be, &nd, ci, in, &state[i]);
    if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
    bytes += (double)(K * N) * 4;
    if (K > maxk) maxk = K;
  }
  printf("bench_gemv: %d matrices, %.1f MB of f32 weights per pass, %d threads, %d reps\n", NS, bytes / 1e6, threads, reps);
  double best_f = 1e9, best_b = 1e9, sum_f = 0, sum_b = 0, frac[64];
  double cfrac[64];
  int nfrac = 0, ncfrac = 0;
  size_t rbytes = ((size_t)bytes + (BENCH_READ_CHUNK * 4) - 1) / (BENCH_READ_CHUNK * 4) * (BENCH_READ_CHUNK * 4);
  float *rbuf = fbx_malloc_huge(rbytes);
  if (!rbuf) { fprintf(stderr, "OOM\n"); return 1; }
  memset(rbuf, 0, rbytes);
  float maxdiff = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s(), c0 = bench_cpu_s();
    for (int i = 0; i < NS; i++) {
      fbx_tensor in[2] = {x[i], w[i]};
      st = be->vt->run_node(be, &nd, state[i], in, 2, &y[i], 1, NULL);
      if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
    }
    double tf = now_s() - t0, cf = bench_cpu_s() - c0;
    c0 = bench_cpu_s();
    double tr = bench_read_pass(be, rbuf, rbytes), cr = bench_cpu_s() - c0;
    if (r > 0 && nfrac < 64) frac[nfrac++] = (tr * (double)bytes / (double)rbytes) / tf;
    if (r > 0 && threads == 1 && ncfrac < 64) cfrac[ncfrac++] = (cr * (double)bytes / (double)rbytes) / cf;
    double t1 = now_s();
    float *keep = malloc((size_t)g_shapes[NS - 1].N * 4);
    memcpy(keep, y[NS - 1].data, (size_t)g_shapes[NS - 1].N * 4);
    for (int i = 0; i < NS && !getenv("BENCH_GEMV_ONLY_FBX"); i++)
      cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)g_shapes[i].K, (blasint)g_shapes[i].N, 1.f, w[i].data,
                  (blasint)g_shapes[i].N, x[i].data, 1, 0.f, y[i].data, 1);
    double t2 = now_s();
    for (int64_t n = 0; n < g_shapes[NS - 1].N; n++) {
      float d = keep[n] - ((float *)y[NS - 1].data)[n];
      d = d < 0 ? -d : d;
      float rel = d / (1e-3f + (((float *)y[NS - 1].data)[n] < 0 ? -((float *)y[NS - 1].data)[n] : ((float *)y[NS - 1].data)[n]));
      if (rel > maxdiff) maxdiff = rel;
    }
    free(keep);
    double tb = t2 - t1;
    if (r > 0) { sum_f += tf; sum_b += tb; }
    if (tf < best_f) best_f = tf;
    if (tb < best_b) best_b = tb;
    printf("  rep %d: fusebox %.2f GB/s   openblas sgemv %.2f GB/s   plain read beside it %.2f GB/s (gemv = %.0f%%)\n", r,
           bytes / tf / 1e9, bytes / tb / 1e9, (double)rbytes / tr / 1e9, 100.0 * (tr * bytes / (double)rbytes) / tf);
  }
  int n = reps > 1 ? reps - 1 : 1;
  printf("fusebox gemv (packed): best %.2f GB/s, mean %.2f GB/s\n", bytes / best_f / 1e9, bytes / (sum_f / n) / 1e9);
  printf("openblas cblas_sgemv : best %.2f GB/s, mean %.2f GB/s\n", bytes / best_b / 1e9, bytes / (sum_b / n) / 1e9);
  printf("max relative difference fusebox vs openblas: %.2g\n", maxdiff);
  if (!nfrac) frac[nfrac++] = 0;
  for (int a = 1; a < nfrac; a++) /* insertion sort: median of the paired fractions */
    for (int b = a; b > 0 && frac[b] < frac[b - 1]; b--) {
      double t = frac[b]; frac[b] = frac[b - 1]; frac[b - 1] = t;
    }
  printf("fusebox gemv / plain read, paired per rep (rep 0 left out): median %.0f%% (min %.0f%%, max %.0f%%)\n", 100.0 * frac[nfrac / 2],
         100.0 * frac[0], 100.0 * frac[nfrac - 1]);
  if (ncfrac) { /* 1 thread: by CPU time (the time this thread was not on a core left out) */
    for (int a = 1; a < ncfrac; a++)
      for (int b = a; b > 0 && cfrac[b] < cfrac[b - 1]; b--) {
        double t = cfrac[b]; cfrac[b] = cfrac[b - 1]; cfrac[b - 1] = t;
      }
    printf("1 thread, by CPU time: fusebox gemv / plain read median %.0f%% (min %.0f%%, max %.0f%%)\n",
           100.0 * cfrac[ncfrac / 2], 100.0 * cfrac[0], 100.0 * cfrac[ncfrac - 1]);
  }
  fbx_free_aligned(rbuf);
  double rb = bench_read_bandwidth(be, (size_t)1 << 30, reps);
  printf("plain read, 1 GiB, huge pages, %d threads: best %.2f GB/s (fusebox gemv best = %.0f%% of it)\n", threads, rb,
         100.0 * bytes / best_f / 1e9 / rb);
  for (int i = 0; i < NS; i++) {
    be->vt->node_release(be, &nd, state[i]);
    free(x[i].data); free(w[i].data); free(y[i].data);
  }
  fbx_backend_destroy(be);
  return 0;
}
