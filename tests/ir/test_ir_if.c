/* The IR IF node through the executor, without ORT, on the CPU backend:
 * graph inputs c (bool, one element), x (f32 (2, 3)), k (f32 scalar);
 *   IF(c; x, k): then  y = Neg(x) * k          (2, 3)
 *                else  y = Concat(x, x + k, 1) (2, 6)   (a branch of another output shape)
 *   z = y + 1 (an outer node reading the IF's output); graph outputs (y, z).
 * Checks, against values computed here: both branches, the output shapes the
 * branch gives (output_fn sees (2, 3) or (2, 6)), compile on (cached plans)
 * and off (eager), alternating branches, no allocation in the steady state of
 * either branch, a branch reading only some captures (then ignores nothing,
 * else reads both), and a condition of two elements refused with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"

typedef struct outs { float *buf[2]; fbx_tensor shape[2]; } outs;

static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)same_as_input; /* the test's own buffers */
  outs *o = ctx;
  o->shape[idx] = *t;
  size_t n = fbx_tensor_nbytes(t);
  fbx_free(o->buf[idx]);
  o->buf[idx] = fbx_malloc(n ? n : 1);
  *data = o->buf[idx];
  return o->buf[idx] ? NULL : FBX_ERR_OOM();
}

/* then: (x, k) -> Neg(x) * k */
static fbx_status *make_then(fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3};
  int x, k, n, y;
  fbx_status *st = fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, d, NULL, &x);
  if (!st) st = fbx_ir_graph_add_input(g, "k", FBX_DTYPE_F32, 0, d, NULL, &k);
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_NEG, &x, 1, NULL, FBX_DTYPE_F32, 2, "neg", "Neg", -1, &n);
  int in2[2] = {n, k};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_MUL, in2, 2, NULL, FBX_DTYPE_F32, 2, "mul", "Mul", -1, &y);
  if (!st) st = fbx_ir_graph_mark_output(g, y);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

/* else: (x, k) -> Concat(x, x + k, axis 1) */
static fbx_status *make_else(fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3};
  int x, k, a, y;
  fbx_status *st = fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, d, NULL, &x);
  if (!st) st = fbx_ir_graph_add_input(g, "k", FBX_DTYPE_F32, 0, d, NULL, &k);
  int in2[2] = {x, k};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_ADD, in2, 2, NULL, FBX_DTYPE_F32, 2, "add", "Add", -1, &a);
  fbx_ir_params p = {.axis = {.axis = 1}};
  int cat[2] = {x, a};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, cat, 2, &p, FBX_DTYPE_F32, 2, "cat", "Concat", -1, &y);
  if (!st) st = fbx_ir_graph_mark_output(g, y);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

static fbx_status *make_graph(int64_t cond_elems, fbx_ir_graph **out) {
  fbx_ir_graph *g, *tb = NULL, *eb = NULL;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t dc[1] = {cond_elems}, dx[2] = {2, 3};
  int c, x, k, y, one, z;
  fbx_status *st = fbx_ir_graph_add_input(g, "c", FBX_DTYPE_BOOL, 1, dc, NULL, &c);
  if (!st) st = fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, dx, NULL, &x);
  if (!st) st = fbx_ir_graph_add_input(g, "k", FBX_DTYPE_F32, 0, dx, NULL, &k);
  if (!st) st = make_then(&tb);
  if (!st) st = fbx_ir_graph_adopt(g, tb);
  if (!st) st = make_else(&eb);
  if (!st) st = fbx_ir_graph_adopt(g, eb);
  fbx_ir_params p = {.cond = {.branch = {tb, eb}}};
  int ins[3] = {c, x, k};
  if (!st) st = fbx_ir_graph_add_value(g, "y", FBX_DTYPE_F32, 2, &y);
  if (!st) st = fbx_ir_graph_add_node(g, FBX_IR_OP_IF, ins, 3, &y, 1, &p, "if", "If", -1, NULL);
  if (!st) st = fbx_ir_graph_add_const_f32(g, 1.0f, &one);
  int in2[2] = {y, one};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_ADD, in2, 2, NULL, FBX_DTYPE_F32, 2, "z", "Add", -1, &z);
  if (!st) st = fbx_ir_graph_mark_output(g, y);
  if (!st) st = fbx_ir_graph_mark_output(g, z);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

/* One run, checked against the formulas above. */
static void run_one(fbx_exec_compiled *c, bool cond, int iter, const char *what, int64_t *allocs) {
  uint8_t cv = cond;
  float x[6], k = 0.5f + (float)iter;
  for (int i = 0; i < 6; i++) x[i] = (float)(i - 2) * 0.75f + (float)iter;
  fbx_tensor in[3] = {{.dtype = FBX_DTYPE_BOOL, .rank = 1, .dims = {1}, .data = &cv},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 3}, .data = x},
                      {.dtype = FBX_DTYPE_F32, .rank = 0, .data = &k}};
  outs o;
  memset(&o, 0, sizeof o);
  fbx_exec_run_report r;
  fbx_status *st = fbx_exec_compiled_run(c, in, 3, out_fn, &o, &r);
  CHECK(!st, "%s: run: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!st) {
    int cols = cond ? 3 : 6;
    bool shapes = o.shape[0].rank == 2 && o.shape[0].dims[0] == 2 && o.shape[0].dims[1] == cols &&
                  o.shape[1].rank == 2 && o.shape[1].dims[1] == cols;
    CHECK(shapes, "%s: output shapes (2, %lld) / (2, %lld), want (2, %d)", what, (long long)o.shape[0].dims[1],
          (long long)o.shape[1].dims[1], cols);
    double worst = 0;
    for (int i = 0; shapes && i < 2; i++)
      for (int j = 0; j < cols; j++) {
        float want = cond ? -x[i * 3 + j] * k : j < 3 ? x[i * 3 + j] : x[i * 3 + j - 3] + k;
        worst = fmax(worst, fabs(o.buf[0][i * cols + j] - want));
        worst = fmax(worst, fabs(o.buf[1][i * cols + j] - (want + 1)));
      }
    CHECK(shapes && worst < 1e-6, "%s: values (max diff %.3g)", what, worst);
    *allocs = r.allocs;
  }
  for (int i = 0; i < 2; i++) fbx_free(o.buf[i]);
}

static void test_branches(fbx_backend *be, bool compile) {
  fbx_ir_graph *g;
  fbx_status *st = make_graph(1, &g);
  CHECK(!st, "build graph: %s", st ? fbx_status_message(st) : "");
  if (st) {
    fbx_status_free(st);
    return;
  }
  fbx_exec_compile_options opt = {.compile = compile, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  st = fbx_exec_compiled_create(g, be, &opt, "if_test", &c);
  CHECK(!st, "compile: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!c) return;
  const char *mode = compile ? "compile=on" : "compile=off";
  static const bool seq[] = {true, true, false, false, true, false, false, true, true, false};
  int64_t late_allocs = 0, a = 0;
  for (int i = 0; i < (int)(sizeof seq / sizeof seq[0]); i++) {
    char what[96];
    snprintf(what, sizeof what, "%s run %d (%s)", mode, i, seq[i] ? "then" : "else");
    run_one(c, seq[i], i, what, &a);
    if (i >= 4) late_allocs += a; /* both branches have run twice by then */
  }
  CHECK(late_allocs == 0, "%s: steady state allocates nothing (%lld buffers after warm-up)", mode, (long long)late_allocs);
  fbx_exec_compiled_destroy(c);
}

static void test_bad_condition(fbx_backend *be) {
  fbx_ir_graph *g;
  fbx_status *st = make_graph(2, &g);
  CHECK(!st, "build graph (2-element condition): %s", st ? fbx_status_message(st) : "");
  if (st) {
    fbx_status_free(st);
    return;
  }
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  st = fbx_exec_compiled_create(g, be, &opt, "if_bad", &c);
  fbx_status_free(st);
  if (!c) return;
  uint8_t cv[2] = {1, 0};
  float x[6] = {0}, k = 1;
  fbx_tensor in[3] = {{.dtype = FBX_DTYPE_BOOL, .rank = 1, .dims = {2}, .data = cv},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 3}, .data = x},
                      {.dtype = FBX_DTYPE_F32, .rank = 0, .data = &k}};
  outs o;
  memset(&o, 0, sizeof o);
  st = fbx_exec_compiled_run(c, in, 3, out_fn, &o, NULL);
  CHECK(st && strstr(fbx_status_message(st), "one element"), "a 2-element condition is refused (%s)",
        st ? fbx_status_message(st) : "no error");
  fbx_status_free(st);
  for (int i = 0; i < 2; i++) fbx_free(o.buf[i]);
  fbx_exec_compiled_destroy(c);
}

int main(void) {
  fbx_cpu_options co = {.threads = 2};
  fbx_backend *be = NULL;
  fbx_status *st = fbx_cpu_backend_create(&co, &be);
  if (st) {
    fprintf(stderr, "cpu backend: %s\n", fbx_status_message(st));
    return 1;
  }
  test_branches(be, true);
  test_branches(be, false);
  test_bad_condition(be);
  fbx_backend_destroy(be);
  printf("test_ir_if: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
