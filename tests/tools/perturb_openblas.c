// perturb_openblas.c — a test-only stand-in for libopenblas.so.0 that plants a known divergence
// in Fusebox without any hook in the product. Built as build/tests/perturb_blas/libopenblas.so.0
// and put first on LD_LIBRARY_PATH of a `fusebox` process, it is what libfusebox_ep.so loads for
// its DT_NEEDED libopenblas.so.0. (An LD_PRELOAD cannot do this: ORT opens plugin EPs with
// RTLD_DEEPBIND, so the EP's own dependencies win over preloaded symbols.) It forwards the two
// symbols Fusebox uses to the real OpenBLAS (FBX_REAL_OPENBLAS, opened by path) and, when asked,
// moves every result of cblas_sgemm by 1% + 0.01. Fusebox's CPU backend runs a float MatMul of
// two activations through cblas_sgemm; ORT's CPU EP never calls it (it has MLAS).
//   FBX_TEST_SGEMM_PERTURB=1  perturb (unset: pass through unchanged)
//   FBX_TEST_SGEMM_MARK=FILE  append one line per perturbed call, so a test can tell "the plant
//                             was not reached" from "the tool missed it".
// Used by tests/tools/test_check_all_tensors.c.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                         const blasint, const blasint, const blasint, const float, const float *,
                         const blasint, const float *, const blasint, const float, float *, const blasint);
typedef void (*threads_fn)(int);

// The real library's symbol `name`, or NULL (then the caller does nothing: the test fails on
// its mark file, not here).
static void *real_sym(const char *name) {
  static void *lib;
  if (!lib) lib = dlopen(FBX_REAL_OPENBLAS, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "perturb_openblas: cannot open %s: %s\n", FBX_REAL_OPENBLAS, dlerror());
    return NULL;
  }
  return dlsym(lib, name);
}

void openblas_set_num_threads(int n) {
  threads_fn f = (threads_fn)real_sym("openblas_set_num_threads");
  if (f) f(n);
}

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                 const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                 const blasint ldc) {
  sgemm_fn real = (sgemm_fn)real_sym("cblas_sgemm");
  if (!real) return;
  real(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const char *on = getenv("FBX_TEST_SGEMM_PERTURB");
  if (!on || on[0] != '1') return;
  const char *mark = getenv("FBX_TEST_SGEMM_MARK");
  FILE *f = mark ? fopen(mark, "a") : NULL;
  if (f) {
    fprintf(f, "sgemm %d %d %d\n", (int)M, (int)N, (int)K);
    fclose(f);
  }
  // Fusebox calls it row-major: M rows of N, leading dimension ldc.
  for (blasint i = 0; i < M; i++)
    for (blasint j = 0; j < N; j++) {
      float *c = &C[(size_t)i * (size_t)ldc + (size_t)j];
      *c = *c * 1.01f + 0.01f;
    }
}
