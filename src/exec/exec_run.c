/* The executor: runs a plan's steps on the backend. Per step: gather input
 * tensors, infer output shapes (on the host), bind outputs (slot memory, or
 * the caller's output buffer for graph outputs: zero-copy), enqueue the
 * kernel. Graph outputs that were not written in place are copied at the end,
 * then the run synchronises with the device once.
 *
 * Host-visible backends read inputs in place and write outputs in place. On
 * the others, inputs that device steps read are uploaded, shape-data steps
 * run on the host backend (exec_plan.c, fbx__ir_plan_host_steps), and outputs
 * are copied once through the backend. Every buffer is plan-owned and grows
 * geometrically: the steady state allocates nothing (counted per run).
 *
 * Graphs (backends with graph_begin, e.g. CUDA): every pass records a
 * signature of the work it enqueues (per device step: node, state, every
 * operand's pointer and shape; per upload of a host step: dst, src, size).
 * When two consecutive runs have equal signatures, the next run first does
 * a dry pass (shape inference, bindings and host steps, no device work) and,
 * if its signature is still the same, captures the device work into a
 * backend graph and launches it; later runs do the dry pass and, on a
 * match, replay the graph. Input uploads come before the graph and output
 * copies after it, outside it (ORT's buffers move between runs); host-step
 * results are uploaded from plan-owned host buffers inside the graph, which
 * re-reads them at each launch. Why compare instead of updating pointers:
 * every kernel takes its shapes and pointers as launch parameters, so a
 * changed shape is a different graph; the comparison proves the replayed
 * work is exactly what a live run would enqueue. A decode plan whose past
 * length grows every run therefore never captures (its signature changes
 * every run) and pays nothing for it: the dry pass runs only once the plan
 * was stable. A plan that needs a shape-data read-back, or whose capture
 * failed, is never captured. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../trace/trace.h"
#include "exec_plan.h"

/* Checked (base/checked.h): inputs are validated at run entry, outputs by shape inference. */
static size_t fbx__ir_tensor_bytes(const fbx_tensor *t) { return fbx_tensor_nbytes(t); }

/* Grow a backend buffer geometrically (x1.5, 64-byte rounded); contents are
 * dead. Counted in the run's allocations. */
static fbx_status *fbx__ir_buf_ensure(fbx__ir_plan *p, void **ptr, size_t *cap, size_t need) {
  fbx_backend *be = p->be;
  if (*ptr && *cap >= need) return NULL;
  size_t nc = *cap + *cap / 2;
  if (nc < need) nc = need;
  if (nc < 64) nc = 64;
  nc = (nc + 63) & ~(size_t)63;
  if (*ptr) be->vt->buffer_free(be, *ptr);
  *ptr = NULL;
  *cap = 0;
  p->run_allocs++;
  FBX_TRY(be->vt->buffer_alloc(be, nc, ptr));
  *cap = nc;
  return NULL;
}

/* The same for the plan-owned host buffer of value v (host steps, read-backs). */
static fbx_status *fbx__ir_host_ensure(fbx__ir_plan *p, int v, size_t need) {
  if (p->host_ptr[v] && p->host_cap[v] >= need) return NULL;
  size_t nc = p->host_cap[v] + p->host_cap[v] / 2;
  if (nc < need) nc = need;
  if (nc < 64) nc = 64;
  nc = (nc + 63) & ~(size_t)63;
  fbx_free_aligned(p->host_ptr[v]);
  p->host_cap[v] = 0;
  p->run_allocs++;
  if (!(p->host_ptr[v] = fbx_malloc_aligned(nc))) return FBX_ERR_OOM();
  p->host_cap[v] = nc;
  return NULL;
}

static fbx_status *fbx__ir_sync(fbx__ir_plan *p) {
  p->run_syncs++;
  return fbx_backend_synchronize(p->be);
}

/* ---- launch signatures ---- */

static fbx_status *fbx__ir_sig_put(fbx__ir_sig *s, int64_t w) {
  if (s->n == s->cap) { /* grows during the first runs only */
    int nc = s->cap ? s->cap * 2 : 256;
    int64_t *nw = fbx_realloc(s->w, sizeof *nw * (size_t)nc);
    if (!nw) return FBX_ERR_OOM();
    s->w = nw;
    s->cap = nc;
  }
  s->w[s->n++] = w;
  return NULL;
}

static fbx_status *fbx__ir_sig_tensors(fbx__ir_sig *s, const fbx_tensor *t, int n) {
  for (int i = 0; i < n; i++) {
    FBX_TRY(fbx__ir_sig_put(s, (int64_t)(intptr_t)t[i].data));
    FBX_TRY(fbx__ir_sig_put(s, ((int64_t)t[i].rank << 8) | (int64_t)t[i].dtype));
    for (int d = 0; d < t[i].rank; d++) FBX_TRY(fbx__ir_sig_put(s, t[i].dims[d]));
  }
  return NULL;
}

static bool fbx__ir_sig_eq(const fbx__ir_sig *a, const fbx__ir_sig *b) {
  return a->n == b->n && (a->n == 0 || memcmp(a->w, b->w, sizeof(int64_t) * (size_t)a->n) == 0);
}

static fbx_status *fbx__ir_sig_copy(fbx__ir_sig *dst, const fbx__ir_sig *src) {
  dst->n = 0;
  for (int i = 0; i < src->n; i++) FBX_TRY(fbx__ir_sig_put(dst, src->w[i]));
  return NULL;
}

static void fbx__ir_sig_swap(fbx__ir_sig *a, fbx__ir_sig *b) {
  fbx__ir_sig t = *a;
  *a = *b;
  *b = t;
}

/* Whether this pass records signatures (the backend can capture). */
static bool fbx__ir_graphs(const fbx__ir_plan *p) { return p->be->vt->graph_begin && !p->graph_off; }

/* The trace site of plan node nid (its constant span text, interned in the
 * session bound to this thread), made on the node's first traced run. */
static fbx_trace_op_site *fbx__ir_trace_site(fbx__ir_plan *p, int nid) {
  if (p->sites[nid]) return p->sites[nid];
  const fbx_ir_node *n = &p->g->nodes[nid];
  const char *op = n->op == FBX_IR_OP_FUSED_EW ? "FusedElementwise" : n->onnx_op && n->onnx_op[0] ? n->onnx_op : "op";
  const char *fast = p->fast_names[nid];
  char fast_span[512], suffix[512];
  const fbx_backend *where = p->host_step && p->host_step[nid] ? p->host : p->be; /* host steps: the host's name */
  fbx_trace_op_site_desc d = {.scope = p->scope, .op = op, .node = n->name ? n->name : "", .domain = n->onnx_domain,
                              .node_id = nid,
                              .device = where->vt->name ? where->vt->name : "cpu"};
  if (fast && n->op == FBX_IR_OP_FUSED_EW) { /* "Add+Mul+Tanh [fast]", one fused elementwise kernel */
    d.fast_span = fast;
    d.fast_kernel = "ew_fused";
  } else if (fast) { /* a conv that runs its elementwise epilogue in-kernel */
    snprintf(fast_span, sizeof fast_span, "%s+%s [fast]", op, fast);
    snprintf(suffix, sizeof suffix, "+epilogue(%s)", fast);
    d.fast_span = fast_span;
    d.variant_suffix = suffix;
  }
  if (n->composed_reason) { /* a composed fallback of an op that has a fast path */
    d.composed_op = op;
    d.composed_reason = n->composed_reason;
  }
  return p->sites[nid] = fbx_trace_op_site_get(fbx_trace_session_current(), &d);
}

/* The trace's view of n tensors (dims borrowed for the call). */
static void fbx__ir_trace_tensors(const fbx_tensor *t, int n, fbx_trace_tensor *v) {
  for (int i = 0; i < n; i++) {
    v[i].dims = t[i].dims;
    v[i].rank = t[i].rank; /* <= FBX_MAX_RANK */
    v[i].elem_bytes = (uint32_t)fbx_dtype_size(t[i].dtype);
  }
}

/* One traced execution: the op span (with its [fast]/[composed] spans) and the op statistics. */
static void fbx__ir_trace_step(fbx__ir_plan *p, int nid, const fbx_tensor *in, int n_in, const fbx_tensor *out,
                               int n_out, const fbx_kernel_info *info, uint64_t t0, uint64_t t1) {
  fbx_trace_tensor tin[FBX_IR_MAX_INPUTS], tout[FBX_IR_MAX_OUTPUTS];
  fbx__ir_trace_tensors(in, n_in, tin);
  fbx__ir_trace_tensors(out, n_out, tout);
  fbx_trace_op_run r = {.in = tin, .out = tout, .n_in = n_in, .n_out = n_out, .dtype = fbx_dtype_name(out[0].dtype),
                        .flops = info->flops, .variant = info->variant, .reason = info->reason};
  fbx_trace_op(fbx__ir_trace_site(p, nid), t0, t1, &r);
}

/* Host copy of shape-data input value v when no host backend computed it:
 * read back from the device (waits for the queue: counted as a sync). */
static fbx_status *fbx__ir_read_back(fbx__ir_plan *p, int v) {
  const fbx_tensor *t = &p->rt[v];
  size_t b = fbx__ir_tensor_bytes(t);
  FBX_TRY(fbx__ir_host_ensure(p, v, b));
  p->run_syncs++;
  p->graph_off = true; /* device results the host needs: a replay could not provide them */
  if (b) FBX_TRY(p->be->vt->copy_to_host(p->be, p->host_ptr[v], t->data, b));
  p->hdata[v] = p->host_ptr[v];
  return NULL;
}

/* One step on the host backend (non-host-visible engines): inputs are host
 * copies (SHAPE reads only its input's shape), outputs go to plan-owned host
 * buffers and, where a device step reads them, are uploaded to their slot. */
static fbx_status *fbx__ir_run_host_step(fbx__ir_plan *p, int nid, uint64_t *clock) {
  fbx_ir_graph *g = p->g;
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
      continue;
    }
    in[i] = p->rt[v];
    /* a device result (an op too heavy for the host) is read back; SHAPE needs none */
    if (!p->hdata[v] && n->op != FBX_IR_OP_SHAPE) FBX_TRY(fbx__ir_read_back(p, v));
    in[i].data = p->hdata[v];
  }
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  FBX_TRY(fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs));
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    FBX_TRY(fbx__ir_host_ensure(p, v, fbx__ir_tensor_bytes(&out[o])));
    out[o].data = p->hdata[v] = p->host_ptr[v];
  }
  fbx_kernel_info info = {0};
  FBX_TRY(p->host->vt->run_node(p->host, n, NULL, in, n->n_inputs, out, n->n_outputs, clock ? &info : NULL));
  if (clock) {
    uint64_t t1 = fbx_trace_now_ns();
    fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &info, *clock, t1);
    *clock = t1;
  }
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    p->rt[v] = out[o];
    p->rt[v].data = NULL;
    if (!p->need_dev[v]) continue;
    int s = p->slot_of[v];
    size_t b = fbx__ir_tensor_bytes(&out[o]);
    FBX_TRY(fbx__ir_buf_ensure(p, &p->slot_ptr[s], &p->slot_cap[s], b));
    p->rt[v].data = p->slot_ptr[s];
    if (fbx__ir_graphs(p)) {
      FBX_TRY(fbx__ir_sig_put(&p->sig, -1 - (int64_t)nid)); /* an upload, not a device step */
      FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)p->slot_ptr[s]));
      FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)out[o].data));
      FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)b));
    }
    if (p->mode == FBX__IR_DRY) continue; /* the graph uploads the current host contents */
    FBX_TRY(fbx_backend_copy_from_host_async(p->be, p->slot_ptr[s], out[o].data, b));
  }
  return NULL;
}

/* clock: NULL when not tracing; else the end of the previous step (or the
 * plan's start), which this step's span starts at: a span covers the node's
 * whole step (shape inference, output binding, kernel), so the spans of a
 * plan tile its run with one clock read per node. */
static fbx_status *fbx__ir_run_step(fbx__ir_plan *p, int nid, fbx_ir_output_fn output_fn, void *output_ctx,
                                    uint64_t *clock) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  if (p->host_step && p->host_step[nid]) return fbx__ir_run_host_step(p, nid, clock);
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  unsigned data_mask = p->hdata ? fbx_ir_op_shape_data_inputs(n->op) : 0;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
      continue;
    }
    in[i] = p->rt[v];
    if ((data_mask >> i) & 1u) { /* shape inference reads the host copy */
      if (!p->hdata[v]) FBX_TRY(fbx__ir_read_back(p, v));
      in[i].data = p->hdata[v];
    }
  }
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  FBX_TRY(fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs));
  if (data_mask) /* kernels read device memory, not our host copies */
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] != FBX_IR_NONE) in[i].data = p->rt[n->inputs[i]].data;
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    size_t need = fbx__ir_tensor_bytes(&out[o]);
    if (p->direct_out[v]) {
      void *d = NULL;
      FBX_TRY(output_fn(output_ctx, p->out_pos[v], &out[o], &d));
      if (!d && need) return FBX_ERR("output %d: output_fn returned no buffer", p->out_pos[v]);
      out[o].data = d;
    } else {
      int s = p->slot_of[v];
      FBX_TRY(fbx__ir_buf_ensure(p, &p->slot_ptr[s], &p->slot_cap[s], need));
      out[o].data = p->slot_ptr[s];
    }
    p->rt[v] = out[o];
    if (p->hdata) p->hdata[v] = NULL; /* device result: no host copy (yet) */
  }
  if (fbx__ir_graphs(p)) {
    FBX_TRY(fbx__ir_sig_put(&p->sig, nid));
    FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)p->states[nid]));
    FBX_TRY(fbx__ir_sig_tensors(&p->sig, in, n->n_inputs));
    FBX_TRY(fbx__ir_sig_tensors(&p->sig, out, n->n_outputs));
  }
  if (p->mode == FBX__IR_DRY) return NULL; /* replayed from the graph */
  fbx_kernel_info info = {0};
  if (clock) {
    fbx_status *st = be->vt->run_node(be, n, p->states[nid], in, n->n_inputs, out, n->n_outputs, &info);
    uint64_t t1 = fbx_trace_now_ns();
    if (!st) fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &info, *clock, t1);
    *clock = t1;
    return st;
  }
  return be->vt->run_node(be, n, p->states[nid], in, n->n_inputs, out, n->n_outputs, NULL);
}

/* Copy one graph output that was not written in place: from its host copy
 * (host-visible memory, a graph input, a constant, a host step), else
 * enqueued from the device (complete at the run's synchronize). */
static fbx_status *fbx__ir_copy_out(fbx__ir_plan *p, int pos, fbx_ir_output_fn output_fn, void *output_ctx,
                                    fbx_ir_run_report *report) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  int v = g->outputs[pos];
  const fbx_tensor *t = &p->rt[v];
  void *d = NULL;
  FBX_TRY(output_fn(output_ctx, pos, t, &d));
  size_t b = fbx__ir_tensor_bytes(t);
  if (!b) return NULL;
  if (!d) return FBX_ERR("output %d: output_fn returned no buffer", pos);
  const void *host_src = be->vt->host_visible ? t->data : p->hdata[v];
  if (host_src) memcpy(d, host_src, b);
  else FBX_TRY(fbx_backend_copy_to_host_async(be, d, t->data, b));
  if (report) {
    report->copyout_count++;
    report->copyout_bytes += (int64_t)b;
  }
  return NULL;
}

/* Bind the run's inputs: host-visible engines read them in place; others
 * keep the caller's pointer as the host copy and upload the inputs that
 * device steps read. */
static fbx_status *fbx__ir_bind_inputs(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                                       fbx_ir_run_report *report) {
  fbx_ir_graph *g = p->g;
  for (int i = 0; i < g->n_inputs && i < n_inputs; i++) {
    int v = g->inputs[i];
    p->rt[v] = inputs[i];
    size_t b = fbx__ir_tensor_bytes(&inputs[i]);
    if (p->be->vt->host_visible) {
      if (report) {
        report->wrap_count++;
        report->wrap_bytes += (int64_t)b;
      }
      continue;
    }
    p->hdata[v] = inputs[i].data;
    p->rt[v].data = NULL;
    if (!p->in_dev[i]) continue;
    FBX_TRY(fbx__ir_buf_ensure(p, &p->in_buf[i], &p->in_cap[i], b));
    FBX_TRY(fbx_backend_copy_from_host_async(p->be, p->in_buf[i], inputs[i].data, b));
    p->rt[v].data = p->in_buf[i];
  }
  return NULL;
}

/* One pass over the steps in the given mode (signature restarted). */
static fbx_status *fbx__ir_pass(fbx__ir_plan *p, fbx__ir_mode mode, fbx_ir_output_fn output_fn, void *output_ctx,
                                uint64_t *clock) {
  p->mode = mode;
  p->sig.n = 0;
  fbx_status *st = NULL;
  for (int s = 0; s < p->n_steps && !st; s++) st = fbx__ir_run_step(p, p->steps[s], output_fn, output_ctx, clock);
  p->mode = FBX__IR_RUN;
  return st;
}

/* Capture the device work of one pass into p->graph and launch it. On a
 * failed capture the plan is marked graph_off and the pass runs live. */
static fbx_status *fbx__ir_capture(fbx__ir_plan *p, fbx_ir_output_fn output_fn, void *output_ctx, uint64_t *clock) {
  fbx_backend *be = p->be;
  if (p->graph) be->vt->graph_destroy(be, p->graph);
  p->graph = NULL;
  fbx_status *st = be->vt->graph_begin(be);
  if (!st) {
    fbx_status *pass = fbx__ir_pass(p, FBX__IR_CAPTURE, output_fn, output_ctx, clock);
    st = be->vt->graph_end(be, &p->graph); /* always ends the capture */
    if (pass) {
      fbx_status_free(st);
      st = pass;
    }
  }
  if (st || !p->graph) {
    char why[200];
    snprintf(why, sizeof why, "%s", st ? fbx_status_message(st) : "no graph");
    fbx_status_free(st);
    if (p->graph) be->vt->graph_destroy(be, p->graph);
    p->graph = NULL;
    p->graph_off = true;
    if (fbx_trace_enabled()) {
      fbx_trace_arg a[] = {FBX_TARG_S("reason", why), FBX_TARG_S("device", be->vt->name)};
      fbx_trace_instant("fusebox.graph.capture_failed", "device", a, 2);
    }
    return fbx__ir_pass(p, FBX__IR_RUN, output_fn, output_ctx, clock); /* reports a real error */
  }
  FBX_TRY(fbx__ir_sig_copy(&p->sig_graph, &p->sig));
  p->run_captures++;
  if (fbx_trace_enabled()) {
    fbx_trace_arg a[] = {FBX_TARG_I("steps", p->n_steps), FBX_TARG_S("device", be->vt->name)};
    fbx_trace_instant("fusebox.graph.capture", "device", a, 2);
  }
  return be->vt->graph_launch(be, p->graph);
}

/* The steps of one run: live, or (graph-capable backends) a dry pass then a
 * replay or a capture, as the file comment says. */
static fbx_status *fbx__ir_steps(fbx__ir_plan *p, fbx_ir_output_fn output_fn, void *output_ctx, uint64_t *clock) {
  fbx_backend *be = p->be;
  if (!fbx__ir_graphs(p)) return fbx__ir_pass(p, FBX__IR_RUN, output_fn, output_ctx, clock);
  if (p->graph || p->graph_stable) {
    FBX_TRY(fbx__ir_pass(p, FBX__IR_DRY, output_fn, output_ctx, clock));
    if (p->graph && fbx__ir_sig_eq(&p->sig, &p->sig_graph)) {
      p->run_replays++;
      if (fbx_trace_enabled()) {
        fbx_trace_arg a[] = {FBX_TARG_I("steps", p->n_steps), FBX_TARG_S("device", be->vt->name)};
        fbx_trace_instant("fusebox.graph.replay", "device", a, 2);
      }
      FBX_TRY(be->vt->graph_launch(be, p->graph));
    } else if (!p->graph_off && fbx__ir_sig_eq(&p->sig, &p->sig_prev)) {
      FBX_TRY(fbx__ir_capture(p, output_fn, output_ctx, clock));
    } else { /* the work changed: back to live runs until it is stable again */
      if (p->graph) be->vt->graph_destroy(be, p->graph);
      p->graph = NULL;
      p->graph_stable = false;
      FBX_TRY(fbx__ir_pass(p, FBX__IR_RUN, output_fn, output_ctx, clock));
    }
  } else {
    FBX_TRY(fbx__ir_pass(p, FBX__IR_RUN, output_fn, output_ctx, clock));
    p->graph_stable = fbx__ir_sig_eq(&p->sig, &p->sig_prev);
  }
  fbx__ir_sig_swap(&p->sig, &p->sig_prev);
  return NULL;
}

/* Steps, output copies and the run's one synchronisation (after the copies
 * when the outputs come from the device: they are part of what it waits for). */
static fbx_status *fbx__ir_plan_exec(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                                     fbx_ir_output_fn output_fn, void *output_ctx, fbx_ir_run_report *report) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  bool tracing = fbx_trace_enabled();
  FBX_TRY(fbx__ir_bind_inputs(p, inputs, n_inputs, report));
  uint64_t t0 = report ? fbx_trace_now_ns() : 0;
  uint64_t clock = tracing ? (report ? t0 : fbx_trace_now_ns()) : 0;
  FBX_TRY(fbx__ir_steps(p, output_fn, output_ctx, tracing ? &clock : NULL));
  if (be->vt->host_visible) FBX_TRY(fbx__ir_sync(p));
  uint64_t t1 = report ? fbx_trace_now_ns() : 0;
  for (int pos = 0; pos < g->n_outputs; pos++) {
    int v = g->outputs[pos];
    if (p->direct_out[v] && p->out_pos[v] == pos) continue;
    FBX_TRY(fbx__ir_copy_out(p, pos, output_fn, output_ctx, report));
  }
  if (!be->vt->host_visible) FBX_TRY(fbx__ir_sync(p));
  if (report) {
    uint64_t t2 = fbx_trace_now_ns();
    report->eval_ns += t1 - t0;
    report->copy_ns += t2 - t1;
    if (tracing) {
      /* device-inclusive eval on a synchronous backend; on an asynchronous one the
       * wait for the device falls in the copy phase, which follows the launches */
      fbx_trace_arg a[] = {FBX_TARG_I("steps", p->n_steps), FBX_TARG_S("device", be->vt->name)};
      fbx_trace_complete("fusebox.eval", "device", t0, t1, a, 2);
      if (t2 > t1) fbx_trace_complete("fusebox.copy", "ep.phase", t1, t2, NULL, 0);
    }
  }
  return NULL;
}

fbx_status *fbx__ir_plan_run(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                             fbx_ir_output_fn output_fn, void *output_ctx, fbx_ir_run_report *report) {
  p->run_allocs = p->run_syncs = p->run_captures = p->run_replays = 0;
  fbx_status *st = fbx__ir_plan_exec(p, inputs, n_inputs, output_fn, output_ctx, report);
  /* an error mid-run may leave work queued that reads our buffers: drain it */
  if (st && !p->be->vt->host_visible) fbx_status_free(fbx__ir_sync(p));
  if (report) {
    report->allocs += p->run_allocs;
    report->host_syncs += p->run_syncs;
    report->graph_captures += p->run_captures;
    report->graph_replays += p->run_replays;
  }
  return st;
}
