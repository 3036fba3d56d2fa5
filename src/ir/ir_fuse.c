/* Elementwise fusion: maximal trees of EW1/EW2/EW3 nodes, where every
 * intermediate value has a single consumer (inside the tree) and is not a
 * graph output, become one FUSED_EW node running a register program.
 * Registers: the external inputs first, then one per instruction (post-order,
 * so operands always precede their users). The root keeps its name/onnx_op. */
#include <string.h>

#include "../base/alloc.h"
#include "ir_passes.h"

typedef struct fbx__ir_fuse_ctx {
  fbx_ir_graph *g;
  bool *dead, *absorbed, *is_out;
  int *uses;          /* per value: number of distinct consuming live nodes */
  int *tree; int n_tree;
} fbx__ir_fuse_ctx;

static bool fbx__ir_is_ew(const fbx_ir_node *n) { return fbx_ir_op_class(n->op) != FBX_IR_CLASS_OTHER; }

static void fbx__ir_fuse_collect(fbx__ir_fuse_ctx *c, int nid) {
  fbx_ir_node *n = &c->g->nodes[nid];
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) continue;
    int p = c->g->values[v].producer;
    if (c->g->values[v].kind != FBX_IR_VALUE_NODE || p < 0 || c->dead[p] || c->absorbed[p]) continue;
    if (!fbx__ir_is_ew(&c->g->nodes[p]) || c->uses[v] != 1 || c->is_out[v]) continue;
    c->absorbed[p] = true;
    fbx__ir_fuse_collect(c, p);
  }
  c->tree[c->n_tree++] = nid;
}

/* Build the program for c->tree (root last) and rewrite the root node. */
static fbx_status *fbx__ir_fuse_emit(fbx__ir_fuse_ctx *c, const char **fast_names) {
  fbx_ir_graph *g = c->g;
  int root = c->tree[c->n_tree - 1];
  int ext[FBX_IR_MAX_INPUTS], n_ext = 0;
  for (int t = 0; t < c->n_tree; t++) {
    fbx_ir_node *n = &g->nodes[c->tree[t]];
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i], p = g->values[v].producer;
      bool internal = false;
      for (int u = 0; u < t && !internal; u++) internal = p == c->tree[u] && g->values[v].kind == FBX_IR_VALUE_NODE;
      if (internal) continue;
      bool dup = false;
      for (int e = 0; e < n_ext && !dup; e++) dup = ext[e] == v;
      if (dup) continue;
      if (n_ext == FBX_IR_MAX_INPUTS) return FBX_ERR_NOTIMPL("too many fused inputs");
      ext[n_ext++] = v;
    }
  }
  fbx_ir_ew_program *pg = fbx_ir_graph_alloc(g, sizeof(*pg));
  fbx_ir_ew_instr *ins = fbx_ir_graph_alloc(g, sizeof(*ins) * (size_t)c->n_tree);
  int *new_inputs = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)n_ext);
  size_t name_len = sizeof " [fast]";
  for (int t = 0; t < c->n_tree; t++) name_len += strlen(g->nodes[c->tree[t]].onnx_op) + 1;
  char *fname = fbx_ir_graph_alloc(g, name_len);
  if (!pg || !ins || !new_inputs || !fname) return FBX_ERR_OOM();
  pg->n_inputs = n_ext;
  pg->n_instrs = c->n_tree;
  pg->instrs = ins;
  pg->out_reg = n_ext + c->n_tree - 1;
  fbx_dtype reg_dt[FBX_IR_MAX_INPUTS + 1024];
  bool big = n_ext + c->n_tree > (int)(sizeof reg_dt / sizeof reg_dt[0]);
  if (big) return FBX_ERR_NOTIMPL("fused program too long");
  for (int e = 0; e < n_ext; e++) {
    pg->in_dtypes[e] = g->values[ext[e]].dtype;
    reg_dt[e] = pg->in_dtypes[e];
    new_inputs[e] = ext[e];
  }
  for (int t = 0; t < c->n_tree; t++) {
    fbx_ir_node *n = &g->nodes[c->tree[t]];
    int regs[3] = {0, 0, 0};
    for (int i = 0; i < n->n_inputs && i < 3; i++) {
      int v = n->inputs[i], r = -1;
      for (int u = 0; u < t && r < 0; u++)
        if (g->values[v].producer == c->tree[u] && g->values[v].kind == FBX_IR_VALUE_NODE) r = n_ext + u;
      for (int e = 0; e < n_ext && r < 0; e++)
        if (ext[e] == v) r = e;
      regs[i] = r;
    }
    fbx_dtype dts[3];
    for (int i = 0; i < n->n_inputs && i < 3; i++) dts[i] = reg_dt[regs[i]];
    ins[t].op = n->op;
    ins[t].a = regs[0];
    ins[t].b = regs[1];
    ins[t].c = regs[2];
    ins[t].params = n->params;
    ins[t].dtype = fbx_ir_ew_out_dtype(n->op, &n->params, dts, n->n_inputs);
    reg_dt[n_ext + t] = ins[t].dtype;
    if (t) strcat(fname, "+");
    strcat(fname, n->onnx_op);
    if (t < c->n_tree - 1) c->dead[c->tree[t]] = true;
  }
  fbx_ir_node *r = &g->nodes[root];
  for (int t = 0; t < c->n_tree && !r->composed_reason; t++) /* a fused composed fallback stays marked */
    r->composed_reason = g->nodes[c->tree[t]].composed_reason;
  r->op = FBX_IR_OP_FUSED_EW;
  r->inputs = new_inputs;
  r->n_inputs = n_ext;
  memset(&r->params, 0, sizeof r->params);
  r->params.fused.prog = pg;
  strcat(fname, " [fast]"); /* the trace span name, built once per plan */
  fast_names[root] = fname;
  return NULL;
}

fbx_status *fbx__ir_fuse(fbx_ir_graph *g, bool *dead, const char **fast_names) {
  fbx__ir_fuse_ctx c = {.g = g, .dead = dead};
  c.absorbed = fbx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
  c.is_out = fbx_calloc((size_t)g->n_values + 1, sizeof(bool));
  c.uses = fbx_calloc((size_t)g->n_values + 1, sizeof(int));
  c.tree = fbx_calloc((size_t)g->n_nodes + 1, sizeof(int));
  fbx_status *st = NULL;
  if (!c.absorbed || !c.is_out || !c.uses || !c.tree) {
    st = FBX_ERR_OOM();
    goto done;
  }
  for (int i = 0; i < g->n_outputs; i++) c.is_out[g->outputs[i]] = true;
  for (int nid = 0; nid < g->n_nodes; nid++) {
    if (dead[nid]) continue;
    fbx_ir_node *n = &g->nodes[nid];
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v == FBX_IR_NONE) continue;
      bool seen = false;
      for (int j = 0; j < i && !seen; j++) seen = n->inputs[j] == v;
      if (!seen) c.uses[v]++;
    }
  }
  for (int nid = g->n_nodes - 1; nid >= 0; nid--) {
    if (dead[nid] || c.absorbed[nid] || !fbx__ir_is_ew(&g->nodes[nid])) continue;
    c.n_tree = 0;
    fbx__ir_fuse_collect(&c, nid);
    if (c.n_tree < 2) continue;
    st = fbx__ir_fuse_emit(&c, fast_names);
    if (st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED) {
      fbx_status_free(st); /* leave this tree unfused */
      st = NULL;
      continue;
    }
    if (st) goto done;
  }
done:
  fbx_free(c.absorbed);
  fbx_free(c.is_out);
  fbx_free(c.uses);
  fbx_free(c.tree);
  return st;
}
