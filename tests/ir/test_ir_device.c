/* The compiled subgraph on a backend that is not host-visible (the opaque
 * test backend: CPU kernels behind handles the host cannot dereference),
 * against a naive reference computed here and against the same graph on the
 * CPU backend (bit-identical: same kernels).
 *
 *  - an attention-like decoder step whose Reshape shapes come from
 *    Shape/Gather/Concat chains over a device value (the KV concat) and over
 *    a graph input: on decode those chains run on the host, so every run
 *    synchronises exactly once (counted by the run report AND by the backend
 *    itself), a repeated step allocates nothing, and a growing past allocates
 *    only on geometric growth;
 *  - the same without a host backend: still right, shape data read back
 *    (each read-back counted as a sync, in agreement with the backend);
 *  - constant folding on the host, then uploaded: a Transpose of a constant
 *    weight is not launched on the device;
 *  - the eager path (compile off) on the opaque backend: one kept plan, so a
 *    repeated run allocates nothing;
 *  - shape data computed by an op too heavy for the host (a MatMul): that
 *    one value is read back (2 syncs per run), its Cast runs on the host;
 *  - allocation failure injected at every allocation of create + prefill +
 *    two decode steps: each either succeeds with right results or returns
 *    an error (no crash; the sanitizer pass checks for leaks);
 *  - two compiled subgraphs sharing one opaque backend, run from two threads
 *    at once (as ORT may run a session's fused nodes): every result right. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "exec/exec_compiled.h"
#include "common/exec_outs.h"

enum { D = 8 };
static float W[D * D];


static fbx_ir_params axis(int a) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.axis.axis = a;
  return p;
}

/* x (1, S, D) "seq", past (1, P, D) "past_seq":
 *   q  = x @ W                          kv = Concat(past, x; 1)       -> output "present"
 *   r  = Reshape(kv, Concat([1], Gather(Shape(kv), [1]), [2], [D/2])) -> output "r" (1, P+S, 2, D/2)
 *   o  = Softmax(q @ Transpose(kv), 2) @ kv
 *   y  = Reshape(o, Concat(Gather(Shape(x), [1]), [D])) * 2           -> output "y" (S, D) */
static fbx_ir_graph *build_attn(void) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  int x, past, w, i1, c1, c2, ch, cd, two;
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D}, (const char *[]){"batch", "seq", NULL}, &x);
  fbx_ir_graph_add_input(g, "past", FBX_DTYPE_F32, 3, (int64_t[]){1, -1, D},
                         (const char *[]){"batch", "past_seq", NULL}, &past);
  fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){D, D}, W, &w);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &i1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){1}, 1, &c1);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){2}, 1, &c2);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){D / 2}, 1, &ch);
  fbx_ir_graph_add_const_i64s(g, (int64_t[]){D}, 1, &cd);
  fbx_ir_graph_add_const_f32(g, 2.0f, &two);
  fbx_ir_params a0 = axis(0), a1 = axis(1), a2 = axis(2), sh, tr, rs;
  memset(&sh, 0, sizeof sh);
  memset(&rs, 0, sizeof rs);
  memset(&tr, 0, sizeof tr);
  tr.transpose.perm[0] = 0, tr.transpose.perm[1] = 2, tr.transpose.perm[2] = 1;
  int q, kv, s_kv, t, ns, r, kt, sc, p, o, s_x, sq, ns2, yr, y;
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, w}, 2, NULL, FBX_DTYPE_F32, 3, "q", "MatMul", 0, &q);
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){past, x}, 2, &a1, FBX_DTYPE_F32, 3, "kv", "Concat", 1, &kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){kv}, 1, &sh, FBX_DTYPE_I64, 1, "shape_kv", "Shape", 2, &s_kv);
  fbx_ir_graph_emit(g, FBX_IR_OP_GATHER, (int[]){s_kv, i1}, 2, &a0, FBX_DTYPE_I64, 1, "len", "Gather", 3, &t);
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){c1, t, c2, ch}, 4, &a0, FBX_DTYPE_I64, 1, "ns", "Concat", 4, &ns);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){kv, ns}, 2, &rs, FBX_DTYPE_F32, 4, "r", "Reshape", 5, &r);
  fbx_ir_graph_emit(g, FBX_IR_OP_TRANSPOSE, (int[]){kv}, 1, &tr, FBX_DTYPE_F32, 3, "kt", "Transpose", 6, &kt);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){q, kt}, 2, NULL, FBX_DTYPE_F32, 3, "sc", "MatMul", 7, &sc);
  fbx_ir_graph_emit(g, FBX_IR_OP_SOFTMAX, (int[]){sc}, 1, &a2, FBX_DTYPE_F32, 3, "p", "Softmax", 8, &p);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){p, kv}, 2, NULL, FBX_DTYPE_F32, 3, "o", "MatMul", 9, &o);
  fbx_ir_graph_emit(g, FBX_IR_OP_SHAPE, (int[]){x}, 1, &sh, FBX_DTYPE_I64, 1, "shape_x", "Shape", 10, &s_x);
  fbx_ir_graph_emit(g, FBX_IR_OP_GATHER, (int[]){s_x, i1}, 2, &a0, FBX_DTYPE_I64, 1, "sq", "Gather", 11, &sq);
  fbx_ir_graph_emit(g, FBX_IR_OP_CONCAT, (int[]){sq, cd}, 2, &a0, FBX_DTYPE_I64, 1, "ns2", "Concat", 12, &ns2);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){o, ns2}, 2, &rs, FBX_DTYPE_F32, 2, "yr", "Reshape", 13, &yr);
  fbx_ir_graph_emit(g, FBX_IR_OP_MUL, (int[]){yr, two}, 2, NULL, FBX_DTYPE_F32, 2, "y", "Mul", 14, &y);
  fbx_ir_graph_mark_output(g, y);
  fbx_ir_graph_mark_output(g, kv);
  fbx_ir_graph_mark_output(g, r);
  return g;
}

/* Naive reference of build_attn's three outputs for one run. */
static bool check_attn(const outs *o, const float *x, int64_t S, const float *past, int64_t P, float *err) {
  int64_t L = P + S;
  float kv[128 * D], q[8 * D], sc[128];
  if (L > 128 || S > 8) return false;
  memcpy(kv, past, sizeof(float) * (size_t)(P * D));
  memcpy(kv + P * D, x, sizeof(float) * (size_t)(S * D));
  *err = 0;
  for (int64_t i = 0; i < L * D; i++)
    if (o->buf[1][i] != kv[i] || o->buf[2][i] != kv[i]) return false;
  for (int64_t s = 0; s < S; s++)
    for (int j = 0; j < D; j++) {
      double a = 0;
      for (int k = 0; k < D; k++) a += (double)x[s * D + k] * W[k * D + j];
      q[s * D + j] = (float)a;
    }
  for (int64_t s = 0; s < S; s++) {
    double mx = -1e30, sum = 0;
    for (int64_t l = 0; l < L; l++) {
      double a = 0;
      for (int k = 0; k < D; k++) a += (double)q[s * D + k] * kv[l * D + k];
      sc[l] = (float)a;
      if (a > mx) mx = a;
    }
    for (int64_t l = 0; l < L; l++) sum += exp(sc[l] - mx);
    for (int j = 0; j < D; j++) {
      double a = 0;
      for (int64_t l = 0; l < L; l++) a += exp(sc[l] - mx) / sum * kv[l * D + j];
      float e = fabsf(o->buf[0][s * D + j] - (float)(2 * a));
      if (e > *err) *err = e;
    }
  }
  return *err < 1e-4f;
}

static fbx_opaque_stats stats_of(fbx_backend *be) {
  fbx_opaque_stats s;
  memset(&s, 0, sizeof s);
  fbx_opaque_backend_stats(be, &s);
  return s;
}

/* One run of build_attn; fills r; returns whether it matches the reference. */
static fbx_status *run_attn(fbx_exec_compiled *c, outs *o, float *x, int64_t S, float *past, int64_t P,
                            fbx_exec_run_report *r) {
  fbx_tensor in[2] = {T3(1, S, D, x), T3(1, P, D, past)};
  return fbx_exec_compiled_run(c, in, 2, out_fn, o, r);
}

static float X[8 * D], PAST[128 * D];

static void fill_inputs(void) {
  for (int i = 0; i < D * D; i++) W[i] = (float)((i * 7) % 11 - 5) * 0.05f;
  for (int i = 0; i < 8 * D; i++) X[i] = (float)((i * 5) % 13 - 6) * 0.1f;
  for (int i = 0; i < 128 * D; i++) PAST[i] = (float)((i * 3) % 17 - 8) * 0.1f;
}

/* Decode on the opaque backend with a host backend: 1 sync per run, no
 * allocation on a repeated step, results equal to the CPU backend's. */
static void test_decode_one_sync(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu};
  fbx_exec_compile_options co = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c, *ref;
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), opq, &oo, "attn_opaque", &c));
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), cpu, &co, "attn_cpu", &ref));
  outs o = {0}, ro = {0};
  fbx_exec_run_report r, rr;
  float err = 0;
  CHECK_TRY(run_attn(c, &o, X, 4, PAST, 3, &r)); /* prefill */
  CHECK(r.path == FBX_EXEC_PATH_PREFILL && check_attn(&o, X, 4, PAST, 3, &err),
        "opaque prefill matches the reference (err %.2g)", err);
  CHECK(r.host_syncs == 1, "opaque prefill: %lld host syncs (want 1)", (long long)r.host_syncs);
  int bad_ref = 0, bad_sync = 0, bad_val = 0, growth_runs = 0, growth_allocs = 0, steady_allocs = -1,
      steady_backend_allocs = -1;
  int64_t first_allocs = -1;
  for (int64_t P = 4; P <= 100; P++) {
    fbx_opaque_stats s0 = stats_of(opq);
    CHECK_TRY(run_attn(c, &o, X, 1, PAST, P, &r));
    fbx_opaque_stats s1 = stats_of(opq);
    CHECK_TRY(run_attn(ref, &ro, X, 1, PAST, P, &rr));
    if (!check_attn(&o, X, 1, PAST, P, &err)) bad_val++;
    if (memcmp(o.buf[0], ro.buf[0], D * sizeof(float)) || memcmp(o.buf[1], ro.buf[1], (size_t)(P + 1) * D * 4))
      bad_ref++;
    if (r.path != FBX_EXEC_PATH_DECODE || r.host_syncs != 1 || s1.syncs - s0.syncs != 1 || s1.d2h - s0.d2h != 3)
      bad_sync++;
    if (P == 4) first_allocs = r.allocs;
    else if (r.allocs) growth_runs++, growth_allocs += (int)r.allocs;
    if (P == 50) { /* the same step again: the steady state */
      fbx_opaque_stats a = stats_of(opq);
      CHECK_TRY(run_attn(c, &o, X, 1, PAST, P, &r));
      fbx_opaque_stats b = stats_of(opq);
      steady_allocs = (int)r.allocs;
      steady_backend_allocs = (int)(b.allocs - a.allocs);
      if (r.host_syncs != 1 || b.syncs - a.syncs != 1) bad_sync++;
    }
  }
  printf("     decode 4..100 on opaque: %lld allocs on the first step, then %d allocs in %d runs\n",
         (long long)first_allocs, growth_allocs, growth_runs);
  CHECK(!bad_val, "opaque decode 4..100: every step matches the naive reference (%d bad)", bad_val);
  CHECK(!bad_ref, "opaque decode 4..100: outputs bit-identical to the CPU backend (%d differ)", bad_ref);
  CHECK(!bad_sync, "opaque decode: every step is decode, 1 host sync (report and backend agree), 3 read-backs (%d bad)",
        bad_sync);
  CHECK(steady_allocs == 0 && steady_backend_allocs == 0,
        "steady-state decode step: 0 allocations (report %d, backend %d)",
        steady_allocs, steady_backend_allocs);
  /* buffers that grow with the past (the past upload, kv, its transpose, r, scores, probabilities):
   * 6, each x1.5 at most log_1.5(101 / 5) + 1 ~ 8.4 times from P = 5 to 100 */
  CHECK(growth_allocs <= 6 * 9, "growing past: only geometric growth allocates (%d allocs in %d runs)", growth_allocs,
        growth_runs);
  fbx_exec_compiled_destroy(c);
  fbx_exec_compiled_destroy(ref);
  outs_free(&o);
  outs_free(&ro);
}

/* No host backend: no folding and no host steps; shape data is read back
 * from the device, each read-back a sync, counted alike by the report and by
 * the backend. */
static void test_read_back(fbx_backend *opq) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4};
  fbx_exec_compiled *c;
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), opq, &oo, "attn_readback", &c));
  outs o = {0};
  fbx_exec_run_report r;
  float err = 0;
  CHECK_TRY(run_attn(c, &o, X, 4, PAST, 5, &r));
  CHECK(check_attn(&o, X, 4, PAST, 5, &err), "no host backend: prefill right (err %.2g)", err);
  fbx_opaque_stats s0 = stats_of(opq);
  CHECK_TRY(run_attn(c, &o, X, 1, PAST, 9, &r));
  fbx_opaque_stats s1 = stats_of(opq);
  CHECK(check_attn(&o, X, 1, PAST, 9, &err), "no host backend: decode right (err %.2g)", err);
  CHECK(r.host_syncs == 3 && s1.syncs - s0.syncs == 3,
        "no host backend: 2 shape read-backs + the final sync (report %lld, backend %lld)", (long long)r.host_syncs,
        (long long)(s1.syncs - s0.syncs));
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
}

/* y = x @ Transpose(Wc): with a host backend the Transpose folds at plan
 * time (on the host, uploaded), so a run launches the MatMul only. */
static void test_fold(fbx_backend *opq, fbx_backend *cpu) {
  for (int with_host = 1; with_host >= 0; with_host--) {
    fbx_ir_graph *g;
    fbx_ir_graph_create(&g);
    int x, w, wt, y;
    fbx_ir_params tr;
    memset(&tr, 0, sizeof tr);
    tr.transpose.perm[0] = 1, tr.transpose.perm[1] = 0;
    fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, D}, NULL, &x);
    fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){D, D}, W, &w);
    fbx_ir_graph_emit(g, FBX_IR_OP_TRANSPOSE, (int[]){w}, 1, &tr, FBX_DTYPE_F32, 2, "wt", "Transpose", 0, &wt);
    fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, wt}, 2, NULL, FBX_DTYPE_F32, 2, "y", "MatMul", 1, &y);
    fbx_ir_graph_mark_output(g, y);
    fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = with_host ? cpu : NULL};
    fbx_exec_compiled *c;
    CHECK_TRY(fbx_exec_compiled_create(g, opq, &oo, "fold", &c));
    outs o = {0};
    fbx_exec_run_report r;
    fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, D}, .data = X};
    CHECK_TRY(fbx_exec_compiled_run(c, &in, 1, out_fn, &o, &r)); /* MISS: builds the plan */
    fbx_opaque_stats s0 = stats_of(opq);
    CHECK_TRY(fbx_exec_compiled_run(c, &in, 1, out_fn, &o, &r));
    fbx_opaque_stats s1 = stats_of(opq);
    float err = 0;
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < D; j++) {
        double a = 0;
        for (int k = 0; k < D; k++) a += (double)X[i * D + k] * W[j * D + k];
        float e = fabsf(o.buf[0][i * D + j] - (float)a);
        if (e > err) err = e;
      }
    int64_t launches = s1.launches - s0.launches;
    CHECK(err < 1e-5f, "fold (%s host backend): y matches x @ W^T (err %.2g)", with_host ? "with" : "without", err);
    /* without a host backend the Transpose is not folded as a constant, but the trans_b fold
     * (ir_matmul_tb.c) still takes it into the MatMul: one launch either way */
    CHECK(launches == 1, "fold (%s host backend): %lld launches per run (want 1)", with_host ? "with" : "without",
          (long long)launches);
    CHECK(r.allocs == 0 && r.host_syncs == 1, "fold: steady general run, %lld allocs, %lld syncs", (long long)r.allocs,
          (long long)r.host_syncs);
    fbx_exec_compiled_destroy(c);
    outs_free(&o);
  }
}

static void test_eager(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = false, .cache_limit = 4, .host = cpu};
  fbx_exec_compiled *c;
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), opq, &oo, "attn_eager", &c));
  outs o = {0};
  fbx_exec_run_report r;
  float err = 0;
  CHECK_TRY(run_attn(c, &o, X, 3, PAST, 6, &r));
  CHECK(r.path == FBX_EXEC_PATH_EAGER && check_attn(&o, X, 3, PAST, 6, &err),
        "opaque eager matches the reference (err %.2g)",
        err);
  CHECK_TRY(run_attn(c, &o, X, 1, PAST, 6, &r));
  CHECK(check_attn(&o, X, 1, PAST, 6, &err) && r.host_syncs == 1, "opaque eager decode-shaped run: right, %lld syncs",
        (long long)r.host_syncs);
  fbx_opaque_stats s0 = stats_of(opq);
  CHECK_TRY(run_attn(c, &o, X, 1, PAST, 6, &r));
  fbx_opaque_stats s1 = stats_of(opq);
  CHECK(check_attn(&o, X, 1, PAST, 6, &err) && r.allocs == 0 && s1.allocs == s0.allocs,
        "opaque eager, same shapes again: one kept plan, no allocation (report %lld, backend %lld)", (long long)r.allocs,
        (long long)(s1.allocs - s0.allocs));
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
}

/* y = Reshape(x, Cast(n @ I, int64)): x (6,), n (2,) = [2, 3] -> y (2, 3) == x */
static void test_heavy_shape_data(fbx_backend *opq, fbx_backend *cpu) {
  fbx_ir_graph *g;
  fbx_ir_graph_create(&g);
  static const float eye[4] = {1, 0, 0, 1};
  int x, n, w, m, c, y;
  fbx_ir_params cast, rs;
  memset(&cast, 0, sizeof cast);
  memset(&rs, 0, sizeof rs);
  cast.ew.to = FBX_DTYPE_I64;
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 1, (int64_t[]){6}, NULL, &x);
  fbx_ir_graph_add_input(g, "n", FBX_DTYPE_F32, 1, (int64_t[]){2}, NULL, &n);
  fbx_ir_graph_add_const(g, "I", FBX_DTYPE_F32, 2, (int64_t[]){2, 2}, eye, &w);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){n, w}, 2, NULL, FBX_DTYPE_F32, 1, "m", "MatMul", 0, &m);
  fbx_ir_graph_emit(g, FBX_IR_OP_CAST, (int[]){m}, 1, &cast, FBX_DTYPE_I64, 1, "c", "Cast", 1, &c);
  fbx_ir_graph_emit(g, FBX_IR_OP_RESHAPE, (int[]){x, c}, 2, &rs, FBX_DTYPE_F32, 2, "y", "Reshape", 2, &y);
  fbx_ir_graph_mark_output(g, y);
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu};
  fbx_exec_compiled *cc;
  CHECK_TRY(fbx_exec_compiled_create(g, opq, &oo, "heavy", &cc));
  float xs[6] = {1, 2, 3, 4, 5, 6}, ns[2] = {2, 3};
  fbx_tensor in[2] = {{.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {6}, .data = xs},
                      {.dtype = FBX_DTYPE_F32, .rank = 1, .dims = {2}, .data = ns}};
  outs o = {0};
  fbx_exec_run_report r;
  CHECK_TRY(fbx_exec_compiled_run(cc, in, 2, out_fn, &o, &r));
  fbx_opaque_stats s0 = stats_of(opq);
  CHECK_TRY(fbx_exec_compiled_run(cc, in, 2, out_fn, &o, &r));
  fbx_opaque_stats s1 = stats_of(opq);
  CHECK(o.buf[0] && memcmp(o.buf[0], xs, sizeof xs) == 0, "shape data from a MatMul: y == x");
  CHECK(r.host_syncs == 2 && s1.syncs - s0.syncs == 2,
        "MatMul shape data: 1 read-back + the final sync (report %lld, backend %lld)",
        (long long)r.host_syncs, (long long)(s1.syncs - s0.syncs));
  CHECK(s1.launches - s0.launches == 1,
        "MatMul on the device, Reshape a zero-copy view of x, Cast on the host (%lld launches)",
        (long long)(s1.launches - s0.launches));
  fbx_exec_compiled_destroy(cc);
  outs_free(&o);
}

/* Whether the failure armed by fbx_alloc_fail_after has fired: if it has
 * not, one of the next `probe` allocations fails (and disarms it). */
static bool injection_fired(int probe) {
  for (int i = 0; i < probe; i++) {
    void *p = fbx_malloc(1);
    if (!p) return false;
    fbx_free(p);
  }
  return true;
}

static void test_alloc_failures(fbx_backend *opq, fbx_backend *cpu) {
  int ok_runs = 0, failed_runs = 0, wrong = 0, k;
  for (k = 0; k < 2000; k++) {
    fbx_ir_graph *g = build_attn(); /* built before the injection: the graph builder is not under test */
    fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu};
    fbx_exec_compiled *c = NULL;
    outs o = {0};
    fbx_exec_run_report r;
    float err;
    fbx_alloc_fail_after(k);
    fbx_status *st = fbx_exec_compiled_create(g, opq, &oo, "inject", &c);
    if (!st && !(st = run_attn(c, &o, X, 4, PAST, 3, &r))) wrong += !check_attn(&o, X, 4, PAST, 3, &err);
    for (int64_t P = 7; !st && P < 9; P++)
      if (!(st = run_attn(c, &o, X, 1, PAST, P, &r))) wrong += !check_attn(&o, X, 1, PAST, P, &err);
    bool fired = injection_fired(1 << 16);
    fbx_alloc_fail_after(-1);
    if (st) failed_runs++;
    else ok_runs++; /* right results despite the failure: recovered (e.g. a plan fell back to eager) */
    fbx_status_free(st);
    fbx_exec_compiled_destroy(c);
    outs_free(&o);
    if (!fired) break; /* the pass made fewer than k allocations: every one has been failed once */
  }
  printf("     allocation failure at each of the first %d allocations: %d errors, %d successes\n", k, failed_runs,
         ok_runs);
  CHECK(k < 2000 && !wrong, "injected allocation failures: errors or right results, never wrong (%d wrong)", wrong);
}

typedef struct thread_arg {
  fbx_exec_compiled *c;
  int bad, runs;
} thread_arg;

static void *decode_thread(void *arg) {
  thread_arg *a = arg;
  outs o = {0};
  float err;
  for (int64_t P = 4; P < 60; P++) {
    fbx_exec_run_report r;
    fbx_status *st = run_attn(a->c, &o, X, 1, PAST, P, &r);
    a->runs++;
    if (st || !check_attn(&o, X, 1, PAST, P, &err) || r.host_syncs != 1) a->bad++;
    fbx_status_free(st);
  }
  outs_free(&o);
  return NULL;
}

static void test_threads(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu};
  thread_arg a[2] = {{0}, {0}};
  pthread_t th[2];
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), opq, &oo, "attn_t0", &a[0].c));
  CHECK_TRY(fbx_exec_compiled_create(build_attn(), opq, &oo, "attn_t1", &a[1].c));
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, decode_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CHECK(!a[0].bad && !a[1].bad && a[0].runs == 56 && a[1].runs == 56,
        "two threads, one opaque backend: %d + %d runs, %d + %d wrong", a[0].runs, a[1].runs, a[0].bad, a[1].bad);
  for (int i = 0; i < 2; i++) fbx_exec_compiled_destroy(a[i].c);
}

static void test_bad_host(fbx_backend *opq) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = opq};
  fbx_exec_compiled *c = NULL;
  fbx_status *st = fbx_exec_compiled_create(build_attn(), opq, &oo, "bad", &c);
  CHECK(st && !c && strstr(fbx_status_message(st), "host-visible"),
        "a host backend that is not host-visible is refused: %s",
        st ? fbx_status_message(st) : "(accepted)");
  fbx_status_free(st);
}

int main(void) {
  fill_inputs();
  fbx_backend *opq = NULL, *cpu = NULL;
  fbx_opaque_options oo = {.threads = 2, .decline_op = -1};
  fbx_cpu_options co = {.threads = 2};
  fbx_status *st = fbx_opaque_backend_create(&oo, &opq);
  if (!st) st = fbx_cpu_backend_create(&co, &cpu);
  if (st) {
    printf("FAIL backend create: %s\n", fbx_status_message(st));
    return 1;
  }
  test_decode_one_sync(opq, cpu);
  test_read_back(opq);
  test_fold(opq, cpu);
  test_eager(opq, cpu);
  test_heavy_shape_data(opq, cpu);
  test_threads(opq, cpu);
  test_alloc_failures(opq, cpu);
  test_bad_host(opq);
  size_t left = opq->vt->memory_in_use(opq);
  CHECK(left == 0, "opaque: every device buffer freed (%zu bytes left)", left);
  fbx_backend_destroy(opq);
  fbx_backend_destroy(cpu);
  printf("test_ir_device: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
