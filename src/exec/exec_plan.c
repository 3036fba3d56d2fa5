/* Plan building: clone the graph, run the passes (fold, fuse), prepare
 * nodes with constant inputs, and assign buffer slots by liveness. */
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
    for (int v = 0; v < p->g->n_values; v++) fbx_free_aligned(p->host_ptr[v]);
  if (p->graph) be->vt->graph_destroy(be, p->graph);
  fbx_free(p->sig.w);
  fbx_free(p->sig_prev.w);
  fbx_free(p->sig_graph.w);
  fbx_free(p->steps);
  fbx_free(p->states);
  fbx_free(p->prepared);
  fbx_free(p->fast_names);
  fbx_free(p->sites); /* the sites belong to the trace session */
  fbx_free(p->slot_of);
  fbx_free(p->direct_out);
  fbx_free(p->out_pos);
  fbx_free(p->slot_ptr);
  fbx_free(p->slot_cap);
  fbx_free(p->owned_const);
  fbx_free(p->rt);
  fbx_free(p->in_buf);
  fbx_free(p->in_cap);
  fbx_free(p->host_step);
  fbx_free(p->need_dev);
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
      unsigned mask = fbx_ir_op_shape_data_inputs(n->op);
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
  fbx_status *st = NULL;
  bool transform = o->fold || o->fuse;
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
  if (!dead || !p->steps || !p->states || !p->prepared || !p->fast_names || !p->sites || !p->slot_of ||
      !p->direct_out || !p->out_pos || !p->owned_const || !p->rt || !p->in_buf || !p->in_cap) {
    st = FBX_ERR_OOM();
    goto fail;
  }
  for (size_t v = 0; v < nv; v++) p->slot_of[v] = p->out_pos[v] = -1;

  if (!be->vt->host_visible) {
    p->host = o->host;
    p->host_step = fbx_calloc(nn, sizeof(bool));
    p->need_dev = fbx_calloc(nv, sizeof(bool));
    p->in_dev = fbx_calloc((size_t)g->n_inputs + 1, sizeof(bool));
    p->hdata = fbx_calloc(nv, sizeof(void *));
    p->host_ptr = fbx_calloc(nv, sizeof(void *));
    p->host_cap = fbx_calloc(nv, sizeof(size_t));
    if (!p->host_step || !p->need_dev || !p->in_dev || !p->hdata || !p->host_ptr || !p->host_cap) {
      st = FBX_ERR_OOM();
      goto fail;
    }
  }
  if (o->fold && o->host && (st = fbx__ir_fold(g, o->host, dead, o->fold_shapes, inputs, n_inputs))) goto fail;
  if (o->fuse && (st = fbx__ir_fuse(g, dead, p->fast_names))) goto fail;
  if (o->fuse && (st = fbx__ir_fuse_epilogue(g, be, dead, p->fast_names, o->fold_shapes, inputs, n_inputs)))
    goto fail;
  for (int nid = 0; nid < g->n_nodes; nid++)
    if (!dead[nid]) p->steps[p->n_steps++] = nid;
  if (fbx_trace_enabled()) fbx__ir_plan_warn_composed(p);
  if (p->host_step && (st = fbx__ir_plan_host_steps(p))) goto fail;

  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    if (p->out_pos[v] >= 0) continue;
    p->out_pos[v] = i;
    p->direct_out[v] = be->vt->host_visible && g->values[v].kind == FBX_IR_VALUE_NODE;
  }
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
