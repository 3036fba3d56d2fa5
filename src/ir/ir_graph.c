/* Graph building: arena-backed values/nodes with growable (doubling) arrays.
 * Growing copies into a new arena block; the old block stays in the arena
 * until the graph is destroyed (at most 2x the final size). */
#include "ir_graph.h"

#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/arena.h"
#include "../base/checked.h"

fbx_status *fbx_ir_graph_create(fbx_ir_graph **out) {
  if (!out) return FBX_ERR_ARG("fbx_ir_graph_create: out is NULL");
  *out = NULL;
  fbx_ir_graph *g = fbx_calloc(1, sizeof(*g));
  if (!g) return FBX_ERR_OOM();
  g->arena = fbx_arena_create(64 * 1024);
  if (!g->arena) {
    fbx_free(g);
    return FBX_ERR_OOM();
  }
  *out = g;
  return NULL;
}

void fbx_ir_graph_destroy(fbx_ir_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_subgraphs; i++) fbx_ir_graph_destroy(g->subgraphs[i]);
  fbx_arena_destroy(g->arena);
  fbx_free(g);
}

static fbx_status *fbx__ir_grow(fbx_ir_graph *g, void **arr, int n, int *cap, size_t elem);

fbx_status *fbx_ir_graph_adopt(fbx_ir_graph *g, fbx_ir_graph *sub) {
  if (!g || !sub) {
    fbx_ir_graph_destroy(sub);
    return FBX_ERR_ARG("fbx_ir_graph_adopt: NULL graph");
  }
  fbx_status *st = fbx__ir_grow(g, (void **)&g->subgraphs, g->n_subgraphs, &g->cap_subgraphs, sizeof(fbx_ir_graph *));
  if (st) {
    fbx_ir_graph_destroy(sub);
    return st;
  }
  g->subgraphs[g->n_subgraphs++] = sub;
  return NULL;
}

void *fbx_ir_graph_alloc(fbx_ir_graph *g, size_t bytes) {
  if (!g) return NULL;
  return fbx_arena_alloc(g->arena, bytes ? bytes : 1);
}

const char *fbx_ir_graph_strdup(fbx_ir_graph *g, const char *s) {
  if (!g) return NULL;
  return fbx_arena_strdup(g->arena, s);
}

/* Make room for one more element in an arena array (doubling). */
static fbx_status *fbx__ir_grow(fbx_ir_graph *g, void **arr, int n, int *cap, size_t elem) {
  if (n < *cap) return NULL;
  int nc = *cap ? *cap * 2 : 16;
  void *na = fbx_arena_alloc(g->arena, (size_t)nc * elem);
  if (!na) return FBX_ERR_OOM();
  if (*arr && n) memcpy(na, *arr, (size_t)n * elem);
  *arr = na;
  *cap = nc;
  return NULL;
}

static fbx_status *fbx__ir_value_new(fbx_ir_graph *g, fbx_ir_value_kind kind, const char *name,
                                     fbx_dtype dt, int rank, int *id) {
  if (rank > FBX_MAX_RANK) return FBX_ERR_NOTIMPL("rank %d exceeds FBX_MAX_RANK", rank);
  FBX_TRY(fbx__ir_grow(g, (void **)&g->values, g->n_values, &g->cap_values, sizeof(fbx_ir_value)));
  fbx_ir_value *v = &g->values[g->n_values];
  memset(v, 0, sizeof(*v));
  v->kind = kind;
  v->dtype = dt;
  v->rank = rank;
  for (int i = 0; i < FBX_MAX_RANK; i++) v->dims[i] = FBX_IR_DIM_DYNAMIC;
  v->name = name ? fbx_arena_strdup(g->arena, name) : NULL;
  v->producer = FBX_IR_NONE;
  v->input_index = -1;
  *id = g->n_values++;
  return NULL;
}

fbx_status *fbx_ir_graph_add_input(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank,
                                   const int64_t *dims, const char *const *dim_sym, int *id) {
  if (!g || !id || rank < 0) return FBX_ERR_ARG("fbx_ir_graph_add_input: bad arguments");
  if (!fbx_dtype_size(dt)) return FBX_ERR_NOTIMPL("input '%s': unsupported dtype %d", name ? name : "", (int)dt);
  FBX_TRY(fbx__ir_value_new(g, FBX_IR_VALUE_INPUT, name, dt, rank, id));
  fbx_ir_value *v = &g->values[*id];
  for (int i = 0; i < rank; i++) {
    v->dims[i] = dims && dims[i] >= 0 ? dims[i] : FBX_IR_DIM_DYNAMIC;
    v->dim_sym[i] = dim_sym && dim_sym[i] ? fbx_arena_strdup(g->arena, dim_sym[i]) : NULL;
  }
  FBX_TRY(fbx__ir_grow(g, (void **)&g->inputs, g->n_inputs, &g->cap_inputs, sizeof(int)));
  v->input_index = g->n_inputs;
  g->inputs[g->n_inputs++] = *id;
  return NULL;
}

fbx_status *fbx_ir_graph_add_const(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank,
                                   const int64_t *dims, const void *data, int *id) {
  if (!g || !id || rank < 0 || (rank > 0 && !dims)) return FBX_ERR_ARG("fbx_ir_graph_add_const: bad arguments");
  size_t es = fbx_dtype_size(dt);
  if (!es) return FBX_ERR_NOTIMPL("constant '%s': unsupported dtype %d", name ? name : "", (int)dt);
  char what[160];
  snprintf(what, sizeof what, "constant '%s'", name ? name : "");
  size_t nbytes;
  FBX_TRY(fbx_shape_bytes_checked(dims, rank, es, what, &nbytes));
  if (nbytes && !data) return FBX_ERR_ARG("constant '%s': no data", name ? name : "");
  FBX_TRY(fbx__ir_value_new(g, FBX_IR_VALUE_CONST, name, dt, rank, id));
  fbx_ir_value *v = &g->values[*id];
  for (int i = 0; i < rank; i++) v->dims[i] = dims[i];
  v->data = fbx_arena_alloc(g->arena, nbytes ? nbytes : 1);
  if (!v->data) return FBX_ERR_OOM();
  if (nbytes) memcpy(v->data, data, nbytes);
  v->nbytes = nbytes;
  return NULL;
}

fbx_status *fbx_ir_graph_add_const_f32(fbx_ir_graph *g, float v, int *id) {
  return fbx_ir_graph_add_const(g, NULL, FBX_DTYPE_F32, 0, NULL, &v, id);
}

fbx_status *fbx_ir_graph_add_const_i64s(fbx_ir_graph *g, const int64_t *v, int n, int *id) {
  int64_t d = n;
  return fbx_ir_graph_add_const(g, NULL, FBX_DTYPE_I64, 1, &d, v, id);
}

fbx_status *fbx_ir_graph_add_value(fbx_ir_graph *g, const char *name, fbx_dtype dt, int rank, int *id) {
  if (!g || !id) return FBX_ERR_ARG("fbx_ir_graph_add_value: bad arguments");
  return fbx__ir_value_new(g, FBX_IR_VALUE_NODE, name, dt, rank, id);
}

fbx_status *fbx_ir_graph_add_node(fbx_ir_graph *g, fbx_ir_op op, const int *inputs, int n_inputs,
                                  const int *outputs, int n_outputs, const fbx_ir_params *params,
                                  const char *name, const char *onnx_op, int onnx_node_index,
                                  int *node_id) {
  if (!g) return FBX_ERR_ARG("fbx_ir_graph_add_node: graph is NULL");
  if ((unsigned)op >= FBX_IR_OP_COUNT) return FBX_ERR_ARG("fbx_ir_graph_add_node: bad op %d", (int)op);
  if (n_inputs < 0 || n_inputs > FBX_IR_MAX_INPUTS || n_outputs < 1 || n_outputs > FBX_IR_MAX_OUTPUTS)
    return FBX_ERR_NOTIMPL("node %s: %d inputs / %d outputs out of range", fbx_ir_op_name(op), n_inputs,
                           n_outputs);
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i] != FBX_IR_NONE && (inputs[i] < 0 || inputs[i] >= g->n_values))
      return FBX_ERR_ARG("node %s: input %d refers to unknown value %d", fbx_ir_op_name(op), i, inputs[i]);
  for (int i = 0; i < n_outputs; i++) {
    if (outputs[i] < 0 || outputs[i] >= g->n_values)
      return FBX_ERR_ARG("node %s: output %d refers to unknown value %d", fbx_ir_op_name(op), i, outputs[i]);
    if (g->values[outputs[i]].kind != FBX_IR_VALUE_NODE || g->values[outputs[i]].producer != FBX_IR_NONE)
      return FBX_ERR_ARG("node %s: output %d (value %d) is not a fresh node value", fbx_ir_op_name(op), i,
                         outputs[i]);
  }
  FBX_TRY(fbx__ir_grow(g, (void **)&g->nodes, g->n_nodes, &g->cap_nodes, sizeof(fbx_ir_node)));
  fbx_ir_node *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof(*n));
  n->op = op;
  n->n_inputs = n_inputs;
  n->n_outputs = n_outputs;
  n->inputs = fbx_arena_alloc(g->arena, sizeof(int) * (size_t)(n_inputs ? n_inputs : 1));
  n->outputs = fbx_arena_alloc(g->arena, sizeof(int) * (size_t)n_outputs);
  if (!n->inputs || !n->outputs) return FBX_ERR_OOM();
  if (n_inputs) memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
  memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
  if (params) n->params = *params;
  n->name = fbx_arena_strdup(g->arena, name);
  n->onnx_op = fbx_arena_strdup(g->arena, onnx_op ? onnx_op : fbx_ir_op_name(op));
  n->onnx_node_index = onnx_node_index;
  for (int i = 0; i < n_outputs; i++) g->values[outputs[i]].producer = g->n_nodes;
  if (node_id) *node_id = g->n_nodes;
  g->n_nodes++;
  return NULL;
}

fbx_status *fbx_ir_graph_emit(fbx_ir_graph *g, fbx_ir_op op, const int *inputs, int n_inputs,
                              const fbx_ir_params *params, fbx_dtype dt, int rank,
                              const char *name, const char *onnx_op, int onnx_node_index,
                              int *out_value) {
  int vid;
  FBX_TRY(fbx_ir_graph_add_value(g, name, dt, rank, &vid));
  FBX_TRY(fbx_ir_graph_add_node(g, op, inputs, n_inputs, &vid, 1, params, name, onnx_op, onnx_node_index,
                                NULL));
  if (out_value) *out_value = vid;
  return NULL;
}

fbx_status *fbx_ir_graph_mark_output(fbx_ir_graph *g, int value_id) {
  if (!g || value_id < 0 || value_id >= g->n_values) return FBX_ERR_ARG("mark_output: unknown value %d", value_id);
  FBX_TRY(fbx__ir_grow(g, (void **)&g->outputs, g->n_outputs, &g->cap_outputs, sizeof(int)));
  g->outputs[g->n_outputs++] = value_id;
  return NULL;
}

int64_t fbx_ir_value_numel(const fbx_ir_value *v) {
  int64_t n;
  if (!v || v->rank < 0 || !fbx_dims_numel(v->dims, v->rank, &n)) return -1; /* dynamic, or not a valid shape */
  return n;
}

static void fbx__ir_dump_value(FILE *f, const fbx_ir_graph *g, int id) {
  if (id == FBX_IR_NONE) {
    fprintf(f, "_");
    return;
  }
  const fbx_ir_value *v = &g->values[id];
  fprintf(f, "%%%d:%s[", id, fbx_dtype_name(v->dtype));
  for (int i = 0; i < v->rank; i++) {
    if (i) fprintf(f, "x");
    if (v->dims[i] >= 0) fprintf(f, "%lld", (long long)v->dims[i]);
    else fprintf(f, "%s", v->dim_sym[i] && v->dim_sym[i][0] ? v->dim_sym[i] : "?");
  }
  fprintf(f, "]%s", v->kind == FBX_IR_VALUE_CONST ? "c" : v->kind == FBX_IR_VALUE_INPUT ? "i" : "");
}

void fbx_ir_graph_dump(const fbx_ir_graph *g, void *file) {
  FILE *f = file ? (FILE *)file : stderr;
  if (!g) return;
  fprintf(f, "graph: %d values, %d nodes\n  inputs:", g->n_values, g->n_nodes);
  for (int i = 0; i < g->n_inputs; i++) {
    fputc(' ', f);
    fbx__ir_dump_value(f, g, g->inputs[i]);
  }
  fprintf(f, "\n");
  for (int n = 0; n < g->n_nodes; n++) {
    const fbx_ir_node *nd = &g->nodes[n];
    fprintf(f, "  #%d %s (%s '%s') ", n, fbx_ir_op_name(nd->op), nd->onnx_op ? nd->onnx_op : "",
            nd->name ? nd->name : "");
    for (int i = 0; i < nd->n_outputs; i++) {
      if (i) fputs(", ", f);
      fbx__ir_dump_value(f, g, nd->outputs[i]);
    }
    fputs(" <- ", f);
    for (int i = 0; i < nd->n_inputs; i++) {
      if (i) fputs(", ", f);
      fbx__ir_dump_value(f, g, nd->inputs[i]);
    }
    fputc('\n', f);
  }
  fprintf(f, "  outputs:");
  for (int i = 0; i < g->n_outputs; i++) {
    fputc(' ', f);
    fbx__ir_dump_value(f, g, g->outputs[i]);
  }
  fprintf(f, "\n");
}
