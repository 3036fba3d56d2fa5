/* GPU observability in the trace without a GPU (src/trace/trace_gpu.c, trace_gpu_nvml.c):
 *   - GPU counters: fusebox.gpu_mem_bytes / gpu_mem_pct from the engine's figures, and no
 *     NVML counter (and no error) where NVML is absent or is not NVML;
 *   - device activity records (as the executor's glue hands them over from CUPTI) become a
 *     GPU track: kernel / memcpy slices, per-node op.device slices and a device-side
 *     fusebox.eval slice, the nodes' device time in the slowest-ops table ("device time");
 *   - the device-side eval slice adds up: span_us = dev_us (busy) + idle_us, dev_us = op_us +
 *     unattributed_us; op.device slices carry dev_us and how they were attributed; the
 *     summary prints span = busy + idle (host-bound) and the attributed share;
 *   - a graph replay's records split over the captured nodes by capture order
 *     (fbx_trace_gpu_map_create), a record beyond the map left as "CUDAGraphReplay";
 *   - FUSEBOX_GPU_CAPTURE / _EVAL: the capture file is valid JSON holding exactly that eval's
 *     records, with and without FUSEBOX_TRACE;
 *   - kernels that start early (programmatic dependent launch: resident before the kernel
 *     before them ends) are cut at that end, with early_start_us, and counted once;
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
  CHECK(fabs(arg_num(v[0], "dev_us") - 26.0) < 1e-6);
  CHECK(fabs(arg_num(v[0], "span_us") - 30.0) < 1e-6 && fabs(arg_num(v[0], "idle_us") - 4.0) < 1e-6);
  CHECK(fabs(arg_num(v[0], "op_us") - 26.0) < 1e-6 && fabs(arg_num(v[0], "unattributed_us")) < 1e-6);
  CHECK(arg_int(v[0], "records") == 4);
  /* op.device slices: MatMul 18 us busy over [0,20], Add 8 us busy over [21,30] */
  json_t *mm = !strcmp(json_string_value(json_object_get(o[0], "name")), "MatMul") ? o[0] : o[1];
  json_t *ad = mm == o[0] ? o[1] : o[0];
  CHECK(!strcmp(json_string_value(json_object_get(mm, "name")), "MatMul"));
  CHECK(!strcmp(json_string_value(json_object_get(ad, "name")), "Add"));
  CHECK(fabs(arg_num(mm, "dev_us") - 18.0) < 1e-6 && fabs(num(mm, "dur") - 20.0) < 1e-6);
  CHECK(fabs(arg_num(ad, "dev_us") - 8.0) < 1e-6 && fabs(num(ad, "dur") - 9.0) < 1e-6);
  CHECK(!strcmp(arg_s(mm, "attribution"), "correlation") && !strcmp(arg_s(ad, "attribution"), "correlation"));
  CHECK(!json_object_get(json_object_get(mm, "args"), "graph"));
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
  /* 3 evals of span 30, busy 26, all of it attributed */
  CHECK(strstr(e, "gpu:     3 device-side eval(s) in the process so far, 12 records: span 90.0us = busy 78.0us + "
                  "idle (host-bound"));
  CHECK(strstr(e, "12.0us (13.3% of the span)"));
  CHECK(strstr(e, "busy attributed to nodes 78.0us (100.0%): by correlation id 78.0us, graph replays by capture order "
                  "0.0us; graph replays not split 0.0us; no node 0.0us"));
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

/* ---- graph replays: capture order ----
 * A graph captured as MatMul (2 kernels), Add (an upload, then 1 kernel): its map. Eval 1
 * replays it once (launch correlation 50): kernels [0,10] [12,20] [26,30] us, the copy
 * [21,25] us, delivered kernels first (a buffer need not interleave kinds), plus a fourth
 * kernel [31,33] us that the map does not know (kept as "CUDAGraphReplay"). Eval 2 replays it
 * without a map (the backend did not count): all of it "CUDAGraphReplay". */
static int child_graph(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-graph");
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm), *add = fbx_trace_op_site_get(s, &k_add);
  if (!mm || !add) return 3;
  fbx_trace_op_site *ks[] = {mm, mm, add}, *cs[] = {add};
  fbx_trace_gpu_map *m = fbx_trace_gpu_map_create(ks, 3, cs, 1);
  if (!m) return 4;
  for (int k = 0; k < 2; k++) {
    bool cap = false;
    uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
    uint64_t t0 = fbx_trace_now_ns() + 1000000;
    fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, ev, NULL, 50), act(1, K_MM, t0, 12, 20, ev, NULL, 50),
                             act(1, "add_f32", t0, 26, 30, ev, NULL, 50), act(1, "extra", t0, 31, 33, ev, NULL, 50),
                             act(2, NULL, t0, 21, 25, ev, NULL, 50)};
    for (int i = 0; i < 5; i++) {
      a[i].graph = 1;
      a[i].map = k == 0 ? m : NULL;
      fbx_trace_gpu_activity(&a[i]);
    }
    fbx_trace_gpu_drained(true);
  }
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}

static int t_graph(void) {
  char *tr = path_of("graph.json"), *err = path_of("graph.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), NULL};
  CHECK(run_child("graph", env, err) == 0);
  json_t *j = NULL, *o[16], *k[16];
  CHECK(load_ok(tr, &j));
  /* eval 1: MatMul 18 us, Add 4 + 4 us by capture order, 2 us not split */
  int no = of_cat(j, "op.device", 1, o, 16);
  double mm_us = 0, add_us = 0, rep_us = 0, sum = 0;
  for (int q = 0; q < no && q < 16; q++) {
    const char *nm = json_string_value(json_object_get(o[q], "name"));
    double d = arg_num(o[q], "dev_us");
    const char *how = arg_s(o[q], "attribution");
    if (!strcmp(nm, "MatMul")) mm_us += d;
    else if (!strcmp(nm, "Add")) add_us += d;
    else if (!strcmp(nm, "CUDAGraphReplay")) rep_us += d;
    if (strcmp(nm, "CUDAGraphReplay")) CHECK(how && !strcmp(how, "capture order"));
    else CHECK(how && !strcmp(how, "graph launch (not split)") && arg_int(o[q], "graph") == 1);
    sum += d;
  }
  CHECK(fabs(mm_us - 18.0) < 1e-6 && fabs(add_us - 8.0) < 1e-6 && fabs(rep_us - 2.0) < 1e-6);
  json_t *v = NULL;
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, "fusebox.eval") && arg_int(e, "eval") == 1) v = e;
  }
  CHECK(v != NULL);
  CHECK(fabs(arg_num(v, "dev_us") - 28.0) < 1e-6 && fabs(arg_num(v, "span_us") - 33.0) < 1e-6);
  CHECK(fabs(arg_num(v, "op_us") - 26.0) < 1e-6 && fabs(arg_num(v, "unattributed_us") - 2.0) < 1e-6);
  CHECK(fabs(sum - arg_num(v, "dev_us")) < 1e-6); /* the op.device slices add up to the busy time */
  /* every replayed kernel of eval 1 names its node (but the extra one) */
  int nk = of_cat(j, "gpu.kernel", 1, k, 16), named = 0;
  for (int q = 0; q < nk && q < 16; q++) named += arg_s(k[q], "node") != NULL;
  CHECK(nk == 4 && named == 3);
  /* eval 2: no map, one CUDAGraphReplay slice of 28 us */
  no = of_cat(j, "op.device", 2, o, 16);
  CHECK(no == 1 && !strcmp(json_string_value(json_object_get(o[0], "name")), "CUDAGraphReplay"));
  CHECK(fabs(arg_num(o[0], "dev_us") - 28.0) < 1e-6);
  char *es = slurp(err);
  CHECK(es && strstr(es, "busy attributed to nodes 26.0us (46.4%): by correlation id 0.0us, graph replays by capture "
                         "order 26.0us; graph replays not split 30.0us"));
  CHECK(strstr(es, "slowest ops (device time)") && strstr(es, "18.0us") && strstr(es, " 8.0us"));
  free(es);
  json_decref(j);
  return 0;
}

/* ---- a replay recorded whole (FUSEBOX_CUPTI_GRAPHS=whole: CUPTI's graph-level record) ----
 * One eval: an upload of no node [0,4] us, then one replay of a graph whose map knows its nodes,
 * delivered as a single kind-4 record [5,35] us (correlation 70). It cannot be split: one
 * "CUDA graph" slice (cat gpu.graph) in a "CUDAGraphReplay" op.device slice of 30 us, and the
 * map's capture-order counters untouched: a per-node record of the same replay [40,42] us
 * (which cuda_cupti.c drops in that mode; the trace must not rely on it) is still MatMul's. */
static int child_graph_whole(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-graph-whole");
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm);
  if (!mm) return 3;
  fbx_trace_op_site *ks[] = {mm};
  fbx_trace_gpu_map *m = fbx_trace_gpu_map_create(ks, 1, NULL, 0);
  if (!m) return 4;
  bool cap = false;
  uint64_t ev = fbx_trace_gpu_eval_begin(&cap), t0 = fbx_trace_now_ns() + 1000000;
  fbx_trace_gpu_act a[] = {act(2, NULL, t0, 0, 4, ev, NULL, 69), act(4, NULL, t0, 5, 35, ev, NULL, 70),
                           act(1, K_MM, t0, 40, 42, ev, NULL, 70)};
  a[1].graph = a[2].graph = 1;
  a[1].map = a[2].map = m; /* the third, a per-node record of the replay: still the map's first node */
  for (int i = 0; i < 3; i++) fbx_trace_gpu_activity(&a[i]);
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}
static int t_graph_whole(void) {
  char *tr = path_of("graph_whole.json"), *err = path_of("graph_whole.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), NULL};
  CHECK(run_child("graph_whole", env, err) == 0);
  json_t *j = NULL, *o[8], *g[4], *k[4];
  CHECK(load_ok(tr, &j));
  CHECK(of_cat(j, "gpu.graph", 1, g, 4) == 1);
  CHECK(!strcmp(json_string_value(json_object_get(g[0], "name")), "CUDA graph"));
  CHECK(fabs(num(g[0], "dur") - 30.0) < 1e-6 && arg_int(g[0], "graph") == 1 && arg_int(g[0], "correlation") == 70);
  CHECK(!json_object_get(json_object_get(g[0], "args"), "bytes") && !arg_s(g[0], "node"));
  CHECK(!strcmp(arg_s(g[0], "attribution"), "graph launch (not split)"));
  CHECK(of_cat(j, "op.device", 1, o, 8) == 3); /* (no node) 4 us, CUDAGraphReplay 30 us, MatMul 2 us */
  CHECK(!strcmp(json_string_value(json_object_get(o[1], "name")), "CUDAGraphReplay"));
  CHECK(fabs(arg_num(o[1], "dev_us") - 30.0) < 1e-6 && arg_int(o[1], "graph") == 1);
  CHECK(!strcmp(json_string_value(json_object_get(o[2], "name")), "MatMul") && fabs(arg_num(o[2], "dev_us") - 2.0) < 1e-6);
  CHECK(of_cat(j, "gpu.kernel", 1, k, 4) == 1 && !strcmp(arg_s(k[0], "node"), "mm"));
  json_decref(j);
  return 0;
}

/* ---- exactly the events of the old path ----
 * Device records are now stored binary at arrival and made into events at the flush. The
 * events must be those that formatting at arrival made, field by field and in the same
 * order. Records (stream 7, us from the first): eval 1 live launches: MatMul's kernel
 * [0,10] (corr 10), Add's upload [12,16] (corr 11, 1024 B) and kernel [20,30] (corr 12);
 * eval 2 one graph replay (corr 50) of a map {MatMul, Add}: [40,45] [46,50] and a kernel
 * the map does not know, [52,53]; then a memset outside any eval [60,61] (corr 60). The
 * expected events below are worked out by hand from the slice rules (trace_gpu.c): an
 * op.device slice closes when a record of another node arrives, the eval slice when one
 * of another eval does, and both at the final drain. */
static const char *const k_exact_expected =
    "["
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"tid\":1048583,\"args\":{\"name\":\"GPU stream 7\"}},"
    "{\"name\":\"void gemm<\\\"f32\\\">(float*)\",\"cat\":\"gpu.kernel\",\"ph\":\"X\",\"tid\":1048583,\"ts\":0,"
    "\"dur\":10,\"args\":{\"op\":\"MatMul\",\"node\":\"mm\",\"node_id\":0,\"eval\":1,\"grid\":\"64x2x1\","
    "\"block\":\"128x1x1\",\"registers\":40,\"shared_bytes\":4096,\"correlation\":10,\"attribution\":\"correlation\"}},"
    "{\"name\":\"MatMul\",\"cat\":\"op.device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":0,\"dur\":10,\"args\":{\"node\":\"mm\","
    "\"node_id\":0,\"eval\":1,\"dev_us\":10,\"records\":1,\"attribution\":\"correlation\"}},"
    "{\"name\":\"memcpy HtoD\",\"cat\":\"gpu.memcpy\",\"ph\":\"X\",\"tid\":1048583,\"ts\":12,\"dur\":4,\"args\":{"
    "\"op\":\"Add\",\"node\":\"add\",\"node_id\":1,\"eval\":1,\"bytes\":1024,\"correlation\":11,"
    "\"attribution\":\"correlation\"}},"
    "{\"name\":\"add_f32\",\"cat\":\"gpu.kernel\",\"ph\":\"X\",\"tid\":1048583,\"ts\":20,\"dur\":10,\"args\":{"
    "\"op\":\"Add\",\"node\":\"add\",\"node_id\":1,\"eval\":1,\"grid\":\"64x2x1\",\"block\":\"128x1x1\","
    "\"registers\":40,\"shared_bytes\":4096,\"correlation\":12,\"attribution\":\"correlation\"}},"
    /* eval 2's first record closes Add's slice (busy 4 + 10 over [12,30]) and eval 1 (busy 24 of 30) */
    "{\"name\":\"Add\",\"cat\":\"op.device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":12,\"dur\":18,\"args\":{\"node\":\"add\","
    "\"node_id\":1,\"eval\":1,\"dev_us\":14,\"records\":2,\"attribution\":\"correlation\"}},"
    "{\"name\":\"fusebox.eval\",\"cat\":\"device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":0,\"dur\":30,\"args\":{"
    "\"eval\":1,\"side\":\"device\",\"dev_us\":24,\"span_us\":30,\"idle_us\":6,\"op_us\":24,\"unattributed_us\":0,"
    "\"records\":3,\"stream\":7,\"attribution\":\"tags\"}},"
    "{\"name\":\"void gemm<\\\"f32\\\">(float*)\",\"cat\":\"gpu.kernel\",\"ph\":\"X\",\"tid\":1048583,\"ts\":40,"
    "\"dur\":5,\"args\":{\"op\":\"MatMul\",\"node\":\"mm\",\"node_id\":0,\"eval\":2,\"grid\":\"64x2x1\","
    "\"block\":\"128x1x1\",\"registers\":40,\"shared_bytes\":4096,\"correlation\":50,\"graph\":1,"
    "\"attribution\":\"capture order\"}},"
    "{\"name\":\"MatMul\",\"cat\":\"op.device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":40,\"dur\":5,\"args\":{\"node\":\"mm\","
    "\"node_id\":0,\"eval\":2,\"dev_us\":5,\"records\":1,\"attribution\":\"capture order\"}},"
    "{\"name\":\"add_f32\",\"cat\":\"gpu.kernel\",\"ph\":\"X\",\"tid\":1048583,\"ts\":46,\"dur\":4,\"args\":{"
    "\"op\":\"Add\",\"node\":\"add\",\"node_id\":1,\"eval\":2,\"grid\":\"64x2x1\",\"block\":\"128x1x1\","
    "\"registers\":40,\"shared_bytes\":4096,\"correlation\":50,\"graph\":1,\"attribution\":\"capture order\"}},"
    "{\"name\":\"Add\",\"cat\":\"op.device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":46,\"dur\":4,\"args\":{\"node\":\"add\","
    "\"node_id\":1,\"eval\":2,\"dev_us\":4,\"records\":1,\"attribution\":\"capture order\"}},"
    /* the third kernel of a two-kernel map: no node, the replay's own slice */
    "{\"name\":\"extra\",\"cat\":\"gpu.kernel\",\"ph\":\"X\",\"tid\":1048583,\"ts\":52,\"dur\":1,\"args\":{"
    "\"eval\":2,\"grid\":\"64x2x1\",\"block\":\"128x1x1\",\"registers\":40,\"shared_bytes\":4096,"
    "\"correlation\":50,\"graph\":1,\"attribution\":\"graph launch (not split)\"}},"
    /* the memset outside any eval closes eval 2: busy 5 + 4 + 1 of span 13, nodes 9 */
    "{\"name\":\"CUDAGraphReplay\",\"cat\":\"op.device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":52,\"dur\":1,\"args\":{"
    "\"node\":\"\",\"node_id\":-1,\"eval\":2,\"dev_us\":1,\"records\":1,\"attribution\":\"graph launch (not split)\","
    "\"graph\":1}},"
    "{\"name\":\"fusebox.eval\",\"cat\":\"device\",\"ph\":\"X\",\"tid\":1048583,\"ts\":40,\"dur\":13,\"args\":{"
    "\"eval\":2,\"side\":\"device\",\"dev_us\":10,\"span_us\":13,\"idle_us\":3,\"op_us\":9,\"unattributed_us\":1,"
    "\"records\":3,\"stream\":7,\"attribution\":\"tags\"}},"
    "{\"name\":\"memset\",\"cat\":\"gpu.memset\",\"ph\":\"X\",\"tid\":1048583,\"ts\":60,\"dur\":1,\"args\":{"
    "\"eval\":0,\"bytes\":256,\"correlation\":60}}"
    "]";

static int child_exact(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-exact");
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm), *add = fbx_trace_op_site_get(s, &k_add);
  if (!mm || !add) return 3;
  fbx_trace_op_site *ks[] = {mm, add};
  fbx_trace_gpu_map *m = fbx_trace_gpu_map_create(ks, 2, NULL, 0);
  if (!m) return 4;
  bool cap = false;
  uint64_t e1 = fbx_trace_gpu_eval_begin(&cap), e2 = fbx_trace_gpu_eval_begin(&cap);
  if (e1 != 1 || e2 != 2) return 5;
  uint64_t t0 = fbx_trace_now_ns() + 1000000;
  char name[32]; /* a producer's reused buffer: the trace keeps its own copy of each name */
  snprintf(name, sizeof name, "%s", "add_f32");
  fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, 1, mm, 10), act(2, NULL, t0, 12, 16, 1, add, 11),
                           act(1, name, t0, 20, 30, 1, add, 12),  act(1, K_MM, t0, 40, 45, 2, NULL, 50),
                           act(1, name, t0, 46, 50, 2, NULL, 50), act(1, name, t0, 52, 53, 2, NULL, 50),
                           act(3, NULL, t0, 60, 61, 0, NULL, 60)};
  for (int i = 3; i < 6; i++) {
    a[i].graph = 1;
    a[i].map = m;
  }
  a[6].bytes = 256;
  for (int i = 0; i < 7; i++) {
    fbx_trace_gpu_activity(&a[i]);
    if (i == 2) snprintf(name, sizeof name, "%s", "overwritten"); /* after its record: must not show */
    if (i == 3) snprintf(name, sizeof name, "%s", "add_f32");
    if (i == 4) snprintf(name, sizeof name, "%s", "extra"); /* same pointer, another name */
  }
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}

/* e matches the expected event x: the same keys (pid aside), args' keys in the same order, the
 * same strings, numbers equal (ts relative to base). */
static int event_matches(json_t *e, json_t *x, double base, int64_t pid) {
  CHECK(json_integer_value(json_object_get(e, "pid")) == pid);
  CHECK(json_object_size(e) == json_object_size(x) + 1);
  const char *k;
  json_t *v;
  json_object_foreach(x, k, v) {
    json_t *g = json_object_get(e, k);
    CHECK(g != NULL);
    if (!strcmp(k, "args")) {
      CHECK(json_object_size(g) == json_object_size(v));
      void *it = json_object_iter(g);
      const char *ak;
      json_t *av;
      json_object_foreach(v, ak, av) {
        CHECK(it && !strcmp(json_object_iter_key(it), ak)); /* same key, same place */
        json_t *gv = json_object_iter_value(it);
        if (json_is_string(av)) CHECK(json_is_string(gv) && !strcmp(json_string_value(gv), json_string_value(av)));
        else CHECK(json_is_number(gv) && fabs(json_number_value(gv) - json_number_value(av)) < 1e-9);
        it = json_object_iter_next(g, it);
      }
    } else if (json_is_string(v)) {
      CHECK(json_is_string(g) && !strcmp(json_string_value(g), json_string_value(v)));
    } else {
      double gv = json_number_value(g) - (!strcmp(k, "ts") ? base : 0.0);
      CHECK(json_is_number(g) && fabs(gv - json_number_value(v)) < 1e-6);
    }
  }
  return 0;
}

static int t_exact(void) {
  char *tr = path_of("exact.json"), *err = path_of("exact.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), NULL};
  CHECK(run_child("exact", env, err) == 0);
  json_t *j = NULL;
  CHECK(load_ok(tr, &j));
  json_error_t je;
  json_t *want = json_loads(k_exact_expected, 0, &je);
  if (!want) fprintf(stderr, "  expected JSON: %s at %d\n", je.text, je.position);
  CHECK(want && json_array_size(want) == 15);
  json_t *got[32];
  int n = 0;
  int64_t pid = -1;
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *nm = json_string_value(json_object_get(e, "name"));
    if (nm && !strcmp(nm, "process_name")) pid = json_integer_value(json_object_get(e, "pid"));
    if (json_integer_value(json_object_get(e, "tid")) == 1048583 && n < 32) got[n++] = e;
  }
  CHECK(pid > 0);
  CHECK(n == 15);
  double base = json_number_value(json_object_get(got[1], "ts")); /* the first kernel's start */
  for (int q = 0; q < n; q++)
    if (event_matches(got[q], json_array_get(want, (size_t)q), base, pid)) {
      fprintf(stderr, "  (event %d of the GPU track: %s)\n", q, json_string_value(json_object_get(got[q], "name")));
      return 1;
    }
  json_decref(want);
  json_decref(j);
  return 0;
}

/* ---- many records from another thread, flushes meanwhile ----
 * The profiling library's thread delivers 2100 evals of 146 kernels (2 us each, 3 us apart;
 * MatMul and Add take turns every 2 records, so MatMul 74 and Add 72 per eval) while the
 * main thread flushes during the first 150 evals; the ~285k records after them pass
 * PENDING_MAX (2^18), so the delivering thread processes some itself. FUSEBOX_TRACE_MAX_EVENTS=20000 keeps the file
 * small: the counted events are 306,600 kernels + 73 x 2100 op.device + 2100 eval slices =
 * 462,000, so exactly 20,000 recorded and 442,000 dropped, and the statistics must still see
 * every record: busy 2100 x 292 us = 613,200 us in a span of 2100 x 437 us = 917,700 us;
 * MatMul 2100 x 148 us = 310,800 us, Add 2100 x 144 us = 302,400 us. The kernel names come
 * from one reused buffer. */
enum { VOL_EVALS = 2100, VOL_PER = 146 };
static fbx_trace_op_site *g_vol_sites[2];
static int g_vol_done, g_vol_evals;
static void *vol_producer(void *arg) {
  (void)arg;
  uint64_t t = fbx_trace_now_ns();
  char name[16];
  for (int k = 0; k < VOL_EVALS; k++) {
    bool cap = false;
    uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
    for (int i = 0; i < VOL_PER; i++) {
      int node = (i / 2) % 2;
      snprintf(name, sizeof name, "%s", node ? "k_add" : "k_mm");
      fbx_trace_gpu_act a = act(1, name, t, 3 * (uint64_t)i, 3 * (uint64_t)i + 2, ev, g_vol_sites[node],
                                (uint32_t)(k * VOL_PER + i));
      fbx_trace_gpu_activity(&a);
    }
    t += 1000000;
    __atomic_store_n(&g_vol_evals, k + 1, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g_vol_done, 1, __ATOMIC_RELEASE);
  return NULL;
}
static int child_volume(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-volume");
  g_vol_sites[0] = fbx_trace_op_site_get(s, &k_mm);
  g_vol_sites[1] = fbx_trace_op_site_get(s, &k_add);
  if (!g_vol_sites[0] || !g_vol_sites[1]) return 3;
  pthread_t th;
  if (pthread_create(&th, NULL, vol_producer, NULL)) return 4;
  /* flushes race the first 150 evals; the remaining ~285k records then pass PENDING_MAX */
  while (!__atomic_load_n(&g_vol_done, __ATOMIC_ACQUIRE) && __atomic_load_n(&g_vol_evals, __ATOMIC_ACQUIRE) < 150) {
    fbx_trace_flush();
    usleep(200);
  }
  pthread_join(th, NULL);
  fbx_trace_gpu_drained(true);
  fbx_trace_session_destroy(s);
  return 0;
}
static int t_volume(void) {
  char *tr = path_of("volume.json"), *err = path_of("volume.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), "FUSEBOX_TRACE_MAX_EVENTS=20000", NULL};
  CHECK(run_child("volume", env, err) == 0);
  json_t *j = NULL;
  CHECK(load_ok(tr, &j));
  json_t *od = json_object_get(j, "otherData");
  CHECK(json_integer_value(json_object_get(od, "recorded_events")) == 20000);
  CHECK(json_integer_value(json_object_get(od, "dropped_events")) == 442000);
  size_t i;
  json_t *e;
  int nk = 0;
  json_array_foreach(events(j), i, e) { /* each kernel that made it in names its own node */
    const char *cat = json_string_value(json_object_get(e, "cat"));
    if (!cat || strcmp(cat, "gpu.kernel")) continue;
    nk++;
    const char *nm = json_string_value(json_object_get(e, "name")), *op = arg_s(e, "op");
    CHECK(nm && op && !strcmp(nm, !strcmp(op, "MatMul") ? "k_mm" : "k_add"));
  }
  CHECK(nk > 10000);
  char *es = slurp(err);
  CHECK(es && strstr(es, "gpu:     2100 device-side eval(s) in the process so far, 306600 records: span 917700.0us = "
                         "busy 613200.0us + idle (host-bound: the device waited for work) 304500.0us (33.2% of the span)"));
  CHECK(strstr(es, "310800.0us") && strstr(es, "302400.0us"));
  CHECK(!strstr(es, "lost"));
  free(es);
  json_decref(j);
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
  CHECK(of_cat(c, "op.device", 0, all, 16) == 1);  /* no node known: one "(no node)" slice */
  CHECK(!strcmp(json_string_value(json_object_get(all[0], "name")), "(no node)"));
  CHECK(!strncmp(arg_s(all[0], "attribution"), "none", 4) && fabs(arg_num(all[0], "dev_us") - 22.0) < 1e-6);
  CHECK(count_named(c, "fusebox.eval") == 1);
  json_t *v = find_event(c, "fusebox.eval", 0);
  CHECK(fabs(num(v, "dur") - 25.0) < 1e-6 && fabs(arg_num(v, "dev_us") - 22.0) < 1e-6);
  CHECK(fabs(arg_num(v, "op_us")) < 1e-6 && fabs(arg_num(v, "unattributed_us") - 22.0) < 1e-6); /* no node known */
  CHECK(fabs(arg_num(v, "idle_us") - 3.0) < 1e-6);
  CHECK(of_cat(c, "gpu.kernel", 1, all, 16) == 2 && !json_object_get(json_object_get(all[0], "args"), "attribution"));
  json_decref(c);
  return 0;
}

/* Programmatic dependent launch: MatMul kernels [0,10] and [7,20] us (resident 3 us before
 * the first ended), Add's kernel [18,30] (2 us early), then an upload [31,35] us and a kernel
 * [33,40] that starts during the copy (not after a kernel: left as it is) and one [50,60]
 * wholly after the last kernel's end. Busy: 10 + 10 + 10 + 4 + 7 + 10 = 51 us of a 60 us span. */
static int child_early(void) {
  fbx_trace_session *s = fbx_trace_session_create("gpu-early");
  fbx_trace_session_bind(s);
  fbx_trace_op_site *mm = fbx_trace_op_site_get(s, &k_mm), *add = fbx_trace_op_site_get(s, &k_add);
  if (!mm || !add) return 3;
  bool cap = false;
  uint64_t ev = fbx_trace_gpu_eval_begin(&cap);
  uint64_t t0 = fbx_trace_now_ns() + 1000000;
  fbx_trace_gpu_act a[] = {act(1, K_MM, t0, 0, 10, ev, mm, 1),       act(1, K_MM, t0, 7, 20, ev, mm, 2),
                           act(1, "add_f32", t0, 18, 30, ev, add, 3), act(2, NULL, t0, 31, 35, ev, add, 4),
                           act(1, "add_f32", t0, 33, 40, ev, add, 5), act(1, "add_f32", t0, 50, 60, ev, add, 6)};
  for (int i = 0; i < 6; i++) fbx_trace_gpu_activity(&a[i]);
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  return 0;
}

static int t_early(void) {
  char *tr = path_of("early.json"), *err = path_of("early.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), NULL};
  CHECK(run_child("early", env, err) == 0);
  json_t *j = NULL, *k[8], *o[4];
  CHECK(load_ok(tr, &j));
  CHECK(of_cat(j, "gpu.kernel", 1, k, 8) == 5);
  CHECK(of_cat(j, "op.device", 1, o, 4) == 2);
  const double ts[5] = {0, 10, 20, 33, 50}, dur[5] = {10, 10, 10, 7, 10}, early[5] = {0, 3, 2, 0, 0};
  double base = 1e300;
  for (int q = 0; q < 5; q++) base = fmin(base, num(k[q], "ts"));
  for (int q = 0; q < 5; q++) { /* kernels in arrival order */
    CHECK(fabs(num(k[q], "ts") - base - ts[q]) < 1e-6 && fabs(num(k[q], "dur") - dur[q]) < 1e-6);
    CHECK(fabs(arg_num(k[q], "early_start_us") - early[q]) < 1e-6); /* absent = 0 */
    CHECK(early[q] != 0 || !json_object_get(json_object_get(k[q], "args"), "early_start_us"));
  }
  json_t *v = NULL;
  CHECK(of_cat(j, "device", 1, &v, 1) == 1);
  CHECK(fabs(arg_num(v, "span_us") - 60.0) < 1e-6 && fabs(arg_num(v, "dev_us") - 51.0) < 1e-6);
  CHECK(fabs(arg_num(v, "idle_us") - 9.0) < 1e-6 && fabs(arg_num(v, "op_us") - 51.0) < 1e-6);
  json_t *mmo = !strcmp(json_string_value(json_object_get(o[0], "name")), "MatMul") ? o[0] : o[1];
  json_t *ado = mmo == o[0] ? o[1] : o[0];
  CHECK(fabs(arg_num(mmo, "dev_us") - 20.0) < 1e-6 && fabs(num(mmo, "dur") - 20.0) < 1e-6);
  CHECK(fabs(arg_num(ado, "dev_us") - 31.0) < 1e-6 && fabs(num(ado, "ts") - base - 20.0) < 1e-6);
  json_decref(j);
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
    {"gpu_graph_replay_by_capture_order", t_graph, "graph", child_graph},
    {"gpu_graph_replay_recorded_whole", t_graph_whole, "graph_whole", child_graph_whole},
    {"gpu_binary_records_give_the_old_events", t_exact, "exact", child_exact},
    {"gpu_records_from_another_thread_past_pending_max", t_volume, "volume", child_volume},
    {"gpu_capture_without_trace", t_capture_only, "capture_only", child_capture_only},
    {"gpu_kernels_starting_early_cut_at_the_previous_end", t_early, "early", child_early},
    {"gpu_all_unset_off", t_off, "off", child_off},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace-gpu");
}

#endif
