// test_e2e_quant_unet: the quantize_dynamic-style U-Net (models/gen_unet_q.py: DynamicQuantizeLinear
// -> ConvInteger (uint8 weights, zero points) -> Cast -> Mul -> Add -> Relu, MaxPool, Resize, Concat)
// through real ORT with Fusebox registered. Checks, by ORT's own assignment view: every node on
// Fusebox, in at most 2 fused subgraphs (1 expected). Output against an independent reference, the
// numpy run of the quantized graph written by the generator (int64 convolution, float32 elementwise in
// the graph's order: models/gen/cases/unet_q_small/logits.npy), and against ORT's CPU EP (right for
// uint8 x uint8 ConvInteger; DESIGN.md says where it is not). Both must agree to 1e-4 of the output's
// scale: the float ops feeding each DynamicQuantizeLinear are the same ops in the same order, so a
// quantisation bucket flip (which would show as a large error) is a real bug.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <onnxruntime_c_api.h>

#include "common/check.h"
#include "common/ort_host.h"

static char *assignment(fbx_host *h, fbx_host_session *s, int *subgraphs, int *fbx_nodes, int *convint) {
  const OrtApi *api = fbx_host_ort_api(h);
  const OrtEpAssignedSubgraph *const *sgs = NULL;
  size_t n = 0;
  *subgraphs = *fbx_nodes = *convint = 0;
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
      (*fbx_nodes)++;
      if (!st && op) *convint += !strcmp(op, "ConvInteger");
    }
  }
  if (!st) return NULL;
  char *e = fbx_host_errf("assignment info: %s", api->GetErrorMessage(st));
  api->ReleaseStatus(st);
  return e;
}

static double max_abs_of(const fbx_host_tensor *t) {
  double m = 0;
  for (size_t i = 0; i < fbx_host_tensor_numel(t); i++) m = fmax(m, fabs(fbx_host_tensor_get(t, i)));
  return m;
}

int main(void) {
  char model[4096], xin[4096], ref[4096];
  if (fbx_host_find_repo_file("models/gen/unet_q_small.onnx", model, sizeof model) ||
      fbx_host_find_repo_file("models/gen/cases/unet_q_small/input.npy", xin, sizeof xin) ||
      fbx_host_find_repo_file("models/gen/cases/unet_q_small/logits.npy", ref, sizeof ref)) {
    fprintf(stderr, "test_e2e_quant_unet: models/gen/unet_q_small.onnx or its case missing (scripts/make_models.sh)\n");
    return 1;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  fbx_host_session *ort = NULL, *fbx = NULL;
  fbx_host_tensor x = {0}, r = {0}, *ya = NULL, *yb = NULL;
  size_t na = 0, nb = 0;
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.record_assignment = 1;
  o.intra_threads = 2;
  if (!err) err = fbx_host_session_create(h, model, &o, &ort);
  o.use_fusebox = 1;
  if (!err) err = fbx_host_session_create(h, model, &o, &fbx);
  int subgraphs = -1, nodes = -1, convint = -1;
  if (!err) err = assignment(h, fbx, &subgraphs, &nodes, &convint);
  if (!err) {
    CHECK(subgraphs >= 1 && subgraphs <= 2, "%d Fusebox subgraphs, expected 1 (at most 2)", subgraphs);
    CHECK(convint == 11, "%d ConvInteger nodes on Fusebox, expected all 11", convint);
    printf("Fusebox: %d nodes in %d subgraph(s), %d ConvInteger\n", nodes, subgraphs, convint);
  }
  if (!err) err = fbx_host_npy_read(xin, &x);
  if (!err) err = fbx_host_tensor_set_name(&x, "input");
  if (!err) err = fbx_host_npy_read(ref, &r);
  if (!err) err = fbx_host_session_run(ort, &x, 1, &ya, &na);
  if (!err) err = fbx_host_session_run(fbx, &x, 1, &yb, &nb);
  if (!err) {
    double tol = 1e-4 * fmax(1.0, max_abs_of(&r));
    fbx_host_cmp c1, c2;
    int ok1 = nb == 1 && fbx_host_compare(&yb[0], &r, 0, tol, &c1);
    CHECK(ok1, "Fusebox vs numpy reference: %zu of %zu beyond %g (max abs %g)", ok1 ? 0 : c1.n_bad, c1.numel, tol,
          c1.max_abs);
    int ok2 = nb == 1 && na == 1 && fbx_host_compare(&yb[0], &ya[0], 0, tol, &c2);
    CHECK(ok2, "Fusebox vs ORT CPU: %zu of %zu beyond %g (max abs %g)", ok2 ? 0 : c2.n_bad, c2.numel, tol,
          c2.max_abs);
    printf("max abs error: vs numpy %g, vs ORT %g (scale %g)\n", c1.max_abs, c2.max_abs, max_abs_of(&r));
  }
  CHECK(err == NULL, "%s", err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensors_free(ya, na);
  fbx_host_tensors_free(yb, nb);
  fbx_host_tensor_free(&x);
  fbx_host_tensor_free(&r);
  fbx_host_session_destroy(ort);
  fbx_host_session_destroy(fbx);
  if (h) fbx_host_close(h);
  printf("test_e2e_quant_unet: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
