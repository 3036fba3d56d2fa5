/* Compile: per fused OrtGraph, describe it (initializers included: ORT drops
 * them from the fused node's inputs, so they are copied here, once),
 * translate to an IR graph and compile it. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../onnx/onnx_rank.h"
#include "../onnx/onnx_registry.h"
#include "ep_graph.h"

void fbx_ep_kernel_destroy(fbx_ep_kernel *k) {
  if (!k) return;
  fbx_exec_compiled_destroy(k->compiled);
  if (k->done) fbx_backend_event_destroy(k->ep->backend, k->done);
  if (k->mu_ready) pthread_mutex_destroy(&k->mu);
  for (int i = 0; k->input_desc && i < k->n_inputs; i++) fbx_free(k->input_desc[i]);
  fbx_free(k->input_desc);
  fbx_free(k->inputs);
  fbx_free(k->input_dev);
  fbx_free(k->name);
  fbx_free(k);
}

/* k->input_desc[i]: the name of fused input i and the first node reading it, so a
 * Compute error can say which input (ORT's own text names none of them). */
static fbx_status *describe_inputs(fbx_ep_kernel *k, const fbx_onnx_graph *g) {
  k->input_desc = fbx_calloc((size_t)(k->n_inputs ? k->n_inputs : 1), sizeof *k->input_desc);
  if (!k->input_desc) return FBX_ERR_OOM();
  for (int i = 0; i < k->n_inputs; i++) {
    int v = g->inputs[i];
    const char *name = v >= 0 && v < g->n_values && g->values[v].name ? g->values[v].name : "?";
    const fbx_onnx_node *reader = NULL;
    for (int n = 0; n < g->n_nodes && !reader; n++)
      for (int j = 0; j < g->nodes[n].n_inputs; j++)
        if (g->nodes[n].inputs[j] == v) reader = &g->nodes[n];
    char buf[512];
    const char *op = reader && reader->op_type ? reader->op_type : "?";
    if (reader && reader->name && reader->name[0])
      snprintf(buf, sizeof buf, "'%s' (read by node '%s' (%s))", name, reader->name, op);
    else if (reader)
      snprintf(buf, sizeof buf, "'%s' (read by an unnamed %s node)", name, op);
    else
      snprintf(buf, sizeof buf, "'%s'", name);
    k->input_desc[i] = fbx_strdup(buf);
    if (!k->input_desc[i]) return FBX_ERR_OOM();
  }
  return NULL;
}

static fbx_status *compile_one(fbx_ep *ep, const OrtGraph *graph, const OrtNode *fused, fbx_ep_kernel **out) {
  *out = NULL;
  fbx_ep_graph d;
  FBX_TRY(fbx_ep_graph_build(graph, fused, &d));
  fbx_ir_graph *ir = NULL;
  fbx_status *st = fbx_onnx_graph_infer_ranks(&d.g); /* as GetCapability saw it */
  if (st) goto fail;
  const char *fname = NULL;
  OrtStatus *os = FBX_ORT->Node_GetName(fused, &fname);
  if (os) {
    st = fbx_ep_status_from_ort(os, "Node_GetName");
    goto fail;
  }
  fbx_ep_kernel *k = fbx_calloc(1, sizeof *k);
  if (!k) {
    st = FBX_ERR_OOM();
    goto fail;
  }
  k->ep = ep;
  k->name = fbx_strdup(fname && fname[0] ? fname : "fusebox_subgraph");
  k->n_nodes = d.g.n_nodes;
  k->n_inputs = d.g.n_inputs;
  k->n_outputs = d.g.n_outputs;
  k->inputs = fbx_calloc((size_t)(k->n_inputs ? k->n_inputs : 1), sizeof *k->inputs);
  k->input_dev = fbx_calloc((size_t)(k->n_inputs ? k->n_inputs : 1), sizeof *k->input_dev);
  if (!k->name || !k->inputs || !k->input_dev) {
    st = FBX_ERR_OOM();
    goto fail_k;
  }
  if (pthread_mutex_init(&k->mu, NULL) != 0) {
    st = FBX_ERR("%s: pthread_mutex_init failed", k->name);
    goto fail_k;
  }
  k->mu_ready = true;
  st = describe_inputs(k, &d.g);
  if (st) goto fail_k;

  uint64_t t0 = fbx_trace_now_ns();
  st = fbx_onnx_translate(&d.g, &ir);
  uint64_t t1 = fbx_trace_now_ns();
  fbx_trace_session_phase(ep->trace, "translate", t1 - t0);
  if (fbx_trace_enabled()) {
    fbx_trace_arg a[] = {FBX_TARG_S("subgraph", k->name), FBX_TARG_I("nodes", k->n_nodes)};
    fbx_trace_complete("fusebox.translate", "ep.phase", t0, t1, a, 2);
  }
  if (st) goto fail_k;
  fbx_trace_session_copy_wrap(ep->trace, d.n_init, d.init_bytes);

  fbx_exec_compile_options copt = {.compile = ep->opt.compile, .cache_limit = ep->opt.cache_limit,
                                 .host = ep->host_backend};
  st = fbx_exec_compiled_create(ir, ep->backend, &copt, k->name, &k->compiled); /* takes ir */
  ir = NULL;
  uint64_t t2 = fbx_trace_now_ns();
  fbx_trace_session_phase(ep->trace, "compile", t2 - t1);
  if (fbx_trace_enabled()) {
    fbx_trace_arg a[] = {FBX_TARG_S("subgraph", k->name)};
    fbx_trace_complete("fusebox.compile", "ep.phase", t1, t2, a, 1);
  }
  if (st) goto fail_k;

  k->base.ort_version_supported = ORT_API_VERSION;
  k->base.CreateState = fbx_ep_kernel_create_state;
  k->base.Compute = fbx_ep_kernel_compute;
  k->base.ReleaseState = fbx_ep_kernel_release_state;
  fbx_ep_graph_free(&d);
  ep->n_compiled++;
  *out = k;
  return NULL;
fail_k:
  fbx_ep_kernel_destroy(k);
fail:
  fbx_ir_graph_destroy(ir);
  fbx_ep_graph_free(&d);
  return st;
}

OrtStatus *ORT_API_CALL fbx_ep_compile(OrtEp *this_ptr, const OrtGraph **graphs, const OrtNode **fused_nodes,
                                       size_t count, OrtNodeComputeInfo **node_compute_infos,
                                       OrtNode **ep_context_nodes) {
  fbx_ep *ep = (fbx_ep *)this_ptr;
  for (size_t i = 0; i < count; i++) node_compute_infos[i] = NULL;
  for (size_t i = 0; i < count; i++) {
    fbx_ep_kernel *k = NULL;
    fbx_status *st = compile_one(ep, graphs[i], fused_nodes[i], &k);
    if (st) {
      for (size_t j = 0; j < i; j++) {
        fbx_ep_kernel_destroy((fbx_ep_kernel *)node_compute_infos[j]);
        node_compute_infos[j] = NULL;
      }
      return fbx_ep_status_to_ort(st);
    }
    node_compute_infos[i] = &k->base;
  }
  return NULL; /* no EPContext nodes: ep_context_nodes stays as ORT set it */
}

void ORT_API_CALL fbx_ep_release_node_compute_infos(OrtEp *this_ptr, OrtNodeComputeInfo **infos, size_t n) {
  for (size_t i = 0; i < n; i++) fbx_ep_kernel_destroy((fbx_ep_kernel *)infos[i]);
}
