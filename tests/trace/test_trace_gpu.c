/* GPU observability in the trace without a GPU (src/trace/trace_gpu.c, trace_gpu_nvml.c):
 *   - GPU counters: fusebox.gpu_mem_bytes / gpu_mem_pct from the engine's figures, and no
 *     NVML counter (and no error) where NVML is absent or is not NVML;
 *   - device activity records (as the executor's glue hands them over from CUPTI) become a
 *     GPU track: kernel / memcpy slices, per-node op.device slices and a device-side
 *     fusebox.eval slice, the nodes' device time in the slowest-ops table ("device time");
 *   - FUSEBOX_GPU_CAPTURE / _EVAL: the capture file is valid JSON holding exactly that eval's
 *     records, with and without FUSEBOX_TRACE;
 *   - everything unset: no capture, no flags.
 * The records are synthetic, with durations chosen here, so every expected value below is
 * worked out by hand from them. */
#include "trace_harness.h"

#if defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT
int main(void) {
  printf("trace-gpu: 0 passed, 0 failed (tracing compiled out)\n");
  return 0;
}
#else

#include <math.h>

/* ---- counters ---- */
static int child_counters(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-counters");
  fbx_trace_sample_gpu("0000:00:00.0", (size_t)1 << 20, (size_t)4 << 20); /* 1 MiB of 4 MiB: 25% */
  fbx_trace_sample_gpu(NULL, (size_t)3 << 20, 0);                         /* total unknown: no pct */
  fbx_trace_session_destroy(s);
  return 0;
}

static int check_counters(const char *nvml_lib) {
  char *tr = path_of(nvml_lib ? "counters_fake.json" : "counters_none.json");
  char *err = path_of("counters.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), envv(1, "FUSEBOX_NVML_LIB=%s", nvml_lib ? nvml_lib : "/nonexistent/libnvidia-ml.so.1"), NULL};
  CHECK(run_child("counters", env, err) == 0);
  json_t *j = NULL;
  CHECK(load_ok(tr, &j));
  CHECK(count_named(j, "fusebox.gpu_mem_bytes") == 2);
  CHECK(count_named(j, "fusebox.gpu_mem_pct") == 1);
  json_t *m0 = find_event(j, "fusebox.gpu_mem_bytes", 0), *m1 = find_event(j, "fusebox.gpu_mem_bytes", 1);
  json_t *p0 = find_event(j, "fusebox.gpu_mem_pct", 0);
  CHECK(!strcmp(json_string_value(json_object_get(m0, "ph")), "C"));
  CHECK(json_number_value(json_object_get(json_object_get(m0, "args"), "value")) == 1048576.0);
  CHECK(json_number_value(json_object_get(json_object_get(m1, "args"), "value")) == 3145728.0);
  CHECK(fabs(json_number_value(json_object_get(json_object_get(p0, "args"), "value")) - 25.0) < 1e-9);
  CHECK(count_named(j, "fusebox.gpu_util_pct") == 0); /* no NVML: no counter */
  CHECK(count_named(j, "fusebox.gpu_sm_clock_mhz") == 0);
  char *e = slurp(err);
  CHECK(e && !strstr(e, "nvml") && !strstr(e, "NVML")); /* and no error about it */
  free(e);
  json_decref(j);
  return 0;
}
static int t_counters_no_nvml(void) { return check_counters(NULL); }
/* a library that loads but is not NVML (its entry points are missing) */
static int t_counters_not_nvml(void) { return check_counters("libm.so.6"); }

/* ---- device activity ---- */
static int g_scope;
static const fbx_trace_op_site_desc k_mm = {.scope = &g_scope, .op = "MatMul", .node = "mm", .node_id = 0, .device = "cuda"};
static const fbx_trace_op_site_desc k_add = {.scope = &g_scope, .op = "Add", .node = "add", .node_id = 1, .device = "cuda"};
static const char *const K_MM = "void gemm<\"f32\">(float*)"; /* a name that needs escaping */

static fbx_trace_gpu_act act(int kind, const char *name, uint64_t t0, uint64_t us0, uint64_t us1, uint64_t eval,
                             fbx_trace_op_site *site, uint32_t corr) {
  fbx_trace_gpu_act a = {.kind = kind, .name = name, .start_ns = t0 + us0 * 1000, .end_ns = t0 + us1 * 1000,
                         .stream = 7, .correlation = corr, .eval = eval, .site = site,
                         .grid = {64, 2, 1}, .block = {128, 1, 1}, .registers = 40, .shared_bytes = 4096,
                         .bytes = kind == 2 ? 1024 : 0, .copy_kind = kind == 2 ? 1 : 0};
  return a;
}

/* Three evals, each: MatMul kernels [0,10] and [12,20] us, Add's upload [21,25] and kernel
 * [26,30] us, so per eval MatMul 18 us and Add 8 us of device time, the eval 30 us long with
 * 26 us busy. The host op spans last 5 us each. Drained after each eval, final after eval 1
 * (the captured one, index 1 = number 2) and at the end. */
static int child_activity(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-activity");
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm), *add = fbx_trace_op_site_get(s, &k_add);
  if (!mm || !add) return 3;
  int64_t dims[2] = {4, 4};
  fbx_trace_tensor t = {dims, 2, 4};
  fbx_trace_op_run r = {.in = &t, .out = &t, .n_in = 1, .n_out = 1, .dtype = "float32", .variant = "cuda"};
  for (int k = 0; k < 3; k++) {
    bool cap = false;
    uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
    if (ev != (uint64_t)k + 1 || cap != (k == 1)) return 4;
    uint64_t h = fbx_trace_now_ns();
    fbx_trace_op(mm, h, h + 5000, &r);
    fbx_trace_op(add, h + 5000, h + 10000, &r);
    uint64_t t0 = h + 1000000; /* the device runs later than the host enqueues */
    fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, ev, mm, 10), act(1, K_MM, t0, 12, 20, ev, mm, 11),
                             act(2, NULL, t0, 21, 25, ev, add, 12), act(1, "add_f32", t0, 26, 30, ev, add, 13)};
    for (int i = 0; i < 4; i++) fbx_trace_gpu_activity(&a[i]);
    fbx_trace_gpu_drained(k == 1);
    if (k == 1 && fbx_trace_gpu_capture_write() != 0) return 5;
  }
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}

static double arg_num(json_t *e, const char *k) { return json_number_value(json_object_get(json_object_get(e, "args"), k)); }
static const char *arg_s(json_t *e, const char *k) { return json_string_value(json_object_get(json_object_get(e, "args"), k)); }
static double num(json_t *e, const char *k) { return json_number_value(json_object_get(e, k)); }

/* The events of cat in j with args.eval == eval (0: any) into out[] (at most cap); returns the count. */
static int of_cat(json_t *j, const char *cat, int64_t eval, json_t **out, int cap) {
  size_t i;
  json_t *e;
  int n = 0;
  json_array_foreach(events(j), i, e) {
    const char *c = json_string_value(json_object_get(e, "cat"));
    if (!c || strcmp(c, cat) || (eval && arg_int(e, "eval") != eval)) continue;
    if (n < cap) out[n] = e;
    n++;
  }
  return n;
}

/* The GPU track of one eval in a trace or capture file. */
static int check_eval_track(json_t *j, int64_t eval) {
  json_t *k[16], *o[8], *v[4], *c[4];
  CHECK(of_cat(j, "gpu.kernel", eval, k, 16) == 3);
  CHECK(of_cat(j, "gpu.memcpy", eval, c, 4) == 1);
  CHECK(of_cat(j, "op.device", eval, o, 8) == 2);
  int nv = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *c2 = json_string_value(json_object_get(e, "cat"));
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (c2 && !strcmp(c2, "device") && nm && !strcmp(nm, "fusebox.eval") && arg_int(e, "eval") == eval && nv < 4)
      v[nv++] = e;
  }
  CHECK(nv == 1);
  CHECK(!strcmp(arg_s(v[0], "side"), "device"));
  CHECK(fabs(num(v[0], "dur") - 30.0) < 1e-6);
  CHECK(fabs(arg_num(v[0], "device_us") - 26.0) < 1e-6);
  CHECK(arg_int(v[0], "records") == 4);
  /* op.device slices: MatMul 18 us busy over [0,20], Add 8 us busy over [21,30] */
  json_t *mm = !strcmp(json_string_value(json_object_get(o[0], "name")), "MatMul") ? o[0] : o[1];
  json_t *ad = mm == o[0] ? o[1] : o[0];
  CHECK(!strcmp(json_string_value(json_object_get(mm, "name")), "MatMul"));
  CHECK(!strcmp(json_string_value(json_object_get(ad, "name")), "Add"));
  CHECK(fabs(arg_num(mm, "device_us") - 18.0) < 1e-6 && fabs(num(mm, "dur") - 20.0) < 1e-6);
  CHECK(fabs(arg_num(ad, "device_us") - 8.0) < 1e-6 && fabs(num(ad, "dur") - 9.0) < 1e-6);
  CHECK(!strcmp(arg_s(mm, "node"), "mm") && arg_int(mm, "node_id") == 0 && arg_int(ad, "node_id") == 1);
  /* nesting on one track: eval > op.device > kernel */
  int64_t tid = json_integer_value(json_object_get(v[0], "tid"));
  double ev0 = num(v[0], "ts"), ev1 = ev0 + num(v[0], "dur");
  for (int q = 0; q < 2; q++) {
    CHECK(json_integer_value(json_object_get(o[q], "tid")) == tid);
    CHECK(num(o[q], "ts") >= ev0 - 1e-6 && num(o[q], "ts") + num(o[q], "dur") <= ev1 + 1e-6);
  }
  int n_mm = 0;
  for (int q = 0; q < 3; q++) {
    CHECK(json_integer_value(json_object_get(k[q], "tid")) == tid);
    const char *nm = json_string_value(json_object_get(k[q], "name"));
    if (!strcmp(nm, K_MM)) {
      n_mm++;
      CHECK(!strcmp(arg_s(k[q], "op"), "MatMul") && !strcmp(arg_s(k[q], "node"), "mm"));
      CHECK(num(k[q], "ts") >= num(mm, "ts") - 1e-6 && num(k[q], "ts") + num(k[q], "dur") <= num(mm, "ts") + num(mm, "dur") + 1e-6);
    }
    CHECK(!strcmp(arg_s(k[q], "grid"), "64x2x1") && !strcmp(arg_s(k[q], "block"), "128x1x1"));
    CHECK(arg_int(k[q], "registers") == 40 && arg_int(k[q], "shared_bytes") == 4096);
  }
  CHECK(n_mm == 2);
  CHECK(!strcmp(json_string_value(json_object_get(c[0], "name")), "memcpy HtoD") && arg_int(c[0], "bytes") == 1024);
  CHECK(!strcmp(arg_s(c[0], "node"), "add"));
  return 0;
}

static int has_track_name(json_t *j, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    const char *an = arg_s(e, "name");
    if (nm && !strcmp(nm, "thread_name") && an && !strcmp(an, name)) return 1;
  }
  return 0;
}

static int t_activity(void) {
  char *tr = path_of("activity.json"), *cap = path_of("activity_cap.json"), *err = path_of("activity.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), envv(1, "FUSEBOX_GPU_CAPTURE=%s", cap),
                       envv(2, "FUSEBOX_GPU_CAPTURE_EVAL=%s", "1"), NULL};
  CHECK(run_child("activity", env, err) == 0);
  json_t *j = NULL, *c = NULL;
  CHECK(load_ok(tr, &j));
  CHECK(has_track_name(j, "GPU stream 7"));
  for (int64_t ev = 1; ev <= 3; ev++)
    if (check_eval_track(j, ev)) {
      fprintf(stderr, "  (eval %lld of the trace)\n", (long long)ev);
      return 1;
    }
  /* slowest ops in device time: MatMul 3 x 18 us, Add 3 x 8 us (not the 5 us host spans) */
  char *e = slurp(err);
  CHECK(e && strstr(e, "slowest ops (device time)"));
  CHECK(strstr(e, "MatMul") && strstr(e, "54.0us") && strstr(e, "24.0us"));
  free(e);
  /* the capture file: eval number 2 only */
  CHECK(load_ok(cap, &c));
  CHECK(has_track_name(c, "GPU stream 7"));
  CHECK(check_eval_track(c, 2) == 0);
  json_t *all[32];
  CHECK(of_cat(c, "gpu.kernel", 0, all, 32) == 3);
  CHECK(of_cat(c, "op.device", 0, all, 32) == 2);
  CHECK(of_cat(c, "gpu.memcpy", 0, all, 32) == 1);
  CHECK(count_named(c, "fusebox.eval") == 1);
  json_decref(j);
  json_decref(c);
  return 0;
}

/* Capture alone: no trace file, the capture file has eval index 0 (the default). */
static int child_capture_only(void) {
  if (fbx_trace_enabled() || fbx_trace_gpu_capture_eval() != 0) return 3;
  for (int k = 0; k < 2; k++) {
    bool cap = false;
    uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
    if (cap != (k == 0)) return 4;
    uint64_t t0 = fbx_trace_now_ns();
    fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, ev, NULL, 1), act(1, K_MM, t0, 12, 20, ev, NULL, 2),
                             act(2, NULL, t0, 21, 25, ev, NULL, 3)};
    for (int i = 0; i < 3; i++) fbx_trace_gpu_activity(&a[i]);
    fbx_trace_gpu_drained(true);
    if (cap && fbx_trace_gpu_capture_write() != 0) return 5;
  }
  return 0;
}

static int t_capture_only(void) {
  char *cap = path_of("only_cap.json"), *err = path_of("only.err");
  const char *env[] = {envv(0, "FUSEBOX_GPU_CAPTURE=%s", cap), NULL};
  CHECK(run_child("capture_only", env, err) == 0);
  json_t *c = NULL, *all[16];
  CHECK(load_ok(cap, &c));
  CHECK(of_cat(c, "gpu.kernel", 1, all, 16) == 2);
  CHECK(of_cat(c, "gpu.kernel", 0, all, 16) == 2); /* nothing of eval 2 */
  CHECK(of_cat(c, "gpu.memcpy", 0, all, 16) == 1);
  CHECK(of_cat(c, "op.device", 0, all, 16) == 0);  /* no node known: no op slices */
  CHECK(count_named(c, "fusebox.eval") == 1);
  json_t *v = find_event(c, "fusebox.eval", 0);
  CHECK(fabs(num(v, "dur") - 25.0) < 1e-6 && fabs(arg_num(v, "device_us") - 22.0) < 1e-6);
  json_decref(c);
  return 0;
}

/* Everything unset: no capture and nothing recorded. */
static int child_off(void) {
  if (fbx_trace_flags() != 0 || fbx_trace_gpu_capture_eval() != -1) return 3;
  bool cap = true;
  (void)fbx_trace_gpu_eval_begin(&cap);
  if (cap) return 4;
  fbx_trace_gpu_act a = act(1, K_MM, fbx_trace_now_ns(), 0, 1, 1, NULL, 1);
  fbx_trace_gpu_activity(&a);
  fbx_trace_sample_gpu(NULL, 1, 2);
  return fbx_trace_gpu_capture_write() == 0 ? 0 : 5;
}
static int t_off(void) {
  const char *env[] = {NULL};
  CHECK(run_child("off", env, path_of("off.err")) == 0);
  return 0;
}

/* ORT profiling on (no FUSEBOX_TRACE): the device slices are in the profiler's store with
 * their device times, bound to the session that drained them. */
typedef struct prof_count { int kernels, ops, evals; double mm_us; const fbx_trace_session *s; int wrong_session; } prof_count;
static void prof_visit(void *ctx, const fbx_trace_prof_event *ev) {
  prof_count *c = ctx;
  if (ev->session != c->s) c->wrong_session++;
  if (!strcmp(ev->cat, "gpu.kernel")) c->kernels++;
  if (!strcmp(ev->cat, "op.device")) {
    c->ops++;
    if (!strcmp(ev->name, "MatMul")) c->mm_us += (double)(ev->t1_ns - ev->t0_ns) / 1e3;
  }
  if (!strcmp(ev->cat, "device") && !strcmp(ev->name, "fusebox.eval")) c->evals++;
}
static int child_profiler(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-prof");
  fbx_trace_profiler_begin();
  uint64_t since = fbx_trace_now_ns();
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm), *add = fbx_trace_op_site_get(s, &k_add);
  if (!mm || !add) return 3;
  bool cap = false;
  uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
  uint64_t t0 = fbx_trace_now_ns() + 1000;
  fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, ev, mm, 10), act(1, K_MM, t0, 12, 20, ev, mm, 11),
                           act(1, "add_f32", t0, 26, 30, ev, add, 13)};
  for (int i = 0; i < 3; i++) fbx_trace_gpu_activity(&a[i]);
  fbx_trace_gpu_drained(true);
  prof_count c = {.s = s};
  fbx_trace_profiler_collect(since, NULL, prof_visit, &c);
  fbx_trace_session_bind(NULL);
  fbx_trace_profiler_end();
  fbx_trace_session_destroy(s);
  if (c.kernels != 3 || c.ops != 2 || c.evals != 1 || c.wrong_session) return 4;
  if (fabs(c.mm_us - 20.0) > 1e-6) return 5; /* MatMul's slice: [0, 20] us */
  return 0;
}
static int t_profiler(void) {
  const char *env[] = {NULL};
  CHECK(run_child("profiler", env, path_of("prof.err")) == 0);
  return 0;
}

static const tcase k_cases[] = {
    {"gpu_events_in_ort_profiler_store", t_profiler, "profiler", child_profiler},
    {"gpu_counters_without_nvml", t_counters_no_nvml, "counters", child_counters},
    {"gpu_counters_library_not_nvml", t_counters_not_nvml, NULL, NULL},
    {"gpu_track_device_times_capture_file", t_activity, "activity", child_activity},
    {"gpu_capture_without_trace", t_capture_only, "capture_only", child_capture_only},
    {"gpu_all_unset_off", t_off, "off", child_off},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace-gpu");
}

#endif
