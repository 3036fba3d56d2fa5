/* The device's say in GetCapability: after the registry says a node is
 * claimable, the backend's supports() is asked about every IR node the ONNX
 * node translates to (dtypes and shapes as known at claim time, no data), so
 * claims follow the device and a declined node's reason names it.
 *
 * The node is translated alone: a one-node description whose inputs are its
 * non-constant inputs. Small initializers stay constants (translators read
 * shape-like constants); large ones become inputs of the same type and shape,
 * so no weight is copied here. A node that does not translate alone keeps the
 * registry's answer: Compile translates it in its real context. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../onnx/onnx_registry.h"
#include "ep_supports.h"

#define FBX__SUP_CONST_MAX ((size_t)64 << 10) /* initializers up to this size stay constants */

/* IR value v as a shape-only tensor (data NULL). */
static void fbx__sup_tensor(const fbx_ir_graph *ir, int v, fbx_tensor *t) {
  memset(t, 0, sizeof *t);
  if (v == FBX_IR_NONE) {
    t->rank = -1;
    return;
  }
  const fbx_ir_value *val = &ir->values[v];
  t->dtype = val->dtype;
  t->rank = val->rank;
  memcpy(t->dims, val->dims, sizeof t->dims);
}

/* Build the one-node description of g's node ni into sub (arrays from the
 * caller, sized for the node's inputs + outputs). */
static void fbx__sup_describe(const fbx_onnx_graph *g, int ni, fbx_onnx_graph *sub, fbx_onnx_value *vals,
                              fbx_onnx_node *node, int *ins, int *outs, int *gin, int *gout) {
  const fbx_onnx_node *n = &g->nodes[ni];
  int nv = 0, n_gin = 0;
  *node = *n;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    ins[i] = -1;
    if (v < 0) continue;
    int k = -1; /* a value used twice maps to one description value */
    for (int j = 0; j < i && k < 0; j++)
      if (n->inputs[j] == v) k = ins[j];
    if (k >= 0) {
      ins[i] = k;
      continue;
    }
    vals[nv] = g->values[v];
    vals[nv].is_graph_output = false;
    bool keep_const = vals[nv].is_initializer && vals[nv].init && vals[nv].init->nbytes <= FBX__SUP_CONST_MAX;
    if (!keep_const) {
      vals[nv].is_initializer = false;
      vals[nv].init = NULL;
      vals[nv].is_graph_input = true;
      gin[n_gin++] = nv;
    } else {
      vals[nv].is_graph_input = false;
    }
    ins[i] = nv++;
  }
  int n_gout = 0;
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    outs[o] = -1;
    if (v < 0) continue;
    vals[nv] = g->values[v];
    vals[nv].is_graph_input = false;
    vals[nv].is_initializer = false;
    vals[nv].init = NULL;
    vals[nv].is_graph_output = true;
    gout[n_gout++] = nv;
    outs[o] = nv++;
  }
  node->inputs = ins;
  node->outputs = outs;
  memset(sub, 0, sizeof *sub);
  sub->n_values = nv;
  sub->values = vals;
  sub->n_nodes = 1;
  sub->nodes = node;
  sub->n_inputs = n_gin;
  sub->inputs = gin;
  sub->n_outputs = n_gout;
  sub->outputs = gout;
}

bool fbx_ep_backend_supports_node(fbx_backend *be, const fbx_onnx_graph *g, int ni, char *reason, size_t cap) {
  if (!be->vt->supports) return true;
  const fbx_onnx_node *n = &g->nodes[ni];
  int slots = n->n_inputs + n->n_outputs + 1;
  fbx_onnx_value *vals = fbx_calloc((size_t)slots, sizeof *vals);
  int *idx = fbx_calloc((size_t)slots * 2, sizeof *idx);
  if (!vals || !idx) { /* no memory to ask: the registry's answer stands */
    fbx_free(vals);
    fbx_free(idx);
    return true;
  }
  fbx_onnx_graph sub;
  fbx_onnx_node node;
  int *ins = idx, *outs = ins + n->n_inputs, *gin = outs + n->n_outputs, *gout = gin + n->n_inputs;
  fbx__sup_describe(g, ni, &sub, vals, &node, ins, outs, gin, gout);
  fbx_ir_graph *ir = NULL;
  fbx_status *st = fbx_onnx_translate(&sub, &ir);
  bool ok = true;
  if (st) {
    fbx_status_free(st);
  } else {
    fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
    for (int k = 0; k < ir->n_nodes && ok; k++) {
      const fbx_ir_node *m = &ir->nodes[k];
      for (int i = 0; i < m->n_inputs; i++) fbx__sup_tensor(ir, m->inputs[i], &in[i]);
      for (int o = 0; o < m->n_outputs; o++) fbx__sup_tensor(ir, m->outputs[o], &out[o]);
      ok = fbx_backend_supports(be, m, in, m->n_inputs, out, m->n_outputs, reason, cap);
    }
  }
  fbx_ir_graph_destroy(ir);
  fbx_free(vals);
  fbx_free(idx);
  return ok;
}
