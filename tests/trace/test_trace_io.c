/* Tests of src/trace's outputs read back by other code: volume drained across flushes,
 * caller strings copied, `fusebox trace summarize` on a written trace, and the ORT profiler
 * adapter (src/ep/ep_profiler.c) against a fake OrtEpApi. Same child-process harness as
 * test_trace.c. */
#if defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT
#include <stdio.h>
int main(void) {
  printf("trace-io: compiled out (FBX_TRACE_COMPILED_OUT), 0 passed, 0 failed\n");
  return 0;
}
#else

#include "trace_harness.h"

/* The ORT profiler adapter is tested in-process against a fake OrtEpApi. */
#include "../../src/ep/ep_profiler.c"

/* `fusebox trace summarize` is tested in-process: the tool's one file. */
#include "../../tools/cmd_trace.c"

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
/* `fusebox trace summarize TRACE` in a child whose stdout is OUT; its exit status (-1: it did not exit). */
static int summarize_into(char *trace, const char *out) {
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
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}
static int t_summarize(void) {
  char *trace = path_of("sz.json");
  char *out = path_of("sz.out");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("summarize_src", env, path_of("sz.err")) == 0);
  CHECK(summarize_into(trace, out) == 0);
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
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(99);
    char *argv[] = {"trace", "summarize", bad, NULL};
    _exit(fbx_cmd_trace(3, argv));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  return 0;
}

/* `fusebox trace summarize` on a trace with a GPU track ranks ops by device time: two evals,
 * each an upload of no node [0,2] us, MatMul's kernel [3,13] and Add's [14,18] (host spans 2 us
 * each), so device time MatMul 20 us (62.5% of the op.device slices' 32 us), Add 8 us (25%),
 * "(no node)" 4 us (12.5%); span 36 us = busy 32 + idle 4 (11.1%). */
static int child_summarize_gpu(void) {
  static int scope;
  fbx_trace_session *s = fbx_trace_session_create("sz-gpu");
  fbx_trace_session_bind(s);
  fbx_trace_op_site_desc dm = {.scope = &scope, .op = "MatMul", .node = "mm", .node_id = 0, .device = "cuda"};
  fbx_trace_op_site_desc da = {.scope = &scope, .op = "Add", .node = "add", .node_id = 1, .device = "cuda"};
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &dm), *add = fbx_trace_op_site_get(s, &da);
  if (!mm || !add) return 3;
  for (int k = 0; k < 2; k++) {
    bool cap = false;
    uint64_t ev = fbx_trace_gpu_eval_begin(&cap), t = fbx_trace_now_ns();
    fbx_trace_complete("MatMul", "op", t, t + 2000, NULL, 0);
    fbx_trace_complete("Add", "op", t + 2000, t + 4000, NULL, 0);
    t += 1000000;
    fbx_trace_gpu_act a[3] = {
        {.kind = 2, .start_ns = t, .end_ns = t + 2000, .stream = 1, .eval = ev, .bytes = 64, .copy_kind = 1},
        {.kind = 1, .name = "k_mm", .start_ns = t + 3000, .end_ns = t + 13000, .stream = 1, .eval = ev, .site = mm},
        {.kind = 1, .name = "k_add", .start_ns = t + 14000, .end_ns = t + 18000, .stream = 1, .eval = ev, .site = add}};
    for (int i = 0; i < 3; i++) fbx_trace_gpu_activity(&a[i]);
  }
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}
static int t_summarize_gpu(void) {
  char *trace = path_of("szg.json"), *out = path_of("szg.out");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", trace), NULL};
  CHECK(run_child("summarize_gpu", env, path_of("szg.err")) == 0);
  CHECK(summarize_into(trace, out) == 0);
  char *s = slurp(out);
  CHECK(s);
  CHECK(strstr(s, "device:  2 device-side eval(s): span 36.0us = busy 32.0us + idle (host-bound) 4.0us (11.1%); "
                  "op.device slices 32.0us"));
  const char *d = strstr(s, "slowest ops (device time, from the GPU track's op.device slices");
  CHECK(d);
  const char *m1 = strstr(d, " 1. MatMul "), *m2 = strstr(d, " 2. Add "), *m3 = strstr(d, " 3. (no node) ");
  CHECK(m1 && m2 && m3 && m1 < m2 && m2 < m3);
  const char *v1 = strstr(m1, "20.0us  62.5%  2 slices\n"), *v2 = strstr(m2, " 8.0us  25.0%  2 slices\n");
  CHECK(v1 && v1 < m2 && v2 && v2 < m3);
  CHECK(strstr(m3, " 4.0us  12.5%  2 slices  (not a node)\n"));
  /* the host spans still listed, after, as host time */
  const char *h = strstr(s, "slowest ops in host time (from per-node spans");
  CHECK(h && h > d && strstr(h, " 4.0us  50.0%  2 calls"));
  free(s);
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


static const tcase k_cases[] = {
    {"volume_drains", t_volume, "volume", child_volume},
    {"strings_copied_big_and_budget", t_copies, "copies", child_copies},
    {"cmd_trace_summarize", t_summarize, "summarize_src", child_summarize_src},
    {"cmd_trace_summarize_device_time", t_summarize_gpu, "summarize_gpu", child_summarize_gpu},
    {"ort_profiler_events", t_ort_profiler, "ort_profiler", child_ort_profiler},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace-io");
}

#endif /* FBX_TRACE_COMPILED_OUT */
