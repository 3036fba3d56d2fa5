/* The executor's GPU observability glue (src/exec/exec_gpuobs.c) on a stand-in device: the
 * CPU backend with observability members (backend_obs.h) whose run_node also emits one fake
 * "kernel" record per node, carrying the tag the executor set, with a device time chosen
 * here (MatMul 10 us, Add 3 us). A two-node graph y = x @ W + b runs 4 times with
 * FUSEBOX_TRACE and FUSEBOX_GPU_CAPTURE_EVAL=2, and the trace must attribute each kernel to
 * the node that launched it: per eval one op.device slice per node with exactly its kernel's
 * time, nested in a device-side fusebox.eval; the profiler range opened and closed exactly
 * around eval index 2; the capture file holding that eval's two kernels only; recording
 * enabled once and nothing of it when everything is unset. Numerics are checked against a
 * naive matmul. (On a GPU, scripts/gpu_trace_check.sh checks the same on real CUPTI records.) */
#include "trace_harness.h"

#if defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT
int main(void) {
  printf("trace-gpu-exec: 0 passed, 0 failed (tracing compiled out)\n");
  return 0;
}
#else

#include <math.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "common/exec_outs.h"
#include "exec/exec_compiled.h"
#include "exec/exec_gpuobs.h"

enum { D = 8, RUNS = 4, RUNS_MAX = 16 };
static int g_runs = RUNS; /* FBX_TEST_RUNS */
static float W[D * D], B[D], X[2 * D];

/* ---- the stand-in device ---- */
static fbx_backend_vtable g_vt;
static const fbx_backend_vtable *g_cpu_vt;
static __thread uint64_t tl_tag;
static fbx_device_activity g_q[256];
static int g_nq, g_enables, g_disables, g_tags;
static int g_on; /* recording enabled: only then does a "kernel" leave a record, as with CUPTI */
static int g_prof_start = -1, g_prof_stop = -1, g_prof_calls; /* at which eval (run index) */
static int g_run;                                               /* run index of the test loop */
static uint64_t g_dev_clock;                                    /* the fake device's clock, ns */

static fbx_device_activity_fn g_sink_fn; /* FBX_TEST_SINK: records go straight to the sink, as from CUPTI's thread */
static int g_sinks;
/* The sink is called on a thread of its own, as CUPTI's thread calls it: the trace stores the
 * record there (binary) and makes its events at a flush on another thread. */
static void *deliver(void *a) {
  g_sink_fn(NULL, a);
  return NULL;
}
static fbx_status *fake_run_node(fbx_backend *be, const fbx_ir_node *n, void *state, const fbx_tensor *in, int n_in,
                                 fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  fbx_status *st = g_cpu_vt->run_node(be, n, state, in, n_in, out, n_out, info);
  if (st || !tl_tag || !g_on || g_nq == 256) return st;
  uint64_t d = n->op == FBX_IR_OP_MATMUL ? 10000 : 3000;
  if (!g_dev_clock) g_dev_clock = fbx_trace_now_ns();
  fbx_device_activity a = {.kind = FBX_DEVACT_KERNEL, .name = n->op == FBX_IR_OP_MATMUL ? "k_matmul" : "k_add",
                           .start_ns = g_dev_clock, .end_ns = g_dev_clock + d, .stream = 3,
                           .correlation = (uint32_t)g_nq + 1, .tag = tl_tag,
                           .grid = {1, 1, 1}, .block = {32, 1, 1}, .registers = 16};
  g_dev_clock += d + 1000; /* 1 us launch gap */
  if (g_sink_fn) {
    a.correlation += 1000;
    pthread_t th;
    if (pthread_create(&th, NULL, deliver, &a)) return FBX_ERR_OOM();
    pthread_join(th, NULL);
    return NULL;
  }
  g_q[g_nq++] = a;
  return NULL;
}
static fbx_status *fake_enable(fbx_backend *be, bool on) {
  (void)be;
  on ? g_enables++ : g_disables++;
  g_on = on;
  return NULL;
}
static void fake_tag(fbx_backend *be, uint64_t tag) {
  (void)be;
  tl_tag = tag;
  g_tags++;
}
static fbx_status *fake_drain(fbx_backend *be, bool flush, fbx_device_activity_fn fn, void *ctx) {
  (void)be;
  (void)flush;
  for (int i = 0; i < g_nq; i++) fn(ctx, &g_q[i]);
  g_nq = 0;
  return NULL;
}
static fbx_status *fake_prof(fbx_backend *be, bool start) {
  (void)be;
  g_prof_calls++;
  if (start) g_prof_start = g_run;
  else g_prof_stop = g_run;
  return NULL;
}
static const char *fake_bus(fbx_backend *be) { (void)be; return "0000:00:00.0"; }
static void fake_sink(fbx_backend *be, fbx_device_activity_fn fn, void *ctx) {
  (void)be;
  (void)ctx;
  g_sink_fn = fn;
  g_sinks++;
}
static const fbx_backend_obs g_obs = {.bus_id = fake_bus, .profiler_range = fake_prof, .activity_enable = fake_enable,
                                      .activity_tag = fake_tag, .activity_drain = fake_drain};
static const fbx_backend_obs g_obs_sink = {.bus_id = fake_bus, .profiler_range = fake_prof,
                                           .activity_enable = fake_enable, .activity_tag = fake_tag,
                                           .activity_drain = fake_drain, .activity_sink = fake_sink};

static fbx_ir_graph *two_nodes(void) {
  fbx_ir_graph *g;
  int x, w, b, y, z;
  fbx_ir_graph_create(&g);
  fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 2, (int64_t[]){2, D}, NULL, &x);
  fbx_ir_graph_add_const(g, "W", FBX_DTYPE_F32, 2, (int64_t[]){D, D}, W, &w);
  fbx_ir_graph_add_const(g, "b", FBX_DTYPE_F32, 1, (int64_t[]){D}, B, &b);
  fbx_ir_graph_emit(g, FBX_IR_OP_MATMUL, (int[]){x, w}, 2, NULL, FBX_DTYPE_F32, 2, "mm", "MatMul", 0, &y);
  fbx_ir_graph_emit(g, FBX_IR_OP_ADD, (int[]){y, b}, 2, NULL, FBX_DTYPE_F32, 2, "add", "Add", 1, &z);
  fbx_ir_graph_mark_output(g, z);
  return g;
}

/* Runs the graph RUNS times; exit code: 0 ok, else which check failed. */
static int child_exec(void) {
  for (int i = 0; i < D * D; i++) W[i] = (float)((i * 7) % 11 - 5) * 0.125f;
  for (int i = 0; i < D; i++) B[i] = (float)i * 0.5f;
  for (int i = 0; i < 2 * D; i++) X[i] = (float)(i % 5 - 2) * 0.25f;
  fbx_backend *cpu = NULL;
  fbx_cpu_options co = {.threads = 1};
  if (fbx_cpu_backend_create(&co, &cpu)) return 10;
  g_cpu_vt = cpu->vt;
  g_vt = *cpu->vt;
  g_vt.run_node = fake_run_node;
  bool sink = getenv("FBX_TEST_SINK") != NULL;
  g_vt.obs = sink ? &g_obs_sink : &g_obs;
  cpu->vt = &g_vt;
  fbx_trace_session *s = fbx_trace_session_create("gpu-exec");
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 2};
  fbx_exec_compiled *c = NULL;
  if (fbx_exec_compiled_create(two_nodes(), cpu, &oo, "two", &c)) return 11;
  outs o = {0};
  fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, D}, .data = X};
  int rc = 0;
  if (getenv("FBX_TEST_RUNS")) g_runs = atoi(getenv("FBX_TEST_RUNS"));
  if (g_runs < 1 || g_runs > RUNS_MAX) return 20;
  for (g_run = 0; g_run < g_runs && !rc; g_run++) {
    fbx_trace_session_bind(s);
    fbx_exec_run_report r;
    fbx_status *st = fbx_exec_compiled_run(c, &in, 1, out_fn, &o, &r);
    fbx_trace_session_bind(NULL);
    if (st) {
      fprintf(stderr, "run: %s\n", fbx_status_message(st));
      rc = 12;
    }
    for (int i = 0; i < 2 && !rc; i++)
      for (int j = 0; j < D; j++) {
        double a = B[j];
        for (int k = 0; k < D; k++) a += (double)X[i * D + k] * W[k * D + j];
        if (fabs(o.buf[0][i * D + j] - a) > 1e-5) rc = 13;
      }
    if (tl_tag) rc = 14; /* the tag is cleared after each eval */
  }
  fbx_exec_gpuobs_finish(cpu);
  fbx_trace_session_destroy(s);
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
  cpu->vt = g_cpu_vt;
  fbx_backend_destroy(cpu);
  bool capture = getenv("FUSEBOX_GPU_CAPTURE") != NULL, trace = getenv("FUSEBOX_TRACE") != NULL;
  const int prof_at = getenv("FBX_TEST_PROF_AT") ? atoi(getenv("FBX_TEST_PROF_AT")) : 2; /* the captured run */
  if (!rc && capture && (g_prof_calls != 2 || g_prof_start != prof_at || g_prof_stop != prof_at)) rc = 15;
  if (!rc && !capture && g_prof_calls) rc = 16;
  if (!rc && trace && g_enables != 1) rc = 17;
  const int want_offs = getenv("FBX_TEST_DETAIL_OFFS") ? atoi(getenv("FBX_TEST_DETAIL_OFFS")) : 0;
  if (!rc && trace && g_disables != want_offs) rc = 21; /* switched off once, after the window */
  if (!rc && !trace && !capture && (g_enables || g_tags)) rc = 18; /* off: no recording, no tags */
  if (!rc && sink && trace && (g_sinks != 1 || g_nq)) rc = 19; /* the sink was set once, nothing queued */
  if (rc) fprintf(stderr, "child: rc %d (profiler %d calls, start %d stop %d; %d enables, %d tags)\n", rc, g_prof_calls,
                  g_prof_start, g_prof_stop, g_enables, g_tags);
  return rc;
}

static double arg_num(json_t *e, const char *k) { return json_number_value(json_object_get(json_object_get(e, "args"), k)); }
static const char *arg_s(json_t *e, const char *k) { return json_string_value(json_object_get(json_object_get(e, "args"), k)); }
static const char *str(json_t *e, const char *k) { return json_string_value(json_object_get(e, k)); }

/* The stand-in device's child run with env; its stderr is printed when it fails. */
static int run_exec_child(const char *const *env, const char *err) {
  int rc = run_child("exec", env, err);
  if (rc) {
    char *e = slurp(err);
    fprintf(stderr, "%s", e ? e : "");
    free(e);
  }
  return rc;
}

/* The kernel slices of a capture file, -1 when one belongs to another eval than eval (a number). */
static int capture_kernels(json_t *c, int64_t eval) {
  int nk = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events(c), i, e) {
    const char *cat = str(e, "cat");
    if (!cat || strcmp(cat, "gpu.kernel")) continue;
    if (arg_int(e, "eval") != eval) return -1;
    nk++;
  }
  return nk;
}

static int exec_case(bool sink) {
  char *tr = path_of(sink ? "exec_sink.json" : "exec.json"), *cap = path_of(sink ? "exec_sink_cap.json" : "exec_cap.json");
  char *err = path_of(sink ? "exec_sink.err" : "exec.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), envv(1, "FUSEBOX_GPU_CAPTURE=%s", cap),
                       envv(2, "FUSEBOX_GPU_CAPTURE_EVAL=%s", "2"), sink ? "FBX_TEST_SINK=1" : NULL, NULL};
  CHECK(run_exec_child(env, err) == 0);
  json_t *j = NULL, *c = NULL;
  CHECK(load_ok(tr, &j));
  /* per eval: MatMul's op.device slice holds k_matmul (10 us), Add's k_add (3 us) */
  int per_eval[RUNS + 1][2] = {{0}};
  size_t i;
  json_t *e;
  int n_dev_eval = 0, n_kernels = 0;
  json_array_foreach(events(j), i, e) {
    const char *cat = str(e, "cat"), *nm = str(e, "name");
    if (!cat || !nm) continue;
    int64_t ev = arg_int(e, "eval");
    if (!strcmp(cat, "op.device")) {
      CHECK(ev >= 1 && ev <= RUNS);
      if (!strcmp(nm, "MatMul")) {
        CHECK(!strcmp(arg_s(e, "node"), "mm") && fabs(arg_num(e, "dev_us") - 10.0) < 1e-9);
        per_eval[ev][0]++;
      } else {
        CHECK(!strcmp(arg_s(e, "node"), "add") && fabs(arg_num(e, "dev_us") - 3.0) < 1e-9);
        per_eval[ev][1]++;
      }
    } else if (!strcmp(cat, "gpu.kernel")) {
      n_kernels++;
      CHECK(!strcmp(nm, "k_matmul") ? !strcmp(arg_s(e, "node"), "mm") && !strcmp(arg_s(e, "op"), "MatMul")
                                    : !strcmp(arg_s(e, "node"), "add"));
    } else if (!strcmp(cat, "device") && !strcmp(nm, "fusebox.eval") && arg_s(e, "side")) {
      n_dev_eval++;
      CHECK(fabs(arg_num(e, "dev_us") - 13.0) < 1e-9 && fabs(json_number_value(json_object_get(e, "dur")) - 14.0) < 1e-9);
    }
  }
  for (int ev = 1; ev <= RUNS; ev++) CHECK(per_eval[ev][0] == 1 && per_eval[ev][1] == 1);
  CHECK(n_kernels == 2 * RUNS && n_dev_eval == RUNS);
  CHECK(count_named(j, "fusebox.gpu_mem_bytes") == RUNS);
  char *se = slurp(err);
  CHECK(se && strstr(se, "slowest ops (device time)"));
  free(se);
  /* the capture file: eval index 2 = number 3, its two kernels only */
  CHECK(load_ok(cap, &c));
  CHECK(capture_kernels(c, 3) == 2);
  json_decref(j);
  json_decref(c);
  return 0;
}

static int t_exec(void) { return exec_case(false); }
/* the same with the backend's sink: records reach the trace as they are delivered, no drain */
static int t_exec_sink(void) { return exec_case(true); }

/* FUSEBOX_GPU_DETAIL=2 with the capture of eval index 3, over 7 runs: per-kernel records for
 * eval indices 0-3 (the window extends to the captured eval), none after (index 4, the lead-out,
 * is recorded and its records dropped; recording switched off once, at index 5), the capture
 * file holds eval index 3's kernels, and the summary says how many evals the device times come
 * from. */
static int t_exec_detail_window(void) {
  char *tr = path_of("exec_window.json"), *cap = path_of("exec_window_cap.json"), *err = path_of("exec_window.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), envv(1, "FUSEBOX_GPU_CAPTURE=%s", cap),
                       "FUSEBOX_GPU_CAPTURE_EVAL=3", "FUSEBOX_GPU_DETAIL=2", "FBX_TEST_RUNS=7",
                       "FBX_TEST_DETAIL_OFFS=1", "FBX_TEST_PROF_AT=3", NULL}; /* off at index 5, after the lead-out */
  CHECK(run_exec_child(env, err) == 0);
  json_t *j = NULL, *c = NULL;
  CHECK(load_ok(tr, &j));
  int kernels[8] = {0}, dev_evals[8] = {0};
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *cat = str(e, "cat"), *nm = str(e, "name");
    if (!cat || !nm) continue;
    int64_t ev = arg_int(e, "eval");
    if (!strcmp(cat, "gpu.kernel")) {
      CHECK(ev >= 1 && ev <= 7);
      kernels[ev]++;
    } else if (!strcmp(cat, "device") && !strcmp(nm, "fusebox.eval") && arg_s(e, "side")) {
      CHECK(ev >= 1 && ev <= 7);
      dev_evals[ev]++;
    }
  }
  for (int ev = 1; ev <= 7; ev++) /* eval number = index + 1 */
    CHECK(kernels[ev] == (ev <= 4 ? 2 : 0) && dev_evals[ev] == (ev <= 4 ? 1 : 0));
  char *se = slurp(err);
  CHECK(se && strstr(se, "slowest ops (device time)") && strstr(se, "device records for 4 of 7 evals"));
  free(se);
  CHECK(load_ok(cap, &c));
  CHECK(capture_kernels(c, 4) == 2);
  json_decref(j);
  json_decref(c);
  return 0;
}

static int t_exec_off(void) {
  const char *env[] = {NULL};
  CHECK(run_child("exec", env, path_of("exec_off.err")) == 0);
  return 0;
}

/* ---- the real thing: the CUDA backend with CUPTI (skips without a GPU) ---- */
static int child_cuda(void) {
  for (int i = 0; i < D * D; i++) W[i] = (float)((i * 7) % 11 - 5) * 0.125f;
  for (int i = 0; i < D; i++) B[i] = (float)i * 0.5f;
  for (int i = 0; i < 2 * D; i++) X[i] = (float)(i % 5 - 2) * 0.25f;
  char exe[4096], lib[4200];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); /* build/tests/ -> build/libfusebox_cuda.so */
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, sizeof lib, "%s/../libfusebox_cuda.so", slash ? exe : ".");
  fbx_backend *cuda = NULL, *cpu = NULL;
  fbx_cuda_options go = {.device_id = 0, .library = lib};
  fbx_status *st = fbx_cuda_backend_open(&go, &cuda);
  if (st) {
    bool skip = fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED;
    fprintf(stderr, "%s: %s\n", skip ? "SKIP" : "FAIL", fbx_status_message(st));
    fbx_status_free(st);
    return skip ? 0 : 20;
  }
  fbx_cpu_options co = {.threads = 1};
  if (fbx_cpu_backend_create(&co, &cpu)) return 21;
  fbx_trace_session *s = fbx_trace_session_create("gpu-cuda");
  fbx_exec_compile_options oo = {.compile = true, .cache_limit = 2, .host = cpu};
  fbx_exec_compiled *c = NULL;
  if (fbx_exec_compiled_create(two_nodes(), cuda, &oo, "two_cuda", &c)) return 22;
  outs o = {0};
  fbx_tensor in = {.dtype = FBX_DTYPE_F32, .rank = 2, .dims = {2, D}, .data = X};
  int rc = 0;
  for (int run = 0; run < RUNS && !rc; run++) {
    fbx_trace_session_bind(s);
    fbx_exec_run_report r;
    st = fbx_exec_compiled_run(c, &in, 1, out_fn, &o, &r);
    fbx_trace_session_bind(NULL);
    if (st) {
      fprintf(stderr, "run: %s\n", fbx_status_message(st));
      fbx_status_free(st);
      rc = 23;
    }
  }
  fbx_exec_gpuobs_finish(cuda);
  fbx_trace_session_destroy(s);
  fbx_exec_compiled_destroy(c);
  outs_free(&o);
  fbx_backend_destroy(cuda);
  fbx_backend_destroy(cpu);
  return rc;
}

static int t_cuda(void) {
  char *tr = path_of("cuda.json"), *cap = path_of("cuda_cap.json"), *err = path_of("cuda.err");
  const char *env[] = {envv(0, "FUSEBOX_TRACE=%s", tr), envv(1, "FUSEBOX_GPU_CAPTURE=%s", cap),
                       envv(2, "FUSEBOX_GPU_CAPTURE_EVAL=%s", "2"), NULL};
  int rc = run_child("cuda", env, err);
  char *se = slurp(err);
  if (rc) fprintf(stderr, "%s", se ? se : "");
  CHECK(rc == 0);
  if (se && !strncmp(se, "SKIP", 4)) {
    printf("     (no GPU: %.*s)\n", (int)strcspn(se, "\n"), se);
    free(se);
    return 0;
  }
  CHECK(se && strstr(se, "slowest ops (device time)"));
  json_t *j = NULL, *c = NULL;
  CHECK(load_ok(tr, &j));
  /* Every kernel is attributed to mm (cuBLASLt's GEMM or our GEMV) or add (our elementwise
   * kernel, fused or not). Live evals by correlation id; once the static plan is captured as
   * a CUDA graph (the third run on) an eval is one graph launch and, with CUPTI's callback
   * mode (the summary says "tags: callback"), its kernels are split over mm and add by capture
   * order; in extcorr mode the replay stays one "CUDAGraphReplay" slice. Per eval the op.device
   * slices (nodes, the replay, "(no node)": input uploads and output copies) add up to the
   * device-side eval's dev_us, and the nodes' kernels are at least 90% of its kernel time (the
   * issue's 10% rule; here exactly all of it). */
  bool cb = se && strstr(se, "tags: callback");
  double op_us[RUNS + 2] = {0}, ev_us[RUNS + 2] = {0}, k_us[RUNS + 2] = {0}, k_node_us[RUNS + 2] = {0};
  int ew[RUNS + 2] = {0}, mm[RUNS + 2] = {0}, replay[RUNS + 2] = {0}, by_order[RUNS + 2] = {0}, cap_kernels_in_trace = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events(j), i, e) {
    const char *cat = str(e, "cat"), *nm = str(e, "name");
    int64_t ev = arg_int(e, "eval");
    if (!cat || !nm || ev < 1 || ev > RUNS || strcmp(cat, "op.device")) continue;
    if (!strcmp(nm, "CUDAGraphReplay")) replay[ev] = 1;
    if (arg_s(e, "attribution") && !strcmp(arg_s(e, "attribution"), "capture order")) by_order[ev] = 1;
  }
  CHECK(!replay[1] && !by_order[1]); /* the first run is live */
  json_array_foreach(events(j), i, e) {
    const char *cat = str(e, "cat"), *nm = str(e, "name");
    if (!cat || !nm) continue;
    int64_t ev = arg_int(e, "eval");
    if (ev < 1 || ev > RUNS) continue;
    if (!strcmp(cat, "gpu.kernel")) {
      const char *node = arg_s(e, "node");
      double d = json_number_value(json_object_get(e, "dur"));
      k_us[ev] += d;
      if (!node) CHECK(!cb && replay[ev]); /* only an unsplit graph launch's kernels have no node */
      else CHECK(!strcmp(node, "mm") || !strcmp(node, "add"));
      if (node) k_node_us[ev] += d;
      if (node && strstr(nm, "ew_kernel")) CHECK(!strcmp(node, "add"));
      if (ev == 3) cap_kernels_in_trace++;
    } else if (!strcmp(cat, "op.device")) {
      op_us[ev] += arg_num(e, "dev_us");
      if (!strcmp(arg_s(e, "node"), "mm")) mm[ev]++;
      if (!strcmp(arg_s(e, "node"), "add")) ew[ev]++;
    } else if (!strcmp(cat, "device") && !strcmp(nm, "fusebox.eval") && arg_s(e, "side")) {
      ev_us[ev] += arg_num(e, "dev_us");
      CHECK(fabs(arg_num(e, "span_us") - arg_num(e, "dev_us") - arg_num(e, "idle_us")) < 1e-3);
    }
  }
  int n_replay = 0, n_order = 0;
  for (int ev = 1; ev <= RUNS; ev++) {
    if (!replay[ev]) CHECK(mm[ev] >= 1 && ew[ev] >= 1);
    if (cb && ev >= 3) CHECK(by_order[ev] && !replay[ev]); /* replays split by capture order */
    CHECK(ev_us[ev] > 0 && fabs(op_us[ev] - ev_us[ev]) <= 0.01 * ev_us[ev] + 1e-3); /* the slices add up */
    if (cb || !replay[ev]) CHECK(k_us[ev] > 0 && k_node_us[ev] >= 0.9 * k_us[ev]);
    n_replay += replay[ev];
    n_order += by_order[ev];
  }
  CHECK(load_ok(cap, &c));
  int nk = 0;
  json_array_foreach(events(c), i, e) {
    const char *cat = str(e, "cat");
    if (cat && !strcmp(cat, "gpu.kernel")) {
      nk++;
      CHECK(arg_int(e, "eval") == 3);
    }
  }
  CHECK(nk == cap_kernels_in_trace && nk >= 2);
  printf("     cuda (tags: %s): kernels attributed to their nodes in %d evals (%d graph replays split by capture "
         "order, %d not split); capture of eval index 2 holds its %d kernels\n", cb ? "callback" : "extcorr",
         RUNS - n_replay, n_order, n_replay, nk);
  free(se);
  json_decref(j);
  json_decref(c);
  return 0;
}

static const tcase k_cases[] = {
    {"cuda_attribution_two_nodes", t_cuda, "cuda", child_cuda},
    {"exec_attribution_capture", t_exec, "exec", child_exec},
    {"exec_attribution_sink", t_exec_sink, NULL, NULL},
    {"exec_detail_window", t_exec_detail_window, NULL, NULL},
    {"exec_all_unset_no_recording", t_exec_off, NULL, NULL},
};

int main(int argc, char **argv) {
  return trace_harness_main(argc, argv, k_cases, sizeof k_cases / sizeof k_cases[0], "trace-gpu-exec");
}

#endif
