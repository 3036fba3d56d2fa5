// test_e2e_quant_bert: quantize_dynamic-style BERT encoders (models/gen_bert_q.py: DynamicQuantizeLinear
// -> MatMulInteger -> Cast -> Mul(a_scale * w_scale) -> Add(bias) for Q/K/V/O and the FFN, LayerNorm,
// Erf-Gelu and Softmax attention in float) through real ORT with Fusebox registered. Three variants: s8
// weights per tensor (quantize_dynamic's default), u8 weights per column with non-zero zero points
// (per_channel=True), and one row (seq 1, the decoder-step shape: every MatMulInteger is a GEMV).
// Checks, by ORT's own assignment view: every node on Fusebox, in one fused subgraph, all 12
// MatMulInteger among them. Output against an independent reference, the numpy run of the quantized
// graph written by the generator (exact int64 MatMulInteger; float ops in float32, graph order), and
// against ORT's CPU EP.
//
// Tolerance: the integer sums are exact and the Cast/Mul/Add chain is the same float32 ops in the same
// order, but LayerNorm, Softmax, Erf and the float attention MatMuls are not bit-identical across
// implementations (numpy evaluates them in float64 then rounds; ORT and Fusebox in float32), and a
// one-ulp difference in a DynamicQuantizeLinear input can move that element to the next uint8 bucket
// (DESIGN.md). One flipped bucket changes one input of the next MatMulInteger by one a_scale step
// (~range/255), i.e. its outputs by about a_scale * |w| ~ 1e-3 of the output's scale per flip. So: max
// abs error <= 2e-2 * max(1, max |ref|) (a few flips, compounded over two layers) and mean abs error
// <= 1e-3 * max(1, max |ref|) (flips are rare; a systematic error, e.g. a wrong zero point or scale,
// moves every element and fails this by orders of magnitude).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <onnxruntime_c_api.h>

#include "common/check.h"
#include "common/ort_host.h"

static char *assignment(fbx_host *h, fbx_host_session *s, int *subgraphs, int *fbx_nodes, int *other_nodes, int *mmint) {
  const OrtApi *api = fbx_host_ort_api(h);
  const OrtEpAssignedSubgraph *const *sgs = NULL;
  size_t n = 0;
  *subgraphs = *fbx_nodes = *other_nodes = *mmint = 0;
  OrtStatus *st = api->Session_GetEpGraphAssignmentInfo(fbx_host_session_ort(s), &sgs, &n);
  for (size_t i = 0; i < n && !st; i++) {
    const char *ep = NULL;
    const OrtEpAssignedNode *const *nodes = NULL;
    size_t nn = 0;
    st = api->EpAssignedSubgraph_GetEpName(sgs[i], &ep);
    if (!st) st = api->EpAssignedSubgraph_GetNodes(sgs[i], &nodes, &nn);
    if (st || !ep || strcmp(ep, FBX_HOST_EP_NAME) != 0) {
      *other_nodes += (int)nn;
      continue;
    }
    (*subgraphs)++;
    for (size_t j = 0; j < nn && !st; j++) {
      const char *op = NULL;
      st = api->EpAssignedNode_GetOperatorType(nodes[j], &op);
      (*fbx_nodes)++;
      if (!st && op) *mmint += !strcmp(op, "MatMulInteger");
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

static double mean_abs_diff(const fbx_host_tensor *a, const fbx_host_tensor *b) {
  size_t n = fbx_host_tensor_numel(a);
  if (n != fbx_host_tensor_numel(b) || n == 0) return INFINITY;
  double s = 0;
  for (size_t i = 0; i < n; i++) s += fabs(fbx_host_tensor_get(a, i) - fbx_host_tensor_get(b, i));
  return s / (double)n;
}

static void one_model(fbx_host *h, const char *name) {
  char rel[512], model[4096], xin[4096], ref[4096];
  snprintf(rel, sizeof rel, "models/gen/%s.onnx", name);
  int miss = fbx_host_find_repo_file(rel, model, sizeof model);
  snprintf(rel, sizeof rel, "models/gen/cases/%s/input.npy", name);
  miss |= fbx_host_find_repo_file(rel, xin, sizeof xin);
  snprintf(rel, sizeof rel, "models/gen/cases/%s/last_hidden.npy", name);
  miss |= fbx_host_find_repo_file(rel, ref, sizeof ref);
  CHECK(!miss, "%s: model or its case missing (scripts/make_models.sh)", name);
  if (miss) return;
  char *err = NULL;
  fbx_host_session *ort = NULL, *fbx = NULL;
  fbx_host_tensor x = {0}, r = {0}, *ya = NULL, *yb = NULL;
  size_t na = 0, nb = 0;
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.record_assignment = 1;
  o.intra_threads = 2;
  err = fbx_host_session_create(h, model, &o, &ort);
  o.use_fusebox = 1;
  if (!err) err = fbx_host_session_create(h, model, &o, &fbx);
  int subgraphs = -1, nodes = -1, others = -1, mmint = -1;
  if (!err) err = assignment(h, fbx, &subgraphs, &nodes, &others, &mmint);
  if (!err) { /* ORT's optimizer drops the output Identity before partitioning: 110 of the 111 nodes */
    CHECK(subgraphs == 1, "%s: %d Fusebox subgraphs, expected 1", name, subgraphs);
    CHECK(others == 0 && nodes >= 110, "%s: %d nodes on Fusebox, %d elsewhere, expected all (>= 110) on Fusebox",
          name, nodes, others);
    CHECK(mmint == 12, "%s: %d MatMulInteger nodes on Fusebox, expected all 12", name, mmint);
    printf("%s: Fusebox: %d nodes in %d subgraph(s), %d MatMulInteger\n", name, nodes, subgraphs, mmint);
  }
  if (!err) err = fbx_host_npy_read(xin, &x);
  if (!err) err = fbx_host_tensor_set_name(&x, "hidden");
  if (!err) err = fbx_host_npy_read(ref, &r);
  if (!err) err = fbx_host_session_run(ort, &x, 1, &ya, &na);
  if (!err) err = fbx_host_session_run(fbx, &x, 1, &yb, &nb);
  if (!err && (nb != 1 || na != 1)) err = fbx_host_errf("%s: %zu / %zu outputs, expected 1", name, nb, na);
  if (!err) {
    double scale = fmax(1.0, max_abs_of(&r)), tol = 2e-2 * scale, mtol = 1e-3 * scale;
    fbx_host_cmp c1, c2, c3;
    int ok1 = fbx_host_compare(&yb[0], &r, 0, tol, &c1);
    double m1 = mean_abs_diff(&yb[0], &r);
    CHECK(ok1 && m1 <= mtol, "%s: Fusebox vs numpy reference: %zu of %zu beyond %g (max abs %g), mean abs %g (<= %g)",
          name, c1.n_bad, c1.numel, tol, c1.max_abs, m1, mtol);
    int ok2 = fbx_host_compare(&yb[0], &ya[0], 0, tol, &c2);
    double m2 = mean_abs_diff(&yb[0], &ya[0]);
    CHECK(ok2 && m2 <= mtol, "%s: Fusebox vs ORT CPU: %zu of %zu beyond %g (max abs %g), mean abs %g (<= %g)", name,
          c2.n_bad, c2.numel, tol, c2.max_abs, m2, mtol);
    fbx_host_compare(&ya[0], &r, 0, tol, &c3);
    printf("%s: max abs / mean abs error: Fusebox vs numpy %g / %g, Fusebox vs ORT %g / %g, ORT vs numpy %g / %g "
           "(scale %g)\n", name, c1.max_abs, m1, c2.max_abs, m2, c3.max_abs, mean_abs_diff(&ya[0], &r), scale);
  }
  CHECK(err == NULL, "%s: %s", name, err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensors_free(ya, na);
  fbx_host_tensors_free(yb, nb);
  fbx_host_tensor_free(&x);
  fbx_host_tensor_free(&r);
  fbx_host_session_destroy(ort);
  fbx_host_session_destroy(fbx);
}

int main(void) {
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  CHECK(err == NULL, "%s", err ? err : "");
  if (!err) {
    one_model(h, "bert_q_tiny");
    one_model(h, "bert_q_tiny_pc_u8");
    one_model(h, "bert_q_tiny_m1");
  }
  fbx_host_err_free(err);
  if (h) fbx_host_close(h);
  printf("test_e2e_quant_bert: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
