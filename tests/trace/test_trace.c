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
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace.h"
#include "trace/trace_profiler.h"

/* The ORT profiler adapter is tested in-process against a fake OrtEpApi. */
#include "../../src/ep/ep_profiler.c"

/* `fusebox trace summarize` is tested in-process: the tool's one file. */
#include "../../tools/cmd_trace.c"

static const char *g_self;
static char g_dir[256];
static int g_pass = 0, g_fail = 0;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "  check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);     \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/* ============================ child cases ============================== */

static void span(const char *name, const char *cat, uint64_t t0, uint64_t t1) {
  fbx_trace_complete(name, cat, t0, t1, NULL, 0);
}

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
static int child_off_cost(void) {
  enum { N = 2000000 };
  fbx_trace_arg a[] = {FBX_TARG_I("x", 1)};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < N; i++) {
    fbx_trace_complete("x", "op", (uint64_t)i, (uint64_t)i + 1, a, 1);
    fbx_trace_session_op(NULL, "x", 1, false);
    fbx_trace_counter("c", i);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
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

static int load_ok(const char *path, json_t **out) {
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) fprintf(stderr, "  json error: %s line %d: %s\n", path, err.line, err.text);
  *out = j;
  return j != NULL;
}

static int count_named(json_t *root, const char *name) {
  json_t *ev = json_object_get(root, "traceEvents");
  size_t i;
  json_t *e;
  int n = 0;
  json_array_foreach(ev, i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, name)) n++;
  }
  return n;
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

static int child_counters(void) {
  for (int i = 0; i < 3; i++) {
    volatile double x = 0;
    uint64_t t = fbx_trace_now_ns();
    while (fbx_trace_now_ns() - t < 3000000) x += 1.0; /* 3 ms busy: util sample > 0 */
    fbx_trace_sample_counters(1000u * (size_t)(i + 1), 4000);
  }
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

static char *path_of(const char *name) {
  static char buf[8][512];
  static int k = 0;
  char *p = buf[k++ % 8];
  snprintf(p, 512, "%s/%s", g_dir, name);
  return p;
}

/* Runs `self child <name>` with env "K=V" strings (NULL-terminated) added to
 * a clean FUSEBOX_*-free environment; stderr to errfile. Returns exit code. */
static int run_child(const char *name, const char *const *env, const char *errfile) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("FUSEBOX_TRACE");
    unsetenv("FUSEBOX_VERBOSE");
    unsetenv("FUSEBOX_CLAIM_DEBUG");
    unsetenv("FUSEBOX_NVTX");
    unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    if (errfile && !freopen(errfile, "w", stderr)) _exit(99);
    execl(g_self, g_self, "child", name, (char *)NULL);
    _exit(98);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) n = 0;
  p[n] = '\0';
  fclose(f);
  return p;
}

static char g_envbuf[16][600];
static const char *envv(int k, const char *fmt, const char *v) {
  snprintf(g_envbuf[k], sizeof g_envbuf[k], fmt, v);
  return g_envbuf[k];
}

static json_t *events(json_t *root) { return json_object_get(root, "traceEvents"); }

static json_t *find_event(json_t *root, const char *name, int nth) {
  size_t i;
  json_t *e;
  json_array_foreach(events(root), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, name) && nth-- == 0) return e;
  }
  return NULL;
}

static int64_t arg_int(json_t *e, const char *k) {
  return json_integer_value(json_object_get(json_object_get(e, "args"), k));
}

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
  CHECK(u > 5 && u <= 100.5);
  json_decref(j);
  return 0;
}

/* A large volume: drains across the per-thread flush threshold; every event lands once. */
static int child_volume(void) {
  for (int i = 0; i < 100000; i++) span("v", "op", (uint64_t)i * 10, (uint64_t)i * 10 + 5);
  return 0;
}
static int t_volume(void) {
  char *trace = path_of("volume.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("volume", env, path_of("volume.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "v") == 100000);
  CHECK(json_integer_value(json_object_get(json_object_get(j, "otherData"), "dropped_events")) == 0);
  json_decref(j);
  return 0;
}

/* Strings are copied at the call (the caller frees or reuses them at once); a
 * string larger than a buffer chunk lands intact; past the buffer budget
 * (64 MiB of records) the recording thread flushes by itself. */
enum { BIG_LEN = 600 * 1024, BUDGET_EVENTS = 18000, BUDGET_ARG = 4000 };
static char *heap_str(const char *s) {
  char *p = malloc(strlen(s) + 1);
  strcpy(p, s);
  return p;
}
static int child_copies(void) {
  for (int i = 0; i < 100; i++) {
    char stack_val[32];
    snprintf(stack_val, sizeof stack_val, "1x%d", i);
    char *name = heap_str("heap\"op"), *cat = heap_str("op"), *key = heap_str("heap_key"), *val = heap_str("ha\\");
    fbx_trace_arg a[] = {FBX_TARG_S(key, val), FBX_TARG_S("shape", stack_val), FBX_TARG_I("i", i)};
    fbx_trace_complete(name, cat, 10, 20, a, 3);
    memset(name, 'X', strlen(name));
    memset(key, 'X', strlen(key));
    memset(val, 'X', strlen(val));
    memset(stack_val, 'X', sizeof stack_val - 1);
    free(name), free(cat), free(key), free(val);
  }
  char *big = malloc(BIG_LEN + 1);
  for (int i = 0; i < BIG_LEN; i++) big[i] = (char)('a' + i % 26);
  big[BIG_LEN] = 0;
  fbx_trace_arg b[] = {FBX_TARG_S("big", big)};
  fbx_trace_complete("big", "op", 10, 20, b, 1);
  free(big);
  /* no flush or teardown below: the file grows only by the budget flush */
  char *arg = malloc(BUDGET_ARG + 1);
  memset(arg, 'b', BUDGET_ARG);
  arg[BUDGET_ARG] = 0;
  for (int i = 0; i < BUDGET_EVENTS; i++) {
    fbx_trace_arg c[] = {FBX_TARG_S("pad", arg)};
    fbx_trace_complete("budget", "op", 10, 20, c, 1);
  }
  free(arg);
  FILE *f = fopen(getenv("FUSEBOX_TRACE"), "rb");
  CHECK(f && fseek(f, 0, SEEK_END) == 0);
  long size = ftell(f);
  fclose(f);
  fprintf(stderr, "trace file before exit: %ld bytes\n", size);
  CHECK(size > 32L * 1024 * 1024);
  return 0;
}
static int t_copies(void) {
  char *trace = path_of("copies.json");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("copies", env, path_of("copies.err")) == 0);
  json_t *j;
  CHECK(load_ok(trace, &j));
  CHECK(count_named(j, "heap\"op") == 100);
  for (int i = 0; i < 100; i += 33) {
    json_t *e = find_event(j, "heap\"op", i);
    json_t *args = json_object_get(e, "args");
    CHECK(!strcmp(json_string_value(json_object_get(e, "cat")), "op"));
    CHECK(!strcmp(json_string_value(json_object_get(args, "heap_key")), "ha\\"));
    char want[32];
    snprintf(want, sizeof want, "1x%d", i);
    CHECK(!strcmp(json_string_value(json_object_get(args, "shape")), want));
    CHECK(arg_int(e, "i") == i);
  }
  json_t *big = find_event(j, "big", 0);
  const char *bs = json_string_value(json_object_get(json_object_get(big, "args"), "big"));
  CHECK(bs && strlen(bs) == BIG_LEN);
  for (int i = 0; i < BIG_LEN; i++) CHECK(bs[i] == (char)('a' + i % 26));
  CHECK(count_named(j, "budget") == BUDGET_EVENTS);
  CHECK(json_integer_value(json_object_get(json_object_get(j, "otherData"), "dropped_events")) == 0);
  json_decref(j);
  return 0;
}

/* `fusebox trace summarize` on the summary case's trace (plus op spans) gives
 * the same numbers the events hold. */
static int child_summarize_src(void) {
  fbx_trace_session *s = fbx_trace_session_create("sz");
  fbx_trace_arg a[] = {FBX_TARG_I("claimed", 5), FBX_TARG_I("total", 8), FBX_TARG_I("fused_subgraphs", 2),
                       FBX_TARG_S("fallback_Loop", "control flow")};
  fbx_trace_instant("fusebox.getcapability", "ep", a, 4);
  fbx_trace_arg c[] = {FBX_TARG_S("path", "general"), FBX_TARG_S("cache", "MISS")};
  fbx_trace_instant("fusebox.compute[general]", "ep", c, 2);
  c[1] = FBX_TARG_S("cache", "HIT");
  fbx_trace_instant("fusebox.compute[general]", "ep", c, 2);
  fbx_trace_complete("fusebox.eval", "ep.phase", 1000, 4000, NULL, 0);
  for (int i = 0; i < 3; i++) fbx_trace_complete("MatMul", "op", 1000, 3000, NULL, 0); /* 2us each */
  fbx_trace_complete("Add", "op", 1000, 2000, NULL, 0);
  fbx_trace_session_wrap(s, 2, 2048);
  fbx_trace_session_destroy(s);
  return 0;
}
static int t_summarize(void) {
  char *trace = path_of("sz.json");
  char *out = path_of("sz.out");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("summarize_src", env, path_of("sz.err")) == 0);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out, "w", stdout)) _exit(99);
    char *argv[] = {"trace", "summarize", trace, NULL};
    int r = fbx_cmd_trace(3, argv);
    fflush(stdout);
    _exit(r);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *s = slurp(out);
  CHECK(s);
  CHECK(strstr(s, "claim:   5/8 nodes claimed (62.5%) across 2 fused subgraph(s), 1 GetCapability call(s)"));
  CHECK(strstr(s, "- Loop: control flow"));
  CHECK(strstr(s, "compute: decode=0 prefill=0 general=2 eager=0  (cache: 1 HIT / 1 MISS / 0 RETRACE)"));
  CHECK(strstr(s, "zero-copy wrap 2 (2.00 KiB)"));
  CHECK(strstr(s, "eval=3.0us (1 call)"));
  CHECK(strstr(s, " 1. MatMul "));
  CHECK(strstr(s, " 6.0us  85.7%  3 calls"));
  CHECK(strstr(s, " 1.0us  14.3%  1 call\n"));
  free(s);
  /* bad input: exit code 1 and usage 2 */
  char *bad = path_of("bad.json");
  FILE *f = fopen(bad, "w");
  CHECK(f);
  fputs("{\"traceEvents\":[", f);
  fclose(f);
  pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(99);
    char *argv[] = {"trace", "summarize", bad, NULL};
    _exit(fbx_cmd_trace(3, argv));
  }
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  return 0;
}

/* ---- the OrtEpProfilerImpl over a fake OrtEpApi ---- */
typedef struct fake_ev {
  int cat, pid, tid;
  char name[64];
  int64_t ts, dur;
  size_t n_args;
  char k0[32], v0[32], k1[32], v1[32];
} fake_ev;
static fake_ev g_fake[64];
static int g_fake_n = 0, g_fake_live = 0;
static OrtStatus *ORT_API_CALL fake_create(OrtProfilingEventCategory category, int32_t process_id, int32_t thread_id,
                                           const char *event_name, int64_t timestamp_us, int64_t duration_us,
                                           const char *const *arg_keys, const char *const *arg_values, size_t num_args,
                                           OrtProfilingEvent **out) {
  fake_ev *e = calloc(1, sizeof *e);
  e->cat = (int)category;
  e->pid = process_id;
  e->tid = thread_id;
  snprintf(e->name, sizeof e->name, "%s", event_name);
  e->ts = timestamp_us;
  e->dur = duration_us;
  e->n_args = num_args;
  if (num_args > 0) {
    snprintf(e->k0, 32, "%s", arg_keys[0]);
    snprintf(e->v0, 32, "%s", arg_values[0]);
  }
  if (num_args > 1) {
    snprintf(e->k1, 32, "%s", arg_keys[1]);
    snprintf(e->v1, 32, "%s", arg_values[1]);
  }
  g_fake_live++;
  *out = (OrtProfilingEvent *)e;
  return NULL;
}
static void ORT_API_CALL fake_release(OrtProfilingEvent *e) {
  g_fake_live--;
  free(e);
}
static OrtStatus *ORT_API_CALL fake_add(OrtProfilingEventsContainer *c, const OrtProfilingEvent *const *events,
                                        size_t n) {
  for (size_t i = 0; i < n && g_fake_n < 64; i++) g_fake[g_fake_n++] = *(const fake_ev *)events[i];
  return NULL;
}

static int child_ort_profiler(void) {
  OrtEpApi ep_api;
  memset(&ep_api, 0, sizeof ep_api);
  ep_api.CreateProfilingEvent = fake_create;
  ep_api.ReleaseProfilingEvent = fake_release;
  ep_api.ProfilingEventsContainer_AddEvents = fake_add;
  OrtApi api;
  memset(&api, 0, sizeof api);
  /* two OrtEps (sessions); profiling is off: nothing is collected */
  fbx_trace_session *sa = fbx_trace_session_create("a"), *sb = fbx_trace_session_create("b");
  OrtEpProfilerImpl *pa = NULL, *pb = NULL;
  CHECK(fbx_ep_profiler_create(&api, &ep_api, sa, &pa) == NULL && pa);
  CHECK(fbx_ep_profiler_create(&api, &ep_api, sb, &pb) == NULL && pb);
  CHECK(pa->ort_version_supported == ORT_API_VERSION);
  CHECK(!(fbx_trace_flags() & FBX_TRACE_F_PROFILER));
  fbx_trace_complete("early", "op", 1, 2, NULL, 0);
  /* session a profiles; offset 5 ms into ORT's profile */
  CHECK(pa->StartProfiling(pa, 5000000) == NULL);
  CHECK(fbx_trace_flags() & FBX_TRACE_F_PROFILER);
  uint64_t t0 = ((fbx_ep_profiler *)pa)->start_ns;
  fbx_trace_session_bind(sa);
  fbx_trace_arg args[] = {FBX_TARG_I("node_id", 3)};
  fbx_trace_complete("MatMul", "op", t0 + 2000000, t0 + 2750000, args, 1); /* +2 ms, 750 us */
  fbx_trace_session_bind(sb);
  fbx_trace_complete("OtherSession", "op", t0 + 10, t0 + 20, NULL, 0);
  fbx_trace_session_bind(NULL);
  fbx_trace_complete("op.worker slice", "op.worker", t0 + 3000000, t0 + 3001000, NULL, 0); /* unbound: kept */
  CHECK(pa->EndProfiling(pa, (OrtProfilingEventsContainer *)&g_fake) == NULL);
  CHECK(!(fbx_trace_flags() & FBX_TRACE_F_PROFILER));
  CHECK(g_fake_n == 2);
  CHECK(g_fake_live == 0); /* every event released after adding */
  CHECK(!strcmp(g_fake[0].name, "MatMul"));
  CHECK(g_fake[0].cat == OrtProfilingEventCategory_KERNEL);
  CHECK(g_fake[0].ts == 7000 && g_fake[0].dur == 750); /* (5e6 + 2e6) / 1000 */
  CHECK(g_fake[0].pid == (int)getpid() && g_fake[0].tid > 0);
  CHECK(g_fake[0].n_args == 2 && !strcmp(g_fake[0].k0, "fbx_cat") && !strcmp(g_fake[0].v0, "op"));
  CHECK(!strcmp(g_fake[0].k1, "node_id") && !strcmp(g_fake[0].v1, "3"));
  CHECK(!strcmp(g_fake[1].name, "op.worker slice") && g_fake[1].ts == 8000 && g_fake[1].dur == 1);
  /* a profiler released while started turns collection off too */
  CHECK(pb->StartProfiling(pb, 0) == NULL);
  CHECK(fbx_trace_flags() & FBX_TRACE_F_PROFILER);
  pb->Release(pb);
  CHECK(!(fbx_trace_flags() & FBX_TRACE_F_PROFILER));
  pa->Release(pa);
  fbx_trace_session_destroy(sa);
  fbx_trace_session_destroy(sb);
  return 0;
}
static int t_ort_profiler(void) {
  const char *env[] = {"FUSEBOX_VERBOSE=1", NULL};
  CHECK(run_child("ort_profiler", env, path_of("ortprof.err")) == 0);
  return 0;
}

typedef struct tcase {
  const char *name;
  int (*parent)(void);
  const char *child_name;
  int (*child)(void);
} tcase;

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
    {"volume_drains", t_volume, "volume", child_volume},
    {"strings_copied_big_and_budget", t_copies, "copies", child_copies},
    {"cmd_trace_summarize", t_summarize, "summarize_src", child_summarize_src},
    {"ort_profiler_events", t_ort_profiler, "ort_profiler", child_ort_profiler},
};

int main(int argc, char **argv) {
  g_self = "/proc/self/exe";
  static char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    g_self = self;
  }
  if (argc == 3 && !strcmp(argv[1], "child")) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
      if (k_cases[i].child_name && !strcmp(k_cases[i].child_name, argv[2])) return k_cases[i].child();
    return 97;
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/fbx_trace_test_%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
  if (system(cmd) != 0) return 2;
  const char *only = argc > 1 ? argv[1] : NULL;
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
    if (only && !strstr(k_cases[i].name, only)) continue;
    int r = k_cases[i].parent();
    printf("%s %s\n", r ? "FAIL" : "ok  ", k_cases[i].name);
    if (r) g_fail++;
    else g_pass++;
  }
  if (!g_fail) {
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) { /* leave it */ }
  } else {
    printf("(files kept in %s)\n", g_dir);
  }
  printf("trace: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}

#endif /* FBX_TRACE_COMPILED_OUT */
