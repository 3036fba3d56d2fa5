/* The Transpose -> MatMul trans_b fold (src/ir/ir_matmul_tb.c).
 *
 * 1. The pass on hand-built graphs: MatMul(q, Transpose(k, [0,1,3,2])) reads
 *    k with trans_b set and the Transpose is dead; a MatMul that already had
 *    trans_b gets it cleared; left alone: a Transpose that is also a graph
 *    output, that another node reads (also as MatMul's A), whose perm moves
 *    other dims; two MatMuls sharing one Transpose both fold.
 * 2. Compiled runs on the CPU backend (the decode attention q . K^T at M = 1
 *    over a (2, 3, T, 64) cache, batched and big enough for the per-matrix
 *    GEMV; prefill M = 5 through the blocked GEMM; a Gemm-like constant
 *    weight transposed in the graph) against a naive reference written here,
 *    at 1 and 3 threads. A counting wrapper around the CPU backend shows
 *    that no Transpose kernel runs (the key cache is not copied per step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"
#include "ir/ir_passes.h"

static const char *NOSYM[FBX_MAX_RANK] = {NULL};

static fbx_ir_params perm_of(int rank, const int *perm) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  for (int d = 0; d < rank; d++) p.transpose.perm[d] = perm[d];
  return p;
}

static const int SWAP4[4] = {0, 1, 3, 2}, HEADS4[4] = {0, 2, 1, 3};

/* q (2,3,M,D), k (2,3,T,D); out s = q @ Transpose(k, perm). Extra uses of the
 * transpose: as_output marks it a graph output, as_a makes a second MatMul read
 * it as A, two_mm adds a second MatMul reading it as B. */
typedef struct graph_ids {
  int q, k, kt, mm, mm2, t_node, mm_node, mm2_node;
} graph_ids;

static fbx_ir_graph *attention_graph(int64_t M, int64_t T, int64_t D, const int *perm, bool as_output, bool as_a,
                                     bool two_mm, graph_ids *id) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  fbx_ir_params mmp;
  memset(&mmp, 0, sizeof mmp);
  fbx_ir_params tp = perm_of(4, perm);
  fbx_ir_graph_add_input(g, "q", FBX_DTYPE_F32, 4, (int64_t[]){2, 3, M, D}, NOSYM, &id->q);
  fbx_ir_graph_add_input(g, "k", FBX_DTYPE_F32, 4, (int64_t[]){2, 3, T, D}, NOSYM, &id->k);
  id->t_node = g->n_nodes;
  fbx_ir_graph_emit(g, FBX_IR_OP_TRANSPOSE, (int[]){id->k}, 1, &tp, FBX_DTYPE_F32, 4, "kt", "Transpose", 0, &id->kt);
  id->mm_node = g->n_nodes;
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){id->q, id->kt}, 2, &mmp, FBX_DTYPE_F32, 4, "s", "MatMul", 1, &id->mm);
  fbx_ir_graph_mark_output(g, id->mm);
  id->mm2_node = -1;
  if (as_a || two_mm) {
    id->mm2_node = g->n_nodes;
    int a = as_a ? id->kt : id->q;
    fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){a, id->kt}, 2, &mmp, FBX_DTYPE_F32, 4, "s2", "MatMul", 2, &id->mm2);
    fbx_ir_graph_mark_output(g, id->mm2);
  }
  if (as_output) fbx_ir_graph_mark_output(g, id->kt);
  return g;
}

/* Runs the pass; returns whether the Transpose died. */
static bool fold(fbx_ir_graph *g, const graph_ids *id, bool *dead) {
  memset(dead, 0, sizeof(bool) * (size_t)g->n_nodes);
  fbx_status *st = fbx__ir_fold_transpose_matmul(g, dead);
  CHECK(!st, "pass: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  return dead[id->t_node];
}

static void pass_cases(void) {
  bool dead[8];
  graph_ids id;
  fbx_ir_graph *g = attention_graph(1, 7, 4, SWAP4, false, false, false, &id);
  CHECK(fold(g, &id, dead), "q . K^T: the Transpose dies");
  const fbx_ir_node *mm = &g->nodes[id.mm_node];
  CHECK(mm->inputs[0] == id.q && mm->inputs[1] == id.k && mm->params.matmul.trans_b == 1,
        "q . K^T: the MatMul reads k with trans_b (inputs %d %d, trans_b %d)", mm->inputs[0], mm->inputs[1],
        mm->params.matmul.trans_b);
  fbx_ir_graph_destroy(g);

  g = attention_graph(1, 7, 4, SWAP4, false, false, true, &id);
  CHECK(fold(g, &id, dead), "two MatMuls on one Transpose: it dies");
  CHECK(g->nodes[id.mm_node].inputs[1] == id.k && g->nodes[id.mm2_node].inputs[1] == id.k &&
            g->nodes[id.mm_node].params.matmul.trans_b && g->nodes[id.mm2_node].params.matmul.trans_b,
        "two MatMuls on one Transpose: both read k with trans_b");
  fbx_ir_graph_destroy(g);

  g = attention_graph(1, 7, 4, SWAP4, false, false, false, &id);
  g->nodes[id.mm_node].params.matmul.trans_b = 1; /* (Gemm transB) of a transposed operand */
  CHECK(fold(g, &id, dead) && g->nodes[id.mm_node].params.matmul.trans_b == 0,
        "trans_b already set: cleared (two transposes cancel)");
  fbx_ir_graph_destroy(g);

  struct { bool out, as_a; const int *perm; const char *what; } keep[] = {
      {true, false, SWAP4, "the Transpose is a graph output"},
      {false, true, SWAP4, "the Transpose is also a MatMul's A"},
      {false, false, HEADS4, "perm [0,2,1,3] (not the last two dims)"},
  };
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
    g = attention_graph(4, 4, 4, keep[i].perm, keep[i].out, keep[i].as_a, false, &id);
    bool died = fold(g, &id, dead);
    CHECK(!died && g->nodes[id.mm_node].inputs[1] == id.kt && g->nodes[id.mm_node].params.matmul.trans_b == 0,
          "%s: left alone", keep[i].what);
    fbx_ir_graph_destroy(g);
  }
}

/* ---- compiled runs on the CPU backend, with a kernel counter ---- */
static fbx_backend *g_cpu;
static fbx_backend_vtable g_counting_vt;
static fbx_backend g_counting;
static int g_transposes, g_matmuls;

static fbx_status *counting_run_node(fbx_backend *be, const fbx_ir_node *node, void *state, const fbx_tensor *in,
                                     int n_in, fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  (void)be;
  if (node->op == FBX_IR_OP_TRANSPOSE) g_transposes++;
  if (node->op == FBX_IR_OP_MATMUL) g_matmuls++;
  return g_cpu->vt->run_node(g_cpu, node, state, in, n_in, out, n_out, info);
}

static void counting_setup(int threads) {
  fbx_cpu_options o = {.threads = threads};
  fbx_status *st = fbx_cpu_backend_create(&o, &g_cpu);
  if (st) {
    fprintf(stderr, "cpu backend: %s\n", fbx_status_message(st));
    exit(2);
  }
  g_counting_vt = *g_cpu->vt;
  g_counting_vt.run_node = counting_run_node;
  g_counting = (fbx_backend){.vt = &g_counting_vt, .ctx = g_cpu->ctx};
}

typedef struct outbuf {
  float *y[2];
  size_t n[2];
} outbuf;

static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  outbuf *o = ctx;
  *same_as_input = -1;
  if (idx > 1) return FBX_ERR("test: output %d", idx);
  o->n[idx] = (size_t)fbx_tensor_numel(t);
  if (!o->y[idx]) o->y[idx] = malloc(sizeof(float) * (o->n[idx] ? o->n[idx] : 1));
  *data = o->y[idx];
  return NULL;
}

static float *frand(int64_t n, unsigned seed) {
  float *p = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 8) & 0xffff) / 32768.f - 1.f;
  }
  return p;
}

/* s (2,3,M,T) = q (2,3,M,D) @ k(2,3,T,D)^T through the compiled graph; twice
 * (the second run hits the cache). */
static void attention_run(int64_t M, int64_t T, int64_t D, const char *what) {
  graph_ids id;
  fbx_ir_graph *g = attention_graph(M, T, D, SWAP4, false, false, false, &id);
  fbx_exec_compile_options co = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  fbx_status *st = fbx_exec_compiled_create(g, &g_counting, &co, what, &c);
  CHECK(!st, "%s: create: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!c) return;
  float *q = frand(6 * M * D, 1), *k = frand(6 * T * D, 2);
  fbx_tensor in[2] = {{.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {2, 3, M, D}, .data = q},
                      {.dtype = FBX_DTYPE_F32, .rank = 4, .dims = {2, 3, T, D}, .data = k}};
  outbuf o = {{NULL, NULL}, {0, 0}};
  for (int run = 0; run < 2; run++) {
    g_transposes = g_matmuls = 0;
    st = fbx_exec_compiled_run(c, in, 2, out_fn, &o, NULL);
    CHECK(!st, "%s run %d: %s", what, run, st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    if (st) break;
    CHECK(g_transposes == 0 && g_matmuls == 1, "%s run %d: %d Transpose and %d MatMul kernels ran (want 0, 1)", what,
          run, g_transposes, g_matmuls);
    double worst = 0;
    for (int64_t b = 0; b < 6; b++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t t = 0; t < T; t++) {
          double s = 0;
          for (int64_t d = 0; d < D; d++) s += (double)q[(b * M + m) * D + d] * (double)k[(b * T + t) * D + d];
          double e = fabs((double)o.y[0][(b * M + m) * T + t] - s) / fmax(1.0, fabs(s));
          if (!(e <= worst)) worst = e;
        }
    CHECK(o.n[0] == (size_t)(6 * M * T) && worst <= 1e-5, "%s run %d: max rel err %g", what, run, worst);
  }
  fbx_exec_compiled_destroy(c);
  free(q); free(k); free(o.y[0]); free(o.y[1]);
}

/* y (1, N) = x (1, K) @ Transpose(W (N, K)) with W a constant (constant
 * folding takes this Transpose first): right, and no Transpose per run. */
static void weight_run(int64_t N, int64_t K) {
  char what[96];
  snprintf(what, sizeof what, "x @ Transpose(W) constant W %lldx%lld", (long long)N, (long long)K);
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, w, wt, y;
  float *W = frand(N * K, 3), *X = frand(K, 4);
  fbx_ir_params tp = perm_of(2, (const int[]){1, 0}), mmp;
  memset(&mmp, 0, sizeof mmp);
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){1, K}, NOSYM, &x);
  fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){N, K}, W, &w);
  fbx_ir_graph_emit(g, FBX_IR_OP_TRANSPOSE, (int[]){w}, 1, &tp, FBX_DTYPE_F32, 2, "wt", "Transpose", 0, &wt);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, wt}, 2, &mmp, FBX_DTYPE_F32, 2, "y", "MatMul", 1, &y);
  fbx_ir_graph_mark_output(g, y);
  fbx_exec_compile_options co = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  fbx_status *st = fbx_exec_compiled_create(g, &g_counting, &co, what, &c);
  CHECK(!st, "%s: create: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (c) {
    fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, K}, .data = X};
    outbuf o = {{NULL, NULL}, {0, 0}};
    for (int run = 0; run < 2 && !st; run++) { /* run 0 builds the plan (folding may run a Transpose) */
      g_transposes = 0;
      st = fbx_exec_compiled_run(c, &in, 1, out_fn, &o, NULL);
      CHECK(!st, "%s: run %d: %s", what, run, st ? fbx_status_message(st) : "");
    }
    fbx_status_free(st);
    double worst = 0;
    for (int64_t n = 0; !st && n < N; n++) {
      double s = 0;
      for (int64_t kk = 0; kk < K; kk++) s += (double)X[kk] * (double)W[n * K + kk];
      double e = fabs((double)o.y[0][n] - s) / fmax(1.0, fabs(s));
      if (!(e <= worst)) worst = e;
    }
    CHECK(worst <= 1e-5 && g_transposes == 0, "%s: max rel err %g, %d Transposes ran in run 1", what, worst, g_transposes);
    free(o.y[0]);
    fbx_exec_compiled_destroy(c);
  }
  free(W); free(X);
}

int main(void) {
  pass_cases();
  static const int threads[] = {1, 3};
  for (int t = 0; t < 2; t++) {
    counting_setup(threads[t]);
    attention_run(1, 129, 64, "decode q . K^T, past 129");         /* one matrix per thread */
    attention_run(1, 2049, 64, "decode q . K^T, past 2049");       /* 512 KiB per head: the per-matrix GEMV */
    attention_run(1, 7, 5, "decode q . K^T, odd sizes");
    attention_run(5, 33, 64, "prefill q . K^T, M 5");               /* the blocked GEMM with trans_b */
    weight_run(100, 67);
    fbx_backend_destroy(g_cpu);
  }
  printf("ir matmul trans_b fold: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
