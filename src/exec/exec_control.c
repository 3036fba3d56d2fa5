/* Control-flow steps, run by the executor itself (never by a backend): IF
 * runs the branch its condition picks; LOOP and SCAN run their body once per
 * iteration. Bodies and branches are compiled objects of their own (each with
 * its own plan cache, exec_compiled.c). All of it reads values on the host
 * (conditions, trip counts, slices), so these ops are claimed on
 * host-visible engines only (ep_capability.c declines them elsewhere).
 *
 * LOOP/SCAN per iteration: the body's inputs are tensor views (no copy):
 * the iteration number and condition in the node's state, the carried
 * values in one of two ping-pong buffers per value (iteration t writes set
 * t & 1 and reads the other; the first reads the node's inputs), a SCAN
 * input's slice in place when its axis is 0 (else gathered into a buffer of
 * its own), the captures as they are. The body writes its outputs straight
 * into those buffers and each scan output's slice into its row of a stacked
 * buffer (iteration order). After the last iteration the node's outputs are
 * bound like any step's and copied once: the last carried values, and the
 * stacked slices (SCAN: along out_axis, reversed where asked). The body's
 * plan of iteration t - 1 is run again at once when the carried shapes did
 * not change (fbx__exec_compiled_run_body): no validation, shape key or
 * cache lookup per iteration (nor per run of an IF branch whose captures
 * keep their shapes). Buffers live in the node's state, kept with
 * the plan: the steady state allocates nothing. */
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "../ir/ir_shape.h"
#include "../trace/trace.h"
#include "exec_plan.h"

/* ---- IF: the executor runs the branch the condition picks ---- */

/* The IF step's binding of its outputs while the branch runs: the branch's
 * output_fn. Output o gets the buffer the IF's own output would get (its slot,
 * or the caller's buffer when the IF output is a graph output), sized from the
 * shape the branch gives, so the branch's last kernel writes it in place. */
typedef struct fbx__ir_if_ctx {
  fbx__ir_plan *p;
  int nid;
  fbx_exec_output_fn output_fn;
  void *output_ctx;
  fbx_tensor *out;   /* (node outputs) */
  bool *bound;
} fbx__ir_if_ctx;

static fbx_status *fbx__ir_if_out(void *ctx, int o, const fbx_tensor *shape, void **data, int *same_as_input) {
  fbx__ir_if_ctx *x = ctx;
  const fbx_ir_node *n = &x->p->g->nodes[x->nid];
  (void)same_as_input; /* our buffer is no input's */
  if (o < 0 || o >= n->n_outputs) return FBX_ERR("IF '%s': branch output %d out of range", n->name, o);
  const fbx_ir_value *v = &x->p->g->values[n->outputs[o]];
  if (shape->dtype != v->dtype || shape->rank != v->rank)
    return FBX_ERR("IF '%s': branch output %d is %s rank %d, the node's %s rank %d", n->name, o,
                   fbx_dtype_name(shape->dtype), shape->rank, fbx_dtype_name(v->dtype), v->rank);
  x->out[o] = *shape;
  x->out[o].data = NULL;
  FBX_TRY(fbx__ir_bind_step_out(x->p, x->nid, o, &x->out[o], x->output_fn, x->output_ctx));
  x->bound[o] = true;
  *data = x->out[o].data;
  return NULL;
}

/* Read the condition (host memory: IF is claimed on host-visible engines
 * only), run the branch as a compiled graph of its own on the captures (IF
 * inputs 1..), its outputs written where the IF's outputs live. */
fbx_status *fbx__exec_run_if(fbx__ir_plan *p, int nid, fbx_exec_output_fn output_fn, void *output_ctx,
                             uint64_t *clock) {
  const fbx_ir_node *n = &p->g->nodes[nid];
  if (!p->be->vt->host_visible)
    return FBX_ERR("IF '%s': device '%s' is not host-visible (If is claimed on host-visible devices only)", n->name,
                   p->be->vt->name);
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  bool bound[FBX_IR_MAX_OUTPUTS] = {false};
  FBX_TRY(fbx__ir_step_inputs(p, n, 0u, 0u, in));
  if (in[0].rank < 0 || fbx_tensor_numel(&in[0]) != 1 || !in[0].data)
    return FBX_ERR("IF '%s': the condition must hold one element", n->name);
  bool cond = *(const uint8_t *)in[0].data != 0; /* bool: one byte */
  fbx_exec_compiled *br = fbx__ir_compiled_branch(p->owner, n->params.cond.branch[cond ? 0 : 1]);
  if (!br) return FBX_ERR("IF '%s': branch not compiled", n->name);
  fbx__ir_if_ctx x = {p, nid, output_fn, output_ctx, out, bound};
  fbx_exec_run_report sub;
  FBX_TRY(fbx__exec_compiled_run_body(br, in + 1, n->n_inputs - 1, fbx__ir_if_out, &x, &sub));
  p->run_allocs += sub.allocs;
  p->run_syncs += sub.host_syncs;
  for (int o = 0; o < n->n_outputs; o++) {
    if (!bound[o]) return FBX_ERR("IF '%s': the branch did not write output %d", n->name, o);
    p->rt[n->outputs[o]] = out[o];
  }
  if (clock) {
    fbx_kernel_info info = {.variant = cond ? "then" : "else",
                            .reason = cond ? "condition true: then_branch ran" : "condition false: else_branch ran"};
    uint64_t t1 = fbx_trace_now_ns();
    fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &info, *clock, t1);
    *clock = t1;
  }
  return NULL;
}

/* ---- LOOP / SCAN ---- */

typedef struct fbx__cf_buf {
  void *ptr;
  size_t cap;
} fbx__cf_buf;

/* A LOOP/SCAN node's run state (plan-owned, p->cf[nid]). */
typedef struct fbx__cf_state {
  fbx__cf_buf carry[2][FBX_IR_MAX_OUTPUTS]; /* per carried value: the ping-pong pair */
  fbx__cf_buf stack[FBX_IR_MAX_OUTPUTS];    /* per scan output: (iterations, slice) in iteration order */
  fbx__cf_buf slice[FBX_IR_SCAN_MAX];       /* SCAN: the gathered slice of an input whose axis is not 0 */
  int64_t iter;                             /* (): the body's iteration-number input */
  uint8_t cond_in, cond_out;                /* (): the body's condition input / output (bool) */
} fbx__cf_state;

void fbx__exec_cf_free(fbx__ir_plan *p, void *state) {
  fbx__cf_state *s = state;
  if (!s) return;
  fbx_backend *be = p->be;
  for (int i = 0; i < FBX_IR_MAX_OUTPUTS; i++) {
    for (int k = 0; k < 2; k++)
      if (s->carry[k][i].ptr) be->vt->buffer_free(be, s->carry[k][i].ptr);
    if (s->stack[i].ptr) be->vt->buffer_free(be, s->stack[i].ptr);
  }
  for (int i = 0; i < FBX_IR_SCAN_MAX; i++)
    if (s->slice[i].ptr) be->vt->buffer_free(be, s->slice[i].ptr);
  fbx_free(s);
}

/* Grow b to need bytes keeping its first `keep` bytes (x2: a stack grows by a row per iteration). */
static fbx_status *fbx__cf_grow_keep(fbx__ir_plan *p, fbx__cf_buf *b, size_t need, size_t keep) {
  if (b->ptr && b->cap >= need) return NULL;
  size_t nc = 2 * b->cap;
  if (nc < need) nc = need;
  if (nc < 64) nc = 64;
  nc = (nc + 63) & ~(size_t)63;
  void *np = NULL;
  p->run_allocs++;
  FBX_TRY(p->be->vt->buffer_alloc(p->be, nc, &np));
  if (keep && b->ptr) memcpy(np, b->ptr, keep); /* host-visible memory */
  if (b->ptr) p->be->vt->buffer_free(p->be, b->ptr);
  b->ptr = np;
  b->cap = nc;
  return NULL;
}

/* One iteration's binding of the body's outputs (its output_fn). */
typedef struct fbx__cf_iter {
  fbx__ir_plan *p;
  const fbx_ir_node *n;
  fbx__cf_state *s;
  bool loop;
  int n_carried, n_scan, first_scan; /* body output index of scan output 0 */
  int64_t t, total;                  /* this iteration; SCAN: the iteration count (LOOP: -1) */
  int par;                           /* carried values are written to carry[par] */
  fbx_tensor *next;                  /* (n_carried): the carried values this iteration makes */
  fbx_tensor *slice;                 /* (n_scan): the slice shapes of iteration 0 */
  uint64_t bound;                    /* body outputs written, bit per output (<= 64) */
} fbx__cf_iter;

static fbx_status *fbx__cf_out(void *ctx, int o, const fbx_tensor *shape, void **data, int *same_as_input) {
  fbx__cf_iter *x = ctx;
  const char *nm = x->n->name ? x->n->name : "";
  const char *op = x->loop ? "LOOP" : "SCAN";
  *same_as_input = -1; /* every buffer here is ours */
  size_t b = fbx_tensor_nbytes(shape);
  if (x->loop && o == 0) { /* the condition */
    if (shape->dtype != FBX_DTYPE_BOOL || fbx_tensor_numel(shape) != 1)
      return FBX_ERR("%s '%s': the body's condition output must be one bool", op, nm);
    *data = &x->s->cond_out;
  } else if (o - (x->loop ? 1 : 0) < x->n_carried) {
    int i = o - (x->loop ? 1 : 0);
    fbx__cf_buf *cb = &x->s->carry[x->par][i];
    FBX_TRY(fbx__ir_buf_ensure(x->p, &cb->ptr, &cb->cap, b)); /* holds iteration t - 2's values: dead */
    x->next[i] = *shape;
    x->next[i].data = cb->ptr;
    *data = cb->ptr;
  } else {
    int k = o - x->first_scan;
    if (k < 0 || k >= x->n_scan) return FBX_ERR("%s '%s': body output %d out of range", op, nm, o);
    if (x->t == 0) {
      x->slice[k] = *shape;
    } else if (x->slice[k].dtype != shape->dtype || x->slice[k].rank != shape->rank ||
               memcmp(x->slice[k].dims, shape->dims, sizeof(int64_t) * (size_t)(shape->rank > 0 ? shape->rank : 0))) {
      return FBX_ERR("%s '%s': scan output %d changes shape between iterations (iteration %lld)", op, nm, k,
                     (long long)x->t);
    }
    int64_t rows = x->total >= 0 ? x->total : x->t + 1;
    FBX_TRY(fbx__cf_grow_keep(x->p, &x->s->stack[k], (size_t)rows * b, (size_t)x->t * b));
    *data = (char *)x->s->stack[k].ptr + (size_t)x->t * b;
  }
  if (o < 64) x->bound |= 1ull << o;
  return NULL;
}

/* Slice t of SCAN input x along axis (reversed: from the end) into *sl: in
 * place for axis 0, else gathered into buf. */
static fbx_status *fbx__cf_slice(fbx__ir_plan *p, const fbx_tensor *x, int axis, bool rev, int64_t t,
                                 fbx__cf_buf *buf, fbx_tensor *sl) {
  const int64_t T = x->dims[axis], idx = rev ? T - 1 - t : t;
  sl->dtype = x->dtype;
  sl->rank = x->rank - 1;
  int64_t outer = 1, inner = (int64_t)fbx_dtype_size(x->dtype);
  for (int d = 0, k = 0; d < x->rank; d++) {
    if (d == axis) continue;
    sl->dims[k++] = x->dims[d];
    if (d < axis) outer *= x->dims[d];
    else inner *= x->dims[d];
  }
  if (outer == 1) { /* axis 0 (or only 1s before it): the slice is contiguous */
    sl->data = (char *)x->data + (size_t)(idx * inner);
    return NULL;
  }
  FBX_TRY(fbx__cf_grow_keep(p, buf, (size_t)(outer * inner), 0));
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)buf->ptr + o * inner, (const char *)x->data + (o * T + idx) * inner, (size_t)inner);
  sl->data = buf->ptr;
  return NULL;
}

/* Write the stacked slices st (rows iterations of slice shape sl, iteration
 * order) into out, shaped as sl with rows inserted at axis (reversed: the
 * last iteration first). */
static void fbx__cf_unstack(const void *st, const fbx_tensor *sl, int64_t rows, int axis, bool rev, void *out) {
  int64_t outer = 1, inner = (int64_t)fbx_dtype_size(sl->dtype);
  for (int d = 0; d < sl->rank; d++) {
    if (d < axis) outer *= sl->dims[d];
    else inner *= sl->dims[d];
  }
  const size_t slice = (size_t)(outer * inner);
  if (outer == 1 && !rev) {
    if (rows > 0 && slice > 0) memcpy(out, st, (size_t)rows * slice);
    return;
  }
  for (int64_t t = 0; t < rows; t++) {
    int64_t j = rev ? rows - 1 - t : t;
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out + (o * rows + j) * inner, (const char *)st + (size_t)t * slice + o * inner, (size_t)inner);
  }
}

/* Zero iterations: the slice shape of each scan output (sl[k], body output
 * first_scan + k), by shape inference over the body from the inputs it
 * would have had (bin); where that fails (a dim that needs a value computed
 * in the body), the body's static dims, unknown ones 0. Cold path: one
 * allocation per call. */
static fbx_status *fbx__cf_empty_slices(const fbx_ir_graph *bg, const fbx_tensor *bin, int first_scan, int K,
                                        fbx_tensor *sl) {
  fbx_tensor *sh = fbx_calloc((size_t)(bg->n_values > 0 ? bg->n_values : 1), sizeof *sh);
  bool *known = fbx_calloc((size_t)(bg->n_values > 0 ? bg->n_values : 1), sizeof *known);
  if (!sh || !known) {
    fbx_free(sh);
    fbx_free(known);
    return FBX_ERR_OOM();
  }
  for (int v = 0; v < bg->n_values; v++) {
    const fbx_ir_value *val = &bg->values[v];
    sh[v].dtype = val->dtype;
    sh[v].rank = val->rank;
    memcpy(sh[v].dims, val->dims, sizeof sh[v].dims);
    if (val->kind == FBX_IR_VALUE_CONST) sh[v].data = val->data, known[v] = true;
  }
  for (int i = 0; i < bg->n_inputs; i++) sh[bg->inputs[i]] = bin[i], known[bg->inputs[i]] = true;
  for (int nid = 0; nid < bg->n_nodes; nid++) fbx_ir_infer_node_known(&bg->nodes[nid], sh, known);
  for (int k = 0; k < K; k++) {
    int v = bg->outputs[first_scan + k];
    sl[k] = sh[v];
    sl[k].data = NULL;
    if (sl[k].rank < 0) sl[k].rank = 0;
    for (int d = 0; d < sl[k].rank; d++)
      if (!known[v] || sl[k].dims[d] < 0) sl[k].dims[d] = known[v] && sh[v].dims[d] >= 0 ? sh[v].dims[d] : 0;
  }
  fbx_free(sh);
  fbx_free(known);
  return NULL;
}

fbx_status *fbx__exec_run_loop(fbx__ir_plan *p, int nid, fbx_exec_output_fn output_fn, void *output_ctx,
                               uint64_t *clock) {
  const fbx_ir_node *n = &p->g->nodes[nid];
  const bool loop = n->op == FBX_IR_OP_LOOP;
  const char *op = loop ? "LOOP" : "SCAN", *nm = n->name ? n->name : "";
  if (!p->be->vt->host_visible)
    return FBX_ERR("%s '%s': device '%s' is not host-visible (Loop and Scan are claimed on host-visible devices only)",
                   op, nm, p->be->vt->name);
  const int N = n->params.loop.n_carried, S = loop ? 0 : n->params.loop.n_scan_in;
  const int first_in = loop ? 2 : 0;           /* node input of carried value 0 */
  const int n_caps = n->n_inputs - first_in - N - S;
  const int K = n->n_outputs - N;              /* scan outputs */
  if (N < 0 || S < 0 || n_caps < 0 || K < 0 || S > FBX_IR_SCAN_MAX || (!loop && K > FBX_IR_SCAN_MAX) ||
      n->n_outputs > 63)
    return FBX_ERR("%s '%s': %d inputs / %d outputs do not fit %d carried and %d scan inputs", op, nm, n->n_inputs,
                   n->n_outputs, N, S);
  fbx_exec_compiled *body = fbx__ir_compiled_branch(p->owner, n->params.loop.body);
  if (!body) return FBX_ERR("%s '%s': body not compiled", op, nm);
  if (!p->cf && !(p->cf = fbx_calloc((size_t)p->g->n_nodes, sizeof *p->cf))) return FBX_ERR_OOM();
  if (!p->cf[nid] && !(p->cf[nid] = fbx_calloc(1, sizeof(fbx__cf_state)))) return FBX_ERR_OOM();
  fbx__cf_state *s = p->cf[nid];

  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS], bin[FBX_IR_MAX_INPUTS];
  fbx_tensor next[FBX_IR_MAX_OUTPUTS], slice[FBX_IR_MAX_OUTPUTS]; /* slice: per scan output */
  FBX_TRY(fbx__ir_step_inputs(p, n, 0u, 0u, in));
  /* trip count and condition (LOOP), iteration count (SCAN) */
  int64_t trips = INT64_MAX, total = -1;
  bool cond = true;
  if (loop && in[0].rank >= 0) {
    if (in[0].dtype != FBX_DTYPE_I64 || fbx_tensor_numel(&in[0]) != 1 || !in[0].data)
      return FBX_ERR("LOOP '%s': the trip count M must be one int64", nm);
    trips = *(const int64_t *)in[0].data;
  }
  if (loop && in[1].rank >= 0) {
    if (in[1].dtype != FBX_DTYPE_BOOL || fbx_tensor_numel(&in[1]) != 1 || !in[1].data)
      return FBX_ERR("LOOP '%s': the condition must be one bool", nm);
    cond = *(const uint8_t *)in[1].data != 0;
  }
  for (int i = 0; i < S; i++) {
    const fbx_tensor *x = &in[N + i];
    int a = n->params.loop.in_axis[i];
    if (a < 0 || a >= x->rank) return FBX_ERR("SCAN '%s': scan input %d has rank %d, axis %d", nm, i, x->rank, a);
    if (total >= 0 && x->dims[a] != total)
      return FBX_ERR("SCAN '%s': scan input %d has %lld slices along axis %d, scan input 0 %lld", nm, i,
                     (long long)x->dims[a], a, (long long)total);
    total = x->dims[a];
  }
  if (!loop) trips = total < 0 ? 0 : total;
  /* the body's inputs: [iteration, cond,] carried, [slices,] captures */
  const int bc = loop ? 2 : 0, bs = bc + N, bcap = bs + S, n_bin = bcap + n_caps;
  if (n_bin > FBX_IR_MAX_INPUTS) return FBX_ERR("%s '%s': body has %d inputs", op, nm, n_bin);
  if (loop) { /* one element each, of the rank the body declares (0, or 1: [1]) */
    const fbx_ir_graph *bg = n->params.loop.body;
    if (bg->n_inputs < 2) return FBX_ERR("LOOP '%s': body has %d inputs", nm, bg->n_inputs);
    bin[0] = (fbx_tensor){.dtype = FBX_DTYPE_I64, .rank = bg->values[bg->inputs[0]].rank == 1, .dims = {1},
                          .data = &s->iter};
    bin[1] = (fbx_tensor){.dtype = FBX_DTYPE_BOOL, .rank = bg->values[bg->inputs[1]].rank == 1, .dims = {1},
                          .data = &s->cond_in};
  }
  for (int i = 0; i < N; i++) bin[bc + i] = in[first_in + i];
  for (int k = 0; k < n_caps; k++) bin[bcap + k] = in[first_in + N + S + k];
  for (int i = 0; i < S; i++) { /* the slices' shapes (their data: per iteration, below) */
    const fbx_tensor *xi = &in[N + i];
    int a = n->params.loop.in_axis[i];
    memset(&bin[bs + i], 0, sizeof bin[bs + i]);
    bin[bs + i].dtype = xi->dtype;
    bin[bs + i].rank = xi->rank - 1;
    for (int d = 0, j = 0; d < xi->rank; d++)
      if (d != a) bin[bs + i].dims[j++] = xi->dims[d];
  }
  s->iter = 0;
  s->cond_in = 1;
  fbx__cf_iter x = {.p = p, .n = n, .s = s, .loop = loop, .n_carried = N, .n_scan = K,
                    .first_scan = (loop ? 1 : 0) + N, .total = loop ? -1 : total, .next = next, .slice = slice};
  int64_t t = 0;
  for (; t < trips && cond; t++) {
    for (int i = 0; i < S; i++)
      FBX_TRY(fbx__cf_slice(p, &in[N + i], n->params.loop.in_axis[i], (n->params.loop.in_rev >> i) & 1u, t,
                            &s->slice[i], &bin[bs + i]));
    if (loop) {
      s->iter = t;
      s->cond_in = 1;
    }
    x.t = t;
    x.par = (int)(t & 1);
    x.bound = 0;
    fbx_exec_run_report sub;
    FBX_TRY(fbx__exec_compiled_run_body(body, bin, n_bin, fbx__cf_out, &x, &sub));
    p->run_allocs += sub.allocs;
    p->run_syncs += sub.host_syncs;
    int n_body_out = (loop ? 1 : 0) + N + K;
    if (x.bound != (n_body_out >= 64 ? ~0ull : (1ull << n_body_out) - 1))
      return FBX_ERR("%s '%s': iteration %lld did not write every body output", op, nm, (long long)t);
    if (loop) cond = s->cond_out != 0; /* the body's condition decides, with or without a cond input (as ORT) */
    for (int i = 0; i < N; i++) bin[bc + i] = next[i];
  }
  const int64_t rows = t;
  /* outputs: the last carried values, the stacked slices */
  for (int o = 0; o < n->n_outputs; o++) {
    const fbx_tensor *src = NULL;
    if (o < N) {
      src = &bin[bc + o];
      out[o] = *src;
    } else {
      int k = o - N;
      fbx_tensor sl;
      if (rows == 0 && k == 0) /* no iteration: the slice shapes the body would give */
        FBX_TRY(fbx__cf_empty_slices(n->params.loop.body, bin, x.first_scan, K, slice));
      sl = slice[k];
      int axis = loop ? 0 : n->params.loop.out_axis[k];
      if (sl.rank + 1 > FBX_MAX_RANK || axis < 0 || axis > sl.rank)
        return FBX_ERR("%s '%s': scan output %d: slice rank %d, axis %d", op, nm, k, sl.rank, axis);
      out[o].dtype = sl.dtype;
      out[o].rank = sl.rank + 1;
      for (int d = 0, j = 0; d <= sl.rank; d++) out[o].dims[d] = d == axis ? rows : sl.dims[j++];
      slice[k] = sl;
    }
    const fbx_ir_value *v = &p->g->values[n->outputs[o]];
    if (out[o].dtype != v->dtype || out[o].rank != v->rank)
      return FBX_ERR("%s '%s': output %d is %s rank %d, the node's %s rank %d", op, nm, o,
                     fbx_dtype_name(out[o].dtype), out[o].rank, fbx_dtype_name(v->dtype), v->rank);
    out[o].data = NULL;
    FBX_TRY(fbx__ir_bind_step_out(p, nid, o, &out[o], output_fn, output_ctx));
    size_t b = fbx_tensor_nbytes(&out[o]);
    if (src) {
      if (b && src->data != out[o].data) memcpy(out[o].data, src->data, b);
    } else if (b) {
      int k = o - N;
      fbx__cf_unstack(s->stack[k].ptr, &slice[k], rows, loop ? 0 : n->params.loop.out_axis[k],
                      !loop && ((n->params.loop.out_rev >> k) & 1u), out[o].data);
    }
    p->rt[n->outputs[o]] = out[o];
  }
  if (clock) {
    char why[96];
    snprintf(why, sizeof why, "%lld iteration(s) of the body", (long long)rows);
    fbx_kernel_info info = {.variant = loop ? "loop" : "scan", .reason = why};
    uint64_t t1 = fbx_trace_now_ns();
    fbx__ir_trace_step(p, nid, in, n->n_inputs, out, n->n_outputs, &info, *clock, t1);
    *clock = t1;
  }
  return NULL;
}
