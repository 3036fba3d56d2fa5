/* Three MatMulNBits projections of one activation feeding one
 * GroupQueryAttention as query, key and value (ONNX Runtime GenAI's model
 * builder emits q_proj, k_proj and v_proj so) become one MatMulNBits over the
 * three weight sets stacked along N, feeding the attention's packed form
 * (query = q | k | v per token, key and value absent).
 *
 * Why: a decode step is latency-bound, and the key and value projections are
 * tiny (Qwen2.5-0.5B: N = 128 each against q's 896): three launches and three
 * passes over the activation become one, with 1152 columns to spread over the
 * device. Every column is computed exactly as before (its weights, scales and
 * zero point are the same bytes, its accumulation along K the same), so the
 * results are unchanged.
 *
 * The weights, scales and zero points are laid out column after column
 * (N rows of equal size, ORT's contrib-op layout), so stacking is a byte
 * concatenation. Applies when: the three outputs are read by that attention
 * alone; the projections share the activation, K, bits, block size,
 * accuracy level and zero-point form, have constant weights and scales,
 * and constant zero points and biases (each all or none; Qwen's projections
 * have biases); N of q is num_heads * H
 * and N of k and v kv_num_heads * H. Runs once on a compiled subgraph's own
 * graph, before any plan or prepared state exists (node ids change: the two
 * dropped nodes are removed and the rest renumbered). */
#include <string.h>

#include "../base/alloc.h"
#include "ir_passes.h"

/* The MatMulNBits node producing value v and read once, or -1. */
static int fbx__pq_producer(const fbx_ir_graph *g, const int *uses, int v) {
  if (v == FBX_IR_NONE || g->values[v].kind != FBX_IR_VALUE_NODE || uses[v] != 1) return -1;
  int p = g->values[v].producer;
  if (p < 0 || g->nodes[p].op != FBX_IR_OP_MATMUL_NBITS || g->nodes[p].n_outputs != 1) return -1;
  return p;
}

static int fbx__pq_in(const fbx_ir_node *n, int i) { return i < n->n_inputs ? n->inputs[i] : FBX_IR_NONE; }

/* Whether input i of the three nodes is stackable: all absent (*row = 0), or
 * constants of one dtype whose bytes are N rows of one size *row. */
static bool fbx__pq_stackable(const fbx_ir_graph *g, const fbx_ir_node *const m[3], int i, size_t *row) {
  *row = 0;
  int absent = 0;
  for (int j = 0; j < 3; j++) absent += fbx__pq_in(m[j], i) == FBX_IR_NONE;
  if (absent == 3) return true;
  if (absent) return false;
  for (int j = 0; j < 3; j++) {
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

/* The stacked constant of input i (three row blocks back to back) as a new value; *id. */
static fbx_status *fbx__pq_stack(fbx_ir_graph *g, const fbx_ir_node *const m[3], int i, size_t row, int *id) {
  int64_t ntot = 0;
  for (int j = 0; j < 3; j++) ntot += m[j]->params.nbits.N;
  const fbx_ir_value *c0 = &g->values[m[0]->inputs[i]];
  int64_t dims[FBX_MAX_RANK];
  int rank = c0->rank;
  memcpy(dims, c0->dims, sizeof(int64_t) * (size_t)rank);
  dims[0] = rank == 1 ? ntot * (int64_t)(row / fbx_dtype_size(c0->dtype)) : ntot;
  if (rank == 1 && row % fbx_dtype_size(c0->dtype)) return FBX_ERR("pack qkv: a row of %zu bytes", row);
  char *buf = fbx_malloc(row * (size_t)ntot);
  if (!buf) return FBX_ERR_OOM();
  size_t at = 0;
  for (int j = 0; j < 3; j++) {
    const fbx_ir_value *c = &g->values[m[j]->inputs[i]];
    memcpy(buf + at, c->data, c->nbytes);
    at += c->nbytes;
  }
  char name[256];
  snprintf(name, sizeof name, "%s|packed_qkv", c0->name ? c0->name : "w");
  fbx_status *st = fbx_ir_graph_add_const(g, name, c0->dtype, rank, dims, buf, id); /* copied into the arena */
  fbx_free(buf);
  return st;
}

enum { FBX__PQ_INS = 5 }; /* MATMUL_NBITS: (A, B, scales, zero_points, bias) */

/* Pack the three projections of attention node a (their ids in m) into m[0]. */
static fbx_status *fbx__pq_apply(fbx_ir_graph *g, int a, const int mid[3], const size_t row[FBX__PQ_INS]) {
  const fbx_ir_node *m[3] = {&g->nodes[mid[0]], &g->nodes[mid[1]], &g->nodes[mid[2]]};
  int c[FBX__PQ_INS] = {FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE, FBX_IR_NONE};
  for (int i = 1; i < FBX__PQ_INS; i++)
    if (row[i]) {
      FBX_TRY(fbx__pq_stack(g, m, i, row[i], &c[i]));
      m[0] = &g->nodes[mid[0]], m[1] = &g->nodes[mid[1]], m[2] = &g->nodes[mid[2]]; /* values may have moved */
    }
  fbx_ir_node *q = &g->nodes[mid[0]];
  const int64_t ntot = q->params.nbits.N + m[1]->params.nbits.N + m[2]->params.nbits.N;
  const int n_in = FBX__PQ_INS;
  int *ins = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)n_in);
  int *gins = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)g->nodes[a].n_inputs);
  char name[256];
  snprintf(name, sizeof name, "%s+%s+%s", q->name ? q->name : "q", m[1]->name ? m[1]->name : "k",
           m[2]->name ? m[2]->name : "v");
  const char *nm = fbx_ir_graph_strdup(g, name);
  if (!ins || !gins || !nm) return FBX_ERR_OOM();
  ins[0] = q->inputs[0];
  for (int i = 1; i < n_in; i++) ins[i] = c[i];
  q->inputs = ins;
  q->n_inputs = n_in;
  q->params.nbits.N = ntot;
  q->name = nm;
  fbx_ir_value *qv = &g->values[q->outputs[0]];
  if (qv->rank >= 1) qv->dims[qv->rank - 1] = ntot;
  fbx_ir_node *an = &g->nodes[a];
  memcpy(gins, an->inputs, sizeof(int) * (size_t)an->n_inputs);
  gins[1] = gins[2] = FBX_IR_NONE;
  an->inputs = gins;
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

fbx_status *fbx_ir_pack_qkv(fbx_ir_graph *g, int *packed) {
  *packed = 0;
  int *uses = fbx_calloc((size_t)g->n_values + 1, sizeof(int));
  bool *drop = fbx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
  if (!uses || !drop) {
    fbx_free(uses);
    fbx_free(drop);
    return FBX_ERR_OOM();
  }
  for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
  for (int nid = 0; nid < g->n_nodes; nid++)
    for (int i = 0; i < g->nodes[nid].n_inputs; i++)
      if (g->nodes[nid].inputs[i] != FBX_IR_NONE) uses[g->nodes[nid].inputs[i]]++;
  fbx_status *st = NULL;
  for (int a = 0; a < g->n_nodes && !st; a++) {
    const fbx_ir_node *an = &g->nodes[a];
    if (an->op != FBX_IR_OP_GQA || an->n_inputs < 3) continue;
    int mid[3] = {-1, -1, -1};
    bool ok = true;
    for (int j = 0; j < 3 && ok; j++) ok = (mid[j] = fbx__pq_producer(g, uses, an->inputs[j])) >= 0 && !drop[mid[j]];
    if (!ok || mid[0] == mid[1] || mid[1] == mid[2] || mid[0] == mid[2]) continue;
    const fbx_ir_node *m[3] = {&g->nodes[mid[0]], &g->nodes[mid[1]], &g->nodes[mid[2]]};
    const int nh = an->params.gqa.num_heads, kvh = an->params.gqa.kv_num_heads;
    const int64_t Nq = m[0]->params.nbits.N, H = nh > 0 ? Nq / nh : 0;
    ok = nh > 0 && kvh > 0 && H > 0 && Nq == nh * H && m[1]->params.nbits.N == kvh * H &&
         m[2]->params.nbits.N == kvh * H;
    for (int j = 1; j < 3 && ok; j++) {
      const fbx_ir_node *x = m[j];
      ok = x->inputs[0] == m[0]->inputs[0] && x->params.nbits.K == m[0]->params.nbits.K &&
           x->params.nbits.bits == m[0]->params.nbits.bits &&
           x->params.nbits.block_size == m[0]->params.nbits.block_size &&
           x->params.nbits.accuracy_level == m[0]->params.nbits.accuracy_level &&
           x->params.nbits.zp_u8 == m[0]->params.nbits.zp_u8;
    }
    for (int j = 0; j < 3 && ok; j++) ok = m[j]->n_inputs <= FBX__PQ_INS;
    size_t row[FBX__PQ_INS] = {0, 0, 0, 0, 0};
    for (int i = 1; i < FBX__PQ_INS && ok; i++) ok = fbx__pq_stackable(g, m, i, &row[i]) && (i >= 3 || row[i]);
    if (!ok) continue;
    st = fbx__pq_apply(g, a, mid, row);
    drop[mid[1]] = drop[mid[2]] = true;
    ++*packed;
  }
  if (!st && *packed) fbx__pq_compact(g, drop);
  fbx_free(uses);
  fbx_free(drop);
  return st;
}
