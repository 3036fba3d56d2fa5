// test_e2e_trace: observability end to end through real ONNX Runtime with Fusebox.
//
// The trace environment is read once per process, so every case runs as a child process
// (this program re-executed as `--child CASE OUT [EXTRA]` with its own environment); the parent
// then parses the REAL files the child wrote (jansson) and checks them:
//   decoder   decoder_tiny prefill + 24 decode steps: valid JSON, Perfetto fields, spans closed
//             and nested per thread, counter tracks, session_summary == counts from the events
//   cnn       cnn_small x3: the same checks
//   names     names.onnx compiled and eager (compile=off): node names with '"', '\', newline,
//             tab, control char and non-ASCII appear intact after parsing; outputs vs
//             sigmoid((relu(x)+1)*2) computed here
//   two       two sessions; after the first is destroyed (second still alive) the file on disk is
//             valid JSON holding the first summary; at the end both summaries
//   cap       FUSEBOX_TRACE_MAX_EVENTS=40: valid, exactly 40 counted events, drops reported
//   threads   two threads run one session concurrently: coherent trace (nesting per thread,
//             both threads present, counts add up)
//   profile   ORT's own profile (EnableProfiling) holds our events (cat Kernel, args.fbx_cat)
//             inside the time range of the fused node's ORT "Node" event
// `test_e2e_trace --check FILE` runs the single-session checks on any trace file; `test_e2e_trace
// CASE` runs one case.
// Last line: "trace-e2e: N passed, N failed". Env: FUSEBOX_ORT_LIB / FUSEBOX_EP_LIB as usual.
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#include "common/check.h"

static const char *const NAMES[] = {
    "relu \"quoted\" node",
    "add back\\slash\\node",
    "mul new\nline\ttab",
    "sigmoid \xc3\xbcn\xc3\xaf\x63\xc3\xb8\x64\xc3\xa9 \xe2\x86\x92 \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \x01" "ctl",
};

/* ================================ child side ================================ */

#define CTRY(e)                                           \
  do {                                                    \
    char *err_ = (e);                                     \
    if (err_) {                                           \
      fprintf(stderr, "child error: %s (%s:%d)\n", err_, __FILE__, __LINE__); \
      fbx_host_err_free(err_);                            \
      return 1;                                           \
    }                                                     \
  } while (0)

static int model_path(const char *rel, char *out, size_t cap) {
  if (fbx_host_find_repo_file(rel, out, cap) != 0) {
    fprintf(stderr, "child: model %s not found (run scripts/make_models.sh)\n", rel);
    return -1;
  }
  return 0;
}

static char *open_session(fbx_host *h, const char *rel, const char *profile, int compile_off,
                          fbx_host_session **s) {
  char path[4096];
  if (model_path(rel, path, sizeof path)) return fbx_host_errf("no model %s", rel);
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  static const char *k[] = {"compile"}, *v[] = {"off"};
  if (compile_off) {
    o.ep_keys = k;
    o.ep_vals = v;
    o.n_ep_opts = 1;
  }
  o.profile_prefix = profile;
  return fbx_host_session_create(h, path, &o, s);
}

static char *decode_run(fbx_host_session *s, int prompt, int steps) {
  fbx_host_decoder d;
  char *err = fbx_host_decoder_init(&d, s);
  if (err) return err;
  int64_t ids[16];
  for (int i = 0; i < prompt; i++) ids[i] = 3 + 5 * i;
  err = fbx_host_decoder_step(&d, ids, prompt);
  for (int i = 0; i < steps && !err; i++) {
    int64_t t = fbx_host_decoder_argmax(&d);
    if (t < 0) t = 1;
    err = fbx_host_decoder_step(&d, &t, 1);
  }
  fbx_host_decoder_free(&d);
  return err;
}

/* Runs a static-shape model (all inputs random by fixed seed) n times. */
static char *static_runs(fbx_host_session *s, int n, int check_names) {
  size_t ni = fbx_host_session_input_count(s);
  fbx_host_tensor in[8];
  memset(in, 0, sizeof in);
  char *err = NULL;
  for (size_t i = 0; i < ni && i < 8 && !err; i++) {
    const fbx_host_io *io = fbx_host_session_input(s, i);
    int64_t dims[FBX_HOST_MAX_RANK];
    for (int k = 0; k < io->rank; k++) dims[k] = io->dims[k] > 0 ? io->dims[k] : 1;
    err = fbx_host_tensor_alloc(&in[i], io->name, io->dtype, io->rank, dims);
    if (!err) fbx_host_tensor_fill_normal(&in[i], 42 + i);
  }
  for (int r = 0; r < n && !err; r++) {
    fbx_host_tensor *outs = NULL;
    size_t no = 0;
    err = fbx_host_session_run(s, in, ni, &outs, &no);
    if (!err && check_names) { /* names.onnx: Y = sigmoid((relu(X) + 1) * 2) */
      for (size_t e = 0; e < fbx_host_tensor_numel(&in[0]); e++) {
        double x = fbx_host_tensor_get(&in[0], e);
        double ref = 1.0 / (1.0 + exp(-((x > 0 ? x : 0) + 1) * 2));
        double got = fbx_host_tensor_get(&outs[0], e);
        if (fabs(got - ref) > 1e-5) {
          err = fbx_host_errf("names.onnx output %zu: %g, expected %g", e, got, ref);
          break;
        }
      }
    }
    if (outs) fbx_host_tensors_free(outs, no);
  }
  for (size_t i = 0; i < ni && i < 8; i++) fbx_host_tensor_free(&in[i]);
  return err;
}

typedef struct thr_arg {
  fbx_host_session *s;
  char *err;
} thr_arg;

static void *thr_main(void *p) {
  thr_arg *a = p;
  /* a fixed prompt with an empty cache each time: the prefill path, same shape every run */
  for (int i = 0; i < 8 && !a->err; i++) {
    fbx_host_decoder d;
    a->err = fbx_host_decoder_init(&d, a->s);
    if (a->err) break;
    int64_t ids[4] = {1, 2, 3, 4};
    a->err = fbx_host_decoder_step(&d, ids, 4);
    fbx_host_decoder_free(&d);
  }
  return NULL;
}

static int copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  if (!a || !b) {
    if (a) fclose(a);
    if (b) fclose(b);
    return -1;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
  fclose(a);
  return fclose(b);
}

static int child_main(const char *cs, const char *extra) {
  fbx_host *h = NULL;
  CTRY(fbx_host_open(NULL, NULL, &h));
  fbx_host_session *s = NULL, *s2 = NULL;
  if (!strcmp(cs, "decoder") || !strcmp(cs, "cap")) {
    CTRY(open_session(h, "models/gen/decoder_tiny.onnx", NULL, 0, &s));
    CTRY(decode_run(s, 6, 24));
  } else if (!strcmp(cs, "cnn")) {
    CTRY(open_session(h, "models/gen/cnn_small.onnx", NULL, 0, &s));
    CTRY(static_runs(s, 3, 0));
  } else if (!strcmp(cs, "names")) {
    CTRY(open_session(h, "models/gen/names.onnx", NULL, 0, &s));
    CTRY(static_runs(s, 2, 1));
    fbx_host_session_destroy(s);
    CTRY(open_session(h, "models/gen/names.onnx", NULL, 1, &s));
    CTRY(static_runs(s, 2, 1));
  } else if (!strcmp(cs, "two")) {
    CTRY(open_session(h, "models/gen/names.onnx", NULL, 0, &s));
    CTRY(open_session(h, "models/gen/decoder_tiny.onnx", NULL, 0, &s2));
    CTRY(static_runs(s, 2, 1));
    CTRY(decode_run(s2, 3, 4));
    fbx_host_session_destroy(s);
    s = NULL;
    /* the file as it is on disk now, while the second session still lives */
    if (copy_file(getenv("FUSEBOX_TRACE"), extra)) {
      fprintf(stderr, "child: cannot snapshot the trace\n");
      return 1;
    }
    CTRY(decode_run(s2, 4, 6));
    fbx_host_session_destroy(s2);
    s2 = NULL;
  } else if (!strcmp(cs, "threads")) {
    CTRY(open_session(h, "models/gen/decoder_tiny.onnx", NULL, 0, &s));
    thr_arg a[2] = {{s, NULL}, {s, NULL}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thr_main, &a[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) CTRY(a[i].err);
  } else if (!strcmp(cs, "profile")) {
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s.ortprof", extra);
    CTRY(open_session(h, "models/gen/decoder_tiny.onnx", prefix, 0, &s));
    CTRY(decode_run(s, 5, 6));
    char *p = NULL;
    CTRY(fbx_host_session_end_profiling(s, &p));
    if (!p || rename(p, extra)) {
      fprintf(stderr, "child: cannot move the ORT profile %s to %s: %s\n", p ? p : "(null)", extra, strerror(errno));
      free(p);
      return 1;
    }
    free(p);
  } else {
    fprintf(stderr, "child: unknown case %s\n", cs);
    return 2;
  }
  if (s) fbx_host_session_destroy(s);
  if (s2) fbx_host_session_destroy(s2);
  fbx_host_close(h);
  return 0;
}

/* ================================ parent side =============================== */

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static double jnum(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static long long jint(json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }

/* Runs this program as `--child cs out extra` with the given env changes; returns exit status. */
static int spawn(const char *cs, const char *trace, const char *max_events, const char *out, const char *extra) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    unsetenv("FUSEBOX_TRACE");
    unsetenv("FUSEBOX_VERBOSE");
    unsetenv("FUSEBOX_CLAIM_DEBUG");
    unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
    if (trace) setenv("FUSEBOX_TRACE", trace, 1);
    if (max_events) setenv("FUSEBOX_TRACE_MAX_EVENTS", max_events, 1);
    /* the summary goes to stderr; keep the test log readable */
    if (!freopen(out, "w", stderr)) _exit(3);
    execl("/proc/self/exe", "test_e2e_trace", "--child", cs, extra ? extra : "", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void show_log(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f) && n++ < 40) fprintf(stderr, "    | %s", line);
  fclose(f);
}

static json_t *load(const char *path) {
  json_error_t e;
  json_t *r = json_load_file(path, 0, &e);
  CHECK(r != NULL, "%s is not valid JSON: %s (line %d col %d)", path, e.text, e.line, e.column);
  return r;
}

/* Perfetto / Chrome Trace Event fields on every event. Returns the events array. */
static json_t *check_format(json_t *root, const char *what) {
  json_t *evs = json_object_get(root, "traceEvents");
  CHECK(json_is_array(evs), "%s: no traceEvents array", what);
  if (!json_is_array(evs)) return NULL;
  size_t i;
  json_t *e;
  int bad = 0;
  json_array_foreach(evs, i, e) {
    const char *ph = jstr(e, "ph"), *name = jstr(e, "name");
    int ok = json_is_object(e) && ph && name && strlen(ph) == 1 && strchr("XiCM", ph[0]) &&
             json_is_integer(json_object_get(e, "pid")) && json_is_integer(json_object_get(e, "tid"));
    if (ok && ph[0] != 'M') ok = json_is_number(json_object_get(e, "ts")) && jnum(e, "ts") >= 0 && jstr(e, "cat");
    if (ok && ph[0] == 'X') ok = json_is_number(json_object_get(e, "dur")) && jnum(e, "dur") >= 0;
    if (ok && ph[0] == 'i') {
      const char *s = jstr(e, "s");
      ok = s && (!strcmp(s, "t") || !strcmp(s, "p") || !strcmp(s, "g"));
    }
    if (ok && ph[0] == 'C') {
      json_t *a = json_object_get(e, "args"), *v;
      const char *k;
      ok = json_is_object(a) && json_object_size(a) > 0;
      json_object_foreach(a, k, v) ok = ok && json_is_number(v);
    }
    if (ok && ph[0] == 'M') ok = jstr(json_object_get(e, "args"), "name") != NULL;
    if (!ok && bad++ < 5) {
      char *d = json_dumps(e, JSON_COMPACT);
      CHECK(0, "%s: event %zu lacks Perfetto fields: %.300s", what, i, d ? d : "?");
      free(d);
    }
  }
  return evs;
}

typedef struct span {
  double ts, end;
  long long tid;
  const char *name;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end ? 1 : 0; /* outer first */
}

/* Every X span closed (dur >= 0, checked above) and properly nested per thread; every thread
 * with events is named. Returns the number of distinct tids with spans of `name_of_interest`. */
static int check_nesting(json_t *evs, const char *what, const char *name_of_interest) {
  size_t n = json_array_size(evs), m = 0;
  span *sp = calloc(n + 1, sizeof *sp);
  long long named[256];
  int n_named = 0;
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *ph = jstr(e, "ph");
    if (ph && ph[0] == 'M' && !strcmp(jstr(e, "name"), "thread_name") && n_named < 256) named[n_named++] = jint(e, "tid");
    if (!ph || ph[0] != 'X') continue;
    sp[m].ts = jnum(e, "ts");
    sp[m].end = sp[m].ts + jnum(e, "dur");
    sp[m].tid = jint(e, "tid");
    sp[m].name = jstr(e, "name");
    m++;
  }
  qsort(sp, m, sizeof *sp, span_cmp);
  const double eps = 0.0015; /* timestamps are printed with ns precision */
  int stack[64], depth = 0, bad = 0, tids_interest = 0;
  long long cur = -1, last_interest_tid = -1;
  for (size_t k = 0; k < m; k++) {
    if (sp[k].tid != cur) {
      cur = sp[k].tid;
      depth = 0;
      int found = 0;
      for (int j = 0; j < n_named; j++) found |= named[j] == cur;
      CHECK(found, "%s: tid %lld has spans but no thread_name metadata", what, cur);
    }
    if (name_of_interest && !strcmp(sp[k].name, name_of_interest) && sp[k].tid != last_interest_tid) {
      tids_interest++;
      last_interest_tid = sp[k].tid;
    }
    while (depth && sp[stack[depth - 1]].end <= sp[k].ts + eps) depth--;
    if (depth && sp[k].end > sp[stack[depth - 1]].end + eps) {
      if (bad++ < 5)
        CHECK(0, "%s: span %s [%.3f, %.3f] on tid %lld overlaps %s [%.3f, %.3f] without nesting", what, sp[k].name,
              sp[k].ts, sp[k].end, sp[k].tid, sp[stack[depth - 1]].name, sp[stack[depth - 1]].ts,
              sp[stack[depth - 1]].end);
      continue;
    }
    if (depth < 64) stack[depth++] = (int)k;
  }
  free(sp);
  return tids_interest;
}

/* The summary instant of session `sid` (0: the only/last one). */
static json_t *summary_of(json_t *evs, const char *name, long long sid, int *count) {
  json_t *found = NULL, *e;
  size_t i;
  *count = 0;
  json_array_foreach(evs, i, e) {
    if (strcmp(jstr(e, "name") ? jstr(e, "name") : "", name)) continue;
    json_t *a = json_object_get(e, "args");
    if (sid && jint(a, "session_id") != sid) continue;
    (*count)++;
    found = a;
  }
  return found;
}

static const char *const COUNTERS_ALWAYS[] = {"fusebox.mem_bytes", "fusebox.mem_pct", "fusebox.util_pct",
                                              "fusebox.rss_bytes", "fusebox.claimed_nodes",
                                              "fusebox.unclaimed_nodes", "fusebox.fused_subgraphs",
                                              "fusebox.mem_wrap_bytes"};

/* A single-session trace: summary numbers == the counts derivable from the events. */
static void check_summary_matches(json_t *root, json_t *evs, const char *what, int expect_util) {
  int ns = 0, no = 0;
  json_t *sum = summary_of(evs, "fusebox.session_summary", 0, &ns);
  json_t *slow = summary_of(evs, "fusebox.slowest_ops", 0, &no);
  CHECK(ns == 1 && no == 1, "%s: %d session_summary and %d slowest_ops instants, expected 1 each", what, ns, no);
  if (!sum || !slow) return;
  long long gc_calls = 0, gc_claimed = 0, gc_total = 0, gc_fused = 0;
  long long paths[4] = {0}, cache[3] = {0}, subgraphs = 0, sg_cache[3] = {0}, fast = 0, composed = 0;
  long long counted = 0;
  double last_claimed = -1, last_unclaimed = -1, last_fused = -1;
  static const char *pn[4] = {"decode", "prefill", "general", "eager"}, *cn[3] = {"HIT", "MISS", "RETRACE"};
  int seen_counter[sizeof COUNTERS_ALWAYS / sizeof *COUNTERS_ALWAYS] = {0};
  json_t *op_calls = json_object(); /* op span name -> count */
  double op_us = 0;
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *name = jstr(e, "name"), *ph = jstr(e, "ph"), *cat = jstr(e, "cat");
    json_t *a = json_object_get(e, "args");
    if (ph[0] != 'M' && strcmp(name, "fusebox.session_summary") && strcmp(name, "fusebox.slowest_ops")) counted++;
    if (!strcmp(name, "fusebox.getcapability")) {
      gc_calls++;
      gc_claimed += jint(a, "claimed");
      gc_total += jint(a, "total");
      gc_fused += jint(a, "fused_subgraphs");
    } else if (!strncmp(name, "fusebox.compute[", 16)) {
      const char *p = jstr(a, "path");
      char expect[64];
      snprintf(expect, sizeof expect, "fusebox.compute[%s]", p ? p : "?");
      CHECK(!strcmp(expect, name), "%s: %s carries path %s", what, name, p ? p : "(none)");
      for (int k = 0; k < 4; k++) paths[k] += p && !strcmp(p, pn[k]);
      for (int k = 0; k < 3; k++) cache[k] += jstr(a, "cache") && !strcmp(jstr(a, "cache"), cn[k]);
    } else if (!strcmp(name, "fusebox.subgraph") && ph[0] == 'X') {
      subgraphs++;
      for (int k = 0; k < 3; k++) sg_cache[k] += jstr(a, "cache") && !strcmp(jstr(a, "cache"), cn[k]);
    } else if (ph[0] == 'X' && cat && !strcmp(cat, "op")) {
      json_t *c = json_object_get(op_calls, name);
      json_object_set_new(op_calls, name, json_integer(c ? json_integer_value(c) + 1 : 1));
      op_us += jnum(e, "dur");
    } else if (ph[0] == 'X' && cat && !strcmp(cat, "op.fast")) {
      fast++;
    } else if (ph[0] == 'X' && cat && !strcmp(cat, "op.composed")) {
      composed++;
    } else if (ph[0] == 'C') {
      for (size_t k = 0; k < sizeof COUNTERS_ALWAYS / sizeof *COUNTERS_ALWAYS; k++)
        seen_counter[k] |= !strcmp(name, COUNTERS_ALWAYS[k]);
      double v = jnum(a, "value");
      if (!strcmp(name, "fusebox.claimed_nodes")) last_claimed = v;
      if (!strcmp(name, "fusebox.unclaimed_nodes")) last_unclaimed = v;
      if (!strcmp(name, "fusebox.fused_subgraphs")) last_fused = v;
    }
  }
  for (size_t k = 0; k < sizeof COUNTERS_ALWAYS / sizeof *COUNTERS_ALWAYS; k++) {
    if (!expect_util && !strcmp(COUNTERS_ALWAYS[k], "fusebox.util_pct")) continue;
    CHECK(seen_counter[k], "%s: no counter track %s", what, COUNTERS_ALWAYS[k]);
  }
  CHECK(gc_calls > 0 && gc_calls == jint(sum, "getcapability_calls"), "%s: %lld getcapability instants, summary says %lld",
        what, gc_calls, jint(sum, "getcapability_calls"));
  CHECK(gc_claimed == jint(sum, "claimed") && gc_total == jint(sum, "total") && gc_fused == jint(sum, "fused_subgraphs"),
        "%s: getcapability instants claimed %lld/%lld fused %lld, summary %lld/%lld fused %lld", what, gc_claimed,
        gc_total, gc_fused, jint(sum, "claimed"), jint(sum, "total"), jint(sum, "fused_subgraphs"));
  CHECK(last_claimed == (double)gc_claimed && last_unclaimed == (double)(gc_total - gc_claimed) &&
            last_fused == (double)gc_fused,
        "%s: claim counters end at %g/%g/%g, expected %lld/%lld/%lld", what, last_claimed, last_unclaimed, last_fused,
        gc_claimed, gc_total - gc_claimed, gc_fused);
  long long n_compute = 0;
  for (int k = 0; k < 4; k++) {
    CHECK(paths[k] == jint(sum, pn[k]), "%s: %lld fusebox.compute[%s] instants, summary %s=%lld", what, paths[k], pn[k],
          pn[k], jint(sum, pn[k]));
    n_compute += paths[k];
  }
  CHECK(n_compute > 0, "%s: no compute instants", what);
  static const char *ck[3] = {"cache_hit", "cache_miss", "cache_retrace"};
  for (int k = 0; k < 3; k++) {
    CHECK(cache[k] == jint(sum, ck[k]), "%s: %lld compute instants with cache %s, summary %s=%lld", what, cache[k],
          cn[k], ck[k], jint(sum, ck[k]));
    CHECK(sg_cache[k] == cache[k], "%s: fusebox.subgraph spans with cache %s: %lld vs %lld instants", what, cn[k],
          sg_cache[k], cache[k]);
  }
  CHECK(subgraphs == n_compute, "%s: %lld fusebox.subgraph spans vs %lld compute instants", what, subgraphs, n_compute);
  CHECK(jint(sum, "eval_calls") == n_compute, "%s: eval_calls %lld vs %lld computes", what, jint(sum, "eval_calls"),
        n_compute);
  CHECK(fast == jint(sum, "fast_count") && composed == jint(sum, "composed_count"),
        "%s: op.fast/op.composed spans %lld/%lld, summary %lld/%lld", what, fast, composed, jint(sum, "fast_count"),
        jint(sum, "composed_count"));
  /* slowest ops: calls per op == op spans of that name; total time == sum of span durations */
  json_t *ops = json_object_get(slow, "ops"), *o;
  CHECK(json_array_size(ops) > 0, "%s: slowest_ops lists no op", what);
  json_array_foreach(ops, i, o) {
    json_t *c = json_object_get(op_calls, jstr(o, "op"));
    CHECK(c && json_integer_value(c) == jint(o, "calls"), "%s: op %s: %lld spans, slowest_ops says %lld calls", what,
          jstr(o, "op"), c ? (long long)json_integer_value(c) : 0, jint(o, "calls"));
  }
  if (json_object_size(op_calls) <= 10) {
    CHECK(json_array_size(ops) == json_object_size(op_calls), "%s: %zu op names in spans, %zu in slowest_ops", what,
          json_object_size(op_calls), json_array_size(ops));
    double tot = jnum(slow, "total_us");
    CHECK(fabs(tot - op_us) <= 0.01 * tot + 0.01 * (double)json_array_size(evs), "%s: op spans sum %.3fus, summary total %.3fus",
          what, op_us, tot);
  }
  json_decref(op_calls);
  /* the cap bookkeeping: every counted event written */
  json_t *od = json_object_get(root, "otherData");
  CHECK(jint(od, "recorded_events") == counted && jint(od, "dropped_events") == 0,
        "%s: otherData recorded %lld dropped %lld, file holds %lld counted events", what, jint(od, "recorded_events"),
        jint(od, "dropped_events"), counted);
}

/* Does any fusebox.* X/i event or op span name contain s (in name or any string arg)? */
static int trace_has_string(json_t *evs, const char *s) {
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    json_t *a = json_object_get(e, "args"), *v;
    const char *k;
    json_object_foreach(a, k, v) if (json_is_string(v) && !strcmp(json_string_value(v), s)) return 1;
  }
  return 0;
}

static int count_named(json_t *evs, const char *name) {
  int n = 0;
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) n += jstr(e, "name") && !strcmp(jstr(e, "name"), name);
  return n;
}

/* ORT's profile: our events sit inside the fused node's "Node" event, and the run-time ones
 * name it (args parent_name = that Node event's name, ort_event_correlation_id set: the
 * link made through OrtEpProfilerImpl StartEvent/StopEvent, src/ep/ep_profiler.c). */
static void check_ort_profile(const char *path) {
  json_t *root = load(path);
  if (!root) return;
  json_t *evs = json_is_array(root) ? root : json_object_get(root, "traceEvents");
  typedef struct { double a, b; const char *name; } rng;
  static rng nodes[4096];
  int n_nodes = 0, n_ours = 0, n_sub = 0, n_ops = 0, outside = 0, other_ep_nodes = 0, linked = 0, unlinked = 0;
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    const char *cat = jstr(e, "cat"), *name = jstr(e, "name");
    json_t *a = json_object_get(e, "args");
    if (cat && !strcmp(cat, "Node") && name && strstr(name, "_kernel_time")) {
      const char *prov = jstr(a, "provider");
      if (prov && !strcmp(prov, FBX_HOST_EP_NAME) && n_nodes < 4096) {
        nodes[n_nodes].a = jnum(e, "ts");
        nodes[n_nodes].b = jnum(e, "ts") + jnum(e, "dur");
        nodes[n_nodes].name = name;
        n_nodes++;
      } else {
        other_ep_nodes++;
      }
    }
  }
  json_array_foreach(evs, i, e) {
    const char *cat = jstr(e, "cat"), *name = jstr(e, "name");
    json_t *a = json_object_get(e, "args");
    const char *fc = jstr(a, "fbx_cat");
    if (!fc) continue;
    n_ours++;
    CHECK(cat && !strcmp(cat, "Kernel"), "ORT profile: our event %s has cat %s, expected Kernel", name, cat ? cat : "?");
    int run_time = !strcmp(fc, "op") || !strcmp(fc, "op.fast") || !strcmp(fc, "op.worker") ||
                   (!strcmp(fc, "ep") && !strcmp(name, "fusebox.subgraph"));
    if (!run_time) continue;
    n_sub += !strcmp(name, "fusebox.subgraph");
    n_ops += !strcmp(fc, "op");
    double a0 = jnum(e, "ts"), a1 = a0 + jnum(e, "dur");
    const char *pn = jstr(a, "parent_name"), *pc = jstr(a, "ort_event_correlation_id");
    int in = 0, named = 0;
    for (int k = 0; k < n_nodes && pn && !named; k++) named = !strcmp(pn, nodes[k].name);
    if (!strcmp(fc, "op.worker")) { /* a pool thread's slice: no ORT event is open there */
    } else if (named && pc && *pc) {
      linked++;
    } else if (unlinked++ < 5)
      CHECK(0, "ORT profile: %s (%s) not linked to a Fusebox node event (parent_name %s, correlation %s)", name, fc,
            pn ? pn : "none", pc ? pc : "none");
    /* Tolerance: our events are placed by ORT's StartProfiling offset plus our own clock; the
     * handoff (ORT reads its clock, then calls StartProfiling, where we read ours) shifts all
     * our events early by that gap: ~0-1 us normally, up to ~13 us seen under ASan. */
    const double tol_us = 50;
    for (int k = 0; k < n_nodes && !in; k++) in = a0 >= nodes[k].a - tol_us && a1 <= nodes[k].b + tol_us;
    if (!in && outside++ < 5)
      CHECK(0, "ORT profile: %s (%s) [%.0f, %.0f]us lies outside every Fusebox node event", name, fc, a0, a1);
  }
  CHECK(n_nodes > 0, "ORT profile: no Node event with provider %s", FBX_HOST_EP_NAME);
  CHECK(n_sub > 0 && n_ops > 0, "ORT profile: %d fusebox.subgraph and %d op events (of %d ours)", n_sub, n_ops, n_ours);
  CHECK(n_sub == n_nodes, "ORT profile: %d fusebox.subgraph events vs %d Fusebox node runs", n_sub, n_nodes);
  fprintf(stderr, "  profile: %d Fusebox node runs, %d of our events (%d subgraph, %d op, %d run-time ones linked "
          "to their node event), %d other nodes\n", n_nodes, n_ours, n_sub, n_ops, linked, other_ep_nodes);
  json_decref(root);
}

static int g_pass, g_failed;

static void report(const char *name, int fails_before) {
  if (failed == fails_before) {
    g_pass++;
    printf("PASS  trace-e2e %s\n", name);
  } else {
    g_failed++;
    printf("FAIL  trace-e2e %s\n", name);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--child")) return child_main(argv[2], argc > 3 ? argv[3] : "");
  if (argc == 3 && !strcmp(argv[1], "--check")) { /* the single-session checks on any trace file */
    json_t *root = load(argv[2]);
    json_t *evs = root ? check_format(root, argv[2]) : NULL;
    if (evs) {
      check_nesting(evs, argv[2], NULL);
      check_summary_matches(root, evs, argv[2], 0);
    }
    json_decref(root);
    printf("trace-e2e check: %s\n", failed ? "FAILED" : "ok");
    return failed ? 1 : 0;
  }
  char dir[] = "/tmp/fbx_trace_e2e.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char tr[4096], log[4096], extra[4096];
  const char *only = argc > 1 ? argv[1] : NULL;
#define PATHS(cs)                                         \
  snprintf(tr, sizeof tr, "%s/%s.json", dir, cs);         \
  snprintf(log, sizeof log, "%s/%s.log", dir, cs);        \
  snprintf(extra, sizeof extra, "%s/%s.extra.json", dir, cs)
#define RUN_CHILD(cs, trace, maxev, ex)                                  \
  int rc_ = spawn(cs, trace, maxev, log, ex);                            \
  CHECK(rc_ == 0, "case %s: child exited %d; its stderr:", cs, rc_);     \
  if (rc_ != 0) show_log(log)

  /* 1, 2: decoder and cnn, the full consistency checks */
  static const char *const singles[] = {"decoder", "cnn"};
  for (int c = 0; c < 2; c++) {
    if (only && strcmp(only, singles[c])) continue;
    int f0 = failed;
    PATHS(singles[c]);
    RUN_CHILD(singles[c], tr, NULL, NULL);
    json_t *root = load(tr);
    json_t *evs = root ? check_format(root, tr) : NULL;
    if (evs) {
      check_nesting(evs, tr, NULL);
      check_summary_matches(root, evs, tr, 1);
    }
    json_decref(root);
    report(singles[c], f0);
  }

  /* 3: escaping */
  if (!only || !strcmp(only, "names")) {
    int f0 = failed;
    PATHS("names");
    RUN_CHILD("names", tr, NULL, NULL);
    json_t *root = load(tr);
    json_t *evs = root ? check_format(root, tr) : NULL;
    if (evs) {
      check_nesting(evs, tr, NULL);
      for (int k = 0; k < 4; k++) CHECK(trace_has_string(evs, NAMES[k]), "names: node name #%d not found intact", k);
      int ns = 0;
      summary_of(evs, "fusebox.session_summary", 0, &ns);
      CHECK(ns == 2, "names: %d session summaries, expected 2", ns);
    }
    json_decref(root);
    report("names", f0);
  }

  /* 4: two sessions, the first destroyed while the second lives */
  if (!only || !strcmp(only, "two")) {
    int f0 = failed;
    PATHS("two");
    RUN_CHILD("two", tr, NULL, extra);
    json_t *snap = load(extra);
    json_t *evs = snap ? check_format(snap, "two (snapshot after the first session)") : NULL;
    if (evs) {
      int ns = 0;
      json_t *s1 = summary_of(evs, "fusebox.session_summary", 0, &ns);
      CHECK(ns == 1 && s1 && jint(s1, "general") == 2,
            "two: snapshot holds %d summaries (first: general=%lld), expected 1 with general=2", ns,
            s1 ? jint(s1, "general") : -1);
      check_nesting(evs, "two (snapshot)", NULL);
    }
    json_decref(snap);
    json_t *root = load(tr);
    evs = root ? check_format(root, tr) : NULL;
    if (evs) {
      int ns = 0;
      json_t *last = summary_of(evs, "fusebox.session_summary", 0, &ns);
      CHECK(ns == 2, "two: %d summaries at the end, expected 2", ns);
      CHECK(last && jint(last, "decode") == 4 + 6 && jint(last, "prefill") == 2,
            "two: second session decode=%lld prefill=%lld, expected 10 and 2", last ? jint(last, "decode") : -1,
            last ? jint(last, "prefill") : -1);
      check_nesting(evs, tr, NULL);
    }
    json_decref(root);
    report("two", f0);
  }

  /* 5: a small event cap */
  if (!only || !strcmp(only, "cap")) {
    int f0 = failed;
    PATHS("cap");
    RUN_CHILD("cap", tr, "40", NULL);
    json_t *root = load(tr);
    json_t *evs = root ? check_format(root, tr) : NULL;
    if (evs) {
      check_nesting(evs, tr, NULL);
      long long counted = 0;
      size_t i;
      json_t *e;
      json_array_foreach(evs, i, e) {
        const char *n = jstr(e, "name"), *ph = jstr(e, "ph");
        counted += ph[0] != 'M' && strcmp(n, "fusebox.session_summary") && strcmp(n, "fusebox.slowest_ops");
      }
      json_t *od = json_object_get(root, "otherData");
      CHECK(counted == 40 && jint(od, "recorded_events") == 40 && jint(od, "max_events") == 40,
            "cap: %lld counted events in the file, otherData recorded %lld max %lld (expected 40)", counted,
            jint(od, "recorded_events"), jint(od, "max_events"));
      CHECK(jint(od, "dropped_events") > 100, "cap: only %lld drops reported", jint(od, "dropped_events"));
      int ns = 0;
      json_t *sum = summary_of(evs, "fusebox.session_summary", 0, &ns);
      CHECK(ns == 1 && sum && jint(sum, "dropped_events") > 0 && jint(sum, "decode") == 24,
            "cap: summary missing or without drops / full counts (decode=%lld)", sum ? jint(sum, "decode") : -1);
    }
    json_decref(root);
    FILE *f = fopen(log, "r");
    char line[1024];
    int said = 0;
    while (f && fgets(line, sizeof line, f)) said |= strstr(line, "dropped") != NULL;
    if (f) fclose(f);
    CHECK(said, "cap: the stderr summary does not mention dropped events");
    report("cap", f0);
  }

  /* 6: two threads, one session */
  if (!only || !strcmp(only, "threads")) {
    int f0 = failed;
    PATHS("threads");
    RUN_CHILD("threads", tr, NULL, NULL);
    json_t *root = load(tr);
    json_t *evs = root ? check_format(root, tr) : NULL;
    if (evs) {
      int tids = check_nesting(evs, tr, "fusebox.subgraph");
      CHECK(tids == 2, "threads: fusebox.subgraph spans on %d threads, expected 2", tids);
      check_summary_matches(root, evs, tr, 0);
      CHECK(count_named(evs, "fusebox.subgraph") == 16, "threads: %d subgraph spans, expected 16",
            count_named(evs, "fusebox.subgraph"));
    }
    json_decref(root);
    report("threads", f0);
  }

  /* 7: ORT's own profile */
  if (!only || !strcmp(only, "profile")) {
    int f0 = failed;
    PATHS("profile");
    RUN_CHILD("profile", NULL, NULL, extra);
    if (rc_ == 0) check_ort_profile(extra);
    report("profile", f0);
  }

  if (!g_failed) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
  } else {
    fprintf(stderr, "files kept in %s\n", dir);
  }
  printf("trace-e2e: %d passed, %d failed\n", g_pass, g_failed);
  return g_failed ? 1 : 0;
}
