/* The IR LOOP and SCAN nodes through the executor, without ORT, on the CPU
 * backend. Every expected value is computed here by a plain C loop.
 *
 * LOOP: graph inputs M (int64 ()), c0 (bool ()), h0 (f32 (2, 3)), w (f32 ()),
 * lim (f32 ()); body (iter, cond, h; captures w, lim):
 *   hn = h * w + float(iter);  cond' = float(iter) < lim;  y = hn + 1
 * node outputs h_last (2, 3) and ys (iterations, 2, 3); an outer node
 * z = h_last * 2 reads the LOOP's output. Cases: M-terminated, condition-
 * terminated, zero trips by M = 0 and by c0 = false (h_last = h0, ys (0, 2, 3)),
 * compile on and off, no allocation in the steady state.
 * SCAN: graph inputs s0 (f32 (2, 3)), xa (f32 (T, 2, 3)) scanned along axis 0
 * forward, xb (f32 (2, T, 3)) along axis 1 in reverse; body (s, a, b):
 *   s' = s + a * b;  y1 = s' stacked along axis 0 in reverse;
 *   y2 = a - b stacked along axis 2 (output (2, 3, T)) forward.
 * A SCAN whose inputs disagree on the iteration count is refused.
 * LOOP with a carried value that grows a row per iteration (Concat with a capture): the body's
 * shapes change every iteration (cache limit 2: plans evicted mid-loop), h_last (2 + M, 3); the
 * same body with a scan output of that value is refused (its shape changes between iterations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"

#define NOUT 3
typedef struct outs { float *buf[NOUT]; fbx_tensor shape[NOUT]; } outs;

static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)same_as_input; /* the test's own buffers */
  outs *o = ctx;
  if (idx < 0 || idx >= NOUT) return FBX_ERR("output %d", idx);
  o->shape[idx] = *t;
  size_t n = fbx_tensor_nbytes(t);
  fbx_free(o->buf[idx]);
  o->buf[idx] = fbx_malloc(n ? n : 1);
  *data = o->buf[idx];
  return o->buf[idx] ? NULL : FBX_ERR_OOM();
}

static void outs_free(outs *o) {
  for (int i = 0; i < NOUT; i++) fbx_free(o->buf[i]);
}

static bool shape_is(const fbx_tensor *t, int rank, const int64_t *d) {
  if (t->rank != rank) return false;
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != d[i]) return false;
  return true;
}

/* ---------------------------------------------------------------- LOOP -- */

static fbx_status *make_loop_body(fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3};
  int it, cd, h, w, lim, itf, hw, hn, c2, one, y;
  fbx_status *st = fbx_ir_graph_add_input(g, "iter", FBX_DTYPE_I64, 0, d, NULL, &it);
  if (!st) st = fbx_ir_graph_add_input(g, "cond", FBX_DTYPE_BOOL, 0, d, NULL, &cd);
  if (!st) st = fbx_ir_graph_add_input(g, "h", FBX_DTYPE_F32, 2, d, NULL, &h);
  if (!st) st = fbx_ir_graph_add_input(g, "w", FBX_DTYPE_F32, 0, d, NULL, &w);
  if (!st) st = fbx_ir_graph_add_input(g, "lim", FBX_DTYPE_F32, 0, d, NULL, &lim);
  fbx_ir_params cp = {.ew = {.to = FBX_DTYPE_F32}};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_CAST, &it, 1, &cp, FBX_DTYPE_F32, 0, "itf", "Cast", -1, &itf);
  int a[2] = {h, w};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_MUL, a, 2, NULL, FBX_DTYPE_F32, 2, "hw", "Mul", -1, &hw);
  int b[2] = {hw, itf};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_ADD, b, 2, NULL, FBX_DTYPE_F32, 2, "hn", "Add", -1, &hn);
  int c[2] = {itf, lim};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_LESS, c, 2, NULL, FBX_DTYPE_BOOL, 0, "less", "Less", -1, &c2);
  if (!st) st = fbx_ir_graph_add_const_f32(g, 1.0f, &one);
  int e[2] = {hn, one};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_ADD, e, 2, NULL, FBX_DTYPE_F32, 2, "y", "Add", -1, &y);
  if (!st) st = fbx_ir_graph_mark_output(g, c2);
  if (!st) st = fbx_ir_graph_mark_output(g, hn);
  if (!st) st = fbx_ir_graph_mark_output(g, y);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

static fbx_status *make_loop_graph(fbx_ir_graph **out) {
  fbx_ir_graph *g, *body = NULL;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3};
  int m, c0, h0, w, lim, hl, ys, two, z;
  fbx_status *st = fbx_ir_graph_add_input(g, "M", FBX_DTYPE_I64, 0, d, NULL, &m);
  if (!st) st = fbx_ir_graph_add_input(g, "c0", FBX_DTYPE_BOOL, 0, d, NULL, &c0);
  if (!st) st = fbx_ir_graph_add_input(g, "h0", FBX_DTYPE_F32, 2, d, NULL, &h0);
  if (!st) st = fbx_ir_graph_add_input(g, "w", FBX_DTYPE_F32, 0, d, NULL, &w);
  if (!st) st = fbx_ir_graph_add_input(g, "lim", FBX_DTYPE_F32, 0, d, NULL, &lim);
  if (!st) st = make_loop_body(&body);
  if (!st) st = fbx_ir_graph_adopt(g, body);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.loop.body = body;
  p.loop.n_carried = 1;
  int ins[5] = {m, c0, h0, w, lim}, outv[2];
  if (!st) st = fbx_ir_graph_add_value(g, "h_last", FBX_DTYPE_F32, 2, &hl);
  if (!st) st = fbx_ir_graph_add_value(g, "ys", FBX_DTYPE_F32, 3, &ys);
  outv[0] = hl, outv[1] = ys;
  if (!st) st = fbx_ir_graph_add_node(g, FBX_IR_OP_LOOP, ins, 5, outv, 2, &p, "loop", "Loop", -1, NULL);
  if (!st) st = fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  int e[2] = {hl, two};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_MUL, e, 2, NULL, FBX_DTYPE_F32, 2, "z", "Mul", -1, &z);
  if (!st) st = fbx_ir_graph_mark_output(g, hl);
  if (!st) st = fbx_ir_graph_mark_output(g, ys);
  if (!st) st = fbx_ir_graph_mark_output(g, z);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

/* One LOOP run against the C recurrence. */
static void loop_one(fbx_exec_compiled *c, int64_t M, bool c0, float lim, int seed, const char *what, int64_t *allocs) {
  uint8_t cv = c0;
  float h0[6], w = 0.5f + 0.125f * (float)seed;
  for (int i = 0; i < 6; i++) h0[i] = (float)(i - 2) * 0.25f + (float)seed;
  fbx_tensor in[5] = {{.dtype = FBX_DTYPE_I64, .rank = 0, .data = &M},
                      {.dtype = FBX_DTYPE_BOOL, .rank = 0, .data = &cv},
                      {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 3}, .data = h0},
                      {.dtype = FBX_DTYPE_F32, .rank = 0, .data = &w},
                      {.dtype = FBX_DTYPE_F32, .rank = 0, .data = &lim}};
  /* reference: while (t < M && cond) { h = h * w + t; y_t = h + 1; cond = t < lim; t++ } */
  float h[6], ys[16][6];
  memcpy(h, h0, sizeof h);
  int64_t t = 0;
  for (bool cond = c0; t < M && cond; t++) {
    for (int i = 0; i < 6; i++) h[i] = h[i] * w + (float)t, ys[t][i] = h[i] + 1;
    cond = (float)t < lim;
  }
  outs o;
  memset(&o, 0, sizeof o);
  fbx_exec_run_report r;
  fbx_status *st = fbx_exec_compiled_run(c, in, 5, out_fn, &o, &r);
  CHECK(!st, "%s: run: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!st) {
    int64_t dh[2] = {2, 3}, dy[3] = {t, 2, 3};
    bool shapes = shape_is(&o.shape[0], 2, dh) && shape_is(&o.shape[1], 3, dy) && shape_is(&o.shape[2], 2, dh);
    CHECK(shapes, "%s: shapes h_last rank %d, ys (%lld, %lld, %lld) (want (%lld, 2, 3))", what, o.shape[0].rank,
          (long long)o.shape[1].dims[0], (long long)o.shape[1].dims[1], (long long)o.shape[1].dims[2], (long long)t);
    double worst = 0;
    for (int i = 0; shapes && i < 6; i++) {
      worst = fmax(worst, fabs(o.buf[0][i] - h[i]));
      worst = fmax(worst, fabs(o.buf[2][i] - 2 * h[i]));
      for (int64_t k = 0; k < t; k++) worst = fmax(worst, fabs(o.buf[1][k * 6 + i] - ys[k][i]));
    }
    CHECK(shapes && worst < 1e-5, "%s: values (max diff %.3g)", what, worst);
    printf("  %s: %lld iteration(s), matches\n", what, (long long)t);
    *allocs = r.allocs;
  }
  outs_free(&o);
}

static void test_loop(fbx_backend *be, bool compile) {
  fbx_ir_graph *g;
  fbx_status *st = make_loop_graph(&g);
  CHECK(!st, "build loop graph: %s", st ? fbx_status_message(st) : "");
  if (st) {
    fbx_status_free(st);
    return;
  }
  fbx_exec_compile_options opt = {.compile = compile, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  st = fbx_exec_compiled_create(g, be, &opt, "loop_test", &c);
  CHECK(!st, "compile: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!c) return;
  const char *mode = compile ? "compile=on" : "compile=off";
  char what[128];
  int64_t a = 0, late = 0;
  snprintf(what, sizeof what, "%s LOOP M=5 (trip count ends it)", mode);
  loop_one(c, 5, true, 100.0f, 0, what, &a);
  snprintf(what, sizeof what, "%s LOOP M=10, cond ends it after t=3", mode);
  loop_one(c, 10, true, 2.5f, 1, what, &a);
  snprintf(what, sizeof what, "%s LOOP M=0 (zero trips)", mode);
  loop_one(c, 0, true, 100.0f, 2, what, &a);
  snprintf(what, sizeof what, "%s LOOP c0=false (zero trips)", mode);
  loop_one(c, 7, false, 100.0f, 3, what, &a);
  for (int i = 0; i < 4; i++) { /* the steady state: the same trip counts again */
    snprintf(what, sizeof what, "%s LOOP M=5 again (%d)", mode, i);
    loop_one(c, 5, true, 100.0f, i, what, &a);
    late += a;
    snprintf(what, sizeof what, "%s LOOP cond again (%d)", mode, i);
    loop_one(c, 10, true, 2.5f, i, what, &a);
    late += a;
  }
  CHECK(late == 0, "%s LOOP: steady state allocates nothing (%lld buffers after warm-up)", mode, (long long)late);
  fbx_exec_compiled_destroy(c);
}

/* ------------------------------------------ LOOP, growing carried value -- */
/* body (iter, cond, h (n, 3); capture x (1, 3)): h' = Concat(h, x, axis 0), cond' = cond,
 * and with `scan` a scan output y = h' (its shape changes every iteration: refused). */
static fbx_status *make_grow_graph(bool scan, fbx_ir_graph **out) {
  fbx_ir_graph *g, *b = NULL;
  FBX_TRY(fbx_ir_graph_create(&g));
  fbx_status *st = fbx_ir_graph_create(&b);
  int64_t dh[2] = {FBX_IR_DIM_DYNAMIC, 3}, dx[2] = {1, 3};
  int it, cd, h, x, hn, cdo, y;
  if (!st) st = fbx_ir_graph_add_input(b, "iter", FBX_DTYPE_I64, 0, dh, NULL, &it);
  if (!st) st = fbx_ir_graph_add_input(b, "cond", FBX_DTYPE_BOOL, 0, dh, NULL, &cd);
  if (!st) st = fbx_ir_graph_add_input(b, "h", FBX_DTYPE_F32, 2, dh, NULL, &h);
  if (!st) st = fbx_ir_graph_add_input(b, "x", FBX_DTYPE_F32, 2, dx, NULL, &x);
  fbx_ir_params cp = {.axis = {.axis = 0}};
  int cat[2] = {h, x};
  if (!st) st = fbx_ir_graph_emit(b, FBX_IR_OP_CONCAT, cat, 2, &cp, FBX_DTYPE_F32, 2, "cat", "Concat", -1, &hn);
  if (!st) st = fbx_ir_graph_emit(b, FBX_IR_OP_IDENTITY, &cd, 1, NULL, FBX_DTYPE_BOOL, 0, "c", "Identity", -1, &cdo);
  if (!st && scan) st = fbx_ir_graph_emit(b, FBX_IR_OP_IDENTITY, &hn, 1, NULL, FBX_DTYPE_F32, 2, "y", "Identity", -1, &y);
  if (!st) st = fbx_ir_graph_mark_output(b, cdo);
  if (!st) st = fbx_ir_graph_mark_output(b, hn);
  if (!st && scan) st = fbx_ir_graph_mark_output(b, y);
  if (!st) st = fbx_ir_graph_adopt(g, b);
  else fbx_ir_graph_destroy(b);
  int m, c0, h0, xo, hl, ys;
  if (!st) st = fbx_ir_graph_add_input(g, "M", FBX_DTYPE_I64, 0, dh, NULL, &m);
  if (!st) st = fbx_ir_graph_add_input(g, "c0", FBX_DTYPE_BOOL, 0, dh, NULL, &c0);
  if (!st) st = fbx_ir_graph_add_input(g, "h0", FBX_DTYPE_F32, 2, dh, NULL, &h0);
  if (!st) st = fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, dx, NULL, &xo);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.loop.body = b;
  p.loop.n_carried = 1;
  int ins[4] = {m, c0, h0, xo}, outv[2];
  if (!st) st = fbx_ir_graph_add_value(g, "h_last", FBX_DTYPE_F32, 2, &hl);
  if (!st && scan) st = fbx_ir_graph_add_value(g, "ys", FBX_DTYPE_F32, 3, &ys);
  outv[0] = hl, outv[1] = scan ? ys : -1;
  if (!st) st = fbx_ir_graph_add_node(g, FBX_IR_OP_LOOP, ins, 4, outv, scan ? 2 : 1, &p, "grow", "Loop", -1, NULL);
  if (!st) st = fbx_ir_graph_mark_output(g, hl);
  if (!st && scan) st = fbx_ir_graph_mark_output(g, ys);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

/* The carried value grows a row per iteration (a new body shape key every iteration; cache
 * limit 2, so plans are evicted while the loop runs and the body's "last plan" must follow). */
static void test_loop_grow(fbx_backend *be, bool compile) {
  const char *mode = compile ? "compile=on" : "compile=off";
  for (int scan = 0; scan < 2; scan++) {
    fbx_ir_graph *g;
    fbx_status *st = make_grow_graph(scan, &g);
    CHECK(!st, "build grow graph: %s", st ? fbx_status_message(st) : "");
    if (st) {
      fbx_status_free(st);
      return;
    }
    fbx_exec_compile_options opt = {.compile = compile, .cache_limit = 2};
    fbx_exec_compiled *c = NULL;
    st = fbx_exec_compiled_create(g, be, &opt, "loop_grow", &c);
    CHECK(!st, "compile: %s", st ? fbx_status_message(st) : "");
    fbx_status_free(st);
    if (!c) return;
    for (int rep = 0; rep < 3; rep++) {
      int64_t M = 5 + rep;
      uint8_t cv = 1;
      float h0[2 * 3] = {1, 2, 3, 4, 5, 6}, x[3] = {0.5f, -1.0f, 7.0f + (float)rep};
      fbx_tensor in[4] = {{.dtype = FBX_DTYPE_I64, .rank = 0, .data = &M},
                          {.dtype = FBX_DTYPE_BOOL, .rank = 0, .data = &cv},
                          {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 3}, .data = h0},
                          {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {1, 3}, .data = x}};
      outs o;
      memset(&o, 0, sizeof o);
      st = fbx_exec_compiled_run(c, in, 4, out_fn, &o, NULL);
      if (scan) {
        CHECK(st && strstr(fbx_status_message(st), "changes shape"), "%s: a scan output that grows is refused (%s)",
              mode, st ? fbx_status_message(st) : "no error");
      } else {
        CHECK(!st, "%s grow M=%lld: %s", mode, (long long)M, st ? fbx_status_message(st) : "");
        int64_t dh[2] = {2 + M, 3};
        bool shape = !st && shape_is(&o.shape[0], 2, dh);
        CHECK(shape, "%s grow M=%lld: h_last (%lld, 3), want (%lld, 3)", mode, (long long)M,
              (long long)o.shape[0].dims[0], (long long)(2 + M));
        double worst = 0;
        for (int64_t r = 0; shape && r < 2 + M; r++)
          for (int j = 0; j < 3; j++) worst = fmax(worst, fabs(o.buf[0][r * 3 + j] - (r < 2 ? h0[r * 3 + j] : x[j])));
        CHECK(shape && worst == 0, "%s grow M=%lld: values (max diff %.3g)", mode, (long long)M, worst);
        if (shape && worst == 0) printf("  %s LOOP growing carried value, M=%lld: (%lld, 3), matches\n", mode, (long long)M, (long long)(2 + M));
      }
      fbx_status_free(st);
      outs_free(&o);
      if (scan) break;
    }
    fbx_exec_compiled_destroy(c);
  }
}

/* ---------------------------------------------------------------- SCAN -- */

static fbx_status *make_scan_body(fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3};
  int s, a, b, ab, sn, y1, y2;
  fbx_status *st = fbx_ir_graph_add_input(g, "s", FBX_DTYPE_F32, 2, d, NULL, &s);
  if (!st) st = fbx_ir_graph_add_input(g, "a", FBX_DTYPE_F32, 2, d, NULL, &a);
  if (!st) st = fbx_ir_graph_add_input(g, "b", FBX_DTYPE_F32, 2, d, NULL, &b);
  int m[2] = {a, b};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_MUL, m, 2, NULL, FBX_DTYPE_F32, 2, "ab", "Mul", -1, &ab);
  int e[2] = {s, ab};
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_ADD, e, 2, NULL, FBX_DTYPE_F32, 2, "sn", "Add", -1, &sn);
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_IDENTITY, &sn, 1, NULL, FBX_DTYPE_F32, 2, "y1", "Identity", -1, &y1);
  if (!st) st = fbx_ir_graph_emit(g, FBX_IR_OP_SUB, m, 2, NULL, FBX_DTYPE_F32, 2, "y2", "Sub", -1, &y2);
  if (!st) st = fbx_ir_graph_mark_output(g, sn);
  if (!st) st = fbx_ir_graph_mark_output(g, y1);
  if (!st) st = fbx_ir_graph_mark_output(g, y2);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

static fbx_status *make_scan_graph(fbx_ir_graph **out) {
  fbx_ir_graph *g, *body = NULL;
  FBX_TRY(fbx_ir_graph_create(&g));
  int64_t d[2] = {2, 3}, da[3] = {FBX_IR_DIM_DYNAMIC, 2, 3}, db[3] = {2, FBX_IR_DIM_DYNAMIC, 3};
  int s0, xa, xb, sl, y1, y2;
  fbx_status *st = fbx_ir_graph_add_input(g, "s0", FBX_DTYPE_F32, 2, d, NULL, &s0);
  if (!st) st = fbx_ir_graph_add_input(g, "xa", FBX_DTYPE_F32, 3, da, NULL, &xa);
  if (!st) st = fbx_ir_graph_add_input(g, "xb", FBX_DTYPE_F32, 3, db, NULL, &xb);
  if (!st) st = make_scan_body(&body);
  if (!st) st = fbx_ir_graph_adopt(g, body);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.loop.body = body;
  p.loop.n_carried = 1;
  p.loop.n_scan_in = 2;
  p.loop.in_axis[0] = 0, p.loop.in_axis[1] = 1;
  p.loop.in_rev = 2u;                      /* xb in reverse */
  p.loop.out_axis[0] = 0, p.loop.out_axis[1] = 2;
  p.loop.out_rev = 1u;                     /* y1 in reverse */
  int ins[3] = {s0, xa, xb}, outv[3];
  if (!st) st = fbx_ir_graph_add_value(g, "s_last", FBX_DTYPE_F32, 2, &sl);
  if (!st) st = fbx_ir_graph_add_value(g, "y1", FBX_DTYPE_F32, 3, &y1);
  if (!st) st = fbx_ir_graph_add_value(g, "y2", FBX_DTYPE_F32, 3, &y2);
  outv[0] = sl, outv[1] = y1, outv[2] = y2;
  if (!st) st = fbx_ir_graph_add_node(g, FBX_IR_OP_SCAN, ins, 3, outv, 3, &p, "scan", "Scan", -1, NULL);
  for (int k = 0; k < 3 && !st; k++) st = fbx_ir_graph_mark_output(g, outv[k]);
  if (st) fbx_ir_graph_destroy(g);
  *out = st ? NULL : g;
  return st;
}

#define TMAX 8
static void scan_one(fbx_exec_compiled *c, int T, int Tb, int seed, const char *what, int64_t *allocs) {
  float s0[6], xa[TMAX * 6], xb[6 * TMAX];
  for (int i = 0; i < 6; i++) s0[i] = 0.1f * (float)(i + seed);
  for (int i = 0; i < T * 6; i++) xa[i] = (float)((i * 7 + seed) % 11) * 0.125f - 0.5f;
  for (int i = 0; i < Tb * 6; i++) xb[i] = (float)((i * 5 + seed) % 13) * 0.0625f - 0.25f;
  fbx_tensor in[3] = {{.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, 3}, .data = s0},
                      {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {T, 2, 3}, .data = xa},
                      {.dtype = FBX_DTYPE_F32, .rank = 3, .dims = {2, Tb, 3}, .data = xb}};
  outs o;
  memset(&o, 0, sizeof o);
  fbx_exec_run_report r;
  fbx_status *st = fbx_exec_compiled_run(c, in, 3, out_fn, &o, &r);
  if (T != Tb) {
    CHECK(st && strstr(fbx_status_message(st), "slices"), "%s: refused (%s)", what, st ? fbx_status_message(st) : "no error");
    fbx_status_free(st);
    outs_free(&o);
    return;
  }
  CHECK(!st, "%s: run: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!st) {
    /* reference: t = 0..T-1: a = xa[t], b = xb[:, T-1-t, :]; s += a * b;
     * y1[T-1-t] = s; y2[:, :, t] = a - b */
    float s[6], y1[TMAX][6], y2[6][TMAX];
    memcpy(s, s0, sizeof s);
    for (int t = 0; t < T; t++)
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
          float a = xa[(t * 2 + i) * 3 + j], b = xb[(i * T + (T - 1 - t)) * 3 + j];
          s[i * 3 + j] += a * b;
          y1[T - 1 - t][i * 3 + j] = s[i * 3 + j];
          y2[i * 3 + j][t] = a - b;
        }
    int64_t ds[2] = {2, 3}, d1[3] = {T, 2, 3}, d2[3] = {2, 3, T};
    bool shapes = shape_is(&o.shape[0], 2, ds) && shape_is(&o.shape[1], 3, d1) && shape_is(&o.shape[2], 3, d2);
    CHECK(shapes, "%s: output shapes", what);
    double worst = 0;
    for (int i = 0; shapes && i < 6; i++) {
      worst = fmax(worst, fabs(o.buf[0][i] - s[i]));
      for (int t = 0; t < T; t++) {
        worst = fmax(worst, fabs(o.buf[1][t * 6 + i] - y1[t][i]));
        worst = fmax(worst, fabs(o.buf[2][i * T + t] - y2[i][t]));
      }
    }
    CHECK(shapes && worst < 1e-5, "%s: values (max diff %.3g)", what, worst);
    printf("  %s: matches\n", what);
    *allocs = r.allocs;
  }
  outs_free(&o);
}

static void test_scan(fbx_backend *be, bool compile) {
  fbx_ir_graph *g;
  fbx_status *st = make_scan_graph(&g);
  CHECK(!st, "build scan graph: %s", st ? fbx_status_message(st) : "");
  if (st) {
    fbx_status_free(st);
    return;
  }
  fbx_exec_compile_options opt = {.compile = compile, .cache_limit = 4};
  fbx_exec_compiled *c = NULL;
  st = fbx_exec_compiled_create(g, be, &opt, "scan_test", &c);
  CHECK(!st, "compile: %s", st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (!c) return;
  const char *mode = compile ? "compile=on" : "compile=off";
  char what[128];
  int64_t a = 0, late = 0;
  static const int Ts[] = {4, 1, 7};
  for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
    snprintf(what, sizeof what, "%s SCAN T=%d (axes 0/1, xb and y1 reversed, y2 on axis 2)", mode, Ts[i]);
    scan_one(c, Ts[i], Ts[i], (int)i, what, &a);
  }
  for (int i = 0; i < 3; i++) {
    snprintf(what, sizeof what, "%s SCAN T=4 again (%d)", mode, i);
    scan_one(c, 4, 4, i, what, &a);
    late += a;
  }
  CHECK(late == 0, "%s SCAN: steady state allocates nothing (%lld buffers after warm-up)", mode, (long long)late);
  snprintf(what, sizeof what, "%s SCAN with 4 and 3 slices", mode);
  scan_one(c, 4, 3, 0, what, &a);
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
  test_loop(be, true);
  test_loop(be, false);
  test_loop_grow(be, true);
  test_loop_grow(be, false);
  test_scan(be, true);
  test_scan(be, false);
  fbx_backend_destroy(be);
  printf("test_ir_loop: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
