// bench_trace: the cost of tracing on the decoder decode loop (models/gen/decoder_small.onnx).
//
// Three configurations, each measured in its own process (the trace environment is read once per
// process, and the baseline is another library):
//   off   FUSEBOX_EP_LIB = a build with -DFBX_TRACE_COMPILED_OUT=ON (every entry point compiled out)
//   unset the normal build, every FUSEBOX_* variable unset
//   on    the normal build with FUSEBOX_TRACE=<file>
// The driver runs the three back to back in a rotating order, --reps times (paired processes,
// alternating), and prints per configuration the median decode ms/token, plus the medians of the
// per-repetition ratios:   (a) unset vs off  (goal <= +0.5%)   (b) on vs unset  (goal <= +5%).
//
//   bench_trace --lib LIB --lib-off LIB_OFF [--reps 15] [--steps 48] [--prompt 16] [--rounds 3]
//               [--model models/gen/decoder_small.onnx] [--trace /tmp/bench_trace.json] [--threads N]
//               [--device cpu|cuda] [--warmup-ms MS]
// --threads N sets ORT's intra-op threads and the Fusebox EP option threads=N (default: both
// libraries' defaults, one thread per online core). --device cuda sets the EP option device=cuda
// (GPU decode: the cost of CUPTI recording and device-time attribution; the environment's
// FUSEBOX_CUPTI_CORR passes through to every worker).
//   bench_trace --worker MODEL PROMPT STEPS ROUNDS    (one process: prints "decode_ms_per_token MEDIAN BEST")
//   bench_trace --micro N TRACE_FILE   (in-process ns per event of src/trace itself; see micro())
//   bench_trace --micro-gpu N TRACE_FILE   (ns per device record turned into trace events; see micro_gpu())
// A worker prefills PROMPT tokens, then decodes STEPS tokens greedily, ROUNDS times (cache reset
// in between, first round = warm-up and not counted), and reports the median over the counted
// rounds of (decode wall time / STEPS). --warmup-ms MS (BENCH_TRACE_WARMUP_MS): the warm-up repeats
// until MS milliseconds of decoding have passed (a GPU that idled between two processes needs
// about that long to raise its clocks; one 64-step round of a small decoder lasts ~20 ms).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ort_host.h"
#include "common/ort_host_decode.h"
#include "trace/trace.h"

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, dbl_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int worker(const char *model, int prompt, int steps, int rounds) {
  char path[4096], *err = NULL;
  if (fbx_host_find_repo_file(model, path, sizeof path)) {
    fprintf(stderr, "bench_trace: model %s not found (scripts/make_models.sh --bench)\n", model);
    return 1;
  }
  fbx_host *h = NULL;
  fbx_host_session *s = NULL;
  fbx_host_decoder d;
  int have_d = 0;
  double *ms = calloc((size_t)rounds + 1, sizeof *ms);
  int n_ms = 0;
  int64_t *ids = calloc((size_t)prompt + 1, sizeof *ids);
  err = fbx_host_open(NULL, NULL, &h);
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  /* --threads N (passed down as BENCH_TRACE_THREADS): ORT's intra-op threads and Fusebox's threads */
  const char *th = getenv("BENCH_TRACE_THREADS"), *dev = getenv("BENCH_TRACE_DEVICE");
  const char *ep_key[2], *ep_val[2];
  int n_ep = 0;
  if (th && atoi(th) > 0) {
    o.intra_threads = atoi(th);
    ep_key[n_ep] = "threads";
    ep_val[n_ep++] = th;
  }
  if (dev && *dev) { /* --device (BENCH_TRACE_DEVICE) */
    ep_key[n_ep] = "device";
    ep_val[n_ep++] = dev;
  }
  if (n_ep) {
    o.ep_keys = ep_key;
    o.ep_vals = ep_val;
    o.n_ep_opts = n_ep;
  }
  if (!err) err = fbx_host_session_create(h, path, &o, &s);
  if (!err) err = fbx_host_decoder_init(&d, s);
  if (!err) have_d = 1;
  for (int i = 0; i < prompt; i++) ids[i] = (7 * i + 3) % 100;
  const char *wu = getenv("BENCH_TRACE_WARMUP_MS");
  const double warmup_s = wu ? atof(wu) / 1e3 : 0, warm_t0 = fbx_host_now();
  for (int r = 0; r < rounds && !err; r++) {
    if (r == 1 && rounds > 1 && fbx_host_now() - warm_t0 < warmup_s) r = 0; /* warm up again */
    err = fbx_host_decoder_reset(&d);
    if (!err) err = fbx_host_decoder_step(&d, ids, prompt);
    double t0 = fbx_host_now();
    for (int k = 0; k < steps && !err; k++) {
      int64_t t = fbx_host_decoder_argmax(&d);
      err = fbx_host_decoder_step(&d, &t, 1);
    }
    double t1 = fbx_host_now();
    if (r > 0 || rounds == 1) ms[n_ms++] = (t1 - t0) * 1e3 / steps;
  }
  if (have_d) fbx_host_decoder_free(&d);
  if (s) fbx_host_session_destroy(s);
  if (h) fbx_host_close(h);
  free(ids);
  if (err) {
    fprintf(stderr, "bench_trace worker: %s\n", err);
    fbx_host_err_free(err);
    free(ms);
    return 1;
  }
  double best = ms[0];
  for (int i = 1; i < n_ms; i++) best = ms[i] < best ? ms[i] : best;
  printf("decode_ms_per_token %.6f %.6f\n", median(ms, n_ms), best);
  free(ms);
  return 0;
}

/* One worker process with the given library and trace file (NULL: unset). Returns the median
 * ms/token over its counted rounds (*best: the fastest round) or -1. */
static double run_worker(const char *self, const char *lib, const char *trace, const char *model, int prompt,
                         int steps, int rounds, double *best) {
  int fd[2];
  if (pipe(fd)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 1);
    close(fd[1]);
    unsetenv("FUSEBOX_TRACE");
    unsetenv("FUSEBOX_VERBOSE");
    unsetenv("FUSEBOX_CLAIM_DEBUG");
    unsetenv("FUSEBOX_NVTX");
    unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
    setenv("FUSEBOX_EP_LIB", lib, 1);
    if (trace) setenv("FUSEBOX_TRACE", trace, 1);
    if (trace && !freopen("/dev/null", "w", stderr)) _exit(3); /* the summary */
    char a[3][32];
    snprintf(a[0], 32, "%d", prompt);
    snprintf(a[1], 32, "%d", steps);
    snprintf(a[2], 32, "%d", rounds);
    execl(self, self, "--worker", model, a[0], a[1], a[2], (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[256] = "";
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && ((r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
    if (r > 0) n += (size_t)r;
  buf[n] = '\0';
  close(fd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  double v = -1;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || sscanf(buf, "decode_ms_per_token %lf %lf", &v, best) != 2) return -1;
  return v;
}

/* --micro N TRACE_FILE: in-process cost per event of the tracing library itself (this program's
 * statically linked src/trace), FUSEBOX_TRACE on. Per "op": one op span shaped like the IR
 * executor's (11 args: heap node/op names, shape strings in stack buffers, literals) plus
 * fbx_trace_session_op, and one op.worker slice (3 int args); then the executor's actual per-node
 * call, fbx_trace_op on a site (3 inputs, 1 output, two clock reads). Prints the median over 7
 * batches of ns per event on the hot path, and the flush (JSON formatting + write) ns per event. */
static double now_ns(void) { return fbx_host_now() * 1e9; }
static int micro(int n, const char *trace) {
  setenv("FUSEBOX_TRACE", trace, 1);
  unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
  fbx_trace_init();
  if (!(fbx_trace_flags() & FBX_TRACE_F_JSON)) {
    fprintf(stderr, "bench_trace --micro: cannot trace to %s\n", trace);
    return 1;
  }
  if (!freopen("/dev/null", "w", stderr)) return 1; /* the summary */
  fbx_trace_session *s = fbx_trace_session_create("micro");
  fbx_trace_session_bind(s);
  char *op = strdup("MatMul"), *node = strdup("/model/layers.3/attn/q_proj/MatMul");
  enum { BATCHES = 7 };
  double rec[BATCHES], rec_op[BATCHES], fl[BATCHES], site_op[BATCHES];
  int64_t d_a[4] = {1, 16, 8, 32}, d_b[3] = {1, 1, 1}, d_c[2] = {256, 768}, d_o[4] = {1, 16, 8, 16};
  fbx_trace_tensor tin[3] = {{d_a, 4, 4}, {d_b, 3, 8}, {d_c, 2, 4}}, tout[1] = {{d_o, 4, 4}};
  fbx_trace_op_site_desc sd = {.scope = s, .op = op, .node = node, .node_id = 7, .device = "cpu"};
  fbx_trace_op_site *site = fbx_trace_op_site_get(s, &sd);
  for (int b = 0; b < BATCHES; b++) {
    double t0 = now_ns();
    for (int i = 0; i < n; i++) {
      char ins[64], outs[64];
      memcpy(ins, "1x1x256,256x768", 16);
      memcpy(outs, "1x1x768", 8);
      uint64_t a0 = fbx_trace_now_ns();
      fbx_trace_arg args[] = {
          FBX_TARG_I("node_id", i),          FBX_TARG_S("node", node),      FBX_TARG_S("device", "cpu"),
          FBX_TARG_S("input_shapes", ins),   FBX_TARG_S("output_shapes", outs), FBX_TARG_S("dtype", "float32"),
          FBX_TARG_I("elements", 768),       FBX_TARG_I("bytes", 790528),   FBX_TARG_D("flops", 393216.0),
          FBX_TARG_S("kernel_variant", "gemv_avx2"), FBX_TARG_S("kernel_variant_reason", ""),
      };
      fbx_trace_complete(op, "op", a0, a0 + 1000, args, 11);
      fbx_trace_arg wa[3] = {FBX_TARG_I("worker", 1), FBX_TARG_I("begin", 0), FBX_TARG_I("end", 384)};
      fbx_trace_complete(op, "op.worker", a0 + 10, a0 + 900, wa, 3);
    }
    double t1 = now_ns();
    for (int i = 0; i < n; i++) {
      uint64_t a0 = fbx_trace_now_ns();
      fbx_trace_session_op(fbx_trace_session_current(), op, 1000, false);
      (void)a0;
    }
    double t2 = now_ns();
    for (int i = 0; i < n; i++) { /* the executor's per-node call: site + run values */
      uint64_t a0 = fbx_trace_now_ns();
      fbx_trace_op_run r = {.in = tin, .out = tout, .n_in = 3, .n_out = 1, .dtype = "float32", .flops = 393216.0,
                            .variant = "gemv_avx2", .reason = ""};
      fbx_trace_op(site, a0, fbx_trace_now_ns(), &r);
    }
    double t2b = now_ns();
    fbx_trace_flush();
    double t3 = now_ns();
    rec[b] = (t1 - t0) / (2.0 * n);
    rec_op[b] = (t2 - t1) / n;
    site_op[b] = (t2b - t2) / n;
    fl[b] = (t3 - t2b) / (3.0 * n);
  }
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  double lo = rec[0], hi = rec[0];
  for (int b = 0; b < BATCHES; b++) lo = rec[b] < lo ? rec[b] : lo, hi = rec[b] > hi ? rec[b] : hi;
  printf("micro: %d events/batch x %d batches: record %.1f ns/event (median; min %.1f max %.1f), "
         "session_op %.1f ns/op; fbx_trace_op %.1f ns/op (2 clock reads included); flush %.1f ns/event\n",
         2 * n, BATCHES, median(rec, BATCHES), lo, hi, median(rec_op, BATCHES), median(site_op, BATCHES),
         median(fl, BATCHES));
  free(op);
  free(node);
  return 0;
}

/* --micro-gpu N TRACE_FILE: in-process cost of one device record, FUSEBOX_TRACE on, in evals
 * of 146 records (decoder_small's eval on the H200) over 4 nodes alternating every 2 records:
 *   record: fbx_trace_gpu_activity, what the delivering thread pays per record (CUPTI's thread
 *           with the backend's sink, else the eval's thread at each eval's end). Before branch
 *           traceoh it made the record's events (a kernel slice with its node, the op.device
 *           and device-side eval slices it closes) there; now it stores the record binary;
 *   flush:  fbx_trace_flush per record, where the events are now made and written.
 * Prints the median over 7 batches of ns per record and per eval, and the flush ns per record. */
static int micro_gpu(int n, const char *trace) {
  setenv("FUSEBOX_TRACE", trace, 1);
  unsetenv("FUSEBOX_TRACE_MAX_EVENTS");
  fbx_trace_init();
  if (!(fbx_trace_flags() & FBX_TRACE_F_JSON)) {
    fprintf(stderr, "bench_trace --micro-gpu: cannot trace to %s\n", trace);
    return 1;
  }
  if (!freopen("/dev/null", "w", stderr)) return 1; /* the summary */
  fbx_trace_session *s = fbx_trace_session_create("micro-gpu");
  fbx_trace_session_bind(s);
  enum { BATCHES = 7, PER_EVAL = 146, NODES = 4 };
  fbx_trace_op_site *sites[NODES];
  static const char *const ops[NODES] = {"MatMul", "FusedElementwise", "Softmax", "Transpose"};
  for (int k = 0; k < NODES; k++) {
    fbx_trace_op_site_desc sd = {.scope = s, .op = ops[k], .node = ops[k], .node_id = k, .device = "cuda"};
    sites[k] = fbx_trace_op_site_get(s, &sd);
  }
  double rec[BATCHES], fl[BATCHES];
  uint64_t t = fbx_trace_now_ns();
  for (int b = 0; b < BATCHES; b++) {
    double t0 = now_ns();
    uint64_t ev = 0;
    for (int i = 0; i < n; i++) {
      if (i % PER_EVAL == 0) {
        bool cap = false;
        ev = fbx_trace_gpu_eval_begin(&cap);
      }
      fbx_trace_gpu_act a = {.kind = 1, .name = "void gemv_f32<128>(float const*, float*, int)", .start_ns = t,
                             .end_ns = t + 2000, .stream = 7, .correlation = (uint32_t)i, .eval = ev,
                             .site = sites[(i / 2) % NODES], .grid = {96, 1, 1}, .block = {128, 1, 1},
                             .registers = 32, .shared_bytes = 0};
      t += 3000;
      fbx_trace_gpu_activity(&a);
    }
    double t1 = now_ns();
    fbx_trace_flush();
    double t2 = now_ns();
    rec[b] = (t1 - t0) / n;
    fl[b] = (t2 - t1) / n;
  }
  fbx_trace_gpu_drained(true);
  fbx_trace_session_bind(NULL);
  fbx_trace_session_destroy(s);
  printf("micro-gpu: %d records/batch x %d batches: %.1f ns/record (median), %.1f us per eval of %d records; "
         "flush %.1f ns/record\n", n, BATCHES, median(rec, BATCHES), median(rec, BATCHES) * PER_EVAL / 1e3, PER_EVAL,
         median(fl, BATCHES));
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--worker")) return worker(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  if (argc == 4 && !strcmp(argv[1], "--micro")) return micro(atoi(argv[2]), argv[3]);
  if (argc == 4 && !strcmp(argv[1], "--micro-gpu")) return micro_gpu(atoi(argv[2]), argv[3]);
  const char *lib = NULL, *lib_off = NULL, *model = "models/gen/decoder_small.onnx", *trace = "/tmp/bench_trace.json";
  int reps = 15, steps = 48, prompt = 16, rounds = 3;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_trace: %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--lib")) lib = v;
    else if (!strcmp(a, "--lib-off")) lib_off = v;
    else if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--trace")) trace = v;
    else if (!strcmp(a, "--reps")) reps = atoi(v);
    else if (!strcmp(a, "--steps")) steps = atoi(v);
    else if (!strcmp(a, "--prompt")) prompt = atoi(v);
    else if (!strcmp(a, "--rounds")) rounds = atoi(v);
    else if (!strcmp(a, "--threads")) setenv("BENCH_TRACE_THREADS", v, 1);
    else if (!strcmp(a, "--device")) setenv("BENCH_TRACE_DEVICE", v, 1);
    else if (!strcmp(a, "--warmup-ms")) setenv("BENCH_TRACE_WARMUP_MS", v, 1);
    else {
      fprintf(stderr, "bench_trace: unknown option %s (see the comment at the top of bench/bench_trace.c)\n", a);
      return 2;
    }
    i++;
  }
  if (!lib || !lib_off || reps < 1 || steps < 1 || prompt < 1 || rounds < 1) {
    fprintf(stderr, "usage: bench_trace --lib LIB --lib-off LIB_COMPILED_OUT [--reps N] [--steps N] [--prompt N]"
                    " [--rounds N] [--model M] [--trace FILE] [--threads N] [--device cpu|cuda] [--warmup-ms MS]\n");
    return 2;
  }
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) return 1;
  self[sl] = '\0';
  enum { OFF, UNSET, ON, NCFG };
  static const char *cfg_name[NCFG] = {"off (compiled out)", "unset (tracing built in)", "on (FUSEBOX_TRACE)"};
  /* v: each process's median round; w: its fastest round (interference only ever adds time, so the
   * fastest round of a process is the least disturbed view of it) */
  double *v[NCFG], *w[NCFG], *ra = calloc((size_t)reps, sizeof(double)), *rb = calloc((size_t)reps, sizeof(double));
  double *wa = calloc((size_t)reps, sizeof(double)), *wb = calloc((size_t)reps, sizeof(double));
  for (int c = 0; c < NCFG; c++) v[c] = calloc((size_t)reps, sizeof(double)), w[c] = calloc((size_t)reps, sizeof(double));
  const char *devname = getenv("BENCH_TRACE_DEVICE"), *corr = getenv("FUSEBOX_CUPTI_CORR");
  printf("bench_trace: %s, device %s%s%s, prompt %d, %d decode steps x %d rounds (first is warm-up) per process, %d "
         "reps\n", model, devname && *devname ? devname : "default", corr ? ", FUSEBOX_CUPTI_CORR=" : "", corr ? corr : "",
         prompt, steps, rounds, reps);
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < NCFG; k++) {
      int c = (k + r) % NCFG; /* rotate the order so no configuration always runs first */
      v[c][r] = run_worker(self, c == OFF ? lib_off : lib, c == ON ? trace : NULL, model, prompt, steps, rounds, &w[c][r]);
      if (v[c][r] < 0) {
        fprintf(stderr, "bench_trace: worker (%s) failed\n", cfg_name[c]);
        return 1;
      }
    }
    ra[r] = 100.0 * (v[UNSET][r] / v[OFF][r] - 1.0);
    rb[r] = 100.0 * (v[ON][r] / v[UNSET][r] - 1.0);
    wa[r] = 100.0 * (w[UNSET][r] / w[OFF][r] - 1.0);
    wb[r] = 100.0 * (w[ON][r] / w[UNSET][r] - 1.0);
    printf("  rep %2d: off %.4f  unset %.4f  on %.4f ms/token   (a) %+.2f%%  (b) %+.2f%%   fastest rounds: (a) %+.2f%%"
           "  (b) %+.2f%%\n", r + 1, v[OFF][r], v[UNSET][r], v[ON][r], ra[r], rb[r], wa[r], wb[r]);
    fflush(stdout);
  }
  for (int c = 0; c < NCFG; c++) printf("median %-26s %.4f ms/token\n", cfg_name[c], median(v[c], reps));
  double ma = median(ra, reps), mb = median(rb, reps);
  printf("overhead (a) tracing unset vs compiled out: %+.2f%% (median of paired ratios; goal <= 0.5%%)\n", ma);
  printf("overhead (b) FUSEBOX_TRACE on vs unset:    %+.2f%% (median of paired ratios; goal <= 5%%)\n", mb);
  printf("fastest-round ratios: (a) %+.2f%%  (b) %+.2f%% (median over reps of each process's fastest round)\n",
         median(wa, reps), median(wb, reps));
  for (int c = 0; c < NCFG; c++) free(v[c]), free(w[c]);
  free(ra);
  free(rb);
  free(wa);
  free(wb);
  return 0;
}
