/* Tests of src/trace: gating, the JSON writer, the session summary, the
 * profiler store and counters. The environment is read once per process, so
 * every case runs in a child process (this program re-executed with
 * `child <case>` and its own environment); the parent checks the trace file
 * and the child's stderr with jansson / by hand-computed expectations. */
#if defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT
#include <stdio.h>
int main(void) {
  printf("trace: compiled out (FBX_TRACE_COMPILED_OUT), 0 passed, 0 failed\n");
  return 0;
}
#else

#include <sys/resource.h>

#include "trace_harness.h"


/* ============================ child cases ============================== */


/* Every entry point with everything unset: nothing is collected or written. */
static int child_off(void) {
  CHECK(fbx_trace_flags() == 0);
  CHECK(!fbx_trace_enabled());
  fbx_trace_session *s = fbx_trace_session_create("off");
  CHECK(s == NULL);
  fbx_trace_session_bind(s);
  CHECK(fbx_trace_session_current() == NULL);
  fbx_trace_complete("x", "op", 1, 2, NULL, 0);
  fbx_trace_instant("x", "ep", NULL, 0);
  fbx_trace_counter("c", 1);
  fbx_trace_sample_counters(1, 2);
  fbx_trace_nvtx_push("x");
  fbx_trace_nvtx_pop();
  fbx_trace_session_claim(s, 1, 2, 1);
  fbx_trace_session_op(s, "Add", 5, false);
  fbx_trace_claim_debug("n", "", "Add", true, "r");
  fbx_trace_session_destroy(s);
  fbx_trace_flush();
  return 0;
}

/* Off means one predictable branch: a tight loop over the off entry points
 * costs a few ns per call (bound generous for a loaded machine). */
/* Tracing off: three entry points per iteration cost a branch each. Timed in
 * this thread's CPU time, not wall time, so a loaded machine that deschedules
 * the child does not count against it; 25 ns a call is ten times what a
 * taken-not branch and a call cost, and far below what building an event
 * (formatting, a lock, a buffer write: ~100 ns+) would. bench/bench_trace.c
 * measures the real overhead on whole models. */
static int child_off_cost(void) {
  enum { N = 2000000 };
  fbx_trace_arg a[] = {FBX_TARG_I("x", 1)};
  struct timespec t0, t1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (int i = 0; i < N; i++) {
    fbx_trace_complete("x", "op", (uint64_t)i, (uint64_t)i + 1, a, 1);
    fbx_trace_session_op(NULL, "x", 1, false);
    fbx_trace_counter("c", i);
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / N / 3;
  fprintf(stderr, "off cost: %.2f ns/call\n", ns);
  CHECK(ns < 25);
  return 0;
}

typedef struct thr_arg {
  fbx_trace_session *s;
  int idx;
} thr_arg;

enum { THREADS = 4, ITERS = 500 };

/* Per iteration: one outer span (fusebox.subgraph), two nested op spans, one
 * instant, one counter; session stats for each. */
static void *worker(void *p) {
  thr_arg *a = p;
  char name[32];
  snprintf(name, sizeof name, "worker-%d", a->idx);
  fbx_trace_thread_name_set(name);
  fbx_trace_session_bind(a->s);
  uint64_t last_end = 0;
  for (int i = 0; i < ITERS; i++) {
    uint64_t t0 = fbx_trace_now_ns();
    if (t0 <= last_end) t0 = last_end + 1; /* synthetic times below run ahead of the clock */
    uint64_t a0 = t0 + 5;
    uint64_t a1 = a0 + 1000;
    fbx_trace_arg args[] = {FBX_TARG_I("node_id", i), FBX_TARG_S("node", "n\"1"), FBX_TARG_D("flops", 1.5)};
    fbx_trace_complete("Add", "op", a0, a1, args, 3);
    fbx_trace_session_op(a->s, "Add", a1 - a0, false);
    uint64_t b0 = a1 + 10;
    uint64_t b1 = b0 + 2000;
    fbx_trace_complete("MatMul", "op", b0, b1, NULL, 0);
    fbx_trace_session_op(a->s, "MatMul", b1 - b0, false);
    fbx_trace_arg cargs[] = {FBX_TARG_S("path", "decode"), FBX_TARG_S("cache", i ? "HIT" : "MISS")};
    fbx_trace_instant("fusebox.compute[decode]", "ep", cargs, 2);
    fbx_trace_session_compute(a->s, "decode", i ? "HIT" : "MISS");
    fbx_trace_counter("fusebox.mem_bytes", (double)i);
    fbx_trace_complete("fusebox.subgraph", "ep", t0, b1 + 100, NULL, 0);
    last_end = b1 + 100;
  }
  fbx_trace_session_bind(NULL);
  return NULL;
}

static int child_threads(void) {
  fbx_trace_session *s[2] = {fbx_trace_session_create("A"), fbx_trace_session_create("B")};
  CHECK(s[0] && s[1]);
  pthread_t t[THREADS];
  thr_arg a[THREADS];
  for (int i = 0; i < THREADS; i++) {
    a[i] = (thr_arg){s[i % 2], i};
    CHECK(pthread_create(&t[i], NULL, worker, &a[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  fbx_trace_session_destroy(s[0]);
  fbx_trace_session_destroy(s[1]);
  return 0;
}

static const char *const k_names[] = {
    "quote\"in", "back\\slash", "new\nline", "tab\tctl\x01\x1f", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
    "bad\xff byte", "trunc\xe2\x9c",
};
static const char *const k_expect[] = {
    "quote\"in", "back\\slash", "new\nline", "tab\tctl\x01\x1f", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
    "bad\xef\xbf\xbd byte", "trunc\xef\xbf\xbd\xef\xbf\xbd",
};
enum { N_NAMES = sizeof k_names / sizeof k_names[0] };

static int child_escape(void) {
  fbx_trace_session *s = fbx_trace_session_create("esc\"ape");
  for (int i = 0; i < N_NAMES; i++) {
    fbx_trace_arg a[] = {FBX_TARG_S("node", k_names[i]), FBX_TARG_S(k_names[i], "v")};
    fbx_trace_complete(k_names[i], "op", 10, 20, a, 2);
  }
  fbx_trace_session_unclaimed(s, "com.x", "We\"ird", "node\\\n", "reason \"quoted\"");
  fbx_trace_session_destroy(s);
  return 0;
}

/* The file is valid JSON after the first of two sessions is destroyed, while
 * the second still runs; and after the second. */
static int child_two_sessions(void) {
  const char *path = getenv("FUSEBOX_TRACE");
  fbx_trace_session *s1 = fbx_trace_session_create("first");
  fbx_trace_session *s2 = fbx_trace_session_create("second");
  span("a", "op", fbx_trace_now_ns(), fbx_trace_now_ns());
  fbx_trace_session_destroy(s1);
  json_t *j;
  CHECK(load_ok(path, &j));
  CHECK(count_named(j, "fusebox.session_summary") == 1);
  CHECK(count_named(j, "a") == 1);
  json_decref(j);
  span("b", "op", fbx_trace_now_ns(), fbx_trace_now_ns());
  fbx_trace_session_destroy(s2);
  CHECK(load_ok(path, &j));
  CHECK(count_named(j, "fusebox.session_summary") == 2);
  CHECK(count_named(j, "b") == 1);
  json_decref(j);
  /* after the last teardown, more events and no teardown: atexit completes the file */
  span("after", "op", fbx_trace_now_ns(), fbx_trace_now_ns());
  return 0;
}

enum { CAP = 50, CAP_EMIT = 300 };
static int child_cap(void) {
  fbx_trace_session *s = fbx_trace_session_create("cap");
  for (int i = 0; i < CAP_EMIT; i++) span("capped", "op", 100 + (uint64_t)i, 200 + (uint64_t)i);
  fbx_trace_session_destroy(s);
  return 0;
}

/* Known numbers in: summary out (parent checks both against the events). */
static int child_summary(void) {
  fbx_trace_session *s = fbx_trace_session_create("sum");
  fbx_trace_session_bind(s);
  /* two GetCapability calls */
  int claims[2][3] = {{7, 10, 2}, {3, 4, 1}};
  for (int c = 0; c < 2; c++) {
    fbx_trace_arg a[] = {FBX_TARG_I("claimed", claims[c][0]), FBX_TARG_I("total", claims[c][1]),
                         FBX_TARG_I("fused_subgraphs", claims[c][2]),
                         FBX_TARG_S("fallback_Loop", "control flow")};
    fbx_trace_instant("fusebox.getcapability", "ep", a, 4);
    fbx_trace_session_claim(s, claims[c][0], claims[c][1], claims[c][2]);
  }
  const char *nodes[] = {"l0", "l1", "l2", "l3"};
  for (int i = 0; i < 4; i++) fbx_trace_session_unclaimed(s, "", "Loop", nodes[i], "control flow");
  fbx_trace_session_unclaimed(s, "com.microsoft", "SkipLayerNormalization", "sln0", "contrib op");
  const char *paths[] = {"prefill", "decode", "decode", "decode", "eager"};
  const char *caches[] = {"MISS", "MISS", "HIT", "HIT", ""};
  for (int i = 0; i < 5; i++) {
    fbx_trace_arg a[] = {FBX_TARG_S("path", paths[i]), FBX_TARG_S("cache", caches[i])};
    char nm[64];
    snprintf(nm, sizeof nm, "fusebox.compute[%s]", paths[i]);
    fbx_trace_instant(nm, "ep", a, 2);
    fbx_trace_session_compute(s, paths[i], caches[i]);
    /* device counters: run 0 allocates 7 buffers, run 2 captures, runs 3-4 replay */
    fbx_trace_session_device(s, i == 0 ? 7 : 0, i == 1 ? 2 : 1, i == 2, i > 2);
  }
  fbx_trace_session_wrap(s, 3, 3 << 20);
  fbx_trace_session_copy_wrap(s, 2, 1000);
  fbx_trace_session_copy_out(s, true, 64);
  fbx_trace_session_copy_out(s, true, 64);
  fbx_trace_session_copy_out(s, false, 4096);
  fbx_trace_session_phase(s, "compile", 5000);
  fbx_trace_session_phase(s, "eval", 1000);
  fbx_trace_session_phase(s, "eval", 2000);
  /* ops: MatMul 3 x 300us, Add 10 x 10us, Softmax 1 x 500us (device) */
  for (int i = 0; i < 3; i++) fbx_trace_session_op(s, "MatMul", 300000, false);
  for (int i = 0; i < 10; i++) fbx_trace_session_op(s, "Add", 10000, false);
  fbx_trace_session_op(s, "Softmax", 500000, true);
  /* fast vs composed, counted from the spans */
  fbx_trace_arg kf[] = {FBX_TARG_S("kernel", "avx2")};
  fbx_trace_arg kc[] = {FBX_TARG_S("reason", "axis not last")};
  for (int i = 0; i < 4; i++) fbx_trace_complete("MatMul [fast]", "op.fast", 10, 20, kf, 1);
  for (int i = 0; i < 2; i++) fbx_trace_complete("Softmax [composed]", "op.composed", 10, 20, kc, 1);
  fbx_trace_session_destroy(s);
  return 0;
}

static int child_claim_debug(void) {
  CHECK(fbx_trace_flags() & FBX_TRACE_F_CLAIM);
  CHECK(!fbx_trace_enabled());
  fbx_trace_claim_debug("node_7", "com.microsoft", "FusedMatMul", false, "attribute alpha != 1");
  fbx_trace_claim_debug("node_8", "", "Add", true, NULL);
  return 0;
}

typedef struct prof_ctx {
  int n, n_args_ok, inst;
} prof_ctx;
static void prof_visit(void *p, const fbx_trace_prof_event *ev) {
  prof_ctx *c = p;
  c->n++;
  if (ev->t1_ns == ev->t0_ns) c->inst++;
  if (ev->n_args == 2 && !strcmp(ev->keys[0], "node_id") && !strcmp(ev->values[0], "42") &&
      !strcmp(ev->keys[1], "x") && !strcmp(ev->values[1], "q\"v"))
    c->n_args_ok++;
}

/* No env: profiling alone turns collection on and off. */
static int child_profiler(void) {
  CHECK(fbx_trace_flags() == 0);
  fbx_trace_session *none = fbx_trace_session_create("p");
  CHECK(none == NULL); /* no summary without TRACE/VERBOSE */
  span("before", "op", 1, 2);
  fbx_trace_profiler_begin();
  CHECK(fbx_trace_flags() & FBX_TRACE_F_PROFILER);
  CHECK(fbx_trace_enabled());
  uint64_t start = fbx_trace_now_ns();
  fbx_trace_arg a[] = {FBX_TARG_I("node_id", 42), FBX_TARG_S("x", "q\"v")};
  for (int i = 0; i < 5; i++) fbx_trace_complete("Add", "op", start + 10, start + 20, a, 2);
  fbx_trace_instant("fusebox.compute[general]", "ep", NULL, 0);
  prof_ctx c = {0};
  int64_t dropped = fbx_trace_profiler_collect(start, NULL, prof_visit, &c);
  CHECK(c.n == 6 && c.n_args_ok == 5 && c.inst == 1 && dropped == 0);
  prof_ctx c2 = {0};
  fbx_trace_profiler_collect(start + 15, NULL, prof_visit, &c2);
  CHECK(c2.n == 1); /* only the instant is newer */
  fbx_trace_profiler_end();
  CHECK(fbx_trace_flags() == 0);
  prof_ctx c3 = {0};
  fbx_trace_profiler_collect(0, NULL, prof_visit, &c3);
  CHECK(c3.n == 0);
  return 0;
}

/* Process CPU time (user + system) in ns, as the counter sampler reads it. */
static uint64_t child_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* Three samples, each after 3 ms of CPU (not wall) time, so a loaded machine
 * that deschedules the child still leaves CPU time in every interval. The
 * child prints its own measure of sample 1's interval (CPU / wall / cores),
 * taken right after each sample, for the parent to compare with. */
static int child_counters(void) {
  uint64_t wall[3], cpu[3];
  for (int i = 0; i < 3; i++) {
    volatile double x = 0;
    uint64_t c0 = child_cpu_ns();
    while (child_cpu_ns() - c0 < 3000000) x += 1.0;
    fbx_trace_sample_counters(1000u * (size_t)(i + 1), 4000);
    wall[i] = fbx_trace_now_ns();
    cpu[i] = child_cpu_ns();
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  fprintf(stderr, "expect_util=%.6f\n", 100.0 * (double)(cpu[1] - cpu[0]) / (double)(wall[1] - wall[0]) / (double)ncpu);
  fbx_trace_nvtx_push("region");
  fbx_trace_nvtx_pop();
  return 0; /* no teardown: atexit writes the file */
}

/* ---- escaping of random strings (every byte class, runs longer and shorter
 * than the writer's 16-byte blocks) and raw-dims shape arguments ---- */
enum { RND_N = 400 };

static uint32_t rnd_next(uint32_t *st) {
  *st = *st * 1664525u + 1013904223u;
  return *st >> 8;
}

/* String k of the deterministic set (NUL-terminated, no NUL inside). */
static void rnd_string(int k, char *out, size_t cap) {
  uint32_t st = 0x9e3779b9u ^ (uint32_t)k * 2654435761u;
  size_t len = rnd_next(&st) % 90, n = 0;
  while (n < len && n + 5 < cap) {
    uint32_t c = rnd_next(&st) % 100;
    if (c < 50) out[n++] = (char)(0x20 + rnd_next(&st) % 95);
    else if (c < 58) out[n++] = (rnd_next(&st) & 1) ? '"' : '\\';
    else if (c < 68) out[n++] = (char)(1 + rnd_next(&st) % 31);
    else if (c < 76) { /* valid 2-byte */
      out[n++] = (char)(0xC2 + rnd_next(&st) % 30);
      out[n++] = (char)(0x80 + rnd_next(&st) % 64);
    } else if (c < 82) { /* valid 3-byte (not E0/ED corner leads) */
      out[n++] = (char)(0xE1 + rnd_next(&st) % 11);
      out[n++] = (char)(0x80 + rnd_next(&st) % 64);
      out[n++] = (char)(0x80 + rnd_next(&st) % 64);
    } else if (c < 86) { /* 4-byte, U+1F600 */
      memcpy(out + n, "\xf0\x9f\x98\x80", 4);
      n += 4;
    } else {
      out[n++] = (char)(0x80 + rnd_next(&st) % 128); /* any high byte: often invalid */
    }
  }
  out[n] = '\0';
}

/* Reference sanitizer, written from the Unicode definition independently of
 * the writer: each maximal valid UTF-8 sequence is kept, every other byte
 * becomes U+FFFD. */
static void rnd_expect(const char *in, char *out) {
  const unsigned char *p = (const unsigned char *)in;
  size_t o = 0;
  while (*p) {
    unsigned c = p[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    int ok = len > 0;
    for (int i = 1; ok && i < len; i++) {
      if ((p[i] & 0xC0) != 0x80) ok = 0;
      else cp = cp << 6 | (p[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && (cp < min_cp[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) ok = 0;
    if (ok) {
      memcpy(out + o, p, (size_t)len);
      o += (size_t)len;
      p += len;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      p++;
    }
  }
  out[o] = '\0';
}

static int child_escape_random(void) {
  fbx_trace_session *s = fbx_trace_session_create("rnd");
  char str[128], key[140];
  for (int k = 0; k < RND_N; k++) {
    rnd_string(k, str, sizeof str);
    snprintf(key, sizeof key, "k:%s", str);
    fbx_trace_arg a[] = {FBX_TARG_I("i", k), FBX_TARG_S("s", str), FBX_TARG_I(key, k)};
    fbx_trace_complete(k % 2 ? str : "rnd", "op", 10, 20, a, 3);
  }
  fbx_trace_session_destroy(s);
  return 0;
}

static int shapes_visit_ok;
static void shapes_visit(void *ctx, const fbx_trace_prof_event *ev) {
  (void)ctx;
  if (ev->n_args == 2 && !strcmp(ev->keys[0], "in") && !strcmp(ev->values[0], "1x16x64,scalar,none") &&
      !strcmp(ev->keys[1], "out") && !strcmp(ev->values[1], "0x7,12345678901"))
    shapes_visit_ok++;
}

static int child_shapes(void) {
  fbx_trace_session *s = fbx_trace_session_create("shapes");
  const int64_t in[] = {3, 3, 1, 16, 64, 0, -1};
  const int64_t out[] = {2, 2, -5, 7, 1, 12345678901LL};
  fbx_trace_arg a[] = {FBX_TARG_SHAPES_V("in", in, 7), FBX_TARG_SHAPES_V("out", out, 6),
                       FBX_TARG_SHAPES_V("empty", NULL, 0), FBX_TARG_I("after", 5)};
  fbx_trace_profiler_begin();
  fbx_trace_complete("Shaped", "op", 10, 20, a, 4);
  fbx_trace_complete("Shaped2", "op", 10, 20, a, 2);
  fbx_trace_profiler_collect(0, NULL, shapes_visit, NULL);
  fbx_trace_profiler_end();
  CHECK(shapes_visit_ok == 1); /* Shaped2: both shapes formatted in the ORT profiler store */
  fbx_trace_session_destroy(s);
  return 0;
}

/* ============================== parent ================================= */

static int t_off(void) {
  char *trace = path_of("off.json");
  unlink(trace);
  char *err = path_of("off.err");
  CHECK(run_child("off", NULL, err) == 0);
  CHECK(access(trace, F_OK) != 0);
  char *e = slurp(err);
  CHECK(e && e[0] == '\0'); /* nothing printed */
  free(e);
  return 0;
}

static int t_off_cost(void) {
  CHECK(run_child("off_cost", NULL, path_of("offcost.err")) == 0);
  return 0;
}

typedef struct span_rec {
  double ts, end;
  int64_t tid;
} span_rec;
static int span_cmp(const void *a, const void *b) {
  const span_rec *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end ? 1 : 0; /* outer first */
}

static int t_threads(void) {
  char *trace = path_of("threads.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("threads", env, path_of("threads.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  json_t *ev = events(j);
  size_t i;
  json_t *e;
  int nx = 0, ni = 0, nc = 0, nm_thread = 0, nm_proc = 0;
  span_rec *sp = calloc(json_array_size(ev), sizeof *sp);
  json_array_foreach(ev, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    const char *nm = json_string_value(json_object_get(e, "name"));
    CHECK(ph && nm);
    CHECK(json_is_integer(json_object_get(e, "pid")));
    if (!strcmp(ph, "X")) {
      double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
      CHECK(dur >= 0);
      sp[nx++] = (span_rec){ts, ts + dur, json_integer_value(json_object_get(e, "tid"))};
      if (!strcmp(nm, "Add")) {
        CHECK(arg_int(e, "node_id") >= 0);
        CHECK(!strcmp(json_string_value(json_object_get(json_object_get(e, "args"), "node")), "n\"1"));
        CHECK(json_number_value(json_object_get(json_object_get(e, "args"), "flops")) == 1.5);
      }
    } else if (!strcmp(ph, "i")) {
      ni += !strncmp(nm, "fusebox.compute[", 16);
    } else if (!strcmp(ph, "C")) {
      nc++;
      CHECK(json_is_number(json_object_get(json_object_get(e, "args"), "value")));
    } else if (!strcmp(ph, "M")) {
      nm_thread += !strcmp(nm, "thread_name");
      nm_proc += !strcmp(nm, "process_name");
    }
  }
  CHECK(nx == THREADS * ITERS * 3);
  CHECK(ni == THREADS * ITERS);
  CHECK(nc == THREADS * ITERS);
  CHECK(nm_proc == 1);
  CHECK(nm_thread >= THREADS);
  /* per thread: spans are nested or disjoint (a proper stack) */
  qsort(sp, (size_t)nx, sizeof *sp, span_cmp);
  double stack[16];
  int depth = 0;
  int64_t tid = -1;
  for (int k = 0; k < nx; k++) {
    if (sp[k].tid != tid) {
      tid = sp[k].tid;
      depth = 0;
    }
    while (depth && stack[depth - 1] <= sp[k].ts) depth--;
    if (depth) CHECK(sp[k].end <= stack[depth - 1] + 0.0005);
    CHECK(depth < 16);
    stack[depth++] = sp[k].end;
  }
  free(sp);
  /* two summaries; per-session op calls match the spans of its threads */
  CHECK(count_named(j, "fusebox.session_summary") == 2);
  CHECK(count_named(j, "fusebox.slowest_ops") == 2);
  for (int k = 0; k < 2; k++) {
    json_t *so = find_event(j, "fusebox.slowest_ops", k);
    json_t *ops = json_object_get(json_object_get(so, "args"), "ops");
    CHECK(json_array_size(ops) == 2);
    json_t *top = json_array_get(ops, 0);
    CHECK(!strcmp(json_string_value(json_object_get(top, "op")), "MatMul"));
    CHECK(json_integer_value(json_object_get(top, "calls")) == THREADS / 2 * ITERS);
    json_t *ss = find_event(j, "fusebox.session_summary", k);
    CHECK(arg_int(ss, "decode") == THREADS / 2 * ITERS);
    CHECK(arg_int(ss, "cache_miss") == THREADS / 2);
    CHECK(arg_int(ss, "cache_hit") == THREADS / 2 * (ITERS - 1));
  }
  json_decref(j);
  return 0;
}

static int t_escape(void) {
  char *trace = path_of("escape.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("escape", env, path_of("escape.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  for (int i = 0; i < N_NAMES; i++) {
    json_t *e = find_event(j, k_expect[i], 0);
    CHECK(e != NULL);
    json_t *args = json_object_get(e, "args");
    CHECK(!strcmp(json_string_value(json_object_get(args, "node")), k_expect[i]));
    CHECK(json_object_get(args, k_expect[i]) != NULL);
  }
  json_t *ss = find_event(j, "fusebox.session_summary", 0);
  CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ss, "args"), "session")), "esc\"ape"));
  json_t *u = json_array_get(json_object_get(json_object_get(ss, "args"), "unclaimed"), 0);
  CHECK(!strcmp(json_string_value(json_object_get(u, "op_type")), "We\"ird"));
  CHECK(!strcmp(json_string_value(json_object_get(u, "reason")), "reason \"quoted\""));
  CHECK(!strcmp(json_string_value(json_array_get(json_object_get(u, "nodes"), 0)), "node\\\n"));
  json_decref(j);
  return 0;
}

static int t_escape_random(void) {
  char *trace = path_of("escrnd.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("escape_random", env, path_of("escrnd.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  static char seen[RND_N];
  memset(seen, 0, sizeof seen);
  size_t i;
  json_t *e;
  char str[128], want[128 * 3 + 8], key[140 * 3 + 8];
  json_array_foreach(events(j), i, e) {
    json_t *args = json_object_get(e, "args");
    json_t *ji = json_object_get(args, "i");
    if (!json_is_integer(ji) || !json_object_get(args, "s")) continue;
    int k = (int)json_integer_value(ji);
    CHECK(k >= 0 && k < RND_N && !seen[k]);
    seen[k] = 1;
    rnd_string(k, str, sizeof str);
    rnd_expect(str, want);
    CHECK(!strcmp(json_string_value(json_object_get(args, "s")), want));
    CHECK(!strcmp(json_string_value(json_object_get(e, "name")), k % 2 ? want : "rnd"));
    snprintf(key, sizeof key, "k:%s", want);
    CHECK(json_integer_value(json_object_get(args, key)) == k);
  }
  for (int k = 0; k < RND_N; k++) CHECK(seen[k]);
  json_decref(j);
  return 0;
}

static int t_shapes(void) {
  char *trace = path_of("shapes.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("shapes", env, path_of("shapes.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  json_t *a = json_object_get(find_event(j, "Shaped", 0), "args");
  CHECK(!strcmp(json_string_value(json_object_get(a, "in")), "1x16x64,scalar,none"));
  CHECK(!strcmp(json_string_value(json_object_get(a, "out")), "0x7,12345678901"));
  CHECK(!strcmp(json_string_value(json_object_get(a, "empty")), ""));
  CHECK(json_integer_value(json_object_get(a, "after")) == 5);
  json_decref(j);
  return 0;
}

static int t_two_sessions(void) {
  char *trace = path_of("two.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("two", env, path_of("two.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j)); /* valid at exit too */
  CHECK(count_named(j, "after") == 1);
  json_decref(j);
  return 0;
}

static int t_cap(void) {
  char *trace = path_of("cap.json");
  char *err = path_of("cap.err");
  char cap[32];
  snprintf(cap, sizeof cap, "%d", CAP);
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), envv(1, "FUSEBOX_TRACE_MAX_EVENTS=%s", cap), NULL};
  CHECK(run_child("cap", env, err) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "capped") == CAP);
  json_t *fb = json_object_get(j, "otherData");
  CHECK(json_integer_value(json_object_get(fb, "dropped_events")) == CAP_EMIT - CAP);
  CHECK(json_integer_value(json_object_get(fb, "max_events")) == CAP);
  json_t *ss = find_event(j, "fusebox.session_summary", 0);
  CHECK(ss != NULL); /* never dropped */
  CHECK(arg_int(ss, "dropped_events") == CAP_EMIT - CAP);
  char *e = slurp(err);
  char want[128];
  snprintf(want, sizeof want, "%d event(s) dropped", CAP_EMIT - CAP);
  CHECK(e && strstr(e, want));
  free(e);
  json_decref(j);
  return 0;
}

/* Summary numbers == numbers derived from the events, and == hand values. */
static int t_summary(void) {
  char *trace = path_of("summary.json");
  char *err = path_of("summary.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("summary", env, err) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  int64_t claimed = 0, total = 0, fused = 0;
  int n_getcap = 0, dec = 0, pre = 0, eag = 0, miss = 0, hit = 0, fast = 0, comp = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    const char *cat = json_string_value(json_object_get(e, "cat"));
    if (!nm) continue;
    if (!strcmp(nm, "fusebox.getcapability")) {
      n_getcap++;
      claimed += arg_int(e, "claimed");
      total += arg_int(e, "total");
      fused += arg_int(e, "fused_subgraphs");
    } else if (!strncmp(nm, "fusebox.compute[", 16)) {
      json_t *a = json_object_get(e, "args");
      const char *p = json_string_value(json_object_get(a, "path"));
      const char *c = json_string_value(json_object_get(a, "cache"));
      dec += !strcmp(p, "decode");
      pre += !strcmp(p, "prefill");
      eag += !strcmp(p, "eager");
      miss += !strcmp(c, "MISS");
      hit += !strcmp(c, "HIT");
    } else if (cat && !strcmp(cat, "op.fast")) {
      fast++;
    } else if (cat && !strcmp(cat, "op.composed")) {
      comp++;
    }
  }
  CHECK(n_getcap == 2 && claimed == 10 && total == 14 && fused == 3);
  json_t *ss = find_event(j, "fusebox.session_summary", 0);
  CHECK(arg_int(ss, "getcapability_calls") == n_getcap);
  CHECK(arg_int(ss, "claimed") == claimed && arg_int(ss, "total") == total && arg_int(ss, "fused_subgraphs") == fused);
  CHECK(arg_int(ss, "decode") == dec && arg_int(ss, "prefill") == pre && arg_int(ss, "eager") == eag);
  CHECK(arg_int(ss, "cache_miss") == miss && arg_int(ss, "cache_hit") == hit && arg_int(ss, "cache_retrace") == 0);
  CHECK(arg_int(ss, "fast_count") == fast && fast == 4);
  CHECK(arg_int(ss, "composed_count") == comp && comp == 2);
  CHECK(arg_int(ss, "wrap_count") == 3 && arg_int(ss, "wrap_bytes") == 3 << 20);
  CHECK(arg_int(ss, "copyout_delta_count") == 2 && arg_int(ss, "copyout_delta_bytes") == 128);
  CHECK(arg_int(ss, "copyout_full_count") == 1 && arg_int(ss, "copyout_full_bytes") == 4096);
  CHECK(arg_int(ss, "eval_calls") == 2);
  CHECK(json_number_value(json_object_get(json_object_get(ss, "args"), "eval_us")) == 3.0);
  json_t *un = json_object_get(json_object_get(ss, "args"), "unclaimed");
  CHECK(json_array_size(un) == 2);
  json_t *loop = json_array_get(un, 0);
  CHECK(json_integer_value(json_object_get(loop, "count")) == 4);
  CHECK(json_array_size(json_object_get(loop, "nodes")) == 3);
  /* slowest ops: Softmax 500us (device) > MatMul 900us? no: MatMul 900 first */
  json_t *so = find_event(j, "fusebox.slowest_ops", 0);
  json_t *ops = json_object_get(json_object_get(so, "args"), "ops");
  CHECK(json_array_size(ops) == 3);
  CHECK(!strcmp(json_string_value(json_object_get(json_array_get(ops, 0), "op")), "MatMul"));
  CHECK(!strcmp(json_string_value(json_object_get(json_array_get(ops, 1), "op")), "Softmax"));
  CHECK(!strcmp(json_string_value(json_object_get(json_array_get(ops, 2), "op")), "Add"));
  double pct0 = json_number_value(json_object_get(json_array_get(ops, 0), "pct"));
  CHECK(pct0 > 59.99 && pct0 < 60.01); /* 900 / 1500 */
  CHECK(!strcmp(json_string_value(json_object_get(json_object_get(so, "args"), "time")), "mixed"));
  CHECK(json_integer_value(json_object_get(json_array_get(ops, 2), "calls")) == 10);
  /* counters fed by the session calls */
  CHECK(count_named(j, "fusebox.claimed_nodes") == 2);
  CHECK(count_named(j, "fusebox.composed_path_count") == 2);
  CHECK(count_named(j, "fusebox.copyout_bytes") == 3);
  json_decref(j);
  /* stderr summary */
  char *s = slurp(err);
  CHECK(s);
  CHECK(strstr(s, "[fusebox] ===== session summary ====="));
  CHECK(strstr(s, "claim:   10/14 nodes claimed (71.4%) across 3 fused subgraph(s), 2 GetCapability call(s)"));
  CHECK(strstr(s, "- Loop x4: control flow [l0, l1, l2, ...]"));
  CHECK(strstr(s, "- com.microsoft.SkipLayerNormalization x1: contrib op [sln0]"));
  CHECK(strstr(s, "compute: decode=3 prefill=1 general=0 eager=1  (cache: 2 HIT / 2 MISS / 0 RETRACE)"));
  CHECK(strstr(s, "(graph: 1 capture / 2 replay; 7 allocs in 1 of 5 runs; 6 host syncs, at most 2 per run)"));
  CHECK(strstr(s, "zero-copy wrap 3 (3.00 MiB)"));
  CHECK(strstr(s, "copy-out delta 2 (128 B) vs full 1 (4.00 KiB)"));
  CHECK(strstr(s, "eval=3.0us (2 calls)"));
  CHECK(strstr(s, "kernels: fast=4 composed=2"));
  CHECK(strstr(s, "composed: Softmax x2: axis not last"));
  CHECK(strstr(s, " 1. MatMul"));
  CHECK(strstr(s, "60.0%"));
  free(s);
  return 0;
}

static int t_verbose(void) {
  char *err = path_of("verbose.err");
  const char *env[] = {"FUSEBOX_VERBOSE=1", NULL};
  CHECK(run_child("summary", env, err) == 0);
  char *s = slurp(err);
  CHECK(s && strstr(s, "claim:   10/14 nodes claimed"));
  CHECK(strstr(s, "kernels: fast=4 composed=2")); /* span bookkeeping runs without JSON */
  free(s);
  return 0;
}

static int t_claim_debug(void) {
  char *err = path_of("claim.err");
  const char *env[] = {"FUSEBOX_CLAIM_DEBUG=1", NULL};
  CHECK(run_child("claim", env, err) == 0);
  char *s = slurp(err);
  CHECK(s && strstr(s, "UNCLAIMED com.microsoft.FusedMatMul node='node_7' reason: attribute alpha != 1"));
  CHECK(strstr(s, "CLAIMED   Add node='node_8'"));
  free(s);
  return 0;
}

static int t_profiler(void) {
  CHECK(run_child("profiler", NULL, path_of("profiler.err")) == 0);
  return 0;
}

static int t_counters(void) {
  char *trace = path_of("counters.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("counters", env, path_of("counters.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "fusebox.mem_bytes") == 3);
  CHECK(count_named(j, "fusebox.mem_pct") == 3);
  json_t *pct = find_event(j, "fusebox.mem_pct", 2);
  CHECK(json_number_value(json_object_get(json_object_get(pct, "args"), "value")) == 75.0);
  CHECK(count_named(j, "fusebox.rss_bytes") == 3);
  CHECK(json_number_value(json_object_get(json_object_get(find_event(j, "fusebox.rss_bytes", 0), "args"), "value")) > 1e5);
  /* every sample has a CPU interval: the first one measures from trace init */
  CHECK(count_named(j, "fusebox.util_pct") == 3);
  double u = json_number_value(json_object_get(json_object_get(find_event(j, "fusebox.util_pct", 1), "args"), "value"));
  char *err = slurp(path_of("counters.err"));
  const char *e = err ? strstr(err, "expect_util=") : NULL;
  CHECK(e);
  double want = atof(e + strlen("expect_util="));
  free(err);
  /* Same interval measured twice, a few microseconds apart at each end: a
   * formula error (no division by the core count, wall for CPU) is off by 2x
   * or more; the skew of the two measurements is a fraction of that. */
  CHECK(u > 0 && u <= 100.5);
  CHECK(u > 0.6 * want - 0.5 && u < 1.6 * want + 0.5);
  json_decref(j);
  return 0;
}

static const tcase k_cases[] = {
    {"off_is_silent", t_off, "off", child_off},
    {"off_cost_is_a_branch", t_off_cost, "off_cost", child_off_cost},
    {"threads_sessions_valid_nested", t_threads, "threads", child_threads},
    {"escaping", t_escape, "escape", child_escape},
    {"escaping_random_vs_reference", t_escape_random, "escape_random", child_escape_random},
    {"shapes_arg_raw_dims", t_shapes, "shapes", child_shapes},
    {"valid_after_first_teardown_and_exit", t_two_sessions, "two", child_two_sessions},
    {"event_cap_reports_drops", t_cap, "cap", child_cap},
    {"summary_equals_events", t_summary, "summary", child_summary},
    {"verbose_summary_without_json", t_verbose, NULL, NULL},
    {"claim_debug", t_claim_debug, "claim", child_claim_debug},
    {"profiler_store", t_profiler, "profiler", child_profiler},
    {"counters", t_counters, "counters", child_counters},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace");
}

#endif /* FBX_TRACE_COMPILED_OUT */
