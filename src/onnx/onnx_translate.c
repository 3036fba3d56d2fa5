/* fbx_onnx_translate: a claimed ONNX (sub)graph -> a new IR graph.
 * Inputs map to IR inputs (same order), initializers to IR constants (copied,
 * created on first use), each node goes through its registry translator, and
 * the described graph's outputs are marked in order. */
#include <string.h>

#include "../base/alloc.h"
#include "onnx_ops.h"
#include "onnx_registry.h"

/* Mark ONNX value v as the next IR output. Inputs, constants and values
 * already marked get an IDENTITY node so every IR output is a distinct node
 * result (an initializer or a graph input may be a graph output directly). */
static fbx_status *fbx__onnx_translate_value_out(const fbx_onnx_graph *g, fbx_ir_graph *ir, int *vmap, int v,
                                                 int *id) {
  static const fbx_onnx_node out_node = {.name = "graph_output", .op_type = "Identity", .domain = ""};
  fbx_onnx_tctx t = {g, &out_node, NULL, -1, ir, vmap, NULL};
  if (v < 0 || v >= g->n_values) return FBX_ERR_ARG("onnx translate: graph output has bad index %d", v);
  FBX_TRY(fbx__onnx_tvalue(&t, v, id));
  bool marked = false;
  for (int k = 0; k < ir->n_outputs; k++) marked |= ir->outputs[k] == *id;
  if (ir->values[*id].kind != FBX_IR_VALUE_NODE || marked) {
    int src = *id;
    FBX_TRY(fbx__onnx_emit(&t, FBX_IR_OP_IDENTITY, &src, 1, NULL, ir->values[src].dtype, ir->values[src].rank, id));
    if (g->values[v].name) ir->values[*id].name = fbx_ir_graph_strdup(ir, g->values[v].name);
  }
  return fbx_ir_graph_mark_output(ir, *id);
}

static fbx_status *fbx__onnx_translate_body_nodes(const fbx_onnx_graph *g, fbx_ir_graph *ir, int *vmap);

static fbx_status *fbx__onnx_translate_nodes(const fbx_onnx_graph *g, fbx_ir_graph *ir, int *vmap) {
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    if (v < 0 || v >= g->n_values) return FBX_ERR_ARG("onnx translate: graph input %d has bad index %d", i, v);
    const fbx_onnx_value *val = &g->values[v];
    if (val->rank < 0 || val->rank > FBX_MAX_RANK)
      return FBX_ERR_NOTIMPL("onnx translate: graph input '%s' has unknown or too large rank", val->name);
    if (val->dtype == FBX_DTYPE_UNDEFINED)
      return FBX_ERR_NOTIMPL("onnx translate: graph input '%s' has unsupported dtype", val->name);
    int id;
    FBX_TRY(fbx_ir_graph_add_input(ir, val->name, val->dtype, val->rank, val->dims, val->dim_sym, &id));
    vmap[v] = id;
  }
  return fbx__onnx_translate_body_nodes(g, ir, vmap);
}

/* Nodes, then outputs (inputs already mapped in vmap). */
static fbx_status *fbx__onnx_translate_body_nodes(const fbx_onnx_graph *g, fbx_ir_graph *ir, int *vmap) {
  for (int ni = 0; ni < g->n_nodes; ni++) {
    const fbx_onnx_node *n = &g->nodes[ni];
    char reason[256];
    if (!fbx_onnx_node_claimable(g, ni, reason, sizeof reason))
      return FBX_ERR_NOTIMPL("onnx translate: node '%s' not claimable: %s", n->name ? n->name : "", reason);
    const fbx_onnx_entry *any;
    const fbx_onnx_entry *e = fbx__onnx_registry_find(n, &any);
    if (!e) return FBX_ERR_NOTIMPL("onnx translate: no registry entry for %s", n->op_type);
    fbx_onnx_tctx t = {g, n, e, ni, ir, vmap, NULL};
    int first_new = ir->n_nodes;
    fbx_status *st = e->translate(&t);
    if (st) return st;
    for (int k = first_new; t.composed && k < ir->n_nodes; k++) ir->nodes[k].composed_reason = t.composed;
    const char *dom = n->domain && n->domain[0] ? fbx_ir_graph_strdup(ir, n->domain) : NULL;
    if (n->domain && n->domain[0] && !dom) return FBX_ERR_OOM();
    for (int k = first_new; dom && k < ir->n_nodes; k++) ir->nodes[k].onnx_domain = dom;
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      if (v >= 0 && vmap[v] < 0)
        return FBX_ERR("onnx translate: %s node '%s' left output %d unmapped", n->op_type, n->name ? n->name : "", k);
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    int id;
    FBX_TRY(fbx__onnx_translate_value_out(g, ir, vmap, v, &id));
    (void)id;
  }
  return NULL;
}

fbx_status *fbx_onnx_translate(const fbx_onnx_graph *g, fbx_ir_graph **out) {
  if (!g || !out) return FBX_ERR_ARG("fbx_onnx_translate: NULL argument");
  *out = NULL;
  fbx_ir_graph *ir = NULL;
  FBX_TRY(fbx_ir_graph_create(&ir));
  int *vmap = fbx_malloc(sizeof(int) * (size_t)(g->n_values > 0 ? g->n_values : 1));
  if (!vmap) { fbx_ir_graph_destroy(ir); return FBX_ERR_OOM(); }
  for (int i = 0; i < g->n_values; i++) vmap[i] = -1;
  fbx_status *st = fbx__onnx_translate_nodes(g, ir, vmap);
  fbx_free(vmap);
  if (st) { fbx_ir_graph_destroy(ir); return st; }
  *out = ir;
  return NULL;
}

fbx_status *fbx__onnx_translate_body(const fbx_onnx_graph *body, int n_caps, const char *const *names,
                                     const fbx_ir_graph *outer, const int *outer_ids, fbx_ir_graph **out) {
  return fbx__onnx_translate_body_io(body, 0, NULL, n_caps, names, outer, outer_ids, out);
}

fbx_status *fbx__onnx_translate_body_io(const fbx_onnx_graph *body, int n_own, const fbx_tensor *own, int n_caps,
                                        const char *const *names, const fbx_ir_graph *outer, const int *outer_ids,
                                        fbx_ir_graph **out) {
  *out = NULL;
  if (n_own > body->n_inputs) return FBX_ERR_ARG("onnx translate: body has %d inputs, %d expected", body->n_inputs, n_own);
  fbx_ir_graph *ir = NULL;
  FBX_TRY(fbx_ir_graph_create(&ir));
  int *vmap = fbx_malloc(sizeof(int) * (size_t)(body->n_values > 0 ? body->n_values : 1));
  if (!vmap) { fbx_ir_graph_destroy(ir); return FBX_ERR_OOM(); }
  for (int i = 0; i < body->n_values; i++) vmap[i] = -1;
  fbx_status *st = NULL;
  for (int k = 0; k < n_own && !st; k++) { /* the body's own inputs first, typed by the caller */
    int v = body->inputs[k], id;
    st = fbx_ir_graph_add_input(ir, body->values[v].name, own[k].dtype, own[k].rank, own[k].dims, NULL, &id);
    if (!st) vmap[v] = id;
  }
  for (int k = 0; k < n_caps && !st; k++) {
    const fbx_ir_value *ov = &outer->values[outer_ids[k]];
    int id;
    st = fbx_ir_graph_add_input(ir, names[k], ov->dtype, ov->rank, ov->dims,
                                ov->kind == FBX_IR_VALUE_INPUT ? ov->dim_sym : NULL, &id);
    for (int i = 0; !st && i < body->n_inputs; i++) {
      int v = body->inputs[i];
      if (body->values[v].name && strcmp(body->values[v].name, names[k]) == 0) vmap[v] = id;
    }
  }
  if (!st) st = fbx__onnx_translate_body_nodes(body, ir, vmap);
  fbx_free(vmap);
  if (st) { fbx_ir_graph_destroy(ir); return st; }
  *out = ir;
  return NULL;
}
