// test_e2e_partition: N = 2,000 independent Adds feeding one Concat that Fusebox declines
// (2,000 inputs, more than it takes) — issue 8, defect 8. Before, each Add was its own fused
// subgraph and ORT's session creation took about a minute; now the Adds are one fused subgraph.
// Checks, through real ORT: ORT's own assignment view (Session_GetEpGraphAssignmentInfo) shows
// exactly one Fusebox subgraph holding all 2,000 Adds, the Concat on ORT's CPU EP, and the output
// equals both the hand-computed Y[i*W + j] = X[j] + i and ORT's CPU EP alone. No timing asserted.
// Then the cap: a chain of 150 Adds, each behind a ReverseSequence Fusebox declines, is 150
// groups that may not merge; ORT reports exactly FBX_ONNX_CLUSTER_MAX_GROUPS = 128 Fusebox
// subgraphs (the other 22 Adds on its CPU EP), and the output equals ORT alone and a naive
// reference.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

#include "common/partition_models.h"
#include "onnx/onnx_cluster.h" /* FBX_ONNX_CLUSTER_MAX_GROUPS */
#include "common/ort_host.h"

#include "common/check.h"

enum { N = 2000, W = 8 };

// Fusebox subgraphs and the nodes in them, as ORT reports them.
static char *fusebox_assignment(fbx_host *h, fbx_host_session *s, int *subgraphs, int *adds, int *concats) {
  const OrtApi *api = fbx_host_ort_api(h);
  const OrtEpAssignedSubgraph *const *sgs = NULL;
  size_t n = 0;
  *subgraphs = *adds = *concats = 0;
  OrtStatus *st = api->Session_GetEpGraphAssignmentInfo(fbx_host_session_ort(s), &sgs, &n);
  for (size_t i = 0; i < n && !st; i++) {
    const char *ep = NULL;
    const OrtEpAssignedNode *const *nodes = NULL;
    size_t nn = 0;
    st = api->EpAssignedSubgraph_GetEpName(sgs[i], &ep);
    if (!st) st = api->EpAssignedSubgraph_GetNodes(sgs[i], &nodes, &nn);
    if (st || !ep || strcmp(ep, FBX_HOST_EP_NAME) != 0) continue;
    (*subgraphs)++;
    for (size_t j = 0; j < nn && !st; j++) {
      const char *op = NULL;
      st = api->EpAssignedNode_GetOperatorType(nodes[j], &op);
      if (!st && op) *adds += !strcmp(op, "Add"), *concats += !strcmp(op, "Concat");
    }
  }
  if (!st) return NULL;
  char *e = fbx_host_errf("assignment info: %s", api->GetErrorMessage(st));
  api->ReleaseStatus(st);
  return e;
}

static void test_fanin(fbx_host *h) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/test_e2e_partition_%d.onnx", (int)getpid());
  fbx_host_session *ort = NULL, *fbx = NULL;
  fbx_host_tensor x = {0}, *ya = NULL, *yb = NULL;
  size_t na = 0, nb = 0;
  char *err = fbx_fanin_model_write(path, N, W);
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.record_assignment = 1;
  if (!err) err = fbx_host_session_create(h, path, &o, &ort);
  o.use_fusebox = 1;
  if (!err) err = fbx_host_session_create(h, path, &o, &fbx);
  int subgraphs = -1, adds = -1, concats = -1;
  if (!err) err = fusebox_assignment(h, fbx, &subgraphs, &adds, &concats);
  if (!err) {
    CHECK(subgraphs == 1, "%d fused subgraphs for %d independent Adds, expected 1", subgraphs, N);
    CHECK(adds == N && concats == 0, "Fusebox holds %d Adds (expected %d) and %d Concats (expected 0)", adds, N,
          concats);
  }
  int64_t dims[2] = {1, W};
  if (!err) err = fbx_host_tensor_alloc(&x, "X", FBX_HOST_F32, 2, dims);
  if (!err) {
    fbx_host_tensor_fill_normal(&x, 11);
    err = fbx_host_session_run(ort, &x, 1, &ya, &na);
  }
  if (!err) err = fbx_host_session_run(fbx, &x, 1, &yb, &nb);
  if (!err) {
    CHECK(na == 1 && nb == 1 && fbx_host_tensor_numel(&yb[0]) == (size_t)N * W, "one output of %d elements",
          N * W);
    fbx_host_cmp c;
    CHECK(na == 1 && nb == 1 && fbx_host_compare(&yb[0], &ya[0], 0, 0, &c), "Fusebox output equals ORT's");
    size_t bad = 0;
    const float *xs = x.data, *y = nb == 1 ? yb[0].data : NULL;
    for (int i = 0; y && i < N; i++)
      for (int j = 0; j < W; j++) bad += y[(size_t)i * W + j] != xs[j] + (float)i;
    CHECK(y && bad == 0, "%zu elements differ from X[j] + i", bad);
  }
  CHECK(err == NULL, "fan-in: %s", err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensors_free(ya, na);
  fbx_host_tensors_free(yb, nb);
  fbx_host_tensor_free(&x);
  fbx_host_session_destroy(ort);
  fbx_host_session_destroy(fbx);
  unlink(path);
}

enum { CHAIN = 150 };

static void test_chain_cap(fbx_host *h) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/test_e2e_partition_chain_%d.onnx", (int)getpid());
  fbx_host_session *ort = NULL, *fbx = NULL;
  fbx_host_tensor x = {0}, *ya = NULL, *yb = NULL;
  size_t na = 0, nb = 0;
  char *err = fbx_chain_model_write(path, CHAIN, W);
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.record_assignment = 1;
  if (!err) err = fbx_host_session_create(h, path, &o, &ort);
  o.use_fusebox = 1;
  if (!err) err = fbx_host_session_create(h, path, &o, &fbx);
  int subgraphs = -1, adds = -1, concats = -1;
  if (!err) err = fusebox_assignment(h, fbx, &subgraphs, &adds, &concats);
  if (!err)
    CHECK(subgraphs == FBX_ONNX_CLUSTER_MAX_GROUPS && adds == FBX_ONNX_CLUSTER_MAX_GROUPS,
          "chain of %d separated Adds: %d Fusebox subgraphs holding %d Adds, expected %d of each", CHAIN, subgraphs,
          adds, FBX_ONNX_CLUSTER_MAX_GROUPS);
  int64_t dims[2] = {2, W};
  if (!err) err = fbx_host_tensor_alloc(&x, "X", FBX_HOST_F32, 2, dims);
  if (!err) {
    fbx_host_tensor_fill_normal(&x, 12);
    err = fbx_host_session_run(ort, &x, 1, &ya, &na);
  }
  if (!err) err = fbx_host_session_run(fbx, &x, 1, &yb, &nb);
  if (!err) {
    fbx_host_cmp c;
    CHECK(na == 1 && nb == 1 && fbx_host_compare(&yb[0], &ya[0], 0, 0, &c), "chain: Fusebox output equals ORT's");
    float ref[2][W]; /* y += i, then swap the rows, CHAIN times */
    memcpy(ref, x.data, sizeof ref);
    for (int i = 0; i < CHAIN; i++)
      for (int j = 0; j < W; j++) {
        float r0 = ref[0][j] + (float)i, r1 = ref[1][j] + (float)i;
        ref[0][j] = r1;
        ref[1][j] = r0;
      }
    CHECK(nb == 1 && yb[0].nbytes == sizeof ref && memcmp(yb[0].data, ref, sizeof ref) == 0,
          "chain: output equals the naive reference");
  }
  CHECK(err == NULL, "chain: %s", err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensors_free(ya, na);
  fbx_host_tensors_free(yb, nb);
  fbx_host_tensor_free(&x);
  fbx_host_session_destroy(ort);
  fbx_host_session_destroy(fbx);
  unlink(path);
}

int main(void) {
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  test_fanin(h);
  test_chain_cap(h);
  fbx_host_close(h);
  printf("%s\n", failed ? "test_e2e_partition: FAILED" : "test_e2e_partition: ok");
  return failed ? 1 : 0;
}
