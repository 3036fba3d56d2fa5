/* Helpers for the CPU backend tests: tensors, a fixed-seed RNG, running one
 * node through the backend vtable, and tolerant comparison. Each test keeps
 * its own naive reference (plain loops, double accumulation). */
#ifndef FBX_TEST_CPU_UTIL_H
#define FBX_TEST_CPU_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

static int g_pass, g_fail;
static fbx_backend *g_be;
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static inline double rnd(void) { /* uniform [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

static inline fbx_tensor tmake(fbx_dtype dt, int rank, const int64_t *dims) {
  fbx_tensor t = {.dtype = dt, .rank = rank};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  size_t n = fbx_tensor_nbytes(&t);
  t.data = calloc(1, n ? n : 8);
  return t;
}
#define T(dt, ...) tmake(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static inline fbx_tensor tscalar(fbx_dtype dt) { return tmake(dt, 0, NULL); }
static inline fbx_tensor tabsent(void) { fbx_tensor t = {.rank = -1}; return t; }
static inline void tfree(fbx_tensor *t) { free(t->data); t->data = NULL; }
static inline float *F(const fbx_tensor *t) { return (float *)t->data; }
static inline int64_t *L(const fbx_tensor *t) { return (int64_t *)t->data; }
static inline void frand(fbx_tensor *t) {
  int64_t n = fbx_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) F(t)[i] = (float)rnd();
}

static inline void check(int ok, const char *fmt, ...) {
  if (ok) { g_pass++; return; }
  g_fail++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* max relative error (|a-b| / max(1, |b|)) */
static inline int fclose_arr(const float *a, const double *ref, int64_t n, double tol, const char *what) {
  double worst = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
    if (!(e <= worst)) { worst = e; wi = i; }
  }
  int ok = worst <= tol;
  check(ok, "%s: max rel err %g at %lld (got %g want %g)", what, worst, (long long)wi,
        wi >= 0 ? a[wi] : 0.0, wi >= 0 ? ref[wi] : 0.0);
  return ok;
}

static inline fbx_status *run_node(fbx_ir_op op, const fbx_ir_params *p, fbx_tensor *in, int n_in,
                            fbx_tensor *out, int n_out, void *state) {
  fbx_ir_node nd = {.op = op, .n_inputs = n_in, .n_outputs = n_out};
  if (p) nd.params = *p;
  fbx_kernel_info info;
  return g_be->vt->run_node(g_be, &nd, state, in, n_in, out, n_out, &info);
}

static inline void run_ok(const char *what, fbx_ir_op op, const fbx_ir_params *p, fbx_tensor *in, int n_in,
                   fbx_tensor *out, int n_out) {
  fbx_status *st = run_node(op, p, in, n_in, out, n_out, NULL);
  check(st == NULL, "%s: run failed: %s", what, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
}

static inline void test_setup(int threads) {
  fbx_cpu_options o = {.threads = threads};
  fbx_status *st = fbx_cpu_backend_create(&o, &g_be);
  if (st) {
    fprintf(stderr, "backend create failed: %s\n", fbx_status_message(st));
    exit(2);
  }
}

static inline int test_finish(const char *name) {
  fbx_backend_destroy(g_be);
  printf("%s: %d passed, %d failed\n", name, g_pass, g_fail);
  return g_fail ? 1 : 0;
}

#endif
