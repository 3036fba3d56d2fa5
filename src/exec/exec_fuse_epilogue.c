/* Epilogue fusion (after elementwise fusion): a CONV / CONV_TRANSPOSE whose
 * output feeds exactly one elementwise node (FUSED_EW or a single EW op) of
 * the same output shape takes that node's program as an epilogue, which the
 * backend kernel applies to each output block while it is still in cache.
 * Repeated along the chain (Conv -> Mul+Add -> HardSwish+... -> residual Add),
 * the programs are concatenated into one.
 *
 * Conditions per absorbed node e consuming the current value cur:
 *   - cur is not a graph output and e is its only (live) consumer;
 *   - e has one F32 output whose shape equals cur's (concrete shapes: from the
 *     run's inputs on shape-keyed plans, else static graph dims);
 *   - every other input of e is produced before the conv (order of steps);
 *   - the backend says it applies epilogues for this node (supports_epilogue).
 * CONV_INT and MATMUL_INT (int32 outputs) take an epilogue too: the program starts from the
 * int32 accumulators (a Cast to float first, as quantize_dynamic's ConvInteger / MatMulInteger ->
 * Cast -> Mul -> Add). The conv node then gets inputs (X, W, B or NONE, other program inputs...)
 * (CONV_INT / MATMUL_INT: (X, W, zp or NONE, zp or NONE, other program inputs...)),
 * params.conv.epilogue/epilogue_reg (MATMUL_INT: params.matmul's), and writes e's output; e
 * becomes dead. */
#include <string.h>

#include "../base/alloc.h"
#include "exec_plan.h"

#define FBX__EPI_SELF (-2) /* program input that is the conv output itself */
#define FBX__EPI_MAX_REGS 256

typedef struct fbx__epi_ctx {
  fbx_ir_graph *g;
  bool *dead;
  bool *is_out;       /* per value */
  int *uses;          /* per value: distinct live consuming nodes */
  int *consumer;      /* per value: a consuming live node */
  fbx_tensor *sh;     /* per value: concrete shape when known[v] */
  bool *known;
} fbx__epi_ctx;

/* Concrete shapes of every value, by shape inference over the live nodes.
 * Graph inputs take the run's shapes when use_inputs, else static dims only. */
static void fbx__epi_shapes(fbx__epi_ctx *c, bool use_inputs, const fbx_tensor *inputs, int n_inputs) {
  fbx_ir_graph *g = c->g;
  for (int v = 0; v < g->n_values; v++) {
    const fbx_ir_value *val = &g->values[v];
    fbx_tensor *t = &c->sh[v];
    memset(t, 0, sizeof(*t));
    t->dtype = val->dtype;
    t->rank = val->rank;
    memcpy(t->dims, val->dims, sizeof t->dims);
    if (val->kind == FBX_IR_VALUE_CONST) {
      t->data = val->data;
      c->known[v] = true;
    } else if (val->kind == FBX_IR_VALUE_INPUT) {
      bool ok = val->rank >= 0;
      for (int i = 0; i < val->rank && ok; i++) ok = val->dims[i] >= 0;
      c->known[v] = ok;
    }
  }
  if (use_inputs)
    for (int i = 0; i < g->n_inputs && i < n_inputs; i++) {
      int v = g->inputs[i];
      if (inputs[i].rank != g->values[v].rank) continue;
      c->sh[v].rank = inputs[i].rank;
      memcpy(c->sh[v].dims, inputs[i].dims, sizeof c->sh[v].dims);
      c->known[v] = true;
    }
  for (int nid = 0; nid < g->n_nodes; nid++)
    if (!c->dead[nid]) fbx_ir_infer_node_known(&g->nodes[nid], c->sh, c->known);
}

static bool fbx__epi_same_shape(const fbx_tensor *a, const fbx_tensor *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* The epilogue being built: program E over inputs ext[] (value ids, or
 * FBX__EPI_SELF for the conv output). */
typedef struct fbx__epi_acc {
  fbx_ir_ew_program prog;
  int ext[FBX_IR_MAX_INPUTS];
} fbx__epi_acc;

/* Append program P (inputs pin[], where value cur is the current epilogue
 * result) to acc. Returns false (acc unchanged) when limits are exceeded. */
static bool fbx__epi_merge(fbx__epi_ctx *c, fbx__epi_acc *acc, const fbx_ir_ew_program *P, const int *pin, int cur) {
  const fbx_ir_ew_program *E = &acc->prog;
  int ext[FBX_IR_MAX_INPUTS], n_new = E->n_inputs;
  memcpy(ext, acc->ext, sizeof(int) * (size_t)n_new);
  int pmap_in[FBX_IR_MAX_INPUTS];
  for (int r = 0; r < P->n_inputs; r++) {
    int v = pin[r], at = -1;
    if (v == cur) {
      pmap_in[r] = -1; /* the previous result */
      continue;
    }
    for (int e = 0; e < n_new && at < 0; e++)
      if (ext[e] == v) at = e;
    if (at < 0) {
      if (n_new >= FBX_IR_MAX_INPUTS - 3) return false; /* conv keeps X, W, B */
      at = n_new;
      ext[n_new++] = v;
    }
    pmap_in[r] = at;
  }
  int n_instrs = E->n_instrs + P->n_instrs;
  if (n_new + n_instrs > FBX__EPI_MAX_REGS) return false;
  fbx_ir_ew_instr *ins = fbx_ir_graph_alloc(c->g, sizeof(*ins) * (size_t)(n_instrs > 0 ? n_instrs : 1));
  if (!ins) return false;
#define MAP_E(r) ((r) < E->n_inputs ? (r) : n_new + ((r) - E->n_inputs))
#define MAP_P(r) ((r) < P->n_inputs ? (pmap_in[r] < 0 ? MAP_E(E->out_reg) : pmap_in[r]) \
                                    : n_new + E->n_instrs + ((r) - P->n_inputs))
  for (int i = 0; i < n_instrs; i++) {
    bool fromE = i < E->n_instrs;
    const fbx_ir_ew_instr *src = fromE ? &E->instrs[i] : &P->instrs[i - E->n_instrs];
    int cls = fbx_ir_op_class(src->op);
    ins[i] = *src;
    ins[i].a = fromE ? MAP_E(src->a) : MAP_P(src->a);
    ins[i].b = cls >= FBX_IR_CLASS_EW2 ? (fromE ? MAP_E(src->b) : MAP_P(src->b)) : 0;
    ins[i].c = cls == FBX_IR_CLASS_EW3 ? (fromE ? MAP_E(src->c) : MAP_P(src->c)) : 0;
  }
  int out_reg = MAP_P(P->out_reg);
#undef MAP_P
#undef MAP_E
  for (int e = E->n_inputs; e < n_new; e++) acc->prog.in_dtypes[e] = c->g->values[ext[e]].dtype;
  memcpy(acc->ext, ext, sizeof(int) * (size_t)n_new);
  acc->prog.n_inputs = n_new;
  acc->prog.n_instrs = n_instrs;
  acc->prog.instrs = ins;
  acc->prog.out_reg = out_reg;
  return true;
}

/* Try to absorb the consumer of cur into acc; returns its output value or -1. */
static int fbx__epi_absorb(fbx__epi_ctx *c, int conv, int cur, fbx__epi_acc *acc, const char **fast_names,
                           const char **part_name) {
  fbx_ir_graph *g = c->g;
  if (c->is_out[cur] || c->uses[cur] != 1) return -1;
  int e = c->consumer[cur];
  if (e <= conv || c->dead[e]) return -1;
  const fbx_ir_node *en = &g->nodes[e];
  bool fused = en->op == FBX_IR_OP_FUSED_EW;
  int cls = fbx_ir_op_class(en->op);
  if ((!fused && cls == FBX_IR_CLASS_OTHER) || en->n_outputs != 1) return -1;
  int ov = en->outputs[0];
  if (g->values[ov].dtype != FBX_DTYPE_F32) return -1;
  if (!c->known[cur] || !c->known[ov] || !fbx__epi_same_shape(&c->sh[cur], &c->sh[ov])) return -1;
  for (int i = 0; i < en->n_inputs; i++) {
    int v = en->inputs[i];
    if (v == FBX_IR_NONE) return -1;
    if (v == cur) continue;
    if (g->values[v].kind == FBX_IR_VALUE_NODE && g->values[v].producer >= conv) return -1;
  }
  fbx_ir_ew_program one;
  fbx_ir_ew_instr ins;
  const fbx_ir_ew_program *P = fused ? en->params.fused.prog : &one;
  if (!P) return -1;
  if (!fused) {
    int need = cls == FBX_IR_CLASS_EW1 ? 1 : cls == FBX_IR_CLASS_EW2 ? 2 : 3;
    if (en->n_inputs != need) return -1;
    memset(&one, 0, sizeof one);
    ins = (fbx_ir_ew_instr){.op = en->op, .a = 0, .b = 1, .c = 2, .dtype = g->values[ov].dtype, .params = en->params};
    one.n_inputs = need;
    one.n_instrs = 1;
    one.out_reg = need;
    one.instrs = &ins;
  }
  if (P->n_inputs != en->n_inputs) return -1;
  if (!fbx__epi_merge(c, acc, P, en->inputs, cur)) return -1;
  c->dead[e] = true;
  const char *nm = fused && fast_names[e] ? fast_names[e] : en->onnx_op && en->onnx_op[0] ? en->onnx_op
                                                                                      : fbx_ir_op_name(en->op);
  *part_name = nm;
  return ov;
}

/* "Mul+Add [fast]" + "Add+Clip" -> "Mul+Add+Add+Clip" (arena). */
static const char *fbx__epi_name_cat(fbx_ir_graph *g, const char *a, const char *b) {
  size_t lb = strlen(b);
  const char *tag = " [fast]";
  if (lb >= strlen(tag) && strcmp(b + lb - strlen(tag), tag) == 0) lb -= strlen(tag);
  size_t la = a ? strlen(a) : 0;
  char *s = fbx_ir_graph_alloc(g, la + lb + 2);
  if (!s) return a;
  if (la) {
    memcpy(s, a, la);
    s[la++] = '+';
  }
  memcpy(s + la, b, lb);
  s[la + lb] = 0;
  return s;
}

static fbx_status *fbx__epi_rewrite(fbx__epi_ctx *c, int nid, int out_v, const fbx__epi_acc *acc) {
  fbx_ir_graph *g = c->g;
  fbx_ir_node *n = &g->nodes[nid];
  fbx_ir_ew_program *pg = fbx_ir_graph_alloc(g, sizeof(*pg));
  bool qint = n->op == FBX_IR_OP_CONV_INT || n->op == FBX_IR_OP_MATMUL_INT;
  int n_in = (qint ? 4 : 3) + acc->prog.n_inputs - 1;
  int *ins = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)n_in);
  int *outs = fbx_ir_graph_alloc(g, sizeof(int));
  if (!pg || !ins || !outs) return FBX_ERR_OOM();
  *pg = acc->prog;
  pg->in_dtypes[0] = g->values[n->outputs[0]].dtype;
  /* fixed inputs: (X, W, B) for CONV / CONV_TRANSPOSE, (X, W, x_zp, w_zp) for CONV_INT / MATMUL_INT */
  int nfix = qint ? 4 : 3;
  for (int i = 0; i < nfix; i++) ins[i] = i < n->n_inputs ? n->inputs[i] : FBX_IR_NONE;
  for (int e = 1, k = nfix; e < acc->prog.n_inputs; e++) ins[k++] = acc->ext[e];
  outs[0] = out_v;
  n->inputs = ins;
  n->n_inputs = n_in;
  n->outputs = outs;
  if (n->op == FBX_IR_OP_MATMUL_INT) {
    n->params.matmul.epilogue = pg;
    n->params.matmul.epilogue_reg = 0; /* ext[0] is FBX__EPI_SELF */
  } else {
    n->params.conv.epilogue = pg;
    n->params.conv.epilogue_reg = 0;
  }
  g->values[out_v].producer = nid;
  return NULL;
}

fbx_status *fbx__ir_fuse_epilogue(fbx_ir_graph *g, fbx_backend *be, bool *dead, const char **fast_names,
                                  bool use_inputs, const fbx_tensor *inputs, int n_inputs) {
  if (!be->vt->supports_epilogue) return NULL;
  bool any = false;
  for (int nid = 0; nid < g->n_nodes && !any; nid++)
    any = !dead[nid] && (g->nodes[nid].op == FBX_IR_OP_CONV || g->nodes[nid].op == FBX_IR_OP_CONV_TRANSPOSE ||
                         g->nodes[nid].op == FBX_IR_OP_CONV_INT || g->nodes[nid].op == FBX_IR_OP_MATMUL_INT);
  if (!any) return NULL;
  size_t nv = (size_t)g->n_values + 1;
  fbx__epi_ctx c = {.g = g, .dead = dead};
  c.is_out = fbx_calloc(nv, sizeof(bool));
  c.uses = fbx_calloc(nv, sizeof(int));
  c.consumer = fbx_calloc(nv, sizeof(int));
  c.sh = fbx_calloc(nv, sizeof(fbx_tensor));
  c.known = fbx_calloc(nv, sizeof(bool));
  fbx_status *st = NULL;
  if (!c.is_out || !c.uses || !c.consumer || !c.sh || !c.known) {
    st = FBX_ERR_OOM();
    goto done;
  }
  for (int i = 0; i < g->n_outputs; i++) c.is_out[g->outputs[i]] = true;
  for (int nid = 0; nid < g->n_nodes; nid++) {
    if (dead[nid]) continue;
    const fbx_ir_node *n = &g->nodes[nid];
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v == FBX_IR_NONE) continue;
      bool seen = false;
      for (int j = 0; j < i && !seen; j++) seen = n->inputs[j] == v;
      if (seen) continue;
      c.uses[v]++;
      c.consumer[v] = nid;
    }
  }
  fbx__epi_shapes(&c, use_inputs, inputs, n_inputs);
  for (int nid = 0; nid < g->n_nodes; nid++) {
    fbx_ir_node *n = &g->nodes[nid];
    /* int32 accumulators, converted by the epilogue */
    bool qint = n->op == FBX_IR_OP_CONV_INT || n->op == FBX_IR_OP_MATMUL_INT;
    if (dead[nid] || (n->op != FBX_IR_OP_CONV && n->op != FBX_IR_OP_CONV_TRANSPOSE && !qint)) continue;
    if (n->n_outputs != 1 || n->n_inputs < 2 || n->n_inputs > (qint ? 4 : 3) || fbx_ir_node_epilogue(n, NULL)) continue;
    if (!be->vt->supports_epilogue(be, n)) continue;
    int cur = n->outputs[0];
    if (g->values[cur].dtype != (qint ? FBX_DTYPE_I32 : FBX_DTYPE_F32)) continue;
    fbx__epi_acc acc;
    memset(&acc, 0, sizeof acc);
    acc.prog.n_inputs = 1;
    acc.prog.out_reg = 0;
    acc.prog.in_dtypes[0] = g->values[cur].dtype;
    acc.ext[0] = FBX__EPI_SELF;
    const char *name = NULL;
    for (;;) {
      const char *part = NULL;
      int ov = fbx__epi_absorb(&c, nid, cur, &acc, fast_names, &part);
      if (ov < 0) break;
      name = fbx__epi_name_cat(g, name, part);
      cur = ov;
    }
    if (acc.prog.n_instrs == 0) continue;
    if ((st = fbx__epi_rewrite(&c, nid, cur, &acc))) goto done;
    fast_names[nid] = name;
  }
done:
  fbx_free(c.is_out);
  fbx_free(c.uses);
  fbx_free(c.consumer);
  fbx_free(c.sh);
  fbx_free(c.known);
  return st;
}
