// bench_partition: ORT's session-creation time on the "N independent pieces into one unclaimed
// node" model (issue 8, defect 8; tests/common/partition_models.h), ORT's CPU EP alone against ORT
// with Fusebox, and the number of fused subgraphs ORT reports for Fusebox
// (Session_GetEpGraphAssignmentInfo: ORT's view, not our own count).
//
//   bench_partition [--reps R] N...      (default: R=1, N = 500 1000 2000)
//
// Prints one line per N: median session-creation seconds of each, the fused subgraphs, and
// whether one Run of both sessions gave the same Y. ORT: $FUSEBOX_ORT_LIB or .deps (ort_host.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

#include "common/partition_models.h"
#include "common/ort_host.h"

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Fused subgraphs ORT assigned to Fusebox; -1 when the API is missing. */
static long fusebox_subgraphs(fbx_host *h, fbx_host_session *s) {
  const OrtApi *api = fbx_host_ort_api(h);
  const OrtEpAssignedSubgraph *const *sgs = NULL;
  size_t n = 0;
  OrtStatus *st = api->Session_GetEpGraphAssignmentInfo(fbx_host_session_ort(s), &sgs, &n);
  if (st) {
    api->ReleaseStatus(st);
    return -1;
  }
  long k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *ep = NULL;
    st = api->EpAssignedSubgraph_GetEpName(sgs[i], &ep);
    if (st) api->ReleaseStatus(st);
    else k += ep && strcmp(ep, FBX_HOST_EP_NAME) == 0;
  }
  return k;
}

/* Creates a session reps times (keeping the last), returns the median seconds or -1. */
static double create(fbx_host *h, const char *path, int fusebox, int reps, fbx_host_session **out) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.record_assignment = 1;
  double *t = calloc((size_t)reps, sizeof *t);
  *out = NULL;
  for (int r = 0; r < reps; r++) {
    fbx_host_session_destroy(*out);
    *out = NULL;
    double t0 = fbx_host_now();
    char *err = fbx_host_session_create(h, path, &o, out);
    t[r] = fbx_host_now() - t0;
    if (err) {
      fprintf(stderr, "bench_partition: %s\n", err);
      fbx_host_err_free(err);
      free(t);
      return -1;
    }
  }
  qsort(t, (size_t)reps, sizeof *t, dbl_cmp);
  double m = t[reps / 2];
  free(t);
  return m;
}

static int run_one(fbx_host *h, int n, int reps) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/bench_partition_%d_%d.onnx", n, (int)getpid());
  char *err = fbx_fanin_model_write(path, n, 8);
  if (err) {
    fprintf(stderr, "bench_partition: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  fbx_host_session *ort = NULL, *fbx = NULL;
  double t_ort = create(h, path, 0, reps, &ort);
  double t_fbx = create(h, path, 1, reps, &fbx);
  long sg = fbx ? fusebox_subgraphs(h, fbx) : -1;
  int same = 0;
  if (ort && fbx) {
    fbx_host_tensor x = {0}, *ya = NULL, *yb = NULL;
    size_t na = 0, nb = 0;
    int64_t dims[2] = {1, 8};
    err = fbx_host_tensor_alloc(&x, "X", FBX_HOST_F32, 2, dims);
    if (!err) fbx_host_tensor_fill_normal(&x, 7);
    if (!err) err = fbx_host_session_run(ort, &x, 1, &ya, &na);
    if (!err) err = fbx_host_session_run(fbx, &x, 1, &yb, &nb);
    fbx_host_cmp c;
    same = !err && na == 1 && nb == 1 && fbx_host_compare(&yb[0], &ya[0], 0, 0, &c);
    if (err) fprintf(stderr, "bench_partition: %s\n", err);
    fbx_host_err_free(err);
    fbx_host_tensors_free(ya, na);
    fbx_host_tensors_free(yb, nb);
    fbx_host_tensor_free(&x);
  }
  printf("N=%-5d ORT alone %8.3f s   ORT+Fusebox %8.3f s   fused subgraphs %ld   outputs %s\n", n, t_ort,
         t_fbx, sg, same ? "equal" : "DIFFER");
  fflush(stdout);
  fbx_host_session_destroy(ort);
  fbx_host_session_destroy(fbx);
  unlink(path);
  return !(t_ort >= 0 && t_fbx >= 0 && same);
}

int main(int argc, char **argv) {
  int reps = 1, ns[32], n_ns = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (n_ns < 32 && atoi(argv[i]) > 0) ns[n_ns++] = atoi(argv[i]);
    else {
      fprintf(stderr, "usage: bench_partition [--reps R] N...\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (!n_ns) {
    ns[0] = 500, ns[1] = 1000, ns[2] = 2000;
    n_ns = 3;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "bench_partition: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  printf("ORT %s, Fusebox %s\n", fbx_host_ort_version(h), fbx_host_ep_path(h));
  for (int i = 0; i < n_ns; i++) bad |= run_one(h, ns[i], reps);
  fbx_host_close(h);
  return bad;
}
