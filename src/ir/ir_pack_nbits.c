/* MatMulNBits packing: projections of one activation whose weights can be
 * stacked along N (ORT's contrib-op layout keeps the weights, scales and zero
 * points column after column, N rows of equal size, so stacking is a byte
 * concatenation) become one MatMulNBits. Every column is computed exactly as
 * before (its weights, scales and zero point are the same bytes, its
 * accumulation along K the same). Why: a decode step is latency-bound, so
 * each launch and each pass over the activation saved is time saved. Both
 * passes run once on a compiled subgraph's own graph, before any plan or
 * prepared state exists (node ids change: dropped nodes are removed and the
 * rest renumbered). Both need: the projections share the activation, K,
 * bits, block size, accuracy level and zero-point form, have constant
 * weights and scales, and constant zero points and biases (each all or none);
 * their outputs are read by the pattern alone.
 *
 * pack_qkv: three projections feeding one GroupQueryAttention as query, key
 * and value (ONNX Runtime GenAI's model builder emits q_proj, k_proj and
 * v_proj so) become one over the three weight sets, feeding the attention's
 * packed form (query = q | k | v per token, key and value absent). The key
 * and value projections are tiny (Qwen2.5-0.5B: N = 128 each against q's
 * 896): three launches become one with 1152 columns. N of q is num_heads * H
 * and N of k and v kv_num_heads * H.
 *
 * pack_glu: a gated MLP as the builder emits it, Mul(Mul(g, Sigmoid(g)), u)
 * with g and u MatMulNBits projections of one activation of equal N (either
 * operand order of both Muls), becomes one MatMulNBits over [gate; up] with
 * params.nbits.glu set, which writes silu(g) * u itself: four nodes and two
 * of the three launches of a layer's MLP gone (the backend's GEMV takes the
 * gate and up column of each output together). */
#include <string.h>

#include "../base/alloc.h"
#include "ir_passes.h"

/* The node producing value v if it has op and is live, else -1. */
static int fbx__pq_op_of(const fbx_ir_graph *g, const bool *drop, int v, fbx_ir_op op) {
  if (v == FBX_IR_NONE || g->values[v].kind != FBX_IR_VALUE_NODE) return -1;
  int p = g->values[v].producer;
  if (p < 0 || p >= g->n_nodes || drop[p] || g->nodes[p].op != op || g->nodes[p].n_outputs != 1) return -1;
  return p;
}

static int fbx__pq_in(const fbx_ir_node *n, int i) { return i < n->n_inputs ? n->inputs[i] : FBX_IR_NONE; }

/* Whether input i of the n nodes m is stackable: all absent (*row = 0), or
 * constants of one dtype whose bytes are N rows of one size *row. */
static bool fbx__pq_stackable(const fbx_ir_graph *g, const fbx_ir_node *const *m, int n, int i, size_t *row) {
  *row = 0;
  int absent = 0;
  for (int j = 0; j < n; j++) absent += fbx__pq_in(m[j], i) == FBX_IR_NONE;
  if (absent == n) return true;
  if (absent) return false;
  for (int j = 0; j < n; j++) {
    const fbx_ir_value *c = &g->values[m[j]->inputs[i]], *c0 = &g->values[m[0]->inputs[i]];
    int64_t N = m[j]->params.nbits.N;
    if (c->kind != FBX_IR_VALUE_CONST || !c->data || c->dtype != c0->dtype || N <= 0 || c->nbytes % (size_t)N)
      return false;
    size_t r = c->nbytes / (size_t)N;
    if (j == 0) *row = r;
    if (r != *row || !r) return false;
    /* rank >= 2 with N leading (B (N, kb, bs/2)), or a flat rank-1 array */
    if (c->rank != c0->rank || (c->rank >= 2 && c->dims[0] != N) || c->rank < 1) return false;
    for (int d = 1; d < c->rank; d++)
      if (c->dims[d] != c0->dims[d]) return false;
  }
  return true;
}

/* The stacked constant of input i (the n nodes' row blocks back to back) as a new value *id,
 * named after the first one's with suffix. */
static fbx_status *fbx__pq_stack(fbx_ir_graph *g, const fbx_ir_node *const *m, int n, int i, size_t row,
                                 const char *suffix, int *id) {
  int64_t ntot = 0;
  for (int j = 0; j < n; j++) ntot += m[j]->params.nbits.N;
  const fbx_ir_value *c0 = &g->values[m[0]->inputs[i]];
  int64_t dims[FBX_MAX_RANK];
  int rank = c0->rank;
  memcpy(dims, c0->dims, sizeof(int64_t) * (size_t)rank);
  dims[0] = rank == 1 ? ntot * (int64_t)(row / fbx_dtype_size(c0->dtype)) : ntot;
  if (rank == 1 && row % fbx_dtype_size(c0->dtype)) return FBX_ERR("pack nbits: a row of %zu bytes", row);
  char *buf = fbx_malloc(row * (size_t)ntot);
  if (!buf) return FBX_ERR_OOM();
  size_t at = 0;
  for (int j = 0; j < n; j++) {
    const fbx_ir_value *c = &g->values[m[j]->inputs[i]];
    memcpy(buf + at, c->data, c->nbytes);
    at += c->nbytes;
  }
  char name[256];
  snprintf(name, sizeof name, "%s|%s", c0->name ? c0->name : "w", suffix);
  fbx_status *st = fbx_ir_graph_add_const(g, name, c0->dtype, rank, dims, buf, id); /* copied into the arena */
  fbx_free(buf);
  return st;
}

enum { FBX__PQ_INS = 5 }; /* MATMUL_NBITS: (A, B, scales, zero_points, bias) */

/* Whether the n projections mid can be stacked (the conditions above); row: each input's
 * bytes per column (0: absent). */
static bool fbx__pq_packable(const fbx_ir_graph *g, const int *mid, int n, size_t row[FBX__PQ_INS]) {
  const fbx_ir_node *m[3];
  for (int j = 0; j < n; j++) m[j] = &g->nodes[mid[j]];
  for (int j = 0; j < n; j++) {
    const fbx_ir_node *x = m[j];
    if (x->n_inputs > FBX__PQ_INS || x->params.nbits.glu) return false;
    for (int k = 0; k < j; k++)
      if (mid[k] == mid[j]) return false;
    if (x->inputs[0] != m[0]->inputs[0] || x->params.nbits.K != m[0]->params.nbits.K ||
        x->params.nbits.bits != m[0]->params.nbits.bits || x->params.nbits.block_size != m[0]->params.nbits.block_size ||
        x->params.nbits.accuracy_level != m[0]->params.nbits.accuracy_level ||
        x->params.nbits.zp_u8 != m[0]->params.nbits.zp_u8)
      return false;
  }
  for (int i = 0; i < FBX__PQ_INS; i++) row[i] = 0;
  for (int i = 1; i < FBX__PQ_INS; i++)
    if (!fbx__pq_stackable(g, m, n, i, &row[i]) || (i < 3 && !row[i])) return false;
  return true;
}

/* Node mid[0] becomes the projection over the n nodes' stacked weights (N = their sum), named
 * "a+b(+c)"; its output value's last dim follows. */
static fbx_status *fbx__pq_stack_into(fbx_ir_graph *g, const int *mid, int n, const size_t row[FBX__PQ_INS],
                                      const char *suffix) {
  const fbx_ir_node *m[3];
  int c[FBX__PQ_INS] = {FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE};
  for (int i = 1; i < FBX__PQ_INS; i++)
    if (row[i]) {
      for (int j = 0; j < n; j++) m[j] = &g->nodes[mid[j]]; /* values may have moved: nodes not */
      FBX_TRY(fbx__pq_stack(g, m, n, i, row[i], suffix, &c[i]));
    }
  for (int j = 0; j < n; j++) m[j] = &g->nodes[mid[j]];
  int64_t ntot = 0;
  char name[256];
  int at = 0;
  for (int j = 0; j < n; j++) {
    ntot += m[j]->params.nbits.N;
    at += snprintf(name + at, sizeof name - (size_t)at, "%s%s", j ? "+" : "", m[j]->name ? m[j]->name : "proj");
    if (at >= (int)sizeof name) at = (int)sizeof name - 1;
  }
  int *ins = fbx_ir_graph_alloc(g, sizeof(int) * FBX__PQ_INS);
  const char *nm = fbx_ir_graph_strdup(g, name);
  if (!ins || !nm) return FBX_ERR_OOM();
  fbx_ir_node *q = &g->nodes[mid[0]];
  ins[0] = q->inputs[0];
  for (int i = 1; i < FBX__PQ_INS; i++) ins[i] = c[i];
  q->inputs = ins;
  q->n_inputs = FBX__PQ_INS;
  q->params.nbits.N = ntot;
  q->name = nm;
  fbx_ir_value *qv = &g->values[q->outputs[0]];
  if (qv->rank >= 1) qv->dims[qv->rank - 1] = ntot;
  return NULL;
}

/* Remove the nodes marked in drop, renumbering the rest (producers follow). */
static void fbx__pq_compact(fbx_ir_graph *g, const bool *drop) {
  int w = 0;
  for (int r = 0; r < g->n_nodes; r++) {
    if (drop[r]) continue;
    if (w != r) g->nodes[w] = g->nodes[r];
    for (int o = 0; o < g->nodes[w].n_outputs; o++) g->values[g->nodes[w].outputs[o]].producer = w;
    w++;
  }
  g->n_nodes = w;
}

/* uses[v]: the graph outputs and node inputs that read value v; drop: one flag per node. */
static fbx_status *fbx__pq_begin(const fbx_ir_graph *g, int **uses, bool **drop) {
  *uses = fbx_calloc((size_t)g->n_values + 1, sizeof(int));
  *drop = fbx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
  if (!*uses || !*drop) {
    fbx_free(*uses);
    fbx_free(*drop);
    return FBX_ERR_OOM();
  }
  for (int i = 0; i < g->n_outputs; i++) (*uses)[g->outputs[i]]++;
  for (int nid = 0; nid < g->n_nodes; nid++)
    for (int i = 0; i < g->nodes[nid].n_inputs; i++)
      if (g->nodes[nid].inputs[i] != FBX_IR_NONE) (*uses)[g->nodes[nid].inputs[i]]++;
  return NULL;
}

static fbx_status *fbx__pq_end(fbx_ir_graph *g, fbx_status *st, int packed, int *uses, bool *drop) {
  if (!st && packed) fbx__pq_compact(g, drop);
  fbx_free(uses);
  fbx_free(drop);
  return st;
}

fbx_status *fbx_ir_pack_qkv(fbx_ir_graph *g, int *packed) {
  *packed = 0;
  int *uses;
  bool *drop;
  FBX_TRY(fbx__pq_begin(g, &uses, &drop));
  fbx_status *st = NULL;
  for (int a = 0; a < g->n_nodes && !st; a++) {
    const fbx_ir_node *an = &g->nodes[a];
    if (an->op != FBX_IR_OP_GQA || an->n_inputs < 3) continue;
    int mid[3] = {-1, -1, -1};
    bool ok = true;
    for (int j = 0; j < 3 && ok; j++) { /* each projection read by this attention alone */
      const int v = an->inputs[j];
      ok = v != FBX_IR_NONE && uses[v] == 1 && (mid[j] = fbx__pq_op_of(g, drop, v, FBX_IR_OP_MATMUL_NBITS)) >= 0;
    }
    if (!ok) continue;
    const int nh = an->params.gqa.num_heads, kvh = an->params.gqa.kv_num_heads;
    const int64_t Nq = g->nodes[mid[0]].params.nbits.N, H = nh > 0 ? Nq / nh : 0;
    ok = nh > 0 && kvh > 0 && H > 0 && Nq == nh * H && g->nodes[mid[1]].params.nbits.N == kvh * H &&
         g->nodes[mid[2]].params.nbits.N == kvh * H;
    size_t row[FBX__PQ_INS];
    if (!ok || !fbx__pq_packable(g, mid, 3, row)) continue;
    int *gins = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)an->n_inputs);
    if (!gins) {
      st = FBX_ERR_OOM();
      break;
    }
    if ((st = fbx__pq_stack_into(g, mid, 3, row, "packed_qkv"))) break;
    an = &g->nodes[a];
    memcpy(gins, an->inputs, sizeof(int) * (size_t)an->n_inputs);
    gins[1] = gins[2] = FBX_IR_NONE;
    g->nodes[a].inputs = gins;
    drop[mid[1]] = drop[mid[2]] = true;
    ++*packed;
  }
  return fbx__pq_end(g, st, *packed, uses, drop);
}

/* Node y = Mul(Mul(gv, Sigmoid(gv)), uv), either order of both Muls: its gate and up values
 * (*gv, *uv) and the Sigmoid and inner Mul nodes (*sig, *inner), when the intermediate values
 * are read by the pattern alone (gv: twice, the rest once). */
static bool fbx__pq_swiglu(const fbx_ir_graph *g, const int *uses, const bool *drop, int y, int *gv, int *uv,
                           int *sig, int *inner) {
  const fbx_ir_node *yn = &g->nodes[y];
  if (yn->op != FBX_IR_OP_MUL || yn->n_inputs != 2 || yn->n_outputs != 1) return false;
  for (int side = 0; side < 2; side++) {
    int sv = yn->inputs[side], other = yn->inputs[1 - side];
    int in = fbx__pq_op_of(g, drop, sv, FBX_IR_OP_MUL);
    if (in < 0 || uses[sv] != 1 || g->nodes[in].n_inputs != 2) continue;
    for (int k = 0; k < 2; k++) {
      int g0 = g->nodes[in].inputs[k], s0 = g->nodes[in].inputs[1 - k];
      int sn = fbx__pq_op_of(g, drop, s0, FBX_IR_OP_SIGMOID);
      if (sn < 0 || uses[s0] != 1 || g->nodes[sn].n_inputs != 1 || g->nodes[sn].inputs[0] != g0) continue;
      if (uses[g0] != 2 || other == g0 || uses[other] != 1) continue;
      *gv = g0, *uv = other, *sig = sn, *inner = in;
      return true;
    }
  }
  return false;
}

fbx_status *fbx_ir_pack_glu(fbx_ir_graph *g, int *packed) {
  *packed = 0;
  int *uses;
  bool *drop;
  FBX_TRY(fbx__pq_begin(g, &uses, &drop));
  fbx_status *st = NULL;
  for (int y = 0; y < g->n_nodes && !st; y++) {
    int gv, uv, sig, inner;
    if (drop[y] || !fbx__pq_swiglu(g, uses, drop, y, &gv, &uv, &sig, &inner)) continue;
    int mid[2] = {fbx__pq_op_of(g, drop, gv, FBX_IR_OP_MATMUL_NBITS), fbx__pq_op_of(g, drop, uv, FBX_IR_OP_MATMUL_NBITS)};
    size_t row[FBX__PQ_INS];
    if (mid[0] < 0 || mid[1] < 0 || g->nodes[mid[0]].params.nbits.N != g->nodes[mid[1]].params.nbits.N ||
        g->values[gv].dtype != FBX_DTYPE_F32 || g->values[g->nodes[y].outputs[0]].dtype != FBX_DTYPE_F32 ||
        !fbx__pq_packable(g, mid, 2, row))
      continue;
    /* the packed node stays in the gate's place (the activation is ready before both
     * projections) and writes y's value, whose readers all come after the final Mul */
    if ((st = fbx__pq_stack_into(g, mid, 2, row, "packed_glu"))) break;
    fbx_ir_node *q = &g->nodes[mid[0]];
    const int yv = g->nodes[y].outputs[0], old = q->outputs[0];
    int *outs = fbx_ir_graph_alloc(g, sizeof(int));
    if (!outs) {
      st = FBX_ERR_OOM();
      break;
    }
    outs[0] = yv;
    q->outputs = outs;
    q->params.nbits.glu = 1;
    g->values[yv].producer = mid[0];
    /* the values only the pattern read have no producer now */
    const int orphans[4] = {old, uv, g->nodes[sig].outputs[0], g->nodes[inner].outputs[0]};
    for (int k = 0; k < 4; k++) g->values[orphans[k]].producer = FBX_IR_NONE;
    drop[mid[1]] = drop[sig] = drop[inner] = drop[y] = true;
    ++*packed;
  }
  return fbx__pq_end(g, st, *packed, uses, drop);
}
