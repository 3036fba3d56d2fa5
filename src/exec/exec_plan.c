/* Plan building: clone the graph, run the passes (fold, fuse), prepare
 * nodes with constant inputs, and assign buffer slots by liveness. */
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/arena.h"
#include "exec_plan.h"
#include "../trace/trace.h"

/* Shallow clone: arrays copied into a new arena, constant data, names and
 * node input/output arrays borrowed from src (which outlives the plan). */
static fbx_status *fbx__ir_graph_clone(const fbx_ir_graph *src, fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  g->values = fbx_ir_graph_alloc(g, sizeof(fbx_ir_value) * (size_t)(src->n_values + 1));
  g->nodes = fbx_ir_graph_alloc(g, sizeof(fbx_ir_node) * (size_t)(src->n_nodes + 1));
  g->inputs = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)(src->n_inputs + 1));
  g->outputs = fbx_ir_graph_alloc(g, sizeof(int) * (size_t)(src->n_outputs + 1));
  if (!g->values || !g->nodes || !g->inputs || !g->outputs) {
    fbx_ir_graph_destroy(g);
    return FBX_ERR_OOM();
  }
  if (src->n_values) memcpy(g->values, src->values, sizeof(fbx_ir_value) * (size_t)src->n_values);
  if (src->n_nodes) memcpy(g->nodes, src->nodes, sizeof(fbx_ir_node) * (size_t)src->n_nodes);
  if (src->n_inputs) memcpy(g->inputs, src->inputs, sizeof(int) * (size_t)src->n_inputs);
  if (src->n_outputs) memcpy(g->outputs, src->outputs, sizeof(int) * (size_t)src->n_outputs);
  g->n_values = g->cap_values = src->n_values;
  g->n_nodes = g->cap_nodes = src->n_nodes;
  g->n_inputs = g->cap_inputs = src->n_inputs;
  g->n_outputs = g->cap_outputs = src->n_outputs;
  *out = g;
  return NULL;
}

void fbx__ir_host_free(fbx__ir_plan *p, int v) {
  if (!p->host_ptr[v]) return;
  if (p->need_dev[v]) fbx_backend_host_free(p->be, FBX_BUFT_HOST_PINNED, p->host_ptr[v]);
  else fbx_free_aligned(p->host_ptr[v]);
  p->host_ptr[v] = NULL;
  p->host_cap[v] = 0;
}

void fbx__ir_plan_destroy(fbx__ir_plan *p) {
  if (!p) return;
  fbx_backend *be = p->be;
  if (p->states && p->prepared)
    for (int i = 0; i < p->n_steps; i++) {
      int nid = p->steps[i];
      if (p->prepared[nid] && be->vt->node_release) be->vt->node_release(be, &p->g->nodes[nid], p->states[nid]);
    }
  for (int s = 0; s < p->n_slots; s++)
    if (p->slot_ptr[s]) be->vt->buffer_free(be, p->slot_ptr[s]);
  if (p->owned_const)
    for (int v = 0; v < p->g->n_values; v++)
      if (p->owned_const[v]) be->vt->buffer_free(be, p->owned_const[v]);
  if (p->in_buf)
    for (int i = 0; i < p->g->n_inputs; i++)
      if (p->in_buf[i]) be->vt->buffer_free(be, p->in_buf[i]);
  if (p->host_ptr)
    for (int v = 0; v < p->g->n_values; v++) fbx__ir_host_free(p, v);
  for (int k = 0; k < p->n_segs; k++) {
    if (p->segs[k].graph) be->vt->graph_destroy(be, p->segs[k].graph);
    fbx_free(p->segs[k].prev.w);
    fbx_free(p->segs[k].cap.w);
  }
  if (p->cf)
    for (int i = 0; i < p->g->n_nodes; i++) fbx__exec_cf_free(p, p->cf[i]);
  fbx_free(p->cf);
  fbx_free(p->segs);
  fbx_free(p->seg_at);
  fbx_free(p->sig_at);
  fbx_free(p->shape_h);
  fbx_free(p->shape_h_prev);
  fbx_free(p->dyn);
  if (p->priv_ptr)
    for (int v = 0; v < p->g->n_values; v++)
      if (p->priv_ptr[v]) be->vt->buffer_free(be, p->priv_ptr[v]);
  fbx_free(p->app_node);
  fbx_free(p->app_out);
  fbx_free(p->app_in);
  fbx_free(p->priv_ptr);
  fbx_free(p->priv_cap);
  fbx_free(p->out_bound);
  fbx_free(p->out_mode);
  fbx_free(p->out_delta);
  fbx_free(p->sig.w);
  fbx_free(p->steps);
  fbx_free(p->states);
  fbx_free(p->prepared);
  fbx_free(p->fast_names);
  fbx_free(p->sites); /* the sites belong to the trace session */
  fbx_free(p->slot_of);
  fbx_free(p->direct_out);
  fbx_free(p->out_alias);
  fbx_free(p->out_pos);
  fbx_free(p->slot_ptr);
  fbx_free(p->slot_cap);
  fbx_free(p->owned_const);
  fbx_free(p->rt);
  fbx_free(p->in_buf);
  fbx_free(p->in_cap);
  fbx_free(p->in_last);
  fbx_free(p->in_stage);
  fbx_free(p->out_last);
  fbx_free(p->out_stage);
  fbx_free(p->host_step);
  fbx_free(p->need_dev);
  fbx_free(p->view);
  fbx_free(p->in_dev);
  fbx_free(p->hdata);
  fbx_free(p->host_ptr);
  fbx_free(p->host_cap);
  if (p->owns_graph) fbx_ir_graph_destroy(p->g);
  fbx_free(p);
}

/* Constants: point run-time tensors at backend memory. Original constants use
 * the compiled object's copies; folded ones get a plan-owned copy when the
 * backend is not host-visible (host-visible: the plan arena data is used). */
static fbx_status *fbx__ir_plan_consts(fbx__ir_plan *p, const fbx_ir_graph *orig, void *const *const_bufs) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  for (int v = 0; v < g->n_values; v++) {
    fbx_ir_value *val = &g->values[v];
    if (val->kind != FBX_IR_VALUE_CONST) continue;
    fbx_tensor *t = &p->rt[v];
    t->dtype = val->dtype;
    t->rank = val->rank;
    memcpy(t->dims, val->dims, sizeof t->dims);
    if (p->hdata) p->hdata[v] = val->data; /* host steps read the graph's copy */
    bool original = v < orig->n_values && orig->values[v].kind == FBX_IR_VALUE_CONST;
    if (original && const_bufs && const_bufs[v]) {
      t->data = const_bufs[v];
    } else if (be->vt->host_visible) {
      t->data = val->data;
    } else {
      FBX_TRY(be->vt->buffer_alloc(be, val->nbytes ? val->nbytes : 64, &p->owned_const[v]));
      if (val->nbytes) FBX_TRY(be->vt->copy_from_host(be, p->owned_const[v], val->data, val->nbytes));
      t->data = p->owned_const[v];
    }
  }
  return NULL;
}

/* Node states for steps with constant inputs: the compiled object's shared
 * state when this node is an original node over original constants, else
 * prepared (and later released) by this plan. */
static fbx_status *fbx__ir_plan_prepare(fbx__ir_plan *p, fbx__ir_prep_cache *prep) {
  fbx_backend *be = p->be;
  fbx_ir_graph *g = p->g;
  if (!be->vt->node_prepare) return NULL;
  void **dev = fbx_calloc((size_t)g->n_values + 1, sizeof(void *));
  if (!dev) return FBX_ERR_OOM();
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].kind == FBX_IR_VALUE_CONST) dev[v] = p->rt[v].data;
  fbx_status *st = NULL;
  for (int s = 0; s < p->n_steps && !st; s++) {
    int nid = p->steps[s];
    if (p->host_step && p->host_step[nid]) continue; /* runs on the host backend, unprepared */
    if (fbx__ir_prep_cache_get(prep, g, nid, &p->states[nid])) continue;
    st = fbx__ir_node_prepare(be, g, nid, dev, &p->states[nid], &p->prepared[nid]);
  }
  fbx_free(dev);
  return st;
}

/* Ops cheap enough to run on the host when shape data needs them: the
 * index and shape arithmetic of Shape/Gather/Concat/... chains. Anything
 * else (a MatMul, a Conv) stays on the device even when its result is shape
 * data: that result is read back at run time (one sync) rather than
 * computed on the host. */
static bool fbx__ir_host_op_ok(fbx_ir_op op) {
  if (fbx_ir_op_class(op) != FBX_IR_CLASS_OTHER) return true; /* elementwise */
  switch (op) {
    case FBX_IR_OP_FUSED_EW: case FBX_IR_OP_SHAPE: case FBX_IR_OP_GATHER: case FBX_IR_OP_GATHER_ELEMENTS:
    case FBX_IR_OP_CONCAT: case FBX_IR_OP_SPLIT: case FBX_IR_OP_SLICE: case FBX_IR_OP_RESHAPE: case FBX_IR_OP_SQUEEZE:
    case FBX_IR_OP_UNSQUEEZE: case FBX_IR_OP_FLATTEN: case FBX_IR_OP_EXPAND: case FBX_IR_OP_TILE:
    case FBX_IR_OP_RANGE: case FBX_IR_OP_CONSTANT_OF_SHAPE: case FBX_IR_OP_REDUCE_SUM: case FBX_IR_OP_REDUCE_PROD:
    case FBX_IR_OP_REDUCE_MAX: case FBX_IR_OP_REDUCE_MIN: case FBX_IR_OP_CUMSUM:
      return true;
    default:
      return false;
  }
}

/* Which steps run on the host (non-host-visible backends). Shape inference
 * needs the values of shape-data inputs (fbx_ir_op_shape_data_inputs) on the
 * host; rather than read them back from the device (a synchronisation per
 * node), the steps producing them run on the host backend, and so,
 * transitively, do the steps producing their inputs. The closure ends at
 * graph inputs and constants, whose host copies exist, at SHAPE, which reads
 * only its input's shape, or at an op not fbx__ir_host_op_ok, whose result
 * is read back. Host results that device steps also read are uploaded
 * (need_dev). Without a host backend nothing runs on the host and the
 * executor reads shape data back. */
static fbx_status *fbx__ir_plan_host_steps(fbx__ir_plan *p) {
  fbx_ir_graph *g = p->g;
  if (p->host) {
    bool *need_host = fbx_calloc((size_t)g->n_values + 1, sizeof(bool));
    if (!need_host) return FBX_ERR_OOM();
    for (int s = p->n_steps - 1; s >= 0; s--) { /* consumers before producers */
      int nid = p->steps[s];
      const fbx_ir_node *n = &g->nodes[nid];
      bool host = false;
      for (int o = 0; o < n->n_outputs; o++) host |= need_host[n->outputs[o]];
      host = host && fbx__ir_host_op_ok(n->op);
      p->host_step[nid] = host;
      /* append rows' positions too: a delta copy-out to host memory reads them on the host (to
       * device outputs the kernel writes the rows in place: the positions may stay on the device,
       * computed there from a device input such as an attention mask, with no read-back) */
      unsigned mask = fbx_ir_op_shape_data_inputs(n->op) | (p->dev_outputs ? 0u : fbx_ir_op_append_data_inputs(n->op));
      for (int i = 0; i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v == FBX_IR_NONE) continue;
        if (host ? n->op != FBX_IR_OP_SHAPE : ((mask >> i) & 1u) != 0) need_host[v] = true;
      }
    }
    fbx_free(need_host);
  }
  for (int s = 0; s < p->n_steps; s++) {
    int nid = p->steps[s];
    if (p->host_step[nid]) continue;
    const fbx_ir_node *n = &g->nodes[nid];
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] != FBX_IR_NONE) p->need_dev[n->inputs[i]] = true;
  }
  for (int i = 0; i < g->n_inputs; i++) p->in_dev[i] = p->need_dev[g->inputs[i]];
  return NULL;
}

/* View steps (every backend; on a host-visible one see fbx__ir_plan_views):
 * ops whose output has its input's bytes in the same order. TRANSPOSE is a
 * view only when its perm keeps the order of the dims that are not 1,
 * which the executor checks per run; the plan assumes it may be one. */
static bool fbx__ir_view_op(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_RESHAPE: case FBX_IR_OP_SQUEEZE: case FBX_IR_OP_UNSQUEEZE: case FBX_IR_OP_FLATTEN:
    case FBX_IR_OP_TRANSPOSE:
      return true;
    default:
      return false;
  }
}

static bool fbx__ir_value_in(const int *vals, int n, int v) {
  for (int i = 0; i < n; i++)
    if (vals[i] == v) return true;
  return false;
}

/* On a host-visible backend (the CPU) too, where the decode step has ~100
 * Reshapes and size-1 Transposes of a few KiB, each a copy and a dispatch;
 * there a view neither reads a graph input (a KV buffer the step may append
 * to in place) nor makes a graph output (written straight into the caller's
 * buffer, exec_run.c). */
static void fbx__ir_plan_views(fbx__ir_plan *p) {
  fbx_ir_graph *g = p->g;
  bool hv = p->be->vt->host_visible;
  for (int s = 0; s < p->n_steps; s++) {
    int nid = p->steps[s];
    const fbx_ir_node *n = &g->nodes[nid];
    p->view[nid] = fbx__ir_view_op(n->op) && !(p->host_step && p->host_step[nid]) && n->n_inputs >= 1 &&
                   n->n_outputs == 1 && n->inputs[0] != FBX_IR_NONE &&
                   g->values[n->inputs[0]].dtype == g->values[n->outputs[0]].dtype;
    if (p->view[nid] && hv)
      p->view[nid] = !fbx__ir_value_in(g->inputs, g->n_inputs, n->inputs[0]) &&
                     !fbx__ir_value_in(g->outputs, g->n_outputs, n->outputs[0]);
  }
}

/* Liveness-based slot assignment. A value gets a slot unless it is written
 * straight into an output buffer. Slots are freed after a value's last use
 * (never for values copied out at the end); an output never shares a slot
 * with an input of the same step. */
static fbx_status *fbx__ir_plan_slots(fbx__ir_plan *p, bool reuse) {
  fbx_ir_graph *g = p->g;
  int nv = g->n_values;
  int *last = fbx_malloc(sizeof(int) * (size_t)(nv + 1));
  int *free_list = fbx_malloc(sizeof(int) * (size_t)(nv + 1));
  p->slot_ptr = fbx_calloc((size_t)nv + 1, sizeof(void *));
  p->slot_cap = fbx_calloc((size_t)nv + 1, sizeof(size_t));
  if (!last || !free_list || !p->slot_ptr || !p->slot_cap) {
    fbx_free(last);
    fbx_free(free_list);
    return FBX_ERR_OOM();
  }
  for (int v = 0; v < nv; v++) last[v] = -1;
  for (int s = 0; s < p->n_steps; s++) {
    const fbx_ir_node *n = &g->nodes[p->steps[s]];
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] != FBX_IR_NONE) last[n->inputs[i]] = s;
  }
  for (int i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = p->n_steps; /* live to the end */
  if (p->view) /* a view's input lives as long as the view (chains: later views first) */
    for (int s = p->n_steps - 1; s >= 0; s--) {
      const fbx_ir_node *n = &g->nodes[p->steps[s]];
      if (!p->view[p->steps[s]]) continue;
      int vi = n->inputs[0], vo = n->outputs[0];
      if (last[vo] > last[vi]) last[vi] = last[vo];
    }
  int n_free = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const fbx_ir_node *n = &g->nodes[p->steps[s]];
    for (int o = 0; o < n->n_outputs; o++) {
      int v = n->outputs[o];
      bool host_only = p->host_step && p->host_step[p->steps[s]] && !p->need_dev[v];
      if (p->direct_out[v] || host_only) continue; /* no device buffer */
      p->slot_of[v] = reuse && n_free ? free_list[--n_free] : p->n_slots++;
    }
    if (!reuse) continue;
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v == FBX_IR_NONE || last[v] != s || p->slot_of[v] < 0) continue;
      bool dup = false;
      for (int j = 0; j < i && !dup; j++) dup = n->inputs[j] == v;
      if (!dup) free_list[n_free++] = p->slot_of[v];
    }
    for (int o = 0; o < n->n_outputs; o++) {
      int v = n->outputs[o];
      if (p->slot_of[v] >= 0 && last[v] < s + 1 && last[v] != p->n_steps) free_list[n_free++] = p->slot_of[v];
    }
  }
  fbx_free(last);
  fbx_free(free_list);
  return NULL;
}

/* Append outputs that may be written in place (fbx_ir_op_append_input): a
 * graph output produced by a step whose appended input is a graph input
 * that this step alone reads (writing its buffer cannot change what another
 * step sees) and that is not itself a graph output. */
static void fbx__ir_plan_appends(fbx__ir_plan *p) {
  fbx_ir_graph *g = p->g;
  for (int s = 0; s < p->n_steps; s++) {
    int nid = p->steps[s];
    const fbx_ir_node *n = &g->nodes[nid];
    for (int o = 0; o < n->n_outputs; o++) {
      int i = fbx_ir_op_append_input(n->op, o), v = n->outputs[o];
      if (i < 0 || i >= n->n_inputs || n->inputs[i] == FBX_IR_NONE || p->out_pos[v] < 0) continue;
      if (p->host_step && p->host_step[nid]) continue;
      int u = n->inputs[i], gi = -1, readers = 0;
      for (int k = 0; k < g->n_inputs; k++)
        if (g->inputs[k] == u) gi = k;
      for (int t = 0; t < p->n_steps; t++) {
        const fbx_ir_node *m = &g->nodes[p->steps[t]];
        for (int j = 0; j < m->n_inputs; j++) readers += m->inputs[j] == u;
      }
      if (gi < 0 || readers != 1 || p->out_pos[u] >= 0) continue;
      p->app_node[v] = nid;
      p->app_out[v] = o;
      p->app_in[v] = gi;
    }
  }
}

/* Graph-capable backends: the index arithmetic over the graph inputs runs
 * first. An index step has integer outputs only and reads only constants,
 * graph inputs and other index steps' results (attention_mask -> ReduceSum
 * -> Sub -> Cast -> seqlens_k, Shape -> Gather -> total_sequence_length).
 * That is where a decode's per-token shapes live: the steps that read the
 * growing mask become dynamic (exec_run.c) and, placed before everything
 * else, leave the rest of the plan one static stretch, captured as one
 * graph. Stable (each group keeps its order) and still topological: an
 * index step depends on index steps alone. Done before slots are assigned. */
static fbx_status *fbx__ir_plan_index_first(fbx__ir_plan *p) {
  fbx_ir_graph *g = p->g;
  bool *idx_val = fbx_calloc((size_t)g->n_values + 1, sizeof(bool));
  int *order = fbx_malloc(sizeof(int) * (size_t)(p->n_steps + 1));
  bool *is_idx = fbx_calloc((size_t)p->n_steps + 1, sizeof(bool));
  if (!idx_val || !order || !is_idx) {
    fbx_free(idx_val);
    fbx_free(order);
    fbx_free(is_idx);
    return FBX_ERR_OOM();
  }
  for (int i = 0; i < g->n_inputs; i++) idx_val[g->inputs[i]] = true;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].kind == FBX_IR_VALUE_CONST) idx_val[v] = true;
  for (int s = 0; s < p->n_steps; s++) {
    const fbx_ir_node *n = &g->nodes[p->steps[s]];
    bool ok = n->n_outputs > 0;
    for (int i = 0; i < n->n_inputs && ok; i++) ok = n->inputs[i] == FBX_IR_NONE || idx_val[n->inputs[i]];
    for (int o = 0; o < n->n_outputs && ok; o++) ok = fbx_dtype_is_int(g->values[n->outputs[o]].dtype);
    is_idx[s] = ok;
    for (int o = 0; o < n->n_outputs && ok; o++) idx_val[n->outputs[o]] = true;
  }
  int k = 0;
  for (int s = 0; s < p->n_steps; s++)
    if (is_idx[s]) order[k++] = p->steps[s];
  for (int s = 0; s < p->n_steps; s++)
    if (!is_idx[s]) order[k++] = p->steps[s];
  memcpy(p->steps, order, sizeof(int) * (size_t)p->n_steps);
  fbx_free(idx_val);
  fbx_free(order);
  fbx_free(is_idx);
  return NULL;
}

static bool fbx__ir_graph_has_appends(const fbx_ir_graph *g) {
  for (int nid = 0; nid < g->n_nodes; nid++)
    for (int o = 0; o < g->nodes[nid].n_outputs; o++)
      if (fbx_ir_op_append_input(g->nodes[nid].op, o) >= 0) return true;
  return false;
}

/* One warning instant per composed step of a new plan (not per run): the user
 * sees which ops took a slower composed path, and why. */
static void fbx__ir_plan_warn_composed(const fbx__ir_plan *p) {
  for (int s = 0; s < p->n_steps; s++) {
    const fbx_ir_node *n = &p->g->nodes[p->steps[s]];
    if (!n->composed_reason) continue;
    char name[320];
    snprintf(name, sizeof name, "\u26a0 composed-path: %s (%s)", n->onnx_op ? n->onnx_op : "?", n->composed_reason);
    fbx_trace_arg a[] = {FBX_TARG_S("op", n->onnx_op ? n->onnx_op : ""), FBX_TARG_S("node", n->name ? n->name : ""),
                         FBX_TARG_S("reason", n->composed_reason)};
    fbx_trace_instant(name, "op.composed", a, 3);
  }
}

fbx_status *fbx__ir_plan_build(fbx_ir_graph *orig, fbx_backend *be, void *const *const_bufs,
                               fbx__ir_prep_cache *prep, const fbx__ir_plan_opts *o, const fbx_tensor *inputs,
                               int n_inputs, fbx__ir_plan **out) {
  *out = NULL;
  fbx__ir_plan *p = fbx_calloc(1, sizeof(*p));
  if (!p) return FBX_ERR_OOM();
  p->be = be;
  p->scope = orig;
  p->dev_outputs = o->dev_outputs && !be->vt->host_visible;
  fbx_status *st = NULL;
  /* the plan marks append nodes in place per run (fbx_ir_node_in_place_set): its own nodes */
  bool transform = o->fold || o->fuse || fbx__ir_graph_has_appends(orig);
  if (transform) {
    st = fbx__ir_graph_clone(orig, &p->g);
    if (st) {
      fbx_free(p);
      return st;
    }
    p->owns_graph = true;
  } else {
    p->g = orig;
  }
  fbx_ir_graph *g = p->g;
  size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1;
  bool *dead = fbx_calloc(nn, sizeof(bool));
  p->steps = fbx_calloc(nn, sizeof(int));
  p->states = fbx_calloc(nn, sizeof(void *));
  p->prepared = fbx_calloc(nn, sizeof(bool));
  p->fast_names = fbx_calloc(nn, sizeof(char *));
  p->sites = fbx_calloc(nn, sizeof(fbx_trace_op_site *));
  p->slot_of = fbx_malloc(nv * sizeof(int));
  p->direct_out = fbx_calloc(nv, sizeof(bool));
  p->out_pos = fbx_malloc(nv * sizeof(int));
  p->owned_const = fbx_calloc(nv, sizeof(void *));
  p->rt = fbx_calloc(nv, sizeof(fbx_tensor));
  p->in_buf = fbx_calloc((size_t)g->n_inputs + 1, sizeof(void *));
  p->in_cap = fbx_calloc((size_t)g->n_inputs + 1, sizeof(size_t));
  p->in_last = fbx_calloc((size_t)g->n_inputs + 1, sizeof(void *));
  p->in_stage = fbx_calloc((size_t)g->n_inputs + 1, sizeof(bool));
  size_t no = (size_t)g->n_outputs + 1;
  p->out_last = fbx_calloc(no, sizeof(void *));
  p->out_stage = fbx_calloc(no, sizeof(bool));
  p->app_node = fbx_malloc(nv * sizeof(int));
  p->app_out = fbx_calloc(nv, sizeof(int));
  p->app_in = fbx_calloc(nv, sizeof(int));
  p->priv_ptr = fbx_calloc(nv, sizeof(void *));
  p->priv_cap = fbx_calloc(nv, sizeof(size_t));
  p->out_bound = fbx_calloc(no, sizeof(void *));
  p->out_alias = fbx_calloc(no, sizeof(int));
  p->out_mode = fbx_calloc(no, sizeof(unsigned char));
  p->out_delta = fbx_calloc(no, sizeof(int64_t));
  if (!dead || !p->steps || !p->states || !p->prepared || !p->fast_names || !p->sites || !p->slot_of ||
      !p->direct_out || !p->out_pos || !p->owned_const || !p->rt || !p->in_buf || !p->in_cap || !p->app_node ||
      !p->app_out || !p->app_in || !p->priv_ptr || !p->priv_cap || !p->out_bound || !p->out_alias || !p->out_mode ||
      !p->out_delta || !p->in_last || !p->in_stage || !p->out_last || !p->out_stage) {
    st = FBX_ERR_OOM();
    goto fail;
  }
  for (size_t v = 0; v < nv; v++) p->slot_of[v] = p->out_pos[v] = p->app_node[v] = -1;

  if (!be->vt->host_visible) {
    p->host = o->host;
    p->host_step = fbx_calloc(nn, sizeof(bool));
    p->need_dev = fbx_calloc(nv, sizeof(bool));
    p->in_dev = fbx_calloc((size_t)g->n_inputs + 1, sizeof(bool));
    p->hdata = fbx_calloc(nv, sizeof(void *));
    p->host_ptr = fbx_calloc(nv, sizeof(void *));
    p->host_cap = fbx_calloc(nv, sizeof(size_t));
    p->view = fbx_calloc(nn, sizeof(bool));
    if (!p->host_step || !p->need_dev || !p->in_dev || !p->hdata || !p->host_ptr || !p->host_cap || !p->view) {
      st = FBX_ERR_OOM();
      goto fail;
    }
  } else if (!(p->view = fbx_calloc(nn, sizeof(bool)))) {
    st = FBX_ERR_OOM();
    goto fail;
  }
  if (o->fold && o->host && (st = fbx__ir_fold(g, o->host, dead, o->fold_shapes, inputs, n_inputs))) goto fail;
  /* every backend: plans of one graph stay alike across devices (test_ir_device compares them
   * bit for bit); the CUDA MatMul reads trans_b (cuBLASLt op T; its M=1 "B^T rows" GEMV) */
  if (o->fuse && (st = fbx__ir_fold_transpose_matmul(g, dead))) goto fail;
  if (o->fuse && (st = fbx__ir_fuse(g, dead, p->fast_names))) goto fail;
  if (o->fuse && (st = fbx__ir_fuse_epilogue(g, be, dead, p->fast_names, o->fold_shapes, inputs, n_inputs)))
    goto fail;
  for (int nid = 0; nid < g->n_nodes; nid++)
    if (!dead[nid]) p->steps[p->n_steps++] = nid;
  if (be->vt->graph_begin) { /* graph segments (exec_run.c) */
    if ((st = fbx__ir_plan_index_first(p))) goto fail;
    size_t ns = (size_t)p->n_steps + 1;
    p->sig_at = fbx_calloc(ns, sizeof(int));
    p->shape_h = fbx_calloc(ns, sizeof(uint64_t));
    p->shape_h_prev = fbx_calloc(ns, sizeof(uint64_t));
    p->dyn = fbx_calloc(ns, sizeof(bool));
    p->seg_at = fbx_malloc(ns * sizeof(int));
    p->segs = fbx_calloc(ns, sizeof(fbx__ir_seg));
    if (!p->sig_at || !p->shape_h || !p->shape_h_prev || !p->dyn || !p->seg_at || !p->segs) {
      st = FBX_ERR_OOM();
      goto fail;
    }
    for (size_t s = 0; s < ns; s++) p->seg_at[s] = -1;
    p->reseg = true;
    const char *seg_env = getenv("FUSEBOX_GRAPH_SEGMENTS"); /* read per plan: A/B runs in one process */
    p->seg_on = !(seg_env && seg_env[0] == '0');
  }
  if (fbx_trace_enabled()) fbx__ir_plan_warn_composed(p);
  if (p->host_step && (st = fbx__ir_plan_host_steps(p))) goto fail;
  if (p->view) fbx__ir_plan_views(p);

  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    if (p->out_pos[v] >= 0) continue;
    p->out_pos[v] = i;
    p->direct_out[v] = be->vt->host_visible && g->values[v].kind == FBX_IR_VALUE_NODE;
  }
  fbx__ir_plan_appends(p);
  if ((st = fbx__ir_plan_consts(p, orig, const_bufs))) goto fail;
  if (o->prepare && (st = fbx__ir_plan_prepare(p, prep))) goto fail;
  if ((st = fbx__ir_plan_slots(p, o->reuse_slots))) goto fail;
  fbx_free(dead);
  *out = p;
  return NULL;
fail:
  fbx_free(dead);
  fbx__ir_plan_destroy(p);
  return st;
}
