/* Pieces every ORT-hosted benchmark needs: a session on Fusebox or on ORT's
 * CPU EP with the same intra-op thread count, and a comparator for medians. */
#ifndef FBX_BENCH_HOST_H
#define FBX_BENCH_HOST_H

#include <stdio.h>

#include "common/ort_host.h"

/* A session of model on Fusebox (fusebox != 0, EP option threads=N) or ORT's
 * CPU EP, both with `threads` intra-op threads. NULL after printing
 * "<prog>: MODEL (EP): error" on failure. */
static inline fbx_host_session *bench_open_session(fbx_host *h, const char *model, int fusebox, int threads,
                                                   const char *prog) {
  fbx_host_session *s = NULL;
  char *err = fbx_host_session_create_threads(h, model, fusebox, threads, 0, &s);
  if (err) {
    fprintf(stderr, "%s: %s (%s): %s\n", prog, model, fusebox ? "Fusebox" : "ORT CPU", err);
    fbx_host_err_free(err);
  }
  return s;
}

/* qsort comparator for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
