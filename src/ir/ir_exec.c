/* The executor: runs a plan's steps on the backend. Per step: gather input
 * tensors, infer output shapes, bind outputs (slot memory, or the caller's
 * output buffer for graph outputs: zero-copy), run the kernel. Graph outputs
 * that are inputs/constants/duplicates are copied at the end. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../trace/trace.h"
#include "ir_plan.h"

static size_t fbx__ir_tensor_bytes(const fbx_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return (size_t)n * fbx_dtype_size(t->dtype);
}

/* Grow a backend buffer geometrically (x1.5, 64-byte rounded); contents are dead. */
static fbx_status *fbx__ir_buf_ensure(fbx_backend *be, void **ptr, size_t *cap, size_t need) {
  if (*ptr && *cap >= need) return NULL;
  size_t nc = *cap + *cap / 2;
  if (nc < need) nc = need;
  if (nc < 64) nc = 64;
  nc = (nc + 63) & ~(size_t)63;
  if (*ptr) be->vt->buffer_free(be, *ptr);
  *ptr = NULL;
  *cap = 0;
  FBX_TRY(be->vt->buffer_alloc(be, nc, ptr));
  *cap = nc;
  return NULL;
}

/* The trace site of plan node nid (its constant span text, interned in the
 * session bound to this thread), made on the node's first traced run. */
static fbx_trace_op_site *fbx__ir_trace_site(fbx__ir_plan *p, int nid) {
  if (p->sites[nid]) return p->sites[nid];
  const fbx_ir_node *n = &p->g->nodes[nid];
  const char *op = n->op == FBX_IR_OP_FUSED_EW ? "FusedElementwise" : n->onnx_op && n->onnx_op[0] ? n->onnx_op : "op";
  const char *fast = p->fast_names[nid];
  char fast_span[512], suffix[512];
  fbx_trace_op_site_desc d = {.scope = p->scope, .op = op, .node = n->name ? n->name : "", .domain = n->onnx_domain,
                              .node_id = nid,
                              .device = p->be->vt->name ? p->be->vt->name : "cpu"};
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

/* Host copy of a shape-data input produced on a non-host-visible backend. */
static fbx_status *fbx__ir_host_view(fbx_backend *be, fbx_tensor *t, void **tmp) {
  size_t b = fbx__ir_tensor_bytes(t);
  *tmp = fbx_malloc(b ? b : 1);
  if (!*tmp) return FBX_ERR_OOM();
  if (be->vt->synchronize) FBX_TRY(be->vt->synchronize(be));
  FBX_TRY(be->vt->copy_to_host(be, *tmp, t->data, b));
  t->data = *tmp;
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
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  void *tmp[FBX_IR_MAX_INPUTS];
  int n_tmp = 0;
  unsigned data_mask = fbx_ir_op_shape_data_inputs(n->op);
  fbx_status *st = NULL;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
      continue;
    }
    in[i] = p->rt[v];
    if (!be->vt->host_visible && ((data_mask >> i) & 1u) && g->values[v].kind == FBX_IR_VALUE_NODE) {
      if ((st = fbx__ir_host_view(be, &in[i], &tmp[n_tmp++]))) goto done;
    }
  }
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  if ((st = fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs))) goto done;
  if (!be->vt->host_visible) /* kernels read device memory, not our host views */
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] != FBX_IR_NONE) in[i].data = p->rt[n->inputs[i]].data;
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    size_t need = fbx__ir_tensor_bytes(&out[o]);
    if (p->direct_out[v]) {
      void *d = NULL;
      if ((st = output_fn(output_ctx, p->out_pos[v], &out[o], &d))) goto done;
      if (!d && need) {
        st = FBX_ERR("output %d: output_fn returned no buffer", p->out_pos[v]);
        goto done;
      }
      out[o].data = d;
    } else {
      int s = p->slot_of[v];
      if ((st = fbx__ir_buf_ensure(be, &p->slot_ptr[s], &p->slot_cap[s], need))) goto done;
      out[o].data = p->slot_ptr[s];
    }
    p->rt[v] = out[o];
  }
  fbx_kernel_info info = {0};
  if (clock) {
    st = be->vt->run_node(be, n, p->states[nid], in, n->n_inputs, out, n->n_outputs, &info);
    uint64_t t1 = fbx_trace_now_ns();
    if (!st) fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &info, *clock, t1);
    *clock = t1;
  } else {
    st = be->vt->run_node(be, n, p->states[nid], in, n->n_inputs, out, n->n_outputs, NULL);
  }
done:
  for (int i = 0; i < n_tmp; i++) fbx_free(tmp[i]);
  return st;
}

/* Copy one graph output that was not written in place. */
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
  bool src_is_host = g->values[v].kind == FBX_IR_VALUE_INPUT || be->vt->host_visible ||
                     (p->direct_out[v] && p->out_pos[v] != pos);
  if (src_is_host) memcpy(d, t->data, b);
  else FBX_TRY(be->vt->copy_to_host(be, d, t->data, b));
  if (report) {
    report->copyout_count++;
    report->copyout_bytes += (int64_t)b;
  }
  return NULL;
}

fbx_status *fbx__ir_plan_run(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                             fbx_ir_output_fn output_fn, void *output_ctx, fbx_ir_run_report *report) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  bool tracing = fbx_trace_enabled();
  for (int i = 0; i < g->n_inputs && i < n_inputs; i++) {
    int v = g->inputs[i];
    p->rt[v] = inputs[i];
    size_t b = fbx__ir_tensor_bytes(&inputs[i]);
    if (be->vt->host_visible) {
      if (report) {
        report->wrap_count++;
        report->wrap_bytes += (int64_t)b;
      }
    } else {
      FBX_TRY(fbx__ir_buf_ensure(be, &p->in_buf[i], &p->in_cap[i], b));
      if (b) FBX_TRY(be->vt->copy_from_host(be, p->in_buf[i], inputs[i].data, b));
      p->rt[v].data = p->in_buf[i];
    }
  }
  uint64_t t0 = report ? fbx_trace_now_ns() : 0;
  uint64_t clock = tracing ? (report ? t0 : fbx_trace_now_ns()) : 0;
  for (int s = 0; s < p->n_steps; s++)
    FBX_TRY(fbx__ir_run_step(p, p->steps[s], output_fn, output_ctx, tracing ? &clock : NULL));
  if (be->vt->synchronize) FBX_TRY(be->vt->synchronize(be));
  uint64_t t1 = report ? fbx_trace_now_ns() : 0;
  for (int pos = 0; pos < g->n_outputs; pos++) {
    int v = g->outputs[pos];
    if (p->direct_out[v] && p->out_pos[v] == pos) continue;
    if (!be->vt->host_visible && g->values[v].kind == FBX_IR_VALUE_INPUT) {
      p->rt[v].data = inputs[g->values[v].input_index].data; /* copy from the caller's host buffer */
    }
    FBX_TRY(fbx__ir_copy_out(p, pos, output_fn, output_ctx, report));
  }
  if (report) {
    uint64_t t2 = fbx_trace_now_ns();
    report->eval_ns += t1 - t0;
    report->copy_ns += t2 - t1;
    if (tracing) {
      /* device-inclusive eval (the CPU backend is synchronous, so host == device here) */
      fbx_trace_arg a[] = {FBX_TARG_I("steps", p->n_steps), FBX_TARG_S("device", be->vt->name)};
      fbx_trace_complete("fusebox.eval", "device", t0, t1, a, 2);
      if (t2 > t1) fbx_trace_complete("fusebox.copy", "ep.phase", t1, t2, NULL, 0);
    }
  }
  return NULL;
}
