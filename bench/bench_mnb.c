/* MatMulNBits (int4, block 32, packed uint8 zero points) on the CPU backend, over the
 * weights of a Qwen2.5-0.5B-shaped decoder: 24 layers of q/k/v/o (896x896, 2 x 128x896,
 * 896x896), gate/up (4864x896) and down (896x4864), plus the lm_head (151936x896):
 * ~0.3 GB of weights + scales + zero points, more than any cache.
 *   decode: one pass over all matrices with M = 1 (a token's GEMVs), GB/s of weight bytes
 *           read and that as a fraction of the machine's read bandwidth, measured beside it
 *           (bench_bw.h) on the same pool;
 *   prefill: M rows (default 128) through the matrices of 2 layers, GFLOP/s.
 * Both accuracy levels (0: float, 4: int8 activations per block). Best and median of reps.
 * Usage: bench_mnb [reps=7] [threads=2] [prefill M=128]
 *        bench_mnb --bw [threads=2]   (the read-bandwidth probe alone)
 *        BENCH_MNB_HOT=1 adds decode over one layer's q/k/v/o kept in cache (compute only)
 *        BENCH_MNB_PREFILL=1 runs the prefill passes only (no decode, no bandwidth probe)
 *        BENCH_MNB_DECODE=1 runs the decode passes only (no prefill)
 *        BENCH_MNB_LEVEL=0|4 runs one accuracy level only
 *        BENCH_MNB_SGEMM=1 adds the blocked sgemm on float32 weights of the prefill shapes
 *          (y = A @ W^T, W already float: the ceiling of a level-0 prefill that dequantises) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "bench_bw.h"

typedef struct { int64_t K, N; } mshape;
static const mshape LAYER[] = {{896, 896}, {896, 128}, {896, 128}, {896, 896}, {896, 4864}, {896, 4864}, {4864, 896}};
#define NL ((int)(sizeof LAYER / sizeof LAYER[0]))
#define LAYERS 24
#define NM (NL * LAYERS + 1)
#define BS 32

typedef struct { int64_t K, N; fbx_tensor B, S, Z; void *state[2]; } mat;

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17; return (uint32_t)(rs >> 16); }

static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

static fbx_ir_node node_of(const mat *m, int level) {
  static int ids[4] = {0, 1, 2, 3}, out_id[1] = {4};
  fbx_ir_node nd = {.op = FBX_IR_OP_MATMUL_NBITS, .n_inputs = 4, .n_outputs = 1, .inputs = ids, .outputs = out_id};
  nd.params.nbits.K = m->K, nd.params.nbits.N = m->N, nd.params.nbits.bits = 4;
  nd.params.nbits.block_size = BS, nd.params.nbits.accuracy_level = level, nd.params.nbits.zp_u8 = 1;
  return nd;
}

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wall seconds for one pass of M rows over matrices [0, n); *cpu += the process's CPU
 * seconds (with 1 thread: the kernel's own time, whatever else the machine runs). */
static double g_cpu;
static double pass(fbx_backend *be, mat *ms, int n, int level, int64_t M, float *a, float *y) {
  double c0 = cpu_s(), t0 = bench_now_s();
  for (int i = 0; i < n; i++) {
    fbx_ir_node nd = node_of(&ms[i], level);
    fbx_tensor in[4] = {{.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {M, ms[i].K}, .data = a}, ms[i].B, ms[i].S, ms[i].Z};
    fbx_tensor out = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {M, ms[i].N}, .data = y};
    fbx_status *st = be->vt->run_node(be, &nd, ms[i].state[level == 4], in, 4, &out, 1, NULL);
    if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); exit(1); }
  }
  double t = bench_now_s() - t0;
  g_cpu = cpu_s() - c0;
  return t;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--bw") == 0) { /* the read-bandwidth probe alone (scripts/bench_genai.sh) */
    fbx_backend *be;
    fbx_cpu_options o = {.threads = argc > 2 ? atoi(argv[2]) : 2};
    fbx_status *st = fbx_cpu_backend_create(&o, &be);
    if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
    printf("read bandwidth (1 GiB, huge pages, %d threads): best %.2f GB/s\n", o.threads,
           bench_read_bandwidth(be, (size_t)1 << 30, 7));
    fbx_backend_destroy(be);
    return 0;
  }
  int reps = argc > 1 ? atoi(argv[1]) : 7, threads = argc > 2 ? atoi(argv[2]) : 2;
  int64_t PM = argc > 3 ? atoll(argv[3]) : 128;
  if (reps < 1 || reps > 99 || PM < 1) { fprintf(stderr, "usage: bench_mnb [reps 1..99] [threads] [prefill M]\n"); return 2; }
  fbx_backend *be;
  fbx_cpu_options o = {.threads = threads};
  fbx_status *st = fbx_cpu_backend_create(&o, &be);
  if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
  static mat ms[NM];
  double bytes = 0, flops_pf = 0;
  int64_t maxk = 0, maxn = 0;
  for (int i = 0; i < NM; i++) {
    mat *m = &ms[i];
    m->K = i < NM - 1 ? LAYER[i % NL].K : 896;
    m->N = i < NM - 1 ? LAYER[i % NL].N : 151936;
    int64_t kb = (m->K + BS - 1) / BS, zr = (kb + 1) / 2;
    m->B = (fbx_tensor){.dtype = FBX_DTYPE_U8, .rank = 3, .dims = {m->N, kb, BS / 2}, .data = malloc((size_t)(m->N * kb * BS / 2))};
    m->S = (fbx_tensor){.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {m->N, kb}, .data = malloc((size_t)(m->N * kb) * 4)};
    m->Z = (fbx_tensor){.dtype = FBX_DTYPE_U8, .rank = 2, .dims = {m->N, zr}, .data = malloc((size_t)(m->N * zr))};
    for (int64_t k = 0; k < m->N * kb * BS / 2; k++) ((uint8_t *)m->B.data)[k] = (uint8_t)rnd();
    for (int64_t k = 0; k < m->N * kb; k++) ((float *)m->S.data)[k] = 0.001f + (float)(rnd() % 1000) * 1e-5f;
    for (int64_t k = 0; k < m->N * zr; k++) ((uint8_t *)m->Z.data)[k] = (uint8_t)rnd();
    /* the bytes ORT's layout holds and a decode step must read: B, scales, zero points */
    bytes += (double)(m->N * kb * BS / 2 + m->N * kb * 4 + m->N * zr);
    if (i < 2 * NL) flops_pf += 2.0 * (double)PM * (double)m->K * (double)m->N;
    if (m->K > maxk) maxk = m->K;
    if (m->N > maxn) maxn = m->N;
    for (int l = 0; l < 2; l++) {
      fbx_ir_node nd = node_of(m, l ? 4 : 0);
      const fbx_tensor *ci[4] = {NULL, &m->B, &m->S, &m->Z};
      fbx_tensor in[4] = {{.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, m->K}}, m->B, m->S, m->Z};
      st = be->vt->node_prepare(be, &nd, ci, in, &m->state[l]);
      if (st) { fprintf(stderr, "%s\n", fbx_status_message(st)); return 1; }
    }
    if (i >= 2 * NL && i < NM - 1) { /* decode only: ORT's copies are not needed past prepare */
      free(m->B.data), free(m->S.data), free(m->Z.data);
      m->B.data = m->S.data = m->Z.data = NULL;
    }
  }
  float *a = malloc((size_t)(PM * maxk) * 4), *y = malloc((size_t)(PM * maxn) * 4);
  for (int64_t k = 0; k < PM * maxk; k++) a[k] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
  printf("bench_mnb: Qwen2.5-0.5B-shaped int4 weights, block %d, u8 zero points: %d matrices, %.1f MB per token, "
         "%d threads, %d reps\n", BS, NM, bytes / 1e6, threads, reps);
  const int prefill_only = getenv("BENCH_MNB_PREFILL") != NULL, decode_only = getenv("BENCH_MNB_DECODE") != NULL;
  const int only_level = getenv("BENCH_MNB_LEVEL") ? atoi(getenv("BENCH_MNB_LEVEL")) : -1;
  double rb = prefill_only ? 0 : bench_read_bandwidth(be, (size_t)1 << 30, reps);
  printf("read bandwidth (1 GiB, huge pages, %d threads): best %.2f GB/s\n", threads, rb);
  if (getenv("BENCH_MNB_SGEMM")) { /* float32 weights (random: only the time matters) */
    float *wf = malloc((size_t)(4864 * 896) * 4);
    for (int64_t k = 0; k < 4864 * 896; k++) wf[k] = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
    fbx_cpu_ctx *cc = be->ctx;
    double best = 1e30, cbest = 1e30;
    for (int r = 0; r <= reps; r++) {
      double c0 = cpu_s(), t0 = bench_now_s();
      for (int i = 0; i < 2 * NL; i++) {
        fbx_status *e = fbx_cpu_sgemm_par(cc, false, true, PM, ms[i].N, ms[i].K, 1.0f, a, ms[i].K, wf, ms[i].K, 0.0f,
                                          y, ms[i].N, NULL);
        if (e) { fprintf(stderr, "%s\n", fbx_status_message(e)); return 1; }
      }
      double t = bench_now_s() - t0, cpu = cpu_s() - c0;
      if (r && t < best) best = t;
      if (r && cpu < cbest) cbest = cpu;
    }
    printf("sgemm on float32 weights, prefill M=%lld: best %.2f ms = %.1f GFLOP/s; CPU time min %.2f ms = %.1f GFLOP per CPU-second\n",
           (long long)PM, best * 1e3, flops_pf / best / 1e9, cbest * 1e3, flops_pf / cbest / 1e9);
    free(wf);
  }
  for (int level = 0; level <= 4; level += 4) {
    double td[100], tp[100], cd[100], cp[100];
    if (only_level >= 0 && level != only_level) continue;
    if (!prefill_only) pass(be, ms, NM, level, 1, a, y); /* warm-up */
    for (int r = 0; r < reps; r++) td[r] = prefill_only ? 1 : pass(be, ms, NM, level, 1, a, y), cd[r] = g_cpu;
    if (getenv("BENCH_MNB_HOT")) { /* compute only: q/k/v/o of one layer (1.1 MB), 100 times */
      double best = 1e30, cb = 1e30, hb = 0;
      for (int i = 0; i < 4; i++) hb += (double)(ms[i].N * ms[i].K) * 21.0 / 32.0;
      for (int r = 0; r < reps; r++) {
        double t = 0, c = 0;
        for (int i = 0; i < 100; i++) t += pass(be, ms, 4, level, 1, a, y), c += g_cpu;
        if (t < best) best = t;
        if (c < cb) cb = c;
      }
      printf("level %d decode, hot in cache: %.2f GB/s wall, %.2f GB/s per CPU-second\n", level, 100 * hb / best / 1e9,
             100 * hb / cb / 1e9);
    }
    if (!decode_only) pass(be, ms, 2 * NL, level, PM, a, y);
    for (int r = 0; r < reps; r++) tp[r] = decode_only ? 1 : pass(be, ms, 2 * NL, level, PM, a, y), cp[r] = g_cpu;
    qsort(cd, (size_t)reps, sizeof *cd, cmpd);
    qsort(cp, (size_t)reps, sizeof *cp, cmpd);
    qsort(td, (size_t)reps, sizeof *td, cmpd);
    qsort(tp, (size_t)reps, sizeof *tp, cmpd);
    if (!prefill_only) printf("level %d decode  M=1:   best %.3f ms  median %.3f ms  = %.2f GB/s best (%.0f%% of read bw), median %.2f GB/s\n",
           level, td[0] * 1e3, td[reps / 2] * 1e3, bytes / td[0] / 1e9, 100.0 * bytes / td[0] / 1e9 / rb,
           bytes / td[reps / 2] / 1e9);
    if (!prefill_only) printf("        decode CPU time (all threads) min %.3f ms = %.2f GB/s per CPU-second\n", cd[0] * 1e3, bytes / cd[0] / 1e9);
    if (decode_only) continue;
    printf("level %d prefill M=%lld: best %.2f ms  median %.2f ms  = %.1f GFLOP/s best, %.1f median (2 layers)\n", level,
           (long long)PM, tp[0] * 1e3, tp[reps / 2] * 1e3, flops_pf / tp[0] / 1e9, flops_pf / tp[reps / 2] / 1e9);
    printf("        prefill CPU time (all threads) min %.2f ms = %.1f GFLOP per CPU-second\n", cp[0] * 1e3, flops_pf / cp[0] / 1e9);
  }
  for (int i = 0; i < NM; i++) {
    for (int l = 0; l < 2; l++) {
      fbx_ir_node nd = node_of(&ms[i], l ? 4 : 0);
      be->vt->node_release(be, &nd, ms[i].state[l]);
    }
    free(ms[i].B.data), free(ms[i].S.data), free(ms[i].Z.data);
  }
  free(a), free(y);
  fbx_backend_destroy(be);
  return 0;
}
