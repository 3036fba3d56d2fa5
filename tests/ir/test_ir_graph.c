/* Graph capture and replay in the executor, on the opaque test backend
 * (which records a capture's launch list and replays it, with CUDA's traps:
 * a host source is re-read at launch, a sync during capture fails it).
 * Every run is compared bit for bit with the same graph on the CPU backend
 * (same kernels, never captured), and the counters are checked against the
 * backend's own:
 *
 *  - a static-shape (general) plan: live runs until two in a row enqueue the
 *    same work (run 0 grows a shared slot mid-run, so runs 1 and 2), then a
 *    capture (run 3), then replays; a
 *    replay launches no node itself (backend launches unchanged), allocates
 *    nothing and synchronises once; new input values each run are seen;
 *  - a decode plan whose past grows every run never captures (its launches
 *    change every run) and stays right;
 *  - a decode plan at a fixed past captures, and its host-step results
 *    (the Shape/Gather/Concat chain, uploaded inside the graph) replay right;
 *    a shape change (past + 1) drops the graph, runs live, and a stable
 *    shape again forces a re-capture (2 captures in all);
 *  - without a host backend the plan reads shape data back: never captured. */
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "ir/ir_compiled.h"

enum { D = 8, MAXL = 64 };
static float W[D * D];

typedef struct outs { float *buf[3]; size_t bytes[3]; } outs;
static fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data) {
  outs *o = ctx;
  size_t n = fbx_tensor_nbytes(t);
  if (o->bytes[idx] < n || !o->buf[idx]) {
    fbx_free(o->buf[idx]);
    o->buf[idx] = fbx_malloc(n ? n : 1);
    o->bytes[idx] = n;
  }
  *data = o->buf[idx];
  return o->buf[idx] ? NULL : FBX_ERR_OOM();
}
static void outs_free(outs *o) {
  for (int i = 0; i < 3; i++) fbx_free(o->buf[i]), o->buf[i] = NULL, o->bytes[i] = 0;
}

static fbx_tensor T3(int64_t a, int64_t b, int64_t c, float *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = FBX_DTYPE_F32;
  t.rank = 3;
  t.dims[0] = a, t.dims[1] = b, t.dims[2] = c;
  t.data = data;
  return t;
}

#define OK(x)                                                   \
  do {                                                          \
    fbx_status *s_ = (x);                                       \
    CHECK(!s_, "%s: %s", #x, s_ ? fbx_status_message(s_) : ""); \
    if (s_) {                                                   \
      fbx_status_free(s_);                                      \
      return;                                                   \
    }                                                           \
  } while (0)

/* x (1, S, D), past (1, P, D); symbolic "seq"/"past_seq" when decoder, else fixed (S0, P0):
 *   kv = Concat(past, x; 1)                                              -> output 1
 *   r  = Reshape(kv, Concat([1], Gather(Shape(kv), [1]), [2], [D/2]))    -> output 2 (1, P+S, 2, D/2)
 *   y  = Tanh(Softmax(x @ W, 2) * 2)                                     -> output 0 */
static fbx_ir_graph *build(bool decoder, int64_t S0, int64_t P0) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, past, w, i1, c1, c2, ch, two;
  if (decoder) {
    fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D}, (const char *[]){"batch", "seq", NULL}, &x);
    fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D},
                           (const char *[]){"batch", "past_seq", NULL}, &past);
  } else {
    fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, S0, D}, NULL, &x);
    fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 3, (int64_t[]){1, P0, D}, NULL, &past);
  }
  fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){D, D}, W, &w);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &i1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &c1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){2}, 1, &c2);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){D / 2}, 1, &ch);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_params a0, a1, a2, none;
  memset(&a0, 0, sizeof a0);
  memset(&none, 0, sizeof none);
  a1 = a2 = a0;
  a1.axis.axis = 1;
  a2.axis.axis = 2;
  int kv, s_kv, len, ns, r, q, sm, m, y;
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){past, x}, 2, &a1, FBX_DTYPE_F32, 3, "kv", "Concat", 0, &kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){kv}, 1, &none, FBX_DTYPE_I64, 1, "shape_kv", "Shape", 1, &s_kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_GATHER, (int[]){s_kv, i1}, 2, &a0, FBX_DTYPE_I64, 1, "len", "Gather", 2, &len);
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){c1, len, c2, ch}, 4, &a0, FBX_DTYPE_I64, 1, "ns", "Concat", 3, &ns);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){kv, ns}, 2, &none, FBX_DTYPE_F32, 4, "r", "Reshape", 4, &r);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, w}, 2, NULL, FBX_DTYPE_F32, 3, "q", "MatMul", 5, &q);
  fbx_ir_graph_emit(g, FBX_IR_OP_SOFTMAX, (int[]){q}, 1, &a2, FBX_DTYPE_F32, 3, "sm", "Softmax", 6, &sm);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){sm, two}, 2, NULL, FBX_DTYPE_F32, 3, "m", "Mul", 7, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_TANH, (int[]){m}, 1, NULL, FBX_DTYPE_F32, 3, "y", "Tanh", 8, &y);
  fbx_ir_graph_mark_output(g, y);
  fbx_ir_graph_mark_output(g, kv);
  fbx_ir_graph_mark_output(g, r);
  return g;
}

static float X[MAXL * D], PAST[MAXL * D];

/* New values for run k (same shapes): a replay must see them. */
static void fill(int k) {
  for (int i = 0; i < MAXL * D; i++) {
    X[i] = (float)(((i + 3 * k) * 5) % 13 - 6) * 0.1f;
    PAST[i] = (float)(((i + 7 * k) * 3) % 17 - 8) * 0.1f;
  }
}

static fbx_opaque_stats stats_of(fbx_backend *be) {
  fbx_opaque_stats s;
  memset(&s, 0, sizeof s);
  fbx_opaque_backend_stats(be, &s);
  return s;
}

/* The two compiled objects under test: c on the opaque backend, ref on the CPU. */
typedef struct pair {
  fbx_ir_compiled *c, *ref;
  outs o, ro;
  int64_t captures, replays;
} pair;

/* One run of both; true when every output is bit-identical. r: c's report. */
static bool run_pair(pair *pp, int64_t S, int64_t P, fbx_ir_run_report *r, fbx_status **st) {
  fbx_tensor in[2] = {T3(1, S, D, X), T3(1, P, D, PAST)};
  fbx_ir_run_report rr;
  *st = fbx_ir_compiled_run(pp->c, in, 2, out_fn, &pp->o, r);
  if (!*st) *st = fbx_ir_compiled_run(pp->ref, in, 2, out_fn, &pp->ro, &rr);
  if (*st) return false;
  pp->captures += r->graph_captures;
  pp->replays += r->graph_replays;
  size_t n[3] = {sizeof(float) * (size_t)(S * D), sizeof(float) * (size_t)((P + S) * D),
                 sizeof(float) * (size_t)((P + S) * D)};
  for (int i = 0; i < 3; i++)
    if (memcmp(pp->o.buf[i], pp->ro.buf[i], n[i]) != 0) return false;
  return true;
}

static void pair_free(pair *pp) {
  fbx_ir_compiled_destroy(pp->c);
  fbx_ir_compiled_destroy(pp->ref);
  outs_free(&pp->o);
  outs_free(&pp->ro);
}

static void test_static_plan(fbx_backend *opq, fbx_backend *cpu) {
  fbx_ir_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  OK(fbx_ir_compiled_create(build(false, 4, 5), opq, &oo, "static_opaque", &pp.c));
  OK(fbx_ir_compiled_create(build(false, 4, 5), cpu, &co, "static_cpu", &pp.ref));
  fbx_status *st = NULL;
  for (int k = 0; k < 8; k++) {
    fill(k);
    fbx_ir_run_report r;
    fbx_opaque_stats s0 = stats_of(opq);
    bool same = run_pair(&pp, 4, 5, &r, &st);
    fbx_opaque_stats s1 = stats_of(opq);
    CHECK(!st, "static run %d: %s", k, st ? fbx_status_message(st) : "");
    if (st) break;
    CHECK(r.path == FBX_IR_PATH_GENERAL, "static run %d: path %s", k, fbx_ir_path_name(r.path));
    CHECK(same, "static run %d: outputs bit-identical to the CPU backend", k);
    int64_t want_c = k == 3, want_r = k > 3;
    CHECK(r.graph_captures == want_c && r.graph_replays == want_r,
          "static run %d: %lld captures / %lld replays (want %lld / %lld)", k, (long long)r.graph_captures,
          (long long)r.graph_replays, (long long)want_c, (long long)want_r);
    CHECK(s1.graph_captures - s0.graph_captures == want_c, "static run %d: the backend captured %lld", k,
          (long long)(s1.graph_captures - s0.graph_captures));
    CHECK(s1.graph_launches - s0.graph_launches == (k >= 3), "static run %d: %lld graph launches", k,
          (long long)(s1.graph_launches - s0.graph_launches));
    if (k > 3) {
      CHECK(s1.launches == s0.launches && s1.replayed > s0.replayed,
            "static replay %d: no live launch (%lld), replayed %lld ops", k, (long long)(s1.launches - s0.launches),
            (long long)(s1.replayed - s0.replayed));
      CHECK(r.allocs == 0 && s1.allocs == s0.allocs, "static replay %d: %lld allocs (want 0)", k, (long long)r.allocs);
      CHECK(r.host_syncs == 1, "static replay %d: %lld host syncs (want 1)", k, (long long)r.host_syncs);
    }
  }
  fbx_status_free(st);
  CHECK(pp.captures == 1 && pp.replays == 4, "static: %lld captures / %lld replays (want 1 / 4)",
        (long long)pp.captures, (long long)pp.replays);
  pair_free(&pp);
}

static void test_decode(fbx_backend *opq, fbx_backend *cpu) {
  fbx_ir_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  OK(fbx_ir_compiled_create(build(true, 0, 0), opq, &oo, "dec_opaque", &pp.c));
  OK(fbx_ir_compiled_create(build(true, 0, 0), cpu, &co, "dec_cpu", &pp.ref));
  fbx_status *st = NULL;
  fbx_ir_run_report r;
  int bad = 0;
  for (int64_t P = 3; P < 20 && !st; P++) { /* a growing past: every run's launches differ */
    fill((int)P);
    if (!run_pair(&pp, 1, P, &r, &st) || r.path != FBX_IR_PATH_DECODE) bad++;
  }
  CHECK(!st && !bad, "growing past: %d runs differ from the CPU backend (%s)", bad, st ? fbx_status_message(st) : "");
  CHECK(pp.captures == 0 && pp.replays == 0, "growing past: %lld captures / %lld replays (want 0 / 0)",
        (long long)pp.captures, (long long)pp.replays);
  /* a fixed past: capture on the third run, replays after it */
  int64_t c0 = pp.captures;
  for (int k = 0; k < 6 && !st; k++) {
    fill(100 + k);
    if (!run_pair(&pp, 1, 20, &r, &st)) bad++;
    if (k > 2 && (r.graph_replays != 1 || r.allocs != 0 || r.host_syncs != 1)) bad++;
  }
  CHECK(!st && !bad, "fixed past: %d runs wrong or not replayed with 0 allocs / 1 sync (%s)", bad,
        st ? fbx_status_message(st) : "");
  CHECK(pp.captures - c0 == 1 && pp.replays == 3, "fixed past: %lld captures / %lld replays (want 1 / 3)",
        (long long)(pp.captures - c0), (long long)pp.replays);
  /* a shape change: the graph is dropped (live run), then a stable shape captures again */
  for (int k = 0; k < 4 && !st; k++) {
    fill(200 + k);
    if (!run_pair(&pp, 1, 21, &r, &st)) bad++;
    if (k == 0 && (r.graph_replays || r.graph_captures)) bad++;
  }
  CHECK(!st && !bad, "past + 1: %d runs wrong, or the first one replayed (%s)", bad, st ? fbx_status_message(st) : "");
  CHECK(pp.captures - c0 == 2, "past + 1: re-captured (%lld captures, want 2)", (long long)(pp.captures - c0));
  fbx_status_free(st);
  pair_free(&pp);
}

static void test_read_back_never_captures(fbx_backend *opq, fbx_backend *cpu) {
  fbx_ir_compile_options oo = {.compile = true, .cache_limit = 4}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  OK(fbx_ir_compiled_create(build(true, 0, 0), opq, &oo, "rb_opaque", &pp.c));
  OK(fbx_ir_compiled_create(build(true, 0, 0), cpu, &co, "rb_cpu", &pp.ref));
  fbx_status *st = NULL;
  fbx_ir_run_report r;
  int bad = 0;
  for (int k = 0; k < 6 && !st; k++) {
    fill(k);
    if (!run_pair(&pp, 1, 9, &r, &st)) bad++;
  }
  CHECK(!st && !bad, "read-backs: %d runs wrong (%s)", bad, st ? fbx_status_message(st) : "");
  CHECK(pp.captures == 0 && pp.replays == 0, "read-backs: %lld captures (want 0)", (long long)pp.captures);
  fbx_status_free(st);
  pair_free(&pp);
}

int main(void) {
  for (int i = 0; i < D * D; i++) W[i] = (float)((i * 7) % 11 - 5) * 0.05f;
  fbx_backend *cpu = NULL, *opq = NULL;
  fbx_cpu_options co = {.threads = 1};
  fbx_opaque_options oo = {.threads = 1, .decline_op = -1};
  fbx_status *st = fbx_cpu_backend_create(&co, &cpu);
  if (!st) st = fbx_opaque_backend_create(&oo, &opq);
  CHECK(!st, "backends: %s", st ? fbx_status_message(st) : "");
  if (!st) {
    test_static_plan(opq, cpu);
    test_decode(opq, cpu);
    test_read_back_never_captures(opq, cpu);
  }
  fbx_status_free(st);
  fbx_backend_destroy(opq);
  fbx_backend_destroy(cpu);
  printf("test_ir_graph: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
