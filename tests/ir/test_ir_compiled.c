/* The compiled subgraph against a mock host backend (naive f32 kernels):
 * fusion into one FUSED_EW, constant folding of Shape chains, path
 * classification, the cache (64 decode runs -> 1 MISS 63 HIT 0 RETRACE,
 * prefill lengths, LRU eviction), eager == compiled, zero-copy outputs,
 * node_prepare/release pairing, node states prepared once at create and
 * shared by every plan, steady state without allocation (only O(log n)
 * geometric growth over a growing past length), and input validation. Results are checked against values computed here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "exec/exec_compiled.h"

static int passed, failed;
#define CHECK(cond, ...)                                     \
  do {                                                       \
    bool ok_ = (cond);                                       \
    printf("%s ", ok_ ? "ok  " : "FAIL");                    \
    printf(__VA_ARGS__);                                     \
    printf("\n");                                            \
    ok_ ? passed++ : failed++;                               \
  } while (0)

/* ---- mock backend ---- */
static struct {
  int allocs, frees, runs, prepares, releases, fused_runs, shape_runs, mm_prepares, reshape_runs;
} M;

static fbx_status *m_alloc(fbx_backend *be, size_t n, void **out) {
  M.allocs++;
  *out = fbx_malloc_aligned(n ? n : 64);
  return *out ? NULL : FBX_ERR_OOM();
}
static void m_free(fbx_backend *be, void *p) { M.frees++; fbx_free_aligned(p); }
static fbx_status *m_copy(fbx_backend *be, void *d, const void *s, size_t n) { memcpy(d, s, n); return NULL; }
static fbx_status *m_prepare(fbx_backend *be, const fbx_ir_node *n, const fbx_tensor *const *ci, const fbx_tensor *in,
                             void **state) {
  M.prepares++;
  if (n->op == FBX_IR_OP_MATMUL) M.mm_prepares++;
  *state = fbx_malloc(16);
  return NULL;
}
static void m_release(fbx_backend *be, const fbx_ir_node *n, void *state) { M.releases++; fbx_free(state); }

static float ew1(fbx_ir_op op, float a) {
  switch (op) {
    case FBX_IR_OP_NEG: return -a;
    case FBX_IR_OP_TANH: return tanhf(a);
    case FBX_IR_OP_EXP: return expf(a);
    case FBX_IR_OP_RELU: return a > 0 ? a : 0;
    default: return a;
  }
}
static float ew2(fbx_ir_op op, float a, float b) {
  switch (op) {
    case FBX_IR_OP_ADD: return a + b;
    case FBX_IR_OP_SUB: return a - b;
    case FBX_IR_OP_MUL: return a * b;
    case FBX_IR_OP_DIV: return a / b;
    default: return 0;
  }
}
/* flat index into t for output index i under numpy broadcasting */
static int64_t bidx(const fbx_tensor *t, const fbx_tensor *out, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (int d = out->rank - 1; d >= 0; d--) {
    int64_t c = i % out->dims[d];
    i /= out->dims[d];
    int td = d - (out->rank - t->rank);
    if (td >= 0) {
      if (t->dims[td] != 1) idx += c * stride;
      stride *= t->dims[td];
    }
  }
  return idx;
}
static int64_t numel(const fbx_tensor *t) { int64_t n = 1; for (int i = 0; i < t->rank; i++) n *= t->dims[i]; return n; }

static fbx_status *m_run(fbx_backend *be, const fbx_ir_node *n, void *state, const fbx_tensor *in, int n_in,
                         fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  M.runs++;
  int64_t ne = numel(&out[0]);
  float *o = out[0].data;
  int cls = fbx_ir_op_class(n->op);
  if (n->op == FBX_IR_OP_FUSED_EW) {
    M.fused_runs++;
    const fbx_ir_ew_program *pg = n->params.fused.prog;
    float reg[128];
    for (int64_t i = 0; i < ne; i++) {
      for (int r = 0; r < pg->n_inputs; r++) reg[r] = ((const float *)in[r].data)[bidx(&in[r], &out[0], i)];
      for (int k = 0; k < pg->n_instrs; k++) {
        const fbx_ir_ew_instr *x = &pg->instrs[k];
        reg[pg->n_inputs + k] = fbx_ir_op_class(x->op) == FBX_IR_CLASS_EW1 ? ew1(x->op, reg[x->a]) : ew2(x->op, reg[x->a], reg[x->b]);
      }
      o[i] = reg[pg->out_reg];
    }
    return NULL;
  }
  if (cls == FBX_IR_CLASS_EW1) {
    for (int64_t i = 0; i < ne; i++) o[i] = ew1(n->op, ((const float *)in[0].data)[i]);
    return NULL;
  }
  if (cls == FBX_IR_CLASS_EW2) {
    for (int64_t i = 0; i < ne; i++)
      o[i] = ew2(n->op, ((const float *)in[0].data)[bidx(&in[0], &out[0], i)],
                 ((const float *)in[1].data)[bidx(&in[1], &out[0], i)]);
    return NULL;
  }
  switch (n->op) {
    case FBX_IR_OP_RESHAPE: M.reshape_runs++; memcpy(o, in[0].data, (size_t)ne * 4); return NULL;
    case FBX_IR_OP_SHAPE:
      M.shape_runs++;
      for (int64_t i = 0; i < ne; i++) ((int64_t *)out[0].data)[i] = in[0].dims[i];
      return NULL;
    case FBX_IR_OP_MATMUL: { /* 2-D only */
      int64_t Mr = in[0].dims[0], K = in[0].dims[1], N = in[1].dims[1];
      const float *a = in[0].data, *b = in[1].data;
      for (int64_t i = 0; i < Mr; i++)
        for (int64_t j = 0; j < N; j++) {
          float s = 0;
          for (int64_t k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
          o[i * N + j] = s;
        }
      return NULL;
    }
    default: return FBX_ERR_NOTIMPL("mock: %s", fbx_ir_op_name(n->op));
  }
}
static fbx_status *m_sync(fbx_backend *be) { return NULL; }
static const fbx_backend_vtable M_VT = {
    .name = "cpu", .host_visible = true, .buffer_alloc = m_alloc, .buffer_free = m_free,
    .copy_from_host = m_copy, .copy_to_host = m_copy, .copy_device = m_copy, .node_prepare = m_prepare,
    .node_release = m_release, .run_node = m_run, .synchronize = m_sync};
static fbx_backend MOCK = {&M_VT, NULL};

/* ---- output binding: host buffers owned by the test ---- */
typedef struct outs { float *buf[4]; int calls; } outs;
static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)same_as_input; /* the test's own buffers: never an input's */
  outs *o = ctx;
  o->calls++;
  size_t n = (size_t)numel(t) * fbx_dtype_size(t->dtype);
  fbx_free(o->buf[idx]);
  o->buf[idx] = fbx_malloc(n ? n : 1);
  *data = o->buf[idx];
  return o->buf[idx] ? NULL : FBX_ERR_OOM();
}
static void outs_free(outs *o) { for (int i = 0; i < 4; i++) fbx_free(o->buf[i]), o->buf[i] = NULL; }

static fbx_tensor TF(int rank, const int64_t *d, float *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = FBX_DTYPE_F32;
  t.rank = rank;
  for (int i = 0; i < rank; i++) t.dims[i] = d[i];
  t.data = data;
  return t;
}
#define OK(x)                                                        \
  do {                                                               \
    fbx_status *s_ = (x);                                            \
    if (s_) {                                                        \
      printf("FAIL %s: %s\n", #x, fbx_status_message(s_));           \
      fbx_status_free(s_);                                           \
      failed++;                                                      \
      return;                                                        \
    }                                                                \
  } while (0)

/* y = tanh((x + c) * z) - x ; c constant, a chain of 4 EW ops -> one FUSED_EW */
static void build_chain(fbx_ir_graph **gp, bool dyn) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int64_t d[2] = {dyn ? -1 : 2, 3};
  const char *sym[2] = {dyn ? "batch" : NULL, NULL};
  int x, z, c, a, m, t, y;
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, d, sym, &x);
  fbx_ir_graph_add_input(g, "z", FBX_DTYPE_F32, 1, (int64_t[]){3}, NULL, &z);
  fbx_ir_graph_add_const_f32(g, 0.5f, &c);
  fbx_ir_graph_emit(g, FBX_IR_OP_ADD, (int[]){x, c}, 2, NULL, FBX_DTYPE_F32, 2, "add", "Add", 0, &a);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){a, z}, 2, NULL, FBX_DTYPE_F32, 2, "mul", "Mul", 1, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_TANH, (int[]){m}, 1, NULL, FBX_DTYPE_F32, 2, "tanh", "Tanh", 2, &t);
  fbx_ir_graph_emit(g, FBX_IR_OP_SUB, (int[]){t, x}, 2, NULL, FBX_DTYPE_F32, 2, "sub", "Sub", 3, &y);
  fbx_ir_graph_mark_output(g, y);
  *gp = g;
}

static void test_fusion_and_eager(void) {
  float x[6] = {-1, 0, 1, 2, 3, -2}, z[3] = {0.5f, -1, 2}, want[6];
  for (int i = 0; i < 6; i++) want[i] = tanhf((x[i] + 0.5f) * z[i % 3]) - x[i];
  for (int compile = 1; compile >= 0; compile--) {
    fbx_ir_graph *g;
    build_chain(&g, false);
    fbx_exec_compiled *c;
    fbx_exec_compile_options opt = {.compile = compile, .cache_limit = 4};
    OK(fbx_exec_compiled_create(g, &MOCK, &opt, "chain", &c));
    fbx_tensor in[2] = {TF(2, (int64_t[]){2, 3}, x), TF(1, (int64_t[]){3}, z)};
    outs o = {0};
    fbx_exec_run_report r;
    memset(&M, 0, sizeof M);
    OK(fbx_exec_compiled_run(c, in, 2, out_fn, &o, &r));
    float err = 0;
    for (int i = 0; i < 6; i++) err = fmaxf(err, fabsf(o.buf[0][i] - want[i]));
    if (compile) {
      CHECK(M.runs == 1 && M.fused_runs == 1, "fusion: 4-op chain runs as 1 FUSED_EW step (runs=%d fused=%d)", M.runs, M.fused_runs);
      CHECK(err < 1e-6f, "fusion: fused result matches reference (max err %g)", err);
      CHECK(r.path == FBX_EXEC_PATH_GENERAL && r.cache == FBX_EXEC_CACHE_MISS, "static graph -> general path, MISS first");
      CHECK(r.copyout_count == 0 && r.wrap_count == 2, "zero-copy: inputs wrapped (2), output written in place");
      int allocs = M.allocs;
      OK(fbx_exec_compiled_run(c, in, 2, out_fn, &o, &r));
      CHECK(r.cache == FBX_EXEC_CACHE_HIT && M.allocs == allocs, "second run HIT, no backend allocation");
    } else {
      CHECK(r.path == FBX_EXEC_PATH_EAGER && r.cache == FBX_EXEC_CACHE_NONE && M.runs == 4,
            "compile off -> eager, 4 unfused steps (runs=%d)", M.runs);
      CHECK(err < 1e-6f, "eager result matches reference (max err %g)", err);
    }
    fbx_exec_compiled_destroy(c);
    outs_free(&o);
  }
}

/* out = reshape(x * 2, shape(x)[..]) with Shape folded on the general path */
static void test_fold_shape(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, two, m, s, r, mm, w;
  int64_t d[2] = {-1, 4};
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, d, (const char *[]){"n", NULL}, &x);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){x, two}, 2, NULL, FBX_DTYPE_F32, 2, "mul", "Mul", 0, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){x}, 1, NULL, FBX_DTYPE_I64, 1, "shape", "Shape", 1, &s);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){m, s}, 2, NULL, FBX_DTYPE_F32, 2, "rs", "Reshape", 2, &r);
  float wv[8] = {1, 0, 0, 1, 1, 1, 0, 0}; /* (4,2) */
  fbx_ir_graph_add_const(g, "w", FBX_DTYPE_F32, 2, (int64_t[]){4, 2}, wv, &w);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){r, w}, 2, NULL, FBX_DTYPE_F32, 2, "mm", "MatMul", 3, &mm);
  fbx_ir_graph_mark_output(g, mm);
  fbx_ir_graph_mark_output(g, x); /* an input as output: copied */
  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 4};
  memset(&M, 0, sizeof M);
  OK(fbx_exec_compiled_create(g, &MOCK, &opt, "fold", &c));
  /* Mul (x, const 2) and MatMul (r, const w): prepared at create */
  CHECK(M.prepares == 2 && M.mm_prepares == 1, "create prepares nodes with constant and run-time inputs (%d)",
        M.prepares);
  float xv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  fbx_tensor in[1] = {TF(2, (int64_t[]){2, 4}, xv)};
  outs o = {0};
  fbx_exec_run_report rep;
  OK(fbx_exec_compiled_run(c, in, 1, out_fn, &o, &rep));
  /* row i: 2*(x0 + x2, x1 + x2) */
  bool ok = o.buf[0][0] == 8 && o.buf[0][1] == 10 && o.buf[0][2] == 24 && o.buf[0][3] == 26;
  CHECK(ok, "fold: Shape->Reshape->MatMul values (%g %g %g %g)", o.buf[0][0], o.buf[0][1], o.buf[0][2], o.buf[0][3]);
  CHECK(M.shape_runs == 0, "fold: Shape of a graph input folded on the general path");
  /* + Reshape, whose shape input is folded in this plan: prepared by the plan */
  CHECK(M.prepares == 3 && M.mm_prepares == 1, "run prepares only the node fed by a folded constant (%d)",
        M.prepares);
  CHECK(rep.copyout_count == 1 && o.buf[1] && o.buf[1][7] == 8, "graph input as output is copied (copyout=%lld)",
        (long long)rep.copyout_count);
  fbx_exec_compiled_destroy(c);
  CHECK(M.releases == M.prepares && M.frees == M.allocs, "destroy releases node states (%d/%d) and buffers (%d/%d)",
        M.releases, M.prepares, M.frees, M.allocs);
  outs_free(&o);
}

/* View steps on a host-visible backend (exec_plan.c): a Reshape of an
 * intermediate is its input's buffer (no kernel), a Reshape of a graph input
 * and a Reshape that is a graph output run their kernel; values against
 * products computed here, over two runs of one plan. */
static void naive_mm(const float *a, const float *b, float *c, int Mr, int K, int N) {
  for (int i = 0; i < Mr; i++)
    for (int j = 0; j < N; j++) {
      float acc = 0;
      for (int k = 0; k < K; k++) acc += a[i * K + k] * b[k * N + j];
      c[i * N + j] = acc;
    }
}

static void test_views(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, w, w2, m, s42, r, y1, s32, r2, y2, s8, y3;
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, 3}, NULL, &x);
  fbx_ir_graph_add_input(g, "w", FBX_DTYPE_F32, 2, (int64_t[]){3, 4}, NULL, &w);
  fbx_ir_graph_add_input(g, "w2", FBX_DTYPE_F32, 2, (int64_t[]){2, 3}, NULL, &w2);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){4, 2}, 2, &s42);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){3, 2}, 2, &s32);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){8}, 1, &s8);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, w}, 2, NULL, FBX_DTYPE_F32, 2, "mm", "MatMul", 0, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){m, s42}, 2, NULL, FBX_DTYPE_F32, 2, "rs", "Reshape", 1, &r);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){r, w2}, 2, NULL, FBX_DTYPE_F32, 2, "mm1", "MatMul", 2, &y1);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){x, s32}, 2, NULL, FBX_DTYPE_F32, 2, "rsx", "Reshape", 3, &r2);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){r2, w2}, 2, NULL, FBX_DTYPE_F32, 2, "mm2", "MatMul", 4, &y2);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){m, s8}, 2, NULL, FBX_DTYPE_F32, 1, "rso", "Reshape", 5, &y3);
  fbx_ir_graph_mark_output(g, y1);
  fbx_ir_graph_mark_output(g, y2);
  fbx_ir_graph_mark_output(g, y3);
  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 4};
  memset(&M, 0, sizeof M);
  OK(fbx_exec_compiled_create(g, &MOCK, &opt, "views", &c));
  outs o = {0};
  for (int run = 0; run < 2; run++) {
    float xv[6], wv[12], w2v[6], mref[8], y1ref[12], y2ref[9];
    for (int i = 0; i < 6; i++) xv[i] = (float)(i + 1 + run), w2v[i] = (float)(i % 3) - 0.5f;
    for (int i = 0; i < 12; i++) wv[i] = (float)((i * 7) % 5) - 2.f;
    naive_mm(xv, wv, mref, 2, 3, 4);
    naive_mm(mref, w2v, y1ref, 4, 2, 3); /* m viewed as (4, 2) */
    naive_mm(xv, w2v, y2ref, 3, 2, 3);   /* x viewed as (3, 2) */
    fbx_tensor in[3] = {TF(2, (int64_t[]){2, 3}, xv), TF(2, (int64_t[]){3, 4}, wv), TF(2, (int64_t[]){2, 3}, w2v)};
    int before = M.reshape_runs;
    fbx_exec_run_report rep;
    OK(fbx_exec_compiled_run(c, in, 3, out_fn, &o, &rep));
    bool ok = true;
    for (int i = 0; i < 12; i++) ok &= o.buf[0][i] == y1ref[i];
    for (int i = 0; i < 9; i++) ok &= o.buf[1][i] == y2ref[i];
    for (int i = 0; i < 8; i++) ok &= o.buf[2][i] == mref[i];
    CHECK(ok, "views run %d: Reshape of an intermediate read in place, of an input and as an output copied", run);
    CHECK(M.reshape_runs - before == 2, "views run %d: 2 Reshape kernels (input's, output's), the view none (%d)", run,
          M.reshape_runs - before);
  }
  fbx_exec_compiled_destroy(c);
  CHECK(M.frees == M.allocs, "views: buffers freed (%d/%d)", M.frees, M.allocs);
  outs_free(&o);
}

/* decoder-like graph: ids (1, seq), past (1, 2, past, 4) -> out = past * 2 + ... */
static fbx_ir_graph *build_decoder(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int ids, past, two, y;
  fbx_ir_graph_add_input(g, "ids", FBX_DTYPE_F32, 2, (int64_t[]){1, -1}, (const char *[]){"batch", "sequence_length"}, &ids);
  fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 4, (int64_t[]){1, 2, -1, 4},
                         (const char *[]){"batch", NULL, "past_sequence_length", NULL}, &past);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){past, two}, 2, NULL, FBX_DTYPE_F32, 4, "m", "Mul", 0, &y);
  fbx_ir_graph_mark_output(g, y);
  return g;
}

static void test_paths_and_cache(void) {
  fbx_ir_graph *g = build_decoder();
  CHECK(fbx_exec_graph_is_decoder(g), "decoder: two symbolic dims outside dim 0");
  fbx_ir_graph *gc;
  build_chain(&gc, true);
  CHECK(!fbx_exec_graph_is_decoder(gc), "non-decoder: one symbolic dim (dim 0 only)");
  fbx_ir_graph_destroy(gc);
  static float ids[64], past[1 * 2 * 80 * 4];
  for (int i = 0; i < 640; i++) past[i] = (float)i;
  fbx_tensor in1[2] = {TF(2, (int64_t[]){1, 1}, ids), TF(4, (int64_t[]){1, 2, 7, 4}, past)};
  fbx_tensor in5[2] = {TF(2, (int64_t[]){1, 5}, ids), TF(4, (int64_t[]){1, 2, 0, 4}, past)};
  CHECK(fbx_exec_path_classify(g, true, in1, 2) == FBX_EXEC_PATH_DECODE, "classify: seq 1 -> decode");
  CHECK(fbx_exec_path_classify(g, true, in5, 2) == FBX_EXEC_PATH_PREFILL, "classify: seq 5 -> prefill");
  CHECK(fbx_exec_path_classify(g, false, in1, 2) == FBX_EXEC_PATH_EAGER, "classify: compile off -> eager");

  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 4};
  OK(fbx_exec_compiled_create(g, &MOCK, &opt, "dec", &c));
  outs o = {0};
  fbx_exec_run_report r;
  int cnt[4] = {0}, bad_vals = 0;
  char first_key[256] = "";
  for (int step = 0; step < 64; step++) {
    fbx_tensor in[2] = {TF(2, (int64_t[]){1, 1}, ids), TF(4, (int64_t[]){1, 2, 10 + step, 4}, past)};
    if (10 + step > 80) in[1].dims[2] = 80;
    OK(fbx_exec_compiled_run(c, in, 2, out_fn, &o, &r));
    if (r.path != FBX_EXEC_PATH_DECODE) bad_vals++;
    if (!step) snprintf(first_key, sizeof first_key, "%s", r.shape_key);
    cnt[r.cache]++;
    int64_t n = 2 * in[1].dims[2] * 4;
    for (int64_t i = 0; i < n; i++) if (o.buf[0][i] != 2.0f * past[i]) { bad_vals++; break; }
  }
  CHECK(cnt[FBX_EXEC_CACHE_MISS] == 1 && cnt[FBX_EXEC_CACHE_HIT] == 63 && cnt[FBX_EXEC_CACHE_RETRACE] == 0 && !bad_vals,
        "64 decode steps: %d MISS %d HIT %d RETRACE, key '%s'", cnt[FBX_EXEC_CACHE_MISS], cnt[FBX_EXEC_CACHE_HIT],
        cnt[FBX_EXEC_CACHE_RETRACE], first_key);
  CHECK(strcmp(first_key, "1x1|1x2x*x4") == 0, "decode key is shapeless in the past length");
  fbx_exec_cache_event ev[3];
  for (int k = 0; k < 3; k++) {
    fbx_tensor in[2] = {TF(2, (int64_t[]){1, k == 1 ? 7 : 5}, ids), TF(4, (int64_t[]){1, 2, 0, 4}, past)};
    OK(fbx_exec_compiled_run(c, in, 2, out_fn, &o, &r));
    ev[k] = r.cache;
  }
  CHECK(ev[0] == FBX_EXEC_CACHE_MISS && ev[1] == FBX_EXEC_CACHE_MISS && ev[2] == FBX_EXEC_CACHE_HIT,
        "prefill lengths 5,7,5 -> MISS MISS HIT (two entries)");
  fbx_exec_compiled_destroy(c);

  /* LRU with 2 entries on the general path: keys A B A C A B */
  fbx_ir_graph *g2;
  build_chain(&g2, true);
  opt.cache_limit = 2;
  OK(fbx_exec_compiled_create(g2, &MOCK, &opt, "lru", &c));
  static float xv[64], zv[3] = {1, 1, 1};
  int rows[6] = {1, 2, 1, 3, 1, 2};
  const fbx_exec_cache_event want[6] = {FBX_EXEC_CACHE_MISS, FBX_EXEC_CACHE_MISS, FBX_EXEC_CACHE_HIT,
                                      FBX_EXEC_CACHE_MISS, FBX_EXEC_CACHE_HIT, FBX_EXEC_CACHE_RETRACE};
  bool lru_ok = true;
  for (int k = 0; k < 6; k++) {
    fbx_tensor in[2] = {TF(2, (int64_t[]){rows[k], 3}, xv), TF(1, (int64_t[]){3}, zv)};
    OK(fbx_exec_compiled_run(c, in, 2, out_fn, &o, &r));
    if (r.cache != want[k]) lru_ok = false;
    printf("     run %d key %-8s %s\n", k, r.shape_key, fbx_exec_cache_event_name(r.cache));
  }
  CHECK(lru_ok, "LRU limit 2: A B A C(evicts B) A B(rebuilt after eviction = RETRACE)");
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
}

/* Decoder-like graph with a weight: ids (1, seq), past (1, 2, past, 4), h (rows, 4)
 *   y  = h @ W                (rows, 3)     W constant (4, 3)
 *   a  = past * 2             (1, 2, past, 4)
 *   b  = Reshape(a, Shape(a)) (1, 2, past, 4)  a has two uses: not fused, own slot
 *   z  = b - past             (1, 2, past, 4) */
static const float W43[12] = {1, 2, 0, -1, 0, 1, 3, 1, 1, 0.5f, -2, 4};
static fbx_ir_graph *build_weighted_decoder(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int ids, past, h, w, two, y, a, s, b, z;
  fbx_ir_graph_add_input(g, "ids", FBX_DTYPE_F32, 2, (int64_t[]){1, -1}, (const char *[]){"batch", "sequence_length"}, &ids);
  fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 4, (int64_t[]){1, 2, -1, 4},
                         (const char *[]){"batch", NULL, "past_sequence_length", NULL}, &past);
  fbx_ir_graph_add_input(g, "h", FBX_DTYPE_F32, 2, (int64_t[]){-1, 4}, (const char *[]){"rows", NULL}, &h);
  fbx_ir_graph_add_const(g, "w", FBX_DTYPE_F32, 2, (int64_t[]){4, 3}, W43, &w);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){h, w}, 2, NULL, FBX_DTYPE_F32, 2, "mm", "MatMul", 0, &y);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){past, two}, 2, NULL, FBX_DTYPE_F32, 4, "m", "Mul", 1, &a);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){a}, 1, NULL, FBX_DTYPE_I64, 1, "sh", "Shape", 2, &s);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){a, s}, 2, NULL, FBX_DTYPE_F32, 4, "rs", "Reshape", 3, &b);
  fbx_ir_graph_emit(g, FBX_IR_OP_SUB, (int[]){b, past}, 2, NULL, FBX_DTYPE_F32, 4, "sub", "Sub", 4, &z);
  fbx_ir_graph_mark_output(g, y);
  fbx_ir_graph_mark_output(g, z);
  return g;
}

/* Reference check of both outputs: y = h @ W (naive), z = past (2p - p). */
static bool check_weighted(const outs *o, const float *h, int64_t rows, const float *past, int64_t n_past) {
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < 3; j++) {
      float want = 0;
      for (int k = 0; k < 4; k++) want += h[r * 4 + k] * W43[k * 3 + j];
      if (fabsf(o->buf[0][r * 3 + j] - want) > 1e-5f) return false;
    }
  for (int64_t i = 0; i < 2 * n_past * 4; i++)
    if (o->buf[1][i] != past[i]) return false;
  return true;
}

/* The MatMul's packed state is made once, at create, and shared by the
 * prefill plans and the decode plan; released once at destroy. */
static void test_shared_prepare(void) {
  static float ids[64], past[2 * 64 * 4], h[8 * 4];
  for (int i = 0; i < 2 * 64 * 4; i++) past[i] = (float)(i % 17) - 8;
  for (int i = 0; i < 32; i++) h[i] = (float)(i % 5) * 0.5f - 1;
  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 8};
  memset(&M, 0, sizeof M);
  OK(fbx_exec_compiled_create(build_weighted_decoder(), &MOCK, &opt, "shared", &c));
  int at_create = M.prepares;
  CHECK(M.mm_prepares == 1, "shared: MatMul with a constant weight prepared at create (%d)", M.mm_prepares);
  outs o = {0};
  fbx_exec_run_report r;
  int seqs[4] = {5, 7, 1, 1};
  bool ok = true;
  int misses = 0;
  for (int k = 0; k < 4; k++) {
    int64_t rows = seqs[k], np = k < 2 ? 0 : 5 + k;
    fbx_tensor in[3] = {TF(2, (int64_t[]){1, seqs[k]}, ids), TF(4, (int64_t[]){1, 2, np, 4}, past),
                        TF(2, (int64_t[]){rows, 4}, h)};
    OK(fbx_exec_compiled_run(c, in, 3, out_fn, &o, &r));
    misses += r.cache == FBX_EXEC_CACHE_MISS;
    if (!check_weighted(&o, h, rows, past, np)) ok = false;
  }
  CHECK(ok && misses == 3, "shared: prefill 5, prefill 7, decode x2 -> 3 plans, results match reference");
  CHECK(M.mm_prepares == 1, "shared: no plan prepares the MatMul again (%d MatMul prepares over 3 plans)",
        M.mm_prepares);
  printf("     node_prepare calls: %d at create, %d in total\n", at_create, M.prepares);
  fbx_exec_compiled_destroy(c);
  CHECK(M.releases == M.prepares && M.frees == M.allocs, "shared: destroy releases every state once (%d/%d), buffers (%d/%d)",
        M.releases, M.prepares, M.frees, M.allocs);
  outs_free(&o);

  /* compile off: nothing is prepared (the eager path does not use states) */
  memset(&M, 0, sizeof M);
  opt.compile = false;
  OK(fbx_exec_compiled_create(build_weighted_decoder(), &MOCK, &opt, "eager", &c));
  CHECK(M.prepares == 0, "compile off: no node_prepare at create");
  fbx_exec_compiled_destroy(c);
}

/* Decode over a growing past length 2..N (a past of exactly 1 keeps its dim
 * in the key, like the query length, and gets a plan of its own): after the first (MISS) run, the
 * only backend allocations are the slots' geometric (x1.5) growth, so the
 * runs that allocate are O(log N) and most runs allocate nothing. */
static void test_decode_allocs(void) {
  enum { N = 1024 };
  static float ids[1], past[2 * N * 4], h[4] = {1, -1, 0.5f, 2};
  for (int i = 0; i < 2 * N * 4; i++) past[i] = (float)(i % 13);
  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 4};
  memset(&M, 0, sizeof M);
  OK(fbx_exec_compiled_create(build_weighted_decoder(), &MOCK, &opt, "allocs", &c));
  outs o = {0};
  fbx_exec_run_report r;
  int growth_runs = 0, growth_allocs = 0, warm_allocs = 0, late_allocs = 0, bad = 0;
  for (int64_t np = 2; np <= N; np++) {
    fbx_tensor in[3] = {TF(2, (int64_t[]){1, 1}, ids), TF(4, (int64_t[]){1, 2, np, 4}, past),
                        TF(2, (int64_t[]){1, 4}, h)};
    int before = M.allocs;
    OK(fbx_exec_compiled_run(c, in, 3, out_fn, &o, &r));
    int d = M.allocs - before;
    if (np == 2) warm_allocs = d;
    else if (d) growth_runs++, growth_allocs += d;
    if (np > N / 2 + N / 4) late_allocs += d;
    if (r.path != FBX_EXEC_PATH_DECODE || (np > 2 && r.cache != FBX_EXEC_CACHE_HIT)) bad++;
    if (np % 97 == 0 && !check_weighted(&o, h, 1, past, np)) bad++;
  }
  /* slots of a and b grow with past (Shape's 4 int64 do not); each grows
   * x1.5 at most log_1.5(N * 32 bytes / 64) + 1 ~ 18 times; 3 x 18 leaves
   * room for one more growing slot */
  int bound = 3 * 18;
  printf("     decode 2..%d: %d allocs on warm-up, then %d growth allocs in %d runs (bound %d), %d in the last quarter\n",
         N, warm_allocs, growth_allocs, growth_runs, bound, late_allocs);
  CHECK(!bad, "decode 2..%d: all runs decode HIT after the first, results match reference", N);
  CHECK(growth_allocs <= bound && growth_runs <= bound, "steady-state decode allocates only on geometric growth: O(log n)");
  CHECK(late_allocs <= 3, "past 768..1024: at most one growth per slot (%d allocs)", late_allocs);
  fbx_exec_compiled_destroy(c);
  CHECK(M.frees == M.allocs, "decode: every buffer freed at destroy (%d/%d)", M.frees, M.allocs);
  outs_free(&o);
}

static void test_validation(void) {
  fbx_ir_graph *g;
  build_chain(&g, false);
  fbx_exec_compiled *c;
  fbx_exec_compile_options opt = {.compile = true, .cache_limit = 2};
  OK(fbx_exec_compiled_create(g, &MOCK, &opt, "val", &c));
  float x[6] = {0}, z[3] = {0};
  outs o = {0};
  fbx_tensor in[2] = {TF(2, (int64_t[]){2, 3}, x), TF(1, (int64_t[]){3}, z)};
  fbx_status *s1 = fbx_exec_compiled_run(c, in, 1, out_fn, &o, NULL);
  in[1].dtype = FBX_DTYPE_I32;
  fbx_status *s2 = fbx_exec_compiled_run(c, in, 2, out_fn, &o, NULL);
  in[1].dtype = FBX_DTYPE_F32;
  in[0].dims[0] = 5;
  fbx_status *s3 = fbx_exec_compiled_run(c, in, 2, out_fn, &o, NULL);
  CHECK(s1 && s2 && s3, "validation: input count, dtype, static dim errors");
  if (s3) printf("     e.g. %s\n", fbx_status_message(s3));
  fbx_status_free(s1), fbx_status_free(s2), fbx_status_free(s3);
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
}

int main(void) {
  test_fusion_and_eager();
  test_fold_shape();
  test_views();
  test_paths_and_cache();
  test_shared_prepare();
  test_decode_allocs();
  test_validation();
  printf("ir: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
