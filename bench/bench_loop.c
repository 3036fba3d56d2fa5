// bench_loop — a recurrent cell inside a Loop or a Scan (models/gen_control_flow.py: loop_cell /
// scan_cell, hidden 32, 12 steps by default) through Fusebox and ORT's CPU EP in one process, the
// same intra-op threads. Per EP: median and minimum wall time per Run, and CPU time per Run (this
// thread's and the pool's: process CPU time over the block / runs), the ratio ORT/Fusebox (> 1:
// Fusebox faster), outputs checked against each other (h_last and ys).
//
// Interleaving: the two EPs take turns in blocks of --block runs, the order alternating per block;
// after every switch a 10 ms pause (the other pool's spinning workers go idle) and the block's
// first run is not timed.
//
// usage: bench_loop [--kind loop|scan] [--threads N] [--runs N] [--block N] [--steps N]
// Exit status 1 when the outputs differ by more than 1e-4 (or a run fails).
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_host.h"
#include "common/ort_host.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *load(const char *rel, fbx_host_tensor *t, const char *name) {
  char path[PATH_MAX];
  if (fbx_host_find_repo_file(rel, path, sizeof path)) return fbx_host_errf("%s not found (scripts/make_models.sh)", rel);
  char *e = fbx_host_npy_read(path, t);
  return e ? e : fbx_host_tensor_set_name(t, name);
}

int main(int argc, char **argv) {
  const char *kind = "loop";
  int threads = 2, runs = 600, block = 50, steps = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "bench_loop: %s needs a value\n", a); return 2; }
    if (strcmp(a, "--kind") == 0) kind = v;
    else if (strcmp(a, "--threads") == 0) threads = atoi(v);
    else if (strcmp(a, "--runs") == 0) runs = atoi(v);
    else if (strcmp(a, "--block") == 0) block = atoi(v);
    else if (strcmp(a, "--steps") == 0) steps = atoi(v);
    else { fprintf(stderr, "bench_loop: unknown option %s\n", a); return 2; }
    i++;
  }
  const bool loop = strcmp(kind, "loop") == 0;
  if ((!loop && strcmp(kind, "scan")) || threads < 1 || runs < 4 || block < 2) {
    fprintf(stderr, "bench_loop: bad arguments\n");
    return 2;
  }
  char rel[256], model[PATH_MAX];
  snprintf(rel, sizeof rel, "models/gen/%s_cell.onnx", kind);
  if (fbx_host_find_repo_file(rel, model, sizeof model)) {
    fprintf(stderr, "bench_loop: %s not found (scripts/make_models.sh)\n", rel);
    return 2;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "bench_loop: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  fbx_host_session *s[2] = {bench_open_session(h, model, 1, threads, "bench_loop"),
                            bench_open_session(h, model, 0, threads, "bench_loop")};
  fbx_host_tensor in[2];
  memset(in, 0, sizeof in);
  snprintf(rel, sizeof rel, "models/gen/cases/%s_cell/h0.npy", kind);
  err = load(rel, &in[0], "h0");
  snprintf(rel, sizeof rel, "models/gen/cases/%s_cell/%s.npy", kind, loop ? "steps" : "xs");
  if (!err) err = load(rel, &in[1], loop ? "steps" : "xs");
  if (!err && steps > 0 && loop) fbx_host_tensor_set(&in[1], 0, steps);
  int rc = 1;
  double *ms[2] = {calloc((size_t)runs, sizeof(double)), calloc((size_t)runs, sizeof(double))}, cpu[2] = {0, 0};
  int n_ms[2] = {0, 0};
  double maxd = 0;
  fbx_host_tensor *last[2] = {NULL, NULL};
  size_t n_last[2] = {0, 0};
  if (err || !s[0] || !s[1]) goto out;
  for (int r0 = 0, turn = 0; r0 < runs; r0 += block, turn++)
    for (int k = 0; k < 2; k++) {
      int e = (turn + k) % 2;
      fbx_host_settle(10);
      double c0 = 0;
      for (int r = r0; r < r0 + block && r < runs; r++) {
        if (r == r0 + 1) c0 = cpu_now();
        fbx_host_tensors_free(last[e], n_last[e]);
        last[e] = NULL;
        double t0 = fbx_host_now();
        if ((err = fbx_host_session_run(s[e], in, 2, &last[e], &n_last[e]))) goto out;
        if (r != r0) ms[e][n_ms[e]++] = (fbx_host_now() - t0) * 1e3;
      }
      if (c0 > 0) cpu[e] += cpu_now() - c0;
    }
  for (size_t o = 0; o < n_last[0] && o < n_last[1]; o++) {
    fbx_host_cmp c;
    fbx_host_compare(&last[0][o], &last[1][o], 0, 1e-4, &c);
    maxd = fmax(maxd, c.shape_mismatch ? INFINITY : c.max_abs);
  }
  long long n_steps = loop ? (long long)fbx_host_tensor_get(&in[1], 0) : (long long)in[1].dims[0];
  printf("%s, ORT %s, EP %s, threads %d, %d runs per EP in blocks of %d, steps %lld\n", model, fbx_host_ort_version(h),
         fbx_host_ep_path(h), threads, runs, block, n_steps);
  printf("| EP | median us/run | min us/run | CPU us/run |\n|---|---|---|---|\n");
  double med[2], mn[2];
  for (int e = 0; e < 2; e++) {
    qsort(ms[e], (size_t)n_ms[e], sizeof(double), bench_cmp_double);
    med[e] = ms[e][n_ms[e] / 2] * 1e3;
    mn[e] = ms[e][0] * 1e3;
    printf("| %s | %.1f | %.1f | %.1f |\n", e ? "ORT CPU" : "Fusebox", med[e], mn[e], cpu[e] / n_ms[e] * 1e6);
  }
  printf("ORT/Fusebox: median %.2fx, min %.2fx, CPU %.2fx; max |diff| of the outputs %.2g\n", med[1] / med[0],
         mn[1] / mn[0], cpu[1] / cpu[0], maxd);
  rc = maxd > 1e-4;
out:
  if (err) {
    fprintf(stderr, "bench_loop: %s\n", err);
    fbx_host_err_free(err);
  }
  for (int e = 0; e < 2; e++) {
    fbx_host_tensors_free(last[e], n_last[e]);
    free(ms[e]);
    fbx_host_session_destroy(s[e]);
    fbx_host_tensor_free(&in[e]);
  }
  fbx_host_close(h);
  return rc;
}
