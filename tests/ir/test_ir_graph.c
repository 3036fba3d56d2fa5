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
 *  - a decode plan whose past grows every run: the steps that read the past
 *    (Concat; Reshape, a zero-copy view) become dynamic after the second run and run live; the
 *    rest (MatMul, Softmax, the fused tail) is one segment, captured once
 *    (run 4) and replayed in every later run, which launches only the
 *    dynamic steps live; outputs stay right at every step;
 *  - the same plan at a fixed past and then past + 1: still 1 capture, a
 *    replay every run (the segment's work does not depend on the past);
 *  - the backend's graph epoch moves (fbx_opaque_backend_epoch_bump: what a
 *    reallocated scratch buffer does; a stale graph then fails to launch, as
 *    one reading freed memory would fault): the next run drops the graph and
 *    captures it again at once (graph_invalidated 1, a capture, no replay of
 *    the stale graph), outputs still right, and replays go on from the next run;
 *  - without a host backend the plan reads shape data back: never captured. */
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "common/check.h"
#include "common/graph_kv.h"
#include "exec/exec_compiled.h"
#include "common/exec_outs.h"

enum { D = FBX_TEST_KV_D, MAXL = 64 };
static float W[D * D];


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
  fbx_exec_compiled *c, *ref;
  outs o, ro;
  int64_t captures, replays;
} pair;

/* One run of both; true when every output is bit-identical. r: c's report. */
static bool run_pair(pair *pp, int64_t S, int64_t P, fbx_exec_run_report *r, fbx_status **st) {
  fbx_tensor in[2] = {T3(1, S, D, X), T3(1, P, D, PAST)};
  fbx_exec_run_report rr;
  *st = fbx_exec_compiled_run(pp->c, in, 2, out_fn, &pp->o, r);
  if (!*st) *st = fbx_exec_compiled_run(pp->ref, in, 2, out_fn, &pp->ro, &rr);
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
  fbx_exec_compiled_destroy(pp->c);
  fbx_exec_compiled_destroy(pp->ref);
  outs_free(&pp->o);
  outs_free(&pp->ro);
}

static void test_static_plan(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(false, 4, 5, W), opq, &oo, "static_opaque", &pp.c));
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(false, 4, 5, W), cpu, &co, "static_cpu", &pp.ref));
  fbx_status *st = NULL;
  for (int k = 0; k < 8; k++) {
    fill(k);
    fbx_exec_run_report r;
    fbx_opaque_stats s0 = stats_of(opq);
    bool same = run_pair(&pp, 4, 5, &r, &st);
    fbx_opaque_stats s1 = stats_of(opq);
    CHECK(!st, "static run %d: %s", k, st ? fbx_status_message(st) : "");
    if (st) break;
    CHECK(r.path == FBX_EXEC_PATH_GENERAL, "static run %d: path %s", k, fbx_exec_path_name(r.path));
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
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), opq, &oo, "dec_opaque", &pp.c));
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), cpu, &co, "dec_cpu", &pp.ref));
  fbx_status *st = NULL;
  fbx_exec_run_report r;
  int bad = 0, bad_graph = 0, k = 0;
  for (int64_t P = 3; P < 20 && !st; P++, k++) { /* a growing past: the past's steps change every run */
    fill((int)P);
    fbx_opaque_stats s0 = stats_of(opq);
    if (!run_pair(&pp, 1, P, &r, &st) || r.path != FBX_EXEC_PATH_DECODE) bad++;
    fbx_opaque_stats s1 = stats_of(opq);
    int64_t want_c = k == 4, want_r = k > 4;
    if (r.graph_captures != want_c || r.graph_replays != want_r) bad_graph++;
    /* a replaying run launches the dynamic steps live and nothing else: the Concat (the
     * Reshape is a view of its input, no launch) */
    if (k > 4 && (s1.launches - s0.launches != 1 || s1.replayed <= s0.replayed)) bad_graph++;
    if (r.host_syncs != 1) bad_graph++;
  }
  CHECK(!st && !bad, "growing past: %d runs differ from the CPU backend (%s)", bad, st ? fbx_status_message(st) : "");
  CHECK(!bad_graph && pp.captures == 1 && pp.replays == 12,
        "growing past: %d runs off the graph plan; %lld captures / %lld replays (want 1 / 12)", bad_graph,
        (long long)pp.captures, (long long)pp.replays);
  /* a fixed past, then past + 1: the segment does not read the past, so it keeps replaying */
  for (int j = 0; j < 6 && !st; j++) {
    fill(100 + j);
    if (!run_pair(&pp, 1, j < 3 ? 20 : 21, &r, &st)) bad++;
    if (r.graph_replays != 1 || r.graph_captures != 0 || r.host_syncs != 1) bad_graph++;
  }
  CHECK(!st && !bad && !bad_graph, "fixed past / past + 1: %d runs wrong, %d not replayed (%s)", bad, bad_graph,
        st ? fbx_status_message(st) : "");
  CHECK(pp.captures == 1, "fixed past / past + 1: %lld captures (want 1)", (long long)pp.captures);
  fbx_status_free(st);
  pair_free(&pp);
}

static void test_epoch(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4, .host = cpu}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), opq, &oo, "ep_opaque", &pp.c));
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), cpu, &co, "ep_cpu", &pp.ref));
  fbx_status *st = NULL;
  fbx_exec_run_report r;
  int bad = 0, bad_graph = 0, k = 0;
  int64_t inval = 0;
  for (int64_t P = 3; P < 20 && !st; P++, k++) { /* captured at k == 4, as test_decode */
    fill((int)P);
    if (k == 7 || k == 10) fbx_opaque_backend_epoch_bump(opq); /* after a replay: the graph is stale now */
    if (!run_pair(&pp, 1, P, &r, &st)) bad++;
    inval += r.graph_invalidated;
    bool recapture = k == 7 || k == 10;
    int64_t want_c = k == 4 || recapture, want_r = k > 4 && !recapture;
    if (r.graph_captures != want_c || r.graph_replays != want_r || r.graph_invalidated != recapture) bad_graph++;
    if (r.host_syncs != 1) bad_graph++;
  }
  CHECK(!st && !bad, "epoch moves: %d runs differ from the CPU backend (%s)", bad, st ? fbx_status_message(st) : "");
  CHECK(!bad_graph && inval == 2 && pp.captures == 3 && pp.replays == 10,
        "epoch moves: %d runs off the plan; %lld invalidated, %lld captures / %lld replays (want 2, 3 / 10)", bad_graph,
        (long long)inval, (long long)pp.captures, (long long)pp.replays);
  fbx_status_free(st);
  pair_free(&pp);
}

static void test_read_back_never_captures(fbx_backend *opq, fbx_backend *cpu) {
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 4}, co = {.compile = true, .cache_limit = 4};
  pair pp = {0};
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), opq, &oo, "rb_opaque", &pp.c));
  CHECK_TRY(fbx_exec_compiled_create(fbx_test_graph_kv(true, 0, 0, W), cpu, &co, "rb_cpu", &pp.ref));
  fbx_status *st = NULL;
  fbx_exec_run_report r;
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
    test_epoch(opq, cpu);
    test_read_back_never_captures(opq, cpu);
  }
  fbx_status_free(st);
  fbx_backend_destroy(opq);
  fbx_backend_destroy(cpu);
  printf("test_ir_graph: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
