/* Constant folding: a node whose inputs are all constants is evaluated once
 * at plan time through a host-visible backend (the engine's, or the host
 * backend of a device engine: the plan uploads the results) and its outputs
 * become constants in the plan graph. On the shape-keyed paths SHAPE of a graph
 * input is folded too, which lets Shape->Gather->Concat->Reshape chains fold. */
#include <string.h>

#include "../base/alloc.h"
#include "exec_plan.h"

/* Folded outputs above this size stay computed at run time (memory). */
#define FBX__IR_FOLD_MAX_BYTES ((size_t)16 << 20)

static void fbx__ir_value_tensor(const fbx_ir_value *v, fbx_tensor *t) {
  memset(t, 0, sizeof(*t));
  t->dtype = v->dtype;
  t->rank = v->rank;
  memcpy(t->dims, v->dims, sizeof(t->dims));
  t->data = v->data;
}

static fbx_status *fbx__ir_make_const(fbx_ir_graph *g, int vid, const fbx_tensor *t, const void *data) {
  fbx_ir_value *v = &g->values[vid];
  size_t bytes = fbx_tensor_nbytes(t); /* a valid shape: shape inference checked it */
  void *d = fbx_ir_graph_alloc(g, bytes ? bytes : 1);
  if (!d) return FBX_ERR_OOM();
  if (bytes) memcpy(d, data, bytes);
  v->kind = FBX_IR_VALUE_CONST;
  v->dtype = t->dtype;
  v->rank = t->rank;
  for (int i = 0; i < FBX_MAX_RANK; i++) v->dims[i] = i < t->rank ? t->dims[i] : FBX_IR_DIM_DYNAMIC;
  v->data = d;
  v->nbytes = bytes;
  return NULL;
}

/* Try to fold one node; returns true when folded. Kernel errors are not
 * fatal: the node simply stays a run-time step. */
static bool fbx__ir_fold_node(fbx_ir_graph *g, fbx_backend *be, int nid) {
  fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  void *bufs[FBX_IR_MAX_OUTPUTS] = {0};
  for (int i = 0; i < n->n_inputs; i++) {
    if (n->inputs[i] == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
    } else {
      fbx__ir_value_tensor(&g->values[n->inputs[i]], &in[i]);
    }
  }
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  fbx_status *st = fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs);
  if (st) {
    fbx_status_free(st);
    return false;
  }
  bool ok = true;
  for (int o = 0; o < n->n_outputs && ok; o++) {
    size_t bytes = fbx_tensor_nbytes(&out[o]); /* checked by fbx_ir_infer_node */
    if (bytes > FBX__IR_FOLD_MAX_BYTES) ok = false;
    else if (!(bufs[o] = fbx_malloc_aligned(bytes ? bytes : 64))) ok = false;
    out[o].data = bufs[o];
  }
  if (ok) {
    st = be->vt->run_node(be, n, NULL, in, n->n_inputs, out, n->n_outputs, NULL);
    if (!st && be->vt->synchronize) st = be->vt->synchronize(be);
    if (st) {
      fbx_status_free(st);
      ok = false;
    }
  }
  for (int o = 0; o < n->n_outputs && ok; o++) {
    st = fbx__ir_make_const(g, n->outputs[o], &out[o], bufs[o]);
    if (st) {
      fbx_status_free(st);
      ok = false; /* partially converted outputs: values are consistent constants anyway */
    }
  }
  for (int o = 0; o < n->n_outputs; o++) fbx_free_aligned(bufs[o]);
  return ok;
}

static bool fbx__ir_fold_shape_of_input(fbx_ir_graph *g, int nid, const fbx_tensor *inputs, int n_inputs) {
  fbx_ir_node *n = &g->nodes[nid];
  int x = n->inputs[0];
  const fbx_ir_value *v = &g->values[x];
  if (v->kind != FBX_IR_VALUE_INPUT || v->input_index < 0 || v->input_index >= n_inputs) return false;
  fbx_tensor out;
  memset(&out, 0, sizeof out);
  fbx_status *st = fbx_ir_infer_node(n, &inputs[v->input_index], 1, &out, 1);
  if (st) {
    fbx_status_free(st);
    return false;
  }
  int64_t r = inputs[v->input_index].rank, s = n->params.shape.start;
  if (s < 0) s += r;
  if (s < 0) s = 0;
  int64_t d[FBX_MAX_RANK];
  for (int64_t i = 0; i < out.dims[0]; i++) d[i] = inputs[v->input_index].dims[s + i];
  st = fbx__ir_make_const(g, n->outputs[0], &out, d);
  if (st) {
    fbx_status_free(st);
    return false;
  }
  return true;
}

fbx_status *fbx__ir_fold(fbx_ir_graph *g, fbx_backend *be, bool *dead, bool fold_shapes,
                         const fbx_tensor *inputs, int n_inputs) {
  if (!be->vt->host_visible) return NULL; /* be is the host backend here: never taken */
  for (int nid = 0; nid < g->n_nodes; nid++) {
    fbx_ir_node *n = &g->nodes[nid];
    if (dead[nid]) continue;
    if (n->op == FBX_IR_OP_SHAPE && n->n_inputs >= 1 && n->inputs[0] != FBX_IR_NONE &&
        g->values[n->inputs[0]].kind == FBX_IR_VALUE_INPUT) {
      if (fold_shapes && fbx__ir_fold_shape_of_input(g, nid, inputs, n_inputs)) dead[nid] = true;
      continue;
    }
    bool all_const = true;
    for (int i = 0; i < n->n_inputs && all_const; i++)
      if (n->inputs[i] != FBX_IR_NONE && g->values[n->inputs[i]].kind != FBX_IR_VALUE_CONST) all_const = false;
    if (!all_const) continue;
    if (fbx__ir_fold_node(g, be, nid)) dead[nid] = true;
  }
  return NULL;
}
