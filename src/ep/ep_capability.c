/* GetCapability: describe the graph, ask the registry per node, build convex
 * groups and hand each to ORT as one fused node. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../onnx/onnx_cluster.h"
#include "../onnx/onnx_rank.h"
#include "../onnx/onnx_registry.h"
#include "ep_graph.h"
#include "ep_supports.h"

#define FBX_REASON_SIZE 192
#define FBX_MIN_GROUP_NODES 1   /* claim everything claimable */

/* Per unclaimed op type: the fusebox.getcapability "fallback_<Op>" argument,
 * "<count>x: <reason of the first node> [<up to 3 node names>]". */
typedef struct fallback {
  const char *op_type;
  int first;       /* node index of the first unclaimed node of this op */
  int count;
  int names[3];
} fallback;

static void trace_getcapability(const fbx_onnx_graph *g, const int *cluster_of, const char *reasons,
                                int claimed, int n_groups) {
  int n = g->n_nodes;
  fallback *fb = fbx_calloc((size_t)(n ? n : 1), sizeof *fb);
  fbx_trace_arg *args = fbx_calloc((size_t)n + 3, sizeof *args);
  char *text = fbx_malloc((size_t)(n ? n : 1) * 512);
  if (!fb || !args || !text) goto done;
  int nfb = 0;
  for (int i = 0; i < n; i++) {
    if (cluster_of[i] >= 0) continue;
    int k = 0;
    while (k < nfb && strcmp(fb[k].op_type, g->nodes[i].op_type) != 0) k++;
    if (k == nfb) {
      fb[nfb].op_type = g->nodes[i].op_type;
      fb[nfb].first = i;
      nfb++;
    }
    if (fb[k].count < 3) fb[k].names[fb[k].count] = i;
    fb[k].count++;
  }
  int na = 0;
  args[na++] = FBX_TARG_I("claimed", claimed);
  args[na++] = FBX_TARG_I("total", n);
  args[na++] = FBX_TARG_I("fused_subgraphs", n_groups);
  for (int k = 0; k < nfb; k++) {
    char *key = text + (size_t)k * 512, *val = key + 128;
    snprintf(key, 128, "fallback_%s", fb[k].op_type);
    int len = snprintf(val, 384, "%dx: %s [", fb[k].count, reasons + (size_t)fb[k].first * FBX_REASON_SIZE);
    int shown = fb[k].count < 3 ? fb[k].count : 3;
    for (int j = 0; j < shown && len > 0 && len < 380; j++)
      len += snprintf(val + len, (size_t)(384 - len), "%s%s", j ? ", " : "", g->nodes[fb[k].names[j]].name);
    if (len > 0 && len < 382) snprintf(val + len, (size_t)(384 - len), "]");
    args[na++] = FBX_TARG_S(key, val);
  }
  fbx_trace_instant("fusebox.getcapability", "ep", args, na);
done:
  fbx_free(fb);
  fbx_free(args);
  fbx_free(text);
}

/* The device's say on node ni of g, body graphs included: an If, Loop or
 * Scan runs its bodies through the executor, which reads conditions, trip
 * counts and slices on the host, so it needs a host-visible engine; every
 * node of its bodies must be one the device runs. */
static bool backend_takes(fbx_ep *ep, const fbx_onnx_graph *g, int ni, char *r, size_t cap) {
  const fbx_onnx_node *n = &g->nodes[ni];
  if (!n->n_subgraphs) return fbx_ep_backend_supports_node(ep->backend, g, ni, r, cap);
  if (!ep->backend->vt->host_visible) {
    snprintf(r, cap, "%s: device '%s': the executor runs its body graphs from the host (reading conditions, "
             "trip counts and slices there); this device's memory is not host-visible", n->op_type,
             ep->backend->vt->name);
    return false;
  }
  for (int k = 0; k < n->n_subgraphs; k++)
    for (int i = 0; i < n->subgraphs[k]->n_nodes; i++)
      if (!backend_takes(ep, n->subgraphs[k], i, r, cap)) return false;
  return true;
}

/* Whether Fusebox takes node ni of g, as far as the node itself goes (the
 * registry, then the device). */
static bool node_takes(fbx_ep *ep, const fbx_onnx_graph *g, int ni, char *r, size_t cap) {
  if (g->nodes[ni].n_subgraphs && !ep->backend->vt->host_visible) /* the device's reason first: it is */
    return backend_takes(ep, g, ni, r, cap);                      /* the same at every level of nesting */
  return fbx_onnx_node_claimable(g, ni, r, cap) && backend_takes(ep, g, ni, r, cap);
}

/* A body graph of an If, Loop or Scan that Fusebox will claim whole (with
 * its bodies) at its own level: ORT partitions bottom up, so the body is
 * asked first, and it must stay unclaimed (ORT would otherwise fuse its
 * nodes and the parent would no longer be describable). *parent_name gets
 * "<op> '<name>'". */
static bool body_of_claimed_if(fbx_ep *ep, const OrtGraph *graph, char *parent_name, size_t cap) {
  const OrtNode *par = NULL;
  OrtStatus *os = FBX_ORT->Graph_GetParentNode(graph, &par);
  if (os) {
    FBX_ORT->ReleaseStatus(os);
    return false;
  }
  if (!par) return false;
  fbx_ep_graph pd;
  fbx_status *st = fbx_ep_graph_build_node(par, &pd);
  if (st) { /* not describable: the body is claimed on its own, as before */
    fbx_status_free(st);
    return false;
  }
  char r[FBX_REASON_SIZE];
  /* output ranks ORT left unknown (a Loop's or Scan's inner values), as the parent's own call infers them */
  st = fbx_onnx_graph_infer_ranks(&pd.g);
  if (st) {
    fbx_status_free(st);
    fbx_ep_graph_free(&pd);
    return false;
  }
  bool yes = pd.g.n_nodes == 1 && pd.g.nodes[0].n_subgraphs > 0 && node_takes(ep, &pd.g, 0, r, sizeof r);
  snprintf(parent_name, cap, "%s '%s'", pd.g.nodes[0].op_type ? pd.g.nodes[0].op_type : "?",
           pd.g.nodes[0].name ? pd.g.nodes[0].name : "");
  fbx_ep_graph_free(&pd);
  return yes;
}

static fbx_status *capability(fbx_ep *ep, const OrtGraph *graph, OrtEpGraphSupportInfo *info) {
  fbx_ep_graph d;
  FBX_TRY(fbx_ep_graph_build(graph, NULL, &d));
  const fbx_onnx_graph *g = &d.g;
  int n = g->n_nodes;
  fbx_status *st = NULL;
  /* ranks/dims ORT left unknown: inferred[v] marks values we filled in */
  bool *inferred = fbx_calloc((size_t)(d.g.n_values ? d.g.n_values : 1), sizeof(bool));
  if (!inferred) {
    fbx_ep_graph_free(&d);
    return FBX_ERR_OOM();
  }
  st = fbx_onnx_graph_infer_shapes(&d.g, inferred);
  if (st) {
    fbx_free(inferred);
    fbx_ep_graph_free(&d);
    return st;
  }
  bool *claimed = fbx_calloc((size_t)(n ? n : 1), sizeof(bool));
  int *cluster_of = fbx_malloc((size_t)(n ? n : 1) * sizeof(int));
  char *reasons = fbx_calloc((size_t)(n ? n : 1), FBX_REASON_SIZE);
  const OrtNode **group = fbx_malloc((size_t)(n ? n : 1) * sizeof *group);
  if (!claimed || !cluster_of || !reasons || !group) {
    st = FBX_ERR_OOM();
    goto done;
  }
  char parent_if[128];
  if (body_of_claimed_if(ep, graph, parent_if, sizeof parent_if)) {
    /* compiled with its If/Loop/Scan, one level up: nothing claimed or counted here */
    if (fbx_trace_flags() & FBX_TRACE_F_CLAIM)
      for (int i = 0; i < n; i++)
        fprintf(stderr, "[fusebox] claim %s (%s): later, with %s (claimed with its bodies)\n",
                g->nodes[i].name, g->nodes[i].op_type, parent_if);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    char *r = reasons + (size_t)i * FBX_REASON_SIZE;
    /* the registry says what Fusebox can translate; the device says what it runs */
    claimed[i] = node_takes(ep, g, i, r, FBX_REASON_SIZE);
    if (!claimed[i] && !r[0]) snprintf(r, FBX_REASON_SIZE, "not supported");
  }
  int n_groups = 0;
  do { /* an inferred-rank value must not enter a group from outside (Compile would not know it) */
    st = fbx_onnx_cluster(g, claimed, FBX_MIN_GROUP_NODES, FBX_ONNX_CLUSTER_MAX_GROUPS, cluster_of, &n_groups);
    if (st) goto done;
  } while (fbx_onnx_rank_guard(g, inferred, cluster_of, claimed, reasons, FBX_REASON_SIZE) > 0);
  for (int i = 0; i < n; i++) { /* claimable but released by clustering */
    char *r = reasons + (size_t)i * FBX_REASON_SIZE;
    if (claimed[i] && cluster_of[i] == FBX_ONNX_CLUSTER_OVER_LIMIT)
      snprintf(r, FBX_REASON_SIZE,
               "more than %d separate fused groups in this graph: the smallest groups are left to ORT",
               FBX_ONNX_CLUSTER_MAX_GROUPS);
    else if (claimed[i] && cluster_of[i] < 0)
      snprintf(r, FBX_REASON_SIZE, "fused group smaller than %d nodes", FBX_MIN_GROUP_NODES);
  }

  OrtNodeFusionOptions fopt;
  memset(&fopt, 0, sizeof fopt);
  fopt.ort_version_supported = ORT_API_VERSION;
  fopt.drop_constant_initializers = true; /* ep_compile.c copies them */
  int n_claimed = 0;
  for (int c = 0; c < n_groups; c++) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (cluster_of[i] == c) group[k++] = d.ort_nodes[i];
    n_claimed += k;
    OrtStatus *os = FBX_ORT_EP->EpGraphSupportInfo_AddNodesToFuse(info, group, (size_t)k, &fopt);
    if (os) {
      st = fbx_ep_status_from_ort(os, "EpGraphSupportInfo_AddNodesToFuse");
      goto done;
    }
  }

  if (fbx_trace_flags() & FBX_TRACE_F_CLAIM) {
    for (int i = 0; i < n; i++) {
      if (cluster_of[i] >= 0)
        fprintf(stderr, "[fusebox] claim %s (%s): yes: fused subgraph %d\n", g->nodes[i].name,
                g->nodes[i].op_type, cluster_of[i]);
      else
        fprintf(stderr, "[fusebox] claim %s (%s): no: %s\n", g->nodes[i].name, g->nodes[i].op_type,
                reasons + (size_t)i * FBX_REASON_SIZE);
    }
  }
  fbx_trace_session_claim(ep->trace, n_claimed, n, n_groups);
  if (ep->trace)
    for (int i = 0; i < n; i++)
      if (cluster_of[i] < 0)
        fbx_trace_session_unclaimed(ep->trace, g->nodes[i].domain, g->nodes[i].op_type, g->nodes[i].name,
                                    reasons + (size_t)i * FBX_REASON_SIZE);
  if (fbx_trace_enabled()) trace_getcapability(g, cluster_of, reasons, n_claimed, n_groups);
done:
  fbx_free(inferred);
  fbx_free(claimed);
  fbx_free(cluster_of);
  fbx_free(reasons);
  fbx_free(group);
  fbx_ep_graph_free(&d);
  return st;
}

OrtStatus *ORT_API_CALL fbx_ep_get_capability(OrtEp *this_ptr, const OrtGraph *graph,
                                              OrtEpGraphSupportInfo *info) {
  return fbx_ep_status_to_ort(capability((fbx_ep *)this_ptr, graph, info));
}
