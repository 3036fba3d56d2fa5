/* The executor: runs a plan's steps on the backend. Per step: gather input
 * tensors, infer output shapes (on the host), bind outputs (slot memory, or
 * the caller's output buffer for graph outputs: zero-copy), enqueue the
 * kernel. Graph outputs that were not written in place are copied at the end,
 * then the run synchronises with the device once.
 *
 * Shared buffers: output_fn says when an output's buffer is a graph input's
 * own memory. An append output of that very input (GQA's present over its
 * past, fbx_ir_op_append_input) is then bound to the input's run-time buffer
 * and its node marked in place: the kernel writes only the new rows, which
 * on a device are then copied to the host buffer alone (a delta copy-out).
 * Any other output on an input's memory is computed in a buffer of its own
 * and copied at the end, once every step has read the input.
 *
 * Host-visible backends read inputs in place and write outputs in place. On
 * the others, inputs that device steps read are uploaded, shape-data steps
 * run on the host backend (exec_plan.c, fbx__ir_plan_host_steps), and outputs
 * are copied once through the backend. Every buffer is plan-owned and grows
 * geometrically: the steady state allocates nothing (counted per run).
 *
 * Graphs (backends with graph_begin, e.g. CUDA): every pass records a
 * signature of the work it enqueues (per device step: node, state, every
 * operand's pointer and shape; per upload of a host step: dst, src, size),
 * step after step, and a hash of each step's shapes. A step whose shapes
 * changed between two runs is dynamic (sticky: the steps of a decode plan
 * that read the growing past). The maximal runs of other steps holding at
 * least two device steps are segments; each segment is captured on its own:
 * when two consecutive runs enqueued the same words there, the next run does
 * a dry pass over the segment (shape inference, bindings and host steps, no
 * device work) and, if its words are still the same, captures the segment's
 * device work into a backend graph and launches it; later runs do the dry
 * pass and, on a match, replay the graph. Dynamic steps run live between the
 * segments. A static-shape plan is one segment (one graph per run); a decode
 * plan whose past grows every run replays every segment between the steps
 * that read the past, so most of its launches are replayed although its
 * shapes change every run. Input uploads come before the first step and
 * output copies after the last, outside every graph (ORT's buffers move
 * between runs); host-step results are uploaded from plan-owned host buffers
 * inside a graph, which re-reads them at each launch. Why compare instead of
 * updating pointers: every kernel takes its shapes and pointers as launch
 * parameters, so a changed shape is a different graph; the comparison
 * proves the replayed work is exactly what a live run would enqueue. A
 * segment whose words changed (a buffer regrew) runs live and is re-captured
 * once stable again (counted); after FBX__IR_SEG_MISSES such misses it stays
 * live. Memory a kernel uses without the executor seeing it (the backend's
 * scratch and parameter buffers) is covered by the backend's graph epoch,
 * the last word of every segment: a graph captured before such a buffer was
 * reallocated is dropped and captured again at once (run_invalidated).
 * On device outputs, steps that only feed append positions (seqlens_k) stay
 * on the device, and the index arithmetic over the graph inputs runs first
 * (exec_plan.c): a GenAI decode is then the live steps that read the growing
 * attention_mask and one segment replayed per token. A plan that needs a
 * shape-data read-back is never captured; a
 * segment whose capture failed is not captured again.
 * Staging: a device-memory input or output (io) whose address moved between
 * two runs (ORT allocated it anew: a host tensor it copies in or out, as
 * onnxruntime's Python client binds numpy arrays) would change a segment's
 * words every run, and no graph would ever replay. From then on (sticky) it
 * goes through a plan-owned buffer: the input is copied there on the device
 * before the steps (counted as a copy-wrap), the output is made there and
 * copied out after them (a full copy-out). Only below FBX__IR_STAGE_MAX
 * bytes: a moving large input (a past that is not shared) reads a growing
 * past, whose steps are dynamic anyway. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../trace/trace.h"
#include "exec_gpuobs.h"
#include "exec_plan.h"

/* Checked (base/checked.h): inputs are validated at run entry, outputs by shape inference. */
static size_t fbx__ir_tensor_bytes(const fbx_tensor *t) { return fbx_tensor_nbytes(t); }

/* Grow a backend buffer geometrically (x1.5, 64-byte rounded); contents are
 * dead. Counted in the run's allocations. */
fbx_status *fbx__ir_buf_ensure(fbx__ir_plan *p, void **ptr, size_t *cap, size_t need) {
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

/* The same for the plan-owned host buffer of value v (host steps, read-backs).
 * A value that device steps read is uploaded from it, so it is pinned host
 * memory (FBX_BUFT_HOST_PINNED, where the backend has it): the upload is an
 * asynchronous DMA, also inside a captured graph (from pageable memory a
 * graph's copy stalls its launch). fbx__ir_host_free frees either kind. */
static fbx_status *fbx__ir_host_ensure(fbx__ir_plan *p, int v, size_t need) {
  if (p->host_ptr[v] && p->host_cap[v] >= need) return NULL;
  size_t nc = p->host_cap[v] + p->host_cap[v] / 2;
  if (nc < need) nc = need;
  if (nc < 64) nc = 64;
  nc = (nc + 63) & ~(size_t)63;
  fbx__ir_host_free(p, v);
  p->run_allocs++;
  if (p->need_dev[v]) {
    FBX_TRY(fbx_backend_host_alloc(p->be, FBX_BUFT_HOST_PINNED, nc, &p->host_ptr[v]));
  } else if (!(p->host_ptr[v] = fbx_malloc_aligned(nc))) {
    return FBX_ERR_OOM();
  }
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

/* A shape word: in the signature and in the step's shape hash (pointers are not). */
static fbx_status *fbx__ir_sig_shape(fbx__ir_plan *p, int64_t w) {
  p->cur_h = (p->cur_h ^ (uint64_t)w) * 0x100000001B3ull; /* FNV-1a over words */
  return fbx__ir_sig_put(&p->sig, w);
}

static fbx_status *fbx__ir_sig_tensors(fbx__ir_plan *p, const fbx_tensor *t, int n) {
  for (int i = 0; i < n; i++) {
    FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)t[i].data));
    /* rank -1 (an absent optional input) must not be shifted: rank + 1 >= 0 */
    FBX_TRY(fbx__ir_sig_shape(p, (((int64_t)t[i].rank + 1) << 8) | (int64_t)t[i].dtype));
    for (int d = 0; d < t[i].rank; d++) FBX_TRY(fbx__ir_sig_shape(p, t[i].dims[d]));
  }
  return NULL;
}

/* Whether this run's words from `from` to the end equal b's. */
static bool fbx__ir_sig_tail_eq(const fbx__ir_sig *a, int from, const fbx__ir_sig *b) {
  int n = a->n - from;
  return n == b->n && (n == 0 || memcmp(a->w + from, b->w, sizeof(int64_t) * (size_t)n) == 0);
}

/* dst = this run's words from `from` to the end. */
static fbx_status *fbx__ir_sig_tail_copy(fbx__ir_sig *dst, const fbx__ir_sig *a, int from) {
  dst->n = 0;
  for (int i = from; i < a->n; i++) FBX_TRY(fbx__ir_sig_put(dst, a->w[i]));
  return NULL;
}

/* Whether this pass records signatures (the backend can capture). */
static bool fbx__ir_graphs(const fbx__ir_plan *p) { return p->be->vt->graph_begin && !p->graph_off; }

enum { FBX__IR_STAGE_MAX = 4 << 20 }; /* bytes: larger moving buffers are not staged */

/* Staging (see the top of this file): whether the device buffer d of `bytes`
 * at input / output position `pos` goes through a plan buffer this run;
 * *last holds the previous run's address, *staged the sticky decision. */
static bool fbx__ir_stage(fbx__ir_plan *p, void **last, bool *staged, void *d, size_t bytes, const char *kind,
                          int pos) {
  if (!fbx__ir_graphs(p)) return false;
  void *prev = *last;
  *last = d;
  if (!*staged && prev && d && prev != d && bytes && bytes <= FBX__IR_STAGE_MAX) {
    *staged = true;
    if (fbx_trace_enabled()) {
      fbx_trace_arg a[] = {FBX_TARG_S("kind", kind), FBX_TARG_I("position", pos), FBX_TARG_I("bytes", (int64_t)bytes),
                           FBX_TARG_S("reason", "its device address moved between two runs: copied on the device "
                                                "through a plan buffer from now on, so that a graph can replay"),
                           FBX_TARG_S("device", p->be->vt->name)};
      fbx_trace_instant("fusebox.graph.staged", "device", a, 5);
    }
  }
  return *staged && bytes;
}

/* Whether device buffer [d, d + bytes) overlaps a device input of this run. */
static bool fbx__ir_aliases_input(const fbx__ir_plan *p, const void *d, size_t bytes) {
  if (!p->io || !p->io->input_on_device || !d || !bytes) return false;
  const char *lo = d, *hi = lo + bytes;
  for (int i = 0; i < p->g->n_inputs; i++) {
    if (!p->io->input_on_device[i]) continue;
    const fbx_tensor *t = &p->rt[p->g->inputs[i]];
    const char *a = t->data;
    size_t b = fbx__ir_tensor_bytes(t);
    if (a && b && lo < a + b && a < hi) return true;
  }
  return false;
}

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
void fbx__ir_trace_step(fbx__ir_plan *p, int nid, const fbx_tensor *in, int n_in, const fbx_tensor *out,
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

/* Node n's input tensors for one step: the run-time tensor of each input
 * (rank -1 for an absent optional one). Inputs in read_mask are read back
 * from the device when they have no host copy yet; inputs in host_mask then
 * point at their host copy (host steps, shape data, append positions). */
fbx_status *fbx__ir_step_inputs(fbx__ir_plan *p, const fbx_ir_node *n, unsigned read_mask,
                                       unsigned host_mask, fbx_tensor *in) {
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
      continue;
    }
    in[i] = p->rt[v];
    if (((read_mask >> i) & 1u) && !p->hdata[v]) FBX_TRY(fbx__ir_read_back(p, v));
    if ((host_mask >> i) & 1u) in[i].data = p->hdata[v];
  }
  return NULL;
}

/* One step on the host backend (non-host-visible engines): inputs are host
 * copies (SHAPE reads only its input's shape), outputs go to plan-owned host
 * buffers and, where a device step reads them, are uploaded to their slot. */
static fbx_status *fbx__ir_run_host_step(fbx__ir_plan *p, int nid, uint64_t *clock) {
  fbx_ir_graph *g = p->g;
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  /* a device result (an op too heavy for the host) is read back; SHAPE needs none */
  FBX_TRY(fbx__ir_step_inputs(p, n, n->op == FBX_IR_OP_SHAPE ? 0u : ~0u, ~0u, in));
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
      FBX_TRY(fbx__ir_sig_shape(p, -1 - (int64_t)nid)); /* an upload, not a device step */
      FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)p->slot_ptr[s]));
      FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)out[o].data));
      FBX_TRY(fbx__ir_sig_shape(p, (int64_t)b));
    }
    if (p->mode == FBX__IR_DRY) continue; /* the graph uploads the current host contents */
    FBX_TRY(fbx_backend_copy_from_host_async(p->be, p->slot_ptr[s], out[o].data, b));
  }
  return NULL;
}

/* Whether view step n (p->view) is one this run: TRANSPOSE only when the
 * dims of its input that are not 1 keep their order. */
static bool fbx__ir_is_view(const fbx_ir_node *n, const fbx_tensor *x) {
  if (n->op != FBX_IR_OP_TRANSPOSE) return true;
  int last = -1;
  for (int d = 0; d < x->rank; d++) {
    int src = n->params.transpose.perm[d];
    if (src < 0 || src >= x->rank) return false;
    if (x->dims[src] == 1) continue;
    if (src < last) return false;
    last = src;
  }
  return true;
}

/* ---- graph outputs: direct, in place, private, late ---- */

static bool fbx__ir_same_shape(const fbx_tensor *a, const fbx_tensor *b) {
  return a->dtype == b->dtype && a->rank == b->rank &&
         (a->rank <= 0 || memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0);
}

/* Ask output_fn, once per run and position, for graph output v's buffer and
 * whether it is a graph input's own memory (out_alias; -2: not asked yet). */
static fbx_status *fbx__ir_bind_out(fbx__ir_plan *p, int v, const fbx_tensor *t, fbx_exec_output_fn output_fn,
                                    void *output_ctx) {
  int pos = p->out_pos[v];
  if (p->out_alias[pos] != -2) return NULL;
  void *d = NULL;
  int alias = -1;
  FBX_TRY(output_fn(output_ctx, pos, t, &d, &alias));
  if (!d && fbx__ir_tensor_bytes(t)) return FBX_ERR("output %d: output_fn returned no buffer", pos);
  if (alias < -1 || alias >= p->g->n_inputs) return FBX_ERR("output %d: output_fn named input %d", pos, alias);
  p->out_bound[pos] = d;
  p->out_alias[pos] = alias;
  if (p->io && p->io->outputs_on_device && alias < 0)
    (void)fbx__ir_stage(p, &p->out_last[pos], &p->out_stage[pos], d, fbx__ir_tensor_bytes(t), "output", pos);
  return NULL;
}

/* Where output o (value v) of step nid is written this run (out->data) and
 * how (out_mode): a direct output in output_fn's buffer; an append output
 * whose buffer is its own input's in that input's run-time buffer (ORT's
 * memory on a host-visible backend, the uploaded copy on a device), marked
 * in place for the kernel; a direct output whose buffer is some input's in a
 * private buffer (copied at the end, once every step has read the input);
 * anything else in its slot. With device-memory outputs (io) every graph
 * output a device step makes is direct, unless its buffer overlaps a device
 * input (IOBinding can bind one buffer to both): then it is made in its slot
 * and copied on the device at the end. */
fbx_status *fbx__ir_bind_step_out(fbx__ir_plan *p, int nid, int o, fbx_tensor *out, fbx_exec_output_fn output_fn,
                                         void *output_ctx) {
  fbx_ir_graph *g = p->g;
  int v = g->nodes[nid].outputs[o];
  size_t need = fbx__ir_tensor_bytes(out);
  bool app = p->app_node[v] == nid;
  /* device-memory outputs (io): every graph output a device step makes is written in place */
  bool dev_out = p->io && p->io->outputs_on_device && p->out_pos[v] >= 0;
  bool direct = p->direct_out[v] || dev_out;
  if (!direct && !app) {
    int s = p->slot_of[v];
    FBX_TRY(fbx__ir_buf_ensure(p, &p->slot_ptr[s], &p->slot_cap[s], need));
    out->data = p->slot_ptr[s];
    return NULL;
  }
  int pos = p->out_pos[v];
  FBX_TRY(fbx__ir_bind_out(p, v, out, output_fn, output_ctx));
  int alias = p->out_alias[pos];
  const fbx_tensor *src = alias >= 0 ? &p->rt[g->inputs[alias]] : NULL;
  bool in_place = app && alias == p->app_in[v] && src->data && fbx__ir_same_shape(out, src);
  if (app) fbx_ir_node_in_place_set(&g->nodes[nid], o, in_place);
  if (in_place) {
    out->data = src->data;
    p->out_mode[pos] = FBX__IR_OUT_IN_PLACE;
  } else if (dev_out && alias < 0 && p->out_stage[pos]) { /* staged: made in a plan buffer, copied out at the end */
    FBX_TRY(fbx__ir_buf_ensure(p, &p->priv_ptr[v], &p->priv_cap[v], need));
    out->data = p->priv_ptr[v];
    p->out_mode[pos] = FBX__IR_OUT_LATE;
  } else if (direct && alias < 0 && !(dev_out && fbx__ir_aliases_input(p, p->out_bound[pos], need))) {
    out->data = p->out_bound[pos];
    p->out_mode[pos] = FBX__IR_OUT_DIRECT;
  } else if (p->direct_out[v]) {
    FBX_TRY(fbx__ir_buf_ensure(p, &p->priv_ptr[v], &p->priv_cap[v], need));
    out->data = p->priv_ptr[v];
    p->out_mode[pos] = FBX__IR_OUT_PRIVATE;
  } else {
    int s = p->slot_of[v];
    FBX_TRY(fbx__ir_buf_ensure(p, &p->slot_ptr[s], &p->slot_cap[s], need));
    out->data = p->slot_ptr[s];
    p->out_mode[pos] = FBX__IR_OUT_LATE;
  }
  return NULL;
}

/* The new rows of in-place append output v (fbx_ir_append_rows over the
 * node's inputs `in`, host data for the positions): their bytes, and with
 * copy (a device) each (batch, head) range enqueued to the host's buffer,
 * whose other rows already hold the past. On a host-visible backend the
 * kernel writes them there itself. */
static fbx_status *fbx__ir_delta_rows(fbx__ir_plan *p, int v, const fbx_tensor *in, const fbx_tensor *t, bool copy,
                                      int64_t *bytes) {
  const fbx_ir_node *n = &p->g->nodes[p->app_node[v]];
  if (t->rank != 4) return FBX_ERR("append output %d: rank %d, expected 4", p->out_pos[v], t->rank);
  const int64_t heads = t->dims[1], len = t->dims[2]; /* t: (B, heads, len, head_dim) */
  const size_t row = (size_t)t->dims[3] * fbx_dtype_size(t->dtype);
  char *dst = p->out_bound[p->out_pos[v]];
  const char *src = t->data;
  *bytes = 0;
  for (int64_t b = 0; b < t->dims[0]; b++) {
    int64_t first = 0, count = 0;
    FBX_TRY(fbx_ir_append_rows(n, p->app_out[v], in, n->n_inputs, t, b, &first, &count));
    for (int64_t h = 0; h < heads && count > 0; h++) {
      size_t off = (size_t)((b * heads + h) * len + first) * row, nb = (size_t)count * row;
      if (copy) FBX_TRY(fbx_backend_copy_to_host_async(p->be, dst + off, src + off, nb));
      *bytes += (int64_t)nb;
    }
  }
  return NULL;
}

/* clock: NULL when not tracing; else the end of the previous step (or the
 * plan's start), which this step's span starts at: a span covers the node's
 * whole step (shape inference, output binding, kernel), so the spans of a
 * plan tile its run with one clock read per node. */
static fbx_status *fbx__ir_run_step(fbx__ir_plan *p, int nid, fbx_exec_output_fn output_fn, void *output_ctx,
                                    uint64_t *clock) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  if (clock && p->mode != FBX__IR_DRY) /* device activity tag (exec_gpuobs.c); a dry pass enqueues nothing */
    fbx__gpuobs_node(be, p->gobs, fbx__ir_trace_site(p, nid));
  if (p->host_step && p->host_step[nid]) return fbx__ir_run_host_step(p, nid, clock);
  if (g->nodes[nid].op == FBX_IR_OP_IF) return fbx__exec_run_if(p, nid, output_fn, output_ctx, clock);
  if (g->nodes[nid].op == FBX_IR_OP_LOOP || g->nodes[nid].op == FBX_IR_OP_SCAN)
    return fbx__exec_run_loop(p, nid, output_fn, output_ctx, clock);
  const fbx_ir_node *n = &g->nodes[nid];
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  unsigned data_mask = p->hdata ? fbx_ir_op_shape_data_inputs(n->op) : 0;
  FBX_TRY(fbx__ir_step_inputs(p, n, data_mask, data_mask, in)); /* shape inference reads the host copies */
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  FBX_TRY(fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs));
  if (data_mask) /* kernels read device memory, not our host copies */
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] != FBX_IR_NONE) in[i].data = p->rt[n->inputs[i]].data;
  bool view = p->view && p->view[nid] && fbx__ir_is_view(n, &in[0]) &&
              fbx__ir_tensor_bytes(&out[0]) == fbx__ir_tensor_bytes(&in[0]);
  for (int o = 0; o < n->n_outputs; o++) {
    int v = n->outputs[o];
    if (view) { /* the input's buffer, read in place (exec_plan.c keeps it alive) */
      out[o].data = in[0].data;
    } else {
      FBX_TRY(fbx__ir_bind_step_out(p, nid, o, &out[o], output_fn, output_ctx));
      if (be->vt->host_visible && p->app_node[v] == nid && p->out_mode[p->out_pos[v]] == FBX__IR_OUT_IN_PLACE)
        FBX_TRY(fbx__ir_delta_rows(p, v, in, &out[o], false, &p->out_delta[p->out_pos[v]]));
    }
    p->rt[v] = out[o];
    if (p->hdata) p->hdata[v] = NULL; /* device result: no host copy (yet) */
  }
  if (fbx__ir_graphs(p)) {
    FBX_TRY(fbx__ir_sig_shape(p, nid));
    FBX_TRY(fbx__ir_sig_put(&p->sig, (int64_t)(intptr_t)p->states[nid]));
    FBX_TRY(fbx__ir_sig_tensors(p, in, n->n_inputs));
    FBX_TRY(fbx__ir_sig_tensors(p, out, n->n_outputs));
  }
  if (p->mode == FBX__IR_DRY) return NULL; /* replayed from the graph */
  if (view) { /* nothing to enqueue */
    if (clock) {
      fbx_kernel_info vi = {.variant = "view", .reason = "zero-copy: the output is its input's buffer"};
      uint64_t t1 = fbx_trace_now_ns();
      fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &vi, *clock, t1);
      *clock = t1;
    }
    return NULL;
  }
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

static void fbx__ir_count_full(fbx_exec_run_report *report, size_t b) {
  if (!report) return;
  report->copyout_count++;
  report->copyout_bytes += (int64_t)b;
}

/* Copy value v whole into d: into a host buffer from its host copy
 * (host-visible memory, a graph input, a constant, a host step, a private
 * buffer), else enqueued from the device (complete at the run's
 * synchronize); into a device buffer (io outputs_on_device) on the device,
 * or uploaded from the host copy. */
static fbx_status *fbx__ir_copy_whole(fbx__ir_plan *p, int v, const void *host_src, void *d, int pos,
                                      fbx_exec_run_report *report) {
  const fbx_tensor *t = &p->rt[v];
  size_t b = fbx__ir_tensor_bytes(t);
  if (!b) return NULL;
  if (!d) return FBX_ERR("output %d: output_fn returned no buffer", pos);
  if (p->io && p->io->outputs_on_device) { /* d is device memory (a backend that is not host-visible) */
    fbx_backend *be = p->be;
    if (host_src) FBX_TRY(fbx_backend_copy_from_host_async(be, d, host_src, b));
    else if (t->data) FBX_TRY(be->vt->copy_device(be, d, t->data, b));
    else if (p->hdata[v]) FBX_TRY(fbx_backend_copy_from_host_async(be, d, p->hdata[v], b));
    else return FBX_ERR("output %d: no device or host copy to write out", pos);
    fbx__ir_count_full(report, b);
    return NULL;
  }
  if (!host_src) host_src = p->be->vt->host_visible ? t->data : p->hdata[v];
  if (host_src == d) { /* the very buffer (an output bound twice over one value) */
  } else if (host_src) {
    memcpy(d, host_src, b);
  } else {
    FBX_TRY(fbx_backend_copy_to_host_async(p->be, d, t->data, b));
  }
  fbx__ir_count_full(report, b);
  return NULL;
}

/* Copy one graph output that was not bound during the steps (a graph input,
 * a constant, a host step's result, a device result, a second position of
 * one value). */
static fbx_status *fbx__ir_copy_out(fbx__ir_plan *p, int pos, fbx_exec_output_fn output_fn, void *output_ctx,
                                    fbx_exec_run_report *report) {
  int v = p->g->outputs[pos];
  void *d = NULL;
  int alias = -1; /* whatever it aliases: every step has run */
  FBX_TRY(output_fn(output_ctx, pos, &p->rt[v], &d, &alias));
  return fbx__ir_copy_whole(p, v, NULL, d, pos, report);
}

/* Delta copy-out of in-place append output v at the end of the run. A
 * host-visible backend counted the rows at the step (their positions' buffers
 * may be reused since); a device reads the positions' host copies (host
 * steps' results stay valid for the run, exec_plan.c makes them host steps)
 * and copies the rows. */
static fbx_status *fbx__ir_delta_out(fbx__ir_plan *p, int v, fbx_exec_run_report *report) {
  int pos = p->out_pos[v];
  int64_t bytes = p->out_delta[pos];
  if (!p->be->vt->host_visible) {
    const fbx_ir_node *n = &p->g->nodes[p->app_node[v]];
    fbx_tensor in[FBX_IR_MAX_INPUTS];
    /* the kernel wrote the bound buffer itself when the input was used in place, not uploaded:
     * only the rows' bytes to count, from shapes (the positions may live on the device) */
    bool copy = p->rt[v].data != p->out_bound[pos];
    unsigned mask = copy ? fbx_ir_op_append_data_inputs(n->op) : 0u;
    FBX_TRY(fbx__ir_step_inputs(p, n, mask, mask, in));
    if (copy) {
      FBX_TRY(fbx__ir_delta_rows(p, v, in, &p->rt[v], true, &bytes));
    } else {
      const fbx_tensor *t = &p->rt[v]; /* (B, heads, len, head_dim) */
      int64_t count = 0;
      if (t->rank != 4) return FBX_ERR("append output %d: rank %d, expected 4", pos, t->rank);
      FBX_TRY(fbx_ir_append_row_count(n, p->app_out[v], in, n->n_inputs, &count));
      bytes = t->dims[0] * t->dims[1] * count * t->dims[3] * (int64_t)fbx_dtype_size(t->dtype);
    }
  }
  if (report) {
    report->delta_count++;
    report->delta_bytes += bytes;
  }
  return NULL;
}

/* Finish graph output pos after the steps (see fbx__ir_bind_step_out). An
 * append output written whole to a buffer of its own counts as a full
 * copy-out even when the kernel wrote it directly: the past was copied in. */
static fbx_status *fbx__ir_finish_out(fbx__ir_plan *p, int pos, fbx_exec_output_fn output_fn, void *output_ctx,
                                      fbx_exec_run_report *report) {
  int v = p->g->outputs[pos];
  if (p->out_pos[v] != pos || p->out_alias[pos] == -2) return fbx__ir_copy_out(p, pos, output_fn, output_ctx, report);
  void *d = p->out_bound[pos];
  switch ((fbx__ir_out_mode)p->out_mode[pos]) {
    case FBX__IR_OUT_DIRECT:
      if (p->app_node[v] >= 0) fbx__ir_count_full(report, fbx__ir_tensor_bytes(&p->rt[v]));
      return NULL;
    case FBX__IR_OUT_IN_PLACE: return fbx__ir_delta_out(p, v, report);
    case FBX__IR_OUT_PRIVATE: return fbx__ir_copy_whole(p, v, p->priv_ptr[v], d, pos, report);
    case FBX__IR_OUT_LATE: return fbx__ir_copy_whole(p, v, NULL, d, pos, report);
  }
  return NULL;
}

/* Bind the run's inputs: host-visible engines read them in place; others
 * keep the caller's pointer as the host copy and upload the inputs that
 * device steps read, except device-memory inputs (io), which are wrapped in
 * place like host inputs of a host-visible engine (no host copy: a host step
 * that needs one reads it back). */
static fbx_status *fbx__ir_bind_inputs(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                                       fbx_exec_run_report *report) {
  fbx_ir_graph *g = p->g;
  for (int i = 0; i < g->n_inputs && i < n_inputs; i++) {
    int v = g->inputs[i];
    p->rt[v] = inputs[i];
    size_t b = fbx__ir_tensor_bytes(&inputs[i]);
    bool dev_in = !p->be->vt->host_visible && p->io && p->io->input_on_device && p->io->input_on_device[i];
    if (p->be->vt->host_visible || dev_in) {
      if (p->hdata) p->hdata[v] = NULL;
      if (dev_in && fbx__ir_stage(p, &p->in_last[i], &p->in_stage[i], inputs[i].data, b, "input", i)) {
        /* at least 4 KiB: a growing attention_mask regrows its buffer seldom */
        FBX_TRY(fbx__ir_buf_ensure(p, &p->in_buf[i], &p->in_cap[i], b < 4096 ? 4096 : b));
        FBX_TRY(p->be->vt->copy_device(p->be, p->in_buf[i], inputs[i].data, b));
        p->rt[v].data = p->in_buf[i];
        if (report) {
          report->copywrap_count++;
          report->copywrap_bytes += (int64_t)b;
        }
        continue;
      }
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

/* Steps [s0, s1) in the given mode; each step's words start at sig_at[s]
 * and its shape hash lands in shape_h[s]. */
static fbx_status *fbx__ir_range(fbx__ir_plan *p, int s0, int s1, fbx__ir_mode mode, fbx_exec_output_fn output_fn,
                                 void *output_ctx, uint64_t *clock) {
  p->mode = mode;
  fbx_status *st = NULL;
  bool graphs = p->sig_at != NULL;
  for (int s = s0; s < s1 && !st; s++) {
    if (graphs) {
      p->sig_at[s] = p->sig.n;
      p->cur_h = 0xCBF29CE484222325ull;
    }
    st = fbx__ir_run_step(p, p->steps[s], output_fn, output_ctx, clock);
    if (graphs) p->shape_h[s] = p->cur_h;
  }
  p->mode = FBX__IR_RUN;
  return st;
}

enum { FBX__IR_SEG_MISSES = 8 }; /* a segment whose work changed this often stays live */

/* Segment g's steps in the given mode, then the backend's graph epoch as its
 * last word (after the work: a live pass may regrow a buffer, moving it),
 * so a graph captured before a backend buffer was reallocated no longer
 * matches (backend.h graph_epoch). */
static fbx_status *fbx__ir_seg_range(fbx__ir_plan *p, const fbx__ir_seg *g, fbx__ir_mode mode,
                                     fbx_exec_output_fn output_fn, void *output_ctx, uint64_t *clock) {
  FBX_TRY(fbx__ir_range(p, g->s0, g->s1, mode, output_fn, output_ctx, clock));
  fbx_backend *be = p->be;
  return fbx__ir_sig_put(&p->sig, be->vt->graph_epoch ? (int64_t)be->vt->graph_epoch(be) : 0);
}

/* Whether this run's words from `from` differ from the captured ones in the
 * epoch word alone: the same work, but a backend buffer it used inside was
 * reallocated since the capture. */
static bool fbx__ir_sig_epoch_only(const fbx__ir_sig *a, int from, const fbx__ir_sig *cap) {
  int n = a->n - from;
  return n == cap->n && n >= 1 && a->w[a->n - 1] != cap->w[n - 1] &&
         (n == 1 || memcmp(a->w + from, cap->w, sizeof(int64_t) * (size_t)(n - 1)) == 0);
}

/* Capture segment g's device work into g->graph and launch it (the sig
 * from `base` on is rewritten). On a failed capture the segment is marked
 * off and runs live. */
static fbx_status *fbx__ir_capture(fbx__ir_plan *p, fbx__ir_seg *g, int base, fbx_exec_output_fn output_fn,
                                   void *output_ctx, uint64_t *clock) {
  fbx_backend *be = p->be;
  if (g->graph) be->vt->graph_destroy(be, g->graph);
  g->graph = NULL;
  g->obs_map = NULL;
  p->sig.n = base;
  fbx_status *st = be->vt->graph_begin(be);
  if (!st) {
    if (clock) fbx__gpuobs_capture(be, p->gobs); /* launches counted per node: the replays' attribution */
    fbx_status *pass = fbx__ir_seg_range(p, g, FBX__IR_CAPTURE, output_fn, output_ctx, clock);
    if (clock) g->obs_map = fbx__gpuobs_captured(be, p->gobs);
    st = be->vt->graph_end(be, &g->graph); /* always ends the capture */
    if (pass) {
      fbx_status_free(st);
      st = pass;
    }
  }
  if (st || !g->graph) {
    char why[200];
    snprintf(why, sizeof why, "%s", st ? fbx_status_message(st) : "no graph");
    fbx_status_free(st);
    if (g->graph) be->vt->graph_destroy(be, g->graph);
    g->graph = NULL;
    g->off = true;
    if (fbx_trace_enabled()) {
      fbx_trace_arg a[] = {FBX_TARG_S("reason", why), FBX_TARG_S("device", be->vt->name)};
      fbx_trace_instant("fusebox.graph.capture_failed", "device", a, 2);
    }
    p->sig.n = base;
    return fbx__ir_seg_range(p, g, FBX__IR_RUN, output_fn, output_ctx, clock); /* reports a real error */
  }
  FBX_TRY(fbx__ir_sig_tail_copy(&g->cap, &p->sig, base));
  p->run_captures++;
  if (clock) fbx__gpuobs_launch(be, p->gobs, g->obs_map); /* the eval's, split over nodes by capture order */
  if (fbx_trace_enabled()) {
    fbx_trace_arg a[] = {FBX_TARG_I("steps", g->s1 - g->s0), FBX_TARG_I("first_step", g->s0),
                         FBX_TARG_S("device", be->vt->name)};
    fbx_trace_instant("fusebox.graph.capture", "device", a, 3);
  }
  return be->vt->graph_launch(be, g->graph);
}

/* One segment of one run: live, or a dry pass then a replay or a capture.
 * A graph whose work is unchanged but whose backend epoch moved (a scratch
 * buffer regrew since its capture) is dropped and captured again at once
 * (counted: run_invalidated, a fusebox.graph.invalidated instant). */
static fbx_status *fbx__ir_seg_run(fbx__ir_plan *p, fbx__ir_seg *g, fbx_exec_output_fn output_fn, void *output_ctx,
                                   uint64_t *clock) {
  fbx_backend *be = p->be;
  int base = p->sig.n;
  if (g->off) return fbx__ir_seg_range(p, g, FBX__IR_RUN, output_fn, output_ctx, clock);
  if (g->graph || g->stable) {
    FBX_TRY(fbx__ir_seg_range(p, g, FBX__IR_DRY, output_fn, output_ctx, clock));
    if (g->graph && fbx__ir_sig_tail_eq(&p->sig, base, &g->cap)) {
      p->run_replays++;
      if (fbx_trace_enabled()) {
        fbx_trace_arg a[] = {FBX_TARG_I("steps", g->s1 - g->s0), FBX_TARG_I("first_step", g->s0),
                             FBX_TARG_S("device", be->vt->name)};
        fbx_trace_instant("fusebox.graph.replay", "device", a, 3);
      }
      if (clock) fbx__gpuobs_launch(be, p->gobs, g->obs_map); /* the eval's, split over nodes by capture order */
      FBX_TRY(be->vt->graph_launch(be, g->graph));
    } else if (g->graph && fbx__ir_sig_epoch_only(&p->sig, base, &g->cap)) {
      be->vt->graph_destroy(be, g->graph); /* launched last run, which synchronised */
      g->graph = NULL;
      p->run_invalidated++;
      if (fbx_trace_enabled()) {
        fbx_trace_arg a[] = {FBX_TARG_I("steps", g->s1 - g->s0), FBX_TARG_I("first_step", g->s0),
                             FBX_TARG_S("reason", "the backend's graph epoch moved (a buffer the graph used was reallocated, or "
                                                   "device recording was switched on or off)"),
                             FBX_TARG_S("device", be->vt->name)};
        fbx_trace_instant("fusebox.graph.invalidated", "device", a, 4);
      }
      FBX_TRY(fbx__ir_capture(p, g, base, output_fn, output_ctx, clock));
    } else if (fbx__ir_sig_tail_eq(&p->sig, base, &g->prev)) {
      FBX_TRY(fbx__ir_capture(p, g, base, output_fn, output_ctx, clock));
    } else { /* the work changed: live until it is stable again */
      if (g->graph) {
        be->vt->graph_destroy(be, g->graph); /* launched last run, which synchronised */
        g->graph = NULL;
        if (++g->misses >= FBX__IR_SEG_MISSES) g->off = true;
      }
      g->stable = false;
      p->sig.n = base;
      FBX_TRY(fbx__ir_seg_range(p, g, FBX__IR_RUN, output_fn, output_ctx, clock));
    }
  } else {
    FBX_TRY(fbx__ir_seg_range(p, g, FBX__IR_RUN, output_fn, output_ctx, clock));
    g->stable = g->have_prev && fbx__ir_sig_tail_eq(&p->sig, base, &g->prev);
  }
  g->have_prev = true;
  return fbx__ir_sig_tail_copy(&g->prev, &p->sig, base);
}

/* Rebuild the segments from the dynamic marks (start of a run: the last
 * run synchronised, so no graph is in flight). */
static void fbx__ir_segs_build(fbx__ir_plan *p) {
  fbx_backend *be = p->be;
  for (int k = 0; k < p->n_segs; k++) {
    fbx__ir_seg *g = &p->segs[k];
    if (g->graph) be->vt->graph_destroy(be, g->graph);
    fbx_free(g->prev.w);
    fbx_free(g->cap.w);
    memset(g, 0, sizeof *g);
  }
  p->n_segs = 0;
  for (int s = 0; s < p->n_steps; s++) p->seg_at[s] = -1;
  for (int s = 0; s < p->n_steps;) {
    if (p->dyn[s]) {
      s++;
      continue;
    }
    int e = s, dev = 0;
    for (; e < p->n_steps && !p->dyn[e]; e++) dev += !(p->host_step && p->host_step[p->steps[e]]);
    if (dev >= 2) { /* one device step gains nothing from a graph */
      p->segs[p->n_segs] = (fbx__ir_seg){.s0 = s, .s1 = e};
      p->seg_at[s] = p->n_segs++;
    }
    s = e;
  }
  p->reseg = false;
}

/* After a run: steps whose shapes changed become dynamic (segments rebuilt
 * at the next run). */
static void fbx__ir_segs_mark(fbx__ir_plan *p) {
  if (p->n_runs++ > 0 && p->seg_on)
    for (int s = 0; s < p->n_steps; s++)
      if (!p->dyn[s] && p->shape_h[s] != p->shape_h_prev[s]) p->dyn[s] = p->reseg = true;
  uint64_t *t = p->shape_h;
  p->shape_h = p->shape_h_prev;
  p->shape_h_prev = t;
}

/* The steps of one run: live, or (graph-capable backends) segment by
 * segment, as the file comment says. */
static fbx_status *fbx__ir_steps(fbx__ir_plan *p, fbx_exec_output_fn output_fn, void *output_ctx, uint64_t *clock) {
  if (!fbx__ir_graphs(p)) return fbx__ir_range(p, 0, p->n_steps, FBX__IR_RUN, output_fn, output_ctx, clock);
  if (p->reseg) fbx__ir_segs_build(p);
  p->sig.n = 0;
  for (int s = 0; s < p->n_steps;) {
    int k = p->seg_at[s];
    if (k < 0) {
      FBX_TRY(fbx__ir_range(p, s, s + 1, FBX__IR_RUN, output_fn, output_ctx, clock));
      s++;
      continue;
    }
    FBX_TRY(fbx__ir_seg_run(p, &p->segs[k], output_fn, output_ctx, clock));
    s = p->segs[k].s1;
  }
  if (!p->graph_off) fbx__ir_segs_mark(p); /* a read-back this run turned graphs off */
  return NULL;
}

/* Steps, output copies and the run's one synchronisation (after the copies
 * when the outputs come from the device: they are part of what it waits for). */
static fbx_status *fbx__ir_plan_exec(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs,
                                     fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *report) {
  fbx_ir_graph *g = p->g;
  fbx_backend *be = p->be;
  bool tracing = fbx_trace_enabled();
  for (int pos = 0; pos < g->n_outputs; pos++) {
    p->out_bound[pos] = NULL;
    p->out_alias[pos] = -2; /* not asked yet */
    p->out_mode[pos] = FBX__IR_OUT_LATE;
    p->out_delta[pos] = 0;
  }
  FBX_TRY(fbx__ir_bind_inputs(p, inputs, n_inputs, report));
  uint64_t t0 = report ? fbx_trace_now_ns() : 0;
  uint64_t clock = tracing ? (report ? t0 : fbx_trace_now_ns()) : 0;
  FBX_TRY(fbx__ir_steps(p, output_fn, output_ctx, tracing ? &clock : NULL));
  if (tracing) fbx__gpuobs_node(be, p->gobs, NULL); /* output copies: the eval's, no node's */
  if (be->vt->host_visible) FBX_TRY(fbx__ir_sync(p));
  uint64_t t1 = report ? fbx_trace_now_ns() : 0;
  for (int pos = 0; pos < g->n_outputs; pos++) FBX_TRY(fbx__ir_finish_out(p, pos, output_fn, output_ctx, report));
  /* on the caller's stream with device outputs, the caller waits (fbx_exec_run_io.caller_stream) */
  bool caller_waits = p->io && p->io->caller_stream && p->io->outputs_on_device && !(p->gobs && p->gobs->capture);
  if (!be->vt->host_visible && !caller_waits) FBX_TRY(fbx__ir_sync(p));
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

fbx_status *fbx__ir_plan_run(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs, const fbx_exec_run_io *io,
                             fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *report) {
  p->run_allocs = p->run_syncs = p->run_captures = p->run_replays = p->run_invalidated = 0;
  p->io = io;
  fbx__gpuobs_eval ge; /* counters, capture, device activity (one branch when all is off) */
  fbx__gpuobs_begin(p->be, &ge);
  p->gobs = &ge;
  fbx_status *st = fbx__ir_plan_exec(p, inputs, n_inputs, output_fn, output_ctx, report);
  p->io = NULL;
  /* an error mid-run may leave work queued that reads our buffers: drain it */
  if (st && !p->be->vt->host_visible) fbx_status_free(fbx__ir_sync(p));
  p->gobs = NULL;
  fbx__gpuobs_end(p->be, &ge);
  if (report) {
    report->allocs += p->run_allocs;
    report->host_syncs += p->run_syncs;
    report->graph_captures += p->run_captures;
    report->graph_replays += p->run_replays;
    report->graph_invalidated += p->run_invalidated;
  }
  return st;
}
