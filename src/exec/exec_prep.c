/* Prepared node states (backend node_prepare, e.g. packed MatMul weights)
 * shared by every plan of one compiled subgraph.
 *
 * Why: each cache key (the decode plan, one plan per prefill length) used to
 * prepare its nodes again, so a decoder's weights were packed once per plan
 * (time on the first prefill AND the first decode step, memory per plan).
 *
 * Key: the original graph node id. A plan node may use the shared state only
 * when it is that original node unchanged (same op, params, inputs) and its
 * constant inputs are the original constants (same value ids, same data), so
 * nodes rewritten by fusion or fed by constants folded in one plan prepare
 * per plan as before (they are small). */
#include <string.h>

#include "../base/alloc.h"
#include "../trace/trace.h"
#include "exec_plan.h"

/* Call node_prepare for node nid of g. Constant inputs pass host data (the
 * graph's copy) in const_inputs and backend memory in inputs: dev[v] when
 * given, else the graph's host data. *called tells whether node_prepare ran
 * (false when the node has no constant input). */
fbx_status *fbx__ir_node_prepare(fbx_backend *be, const fbx_ir_graph *g, int nid, void *const *dev, void **state,
                                 bool *called) {
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor ins[FBX_IR_MAX_INPUTS], host[FBX_IR_MAX_INPUTS];
  const fbx_tensor *hp[FBX_IR_MAX_INPUTS];
  bool any = false;
  *state = NULL;
  *called = false;
  if (!be->vt->node_prepare) return NULL;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    hp[i] = NULL;
    memset(&ins[i], 0, sizeof ins[i]);
    ins[i].rank = -1;
    if (v == FBX_IR_NONE) continue;
    const fbx_ir_value *val = &g->values[v];
    ins[i].dtype = val->dtype;
    ins[i].rank = val->rank;
    memcpy(ins[i].dims, val->dims, sizeof ins[i].dims);
    if (val->kind != FBX_IR_VALUE_CONST) continue;
    ins[i].data = dev && dev[v] ? dev[v] : val->data;
    host[i] = ins[i];
    host[i].data = val->data;
    hp[i] = &host[i];
    any = true;
  }
  if (!any) return NULL;
  FBX_TRY(be->vt->node_prepare(be, n, hp, ins, state));
  *called = true;
  return NULL;
}

fbx_status *fbx__ir_prep_cache_create(const fbx_ir_graph *g, fbx_backend *be, void *const *const_bufs,
                                      fbx__ir_prep_cache **out) {
  *out = NULL;
  fbx__ir_prep_cache *pc = fbx_calloc(1, sizeof(*pc));
  if (!pc) return FBX_ERR_OOM();
  pc->g = g;
  pc->be = be;
  pc->const_bufs = const_bufs;
  pc->state = fbx_calloc((size_t)g->n_nodes + 1, sizeof(void *));
  pc->done = fbx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
  pc->failed = fbx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
  if (!pc->state || !pc->done || !pc->failed) {
    fbx__ir_prep_cache_destroy(pc);
    return FBX_ERR_OOM();
  }
  *out = pc;
  return NULL;
}

void fbx__ir_prep_cache_destroy(fbx__ir_prep_cache *pc) {
  if (!pc) return;
  if (pc->state && pc->done)
    for (int nid = 0; nid < pc->g->n_nodes; nid++)
      if (pc->done[nid] && pc->be->vt->node_release)
        pc->be->vt->node_release(pc->be, &pc->g->nodes[nid], pc->state[nid]);
  fbx_free(pc->state);
  fbx_free(pc->done);
  fbx_free(pc->failed);
  fbx_free(pc);
}

/* Prepare node nid of the original graph into the cache (once). A failure is
 * remembered and not retried here; the plan then prepares per plan and
 * reports the error itself (-> eager fallback). */
static fbx_status *fbx__ir_prep_cache_fill(fbx__ir_prep_cache *pc, int nid) {
  if (pc->done[nid] || pc->failed[nid]) return NULL;
  bool called = false;
  fbx_status *st = fbx__ir_node_prepare(pc->be, pc->g, nid, pc->const_bufs, &pc->state[nid], &called);
  if (st) {
    pc->failed[nid] = true;
    pc->state[nid] = NULL;
    return st;
  }
  pc->done[nid] = called;
  if (called) pc->n_prepared++;
  return NULL;
}

void fbx__ir_prep_cache_eager(fbx__ir_prep_cache *pc) {
  const fbx_ir_graph *g = pc->g;
  if (!pc->be->vt->node_prepare) return;
  uint64_t t0 = fbx_trace_now_ns();
  for (int nid = 0; nid < g->n_nodes; nid++) {
    const fbx_ir_node *n = &g->nodes[nid];
    bool any_const = false, any_run = false;
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v == FBX_IR_NONE) continue;
      if (g->values[v].kind == FBX_IR_VALUE_CONST) any_const = true;
      else any_run = true;
    }
    /* all-constant nodes are folded by plans (on the host): prepare those
     * lazily, only if a plan keeps them as steps */
    if (!any_const || (!any_run && pc->folds)) continue;
    fbx_status *st = fbx__ir_prep_cache_fill(pc, nid);
    fbx_status_free(st); /* retried per plan, where the error is reported */
  }
  uint64_t t1 = fbx_trace_now_ns();
  pc->eager_ns = t1 - t0;
  if (fbx_trace_enabled()) {
    fbx_trace_arg a[] = {FBX_TARG_I("nodes_prepared", pc->n_prepared)};
    fbx_trace_complete("ir.prepare_shared", "ir", t0, t1, a, 1);
  }
}

/* Is plan node nid of pg the original node nid, unchanged, over the same constants? */
static bool fbx__ir_prep_same_node(const fbx_ir_graph *og, const fbx_ir_graph *pg, int nid) {
  if (nid >= og->n_nodes) return false;
  const fbx_ir_node *a = &og->nodes[nid], *b = &pg->nodes[nid];
  if (a->op != b->op || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs) return false;
  if (memcmp(&a->params, &b->params, sizeof a->params) != 0) return false;
  for (int i = 0; i < a->n_inputs; i++) {
    int v = a->inputs[i];
    if (v != b->inputs[i]) return false;
    if (v == FBX_IR_NONE) continue;
    const fbx_ir_value *ov = &og->values[v], *pv = &pg->values[v];
    bool oc = ov->kind == FBX_IR_VALUE_CONST, pcst = pv->kind == FBX_IR_VALUE_CONST;
    if (oc != pcst) return false; /* folded in this plan: prepare-relevant inputs differ */
    if (oc && (ov->data != pv->data || ov->dtype != pv->dtype || ov->rank != pv->rank ||
               memcmp(ov->dims, pv->dims, sizeof ov->dims) != 0))
      return false;
  }
  return true;
}

bool fbx__ir_prep_cache_get(fbx__ir_prep_cache *pc, const fbx_ir_graph *pg, int nid, void **state) {
  *state = NULL;
  if (!pc || !fbx__ir_prep_same_node(pc->g, pg, nid)) return false;
  /* an error here is not final: the caller prepares per plan and reports it */
  if (!pc->done[nid] && !pc->failed[nid]) fbx_status_free(fbx__ir_prep_cache_fill(pc, nid));
  if (!pc->done[nid]) return false;
  *state = pc->state[nid];
  return true;
}
