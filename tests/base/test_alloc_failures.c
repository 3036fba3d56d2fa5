/* Allocation failure, injected (fbx_alloc_fail_after, src/base/alloc.h) at every allocation in
 * turn, through three paths a session takes before any kernel runs:
 *   cluster  fbx_onnx_cluster on a 300-node random DAG: each failure is a NO_MEMORY status, and
 *            the first run that reaches no failure gives exactly the groups of a clean run;
 *   trace    a trace session (FUSEBOX_TRACE on) recording claims, unclaimed ops, paths, op
 *            times and composed spans, then its summary: no crash whatever allocation fails,
 *            and the trace file is still valid JSON holding the sessions' summaries;
 *   options  EP option parsing allocates nothing of ours: with a failure pending, good values
 *            parse, bad ones still give their full message, and the failure is still pending.
 * Leaks: the ASan build (scripts/run_tests.sh) checks that nothing leaks on any of these paths. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "ep/ep_options.c" /* not in fusebox_core (see tests/ep/test_options.c) */
#include "onnx/onnx_cluster.h"
#include "trace/trace.h"

#include "common/check.h"

/* ---- cluster: a random DAG, node i writes value i + 1, value 0 is the graph input ---- */
enum { N = 300, MAXP = 3 };
static fbx_onnx_node nodes[N];
static fbx_onnx_value values[N + 1];
static int ins[N][MAXP], outs[N];
static bool claimed[N];

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng >> 11); }

static fbx_onnx_graph random_graph(void) {
  for (int i = 0; i <= N; i++) values[i].name = "v";
  for (int i = 0; i < N; i++) {
    int np = i ? 1 + (int)(rnd() % MAXP) : 0, k = 0;
    for (int j = 0; j < np; j++) {
      int lo = i > 10 ? i - 10 : 0;
      ins[i][k++] = lo + (int)(rnd() % (unsigned)(i - lo)) + 1;
    }
    if (!k) ins[i][k++] = 0;
    outs[i] = i + 1;
    nodes[i] = (fbx_onnx_node){.name = "n", .op_type = "Op", .domain = "", .n_inputs = k, .inputs = ins[i],
                               .n_outputs = 1, .outputs = &outs[i]};
    claimed[i] = rnd() % 100 < 80;
  }
  return (fbx_onnx_graph){.n_values = N + 1, .values = values, .n_nodes = N, .nodes = nodes};
}

static void test_cluster(void) {
  fbx_onnx_graph g = random_graph();
  int ref[N], got[N], n_ref = -1, n_got = -1;
  fbx_status *s = fbx_onnx_cluster(&g, claimed, 1, FBX_ONNX_CLUSTER_MAX_GROUPS, ref, &n_ref);
  CHECK(s == NULL && n_ref > 0, "clean cluster run: %s", s ? fbx_status_message(s) : "no groups");
  fbx_status_free(s);
  int failures = 0, wrong_code = 0, done = 0;
  for (long k = 0; k < 10000 && !done; k++) {
    fbx_alloc_fail_after(k);
    s = fbx_onnx_cluster(&g, claimed, 1, FBX_ONNX_CLUSTER_MAX_GROUPS, got, &n_got);
    int pending = fbx_alloc_fail_pending();
    fbx_alloc_fail_after(-1);
    if (s) {
      failures++;
      wrong_code += fbx_status_code_of(s) != FBX_STATUS_NO_MEMORY;
      CHECK(!pending, "cluster failed (%s) without reaching the injected failure", fbx_status_message(s));
      fbx_status_free(s);
    } else if (pending) {
      done = 1;
      CHECK(n_got == n_ref && memcmp(got, ref, sizeof ref) == 0, "after %d failures, a full run differs", failures);
    } else {
      CHECK(0, "cluster succeeded although allocation %ld failed", k);
    }
  }
  CHECK(done && failures > 0 && wrong_code == 0, "cluster: %d failures (%d not NO_MEMORY), finished: %d", failures,
        wrong_code, done);
  printf("cluster: every one of %d allocations failed in turn -> a NO_MEMORY status each\n", failures);
}

/* ---- trace session ---- */
static void session_work(void) {
  fbx_trace_session *s = fbx_trace_session_create("alloc-failures");
  fbx_trace_session_bind(s);
  fbx_trace_session_claim(s, 3, 5, 1);
  static const char *const ops[] = {"Loop", "If", "Scan", "Loop", "Unique"};
  for (int i = 0; i < 5; i++) fbx_trace_session_unclaimed(s, "", ops[i], "node", "a reason");
  fbx_trace_session_compute(s, "general", "MISS");
  fbx_trace_session_compute(s, "general", "HIT");
  fbx_trace_session_phase(s, "eval", 1000);
  for (int i = 0; i < 40; i++) { /* enough op types to grow the op table twice */
    char op[16];
    snprintf(op, sizeof op, "Op%d", i);
    fbx_trace_session_op(s, op, 10, false);
  }
  uint64_t t = fbx_trace_now_ns();
  fbx_trace_arg why[] = {FBX_TARG_S("reason", "no fast kernel")};
  for (int i = 0; i < 10; i++) { /* more composed ops than the first table holds */
    char name[32];
    snprintf(name, sizeof name, "Gelu%d [composed]", i);
    fbx_trace_complete(name, "op.composed", t, t + 10, why, 1);
    fbx_trace_complete(name, "op.composed", t, t + 10, why, 1);
  }
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
}

static void test_trace(const char *path) {
  /* The summaries (one per session, printed to stderr) go to a file: the composed-span
   * view is only kept while they are on. A crash leaves that file for a look. */
  char errpath[80];
  snprintf(errpath, sizeof errpath, "%s.stderr", path);
  printf("trace: summaries (and any crash report) in %s\n", errpath);
  fflush(stderr);
  int saved = dup(2), errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (errfd >= 0) dup2(errfd, 2);
  int runs = 0, done = 0;
  for (long k = 0; k < 100000 && !done; k++) {
    fbx_alloc_fail_after(k);
    session_work();
    done = fbx_alloc_fail_pending();
    fbx_alloc_fail_after(-1);
    runs++;
  }
  fbx_trace_flush();
  fflush(stderr);
  if (saved >= 0) dup2(saved, 2), close(saved);
  if (errfd >= 0) close(errfd);
  unlink(errpath);
  CHECK(done && runs > 20, "trace: %d runs, finished: %d", runs, done);
  json_error_t e;
  json_t *root = json_load_file(path, 0, &e);
  CHECK(root != NULL, "trace file %s is not valid JSON after the failures: %s (line %d)", path, e.text, e.line);
  int summaries = 0;
  json_t *evs = root ? json_object_get(root, "traceEvents") : NULL;
  for (size_t i = 0; evs && i < json_array_size(evs); i++) {
    const char *name = json_string_value(json_object_get(json_array_get(evs, i), "name"));
    summaries += name && !strcmp(name, "fusebox.session_summary");
  }
  CHECK(summaries >= 1 && summaries <= runs, "trace: %d session summaries for %d sessions", summaries, runs);
  printf("trace: %d sessions, each with one more allocation failing -> no crash, %d summaries written\n", runs,
         summaries);
  json_decref(root);
}

/* ---- options ---- */
static void test_options(void) {
  fbx_ep_options o;
  fbx_ep_options_default(&o);
  fbx_alloc_fail_after(0);
  fbx_status *s = fbx_ep_options_set(&o, "threads", "2");
  CHECK(s == NULL && o.threads == 2, "threads=2 with an allocation failure pending");
  fbx_status_free(s);
  s = fbx_ep_options_set(&o, "threads", "2x");
  CHECK(s && strstr(fbx_status_message(s), "bad value '2x' for EP option 'threads' (accepted: "),
        "a bad value keeps its full message: %s", fbx_status_message(s));
  fbx_status_free(s);
  s = fbx_ep_options_validate(&o);
  CHECK(s == NULL, "validate with an allocation failure pending");
  fbx_status_free(s);
  CHECK(fbx_alloc_fail_pending(), "option parsing allocated through fbx_malloc");
  fbx_alloc_fail_after(-1);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0); /* each part's line survives a crash in the next */
  char path[64];
  snprintf(path, sizeof path, "/tmp/test_alloc_failures_%d.json", (int)getpid());
  setenv("FUSEBOX_TRACE", path, 1);
  unsetenv("FUSEBOX_VERBOSE");
  fbx_trace_init(); /* reads the environment once, before any failure is injected */
  CHECK(fbx_trace_flags() & FBX_TRACE_F_JSON, "FUSEBOX_TRACE=%s opened", path);
  test_cluster();
  test_options();
  test_trace(path);
  unlink(path);
  printf("alloc failures: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
