/* Transpose of the last two dims folded into the MatMul that reads it as B.
 *
 * Attention written as MatMul(q, Transpose(K, perm [0,1,3,2])) (our
 * models/gen_decoder.py, most exported decoders) otherwise copies the whole
 * key cache, (B, heads, past, head_dim), once per layer and decode step, to
 * hand the MatMul a (B, heads, head_dim, past) operand it then reads once.
 * With trans_b the MatMul reads the cache where it lies: at M = 1 that is a
 * dot product of q with each contiguous 64-float key row.
 *
 * Rewrite: MatMul(A, T) with T = Transpose(X, perm swapping only the last
 * two dims) becomes MatMul(A, X) with trans_b toggled. The Transpose dies
 * when every use of T is such a B operand and T is no graph output; otherwise
 * nothing changes (the copy would still be made, and reading both layouts
 * would not save it). Runs on a plan's own (cloned) graph. */
#include "../base/alloc.h"
#include "ir_passes.h"

/* perm is the identity but for its last two entries, which are swapped. */
static bool fbx__ir_tb_swaps_last_two(const fbx_ir_node *t, int rank) {
  if (rank < 2) return false;
  const int *perm = t->params.transpose.perm;
  for (int d = 0; d < rank - 2; d++)
    if (perm[d] != d) return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

fbx_status *fbx__ir_fold_transpose_matmul(fbx_ir_graph *g, bool *dead) {
  /* per value: uses by live nodes that are not "input 1 of a MATMUL" */
  int *other_uses = fbx_calloc((size_t)g->n_values + 1, sizeof(int));
  if (!other_uses) return FBX_ERR_OOM();
  for (int i = 0; i < g->n_outputs; i++) other_uses[g->outputs[i]]++;
  for (int nid = 0; nid < g->n_nodes; nid++) {
    if (dead[nid]) continue;
    const fbx_ir_node *n = &g->nodes[nid];
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      bool as_b = n->op == FBX_IR_OP_MATMUL && i == 1 && n->n_inputs == 2;
      if (v != FBX_IR_NONE && !as_b) other_uses[v]++;
    }
  }
  for (int tid = 0; tid < g->n_nodes; tid++) {
    fbx_ir_node *t = &g->nodes[tid];
    if (dead[tid] || t->op != FBX_IR_OP_TRANSPOSE || t->n_inputs != 1 || t->n_outputs != 1) continue;
    int x = t->inputs[0], tv = t->outputs[0];
    if (x == FBX_IR_NONE || other_uses[tv] != 0) continue;
    const fbx_ir_value *xv = &g->values[x];
    if (xv->dtype != g->values[tv].dtype || xv->rank != g->values[tv].rank) continue;
    if (!fbx__ir_tb_swaps_last_two(t, xv->rank)) continue;
    for (int nid = 0; nid < g->n_nodes; nid++) {
      fbx_ir_node *m = &g->nodes[nid];
      if (dead[nid] || m->op != FBX_IR_OP_MATMUL || m->n_inputs != 2 || m->inputs[1] != tv) continue;
      /* a cloned plan graph borrows its nodes' input arrays: a new one */
      int *ins = fbx_ir_graph_alloc(g, sizeof(int) * 2);
      if (!ins) {
        fbx_free(other_uses);
        return FBX_ERR_OOM();
      }
      ins[0] = m->inputs[0];
      ins[1] = x;
      m->inputs = ins;
      m->params.matmul.trans_b = !m->params.matmul.trans_b;
    }
    dead[tid] = true;
  }
  fbx_free(other_uses);
  return NULL;
}
