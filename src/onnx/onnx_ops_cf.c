/* Control flow: If. The node is claimed with both of its branches when every
 * node of each branch is claimable; it becomes one IR IF node whose inputs
 * are the condition and the outer values the branches read (captures, in
 * order of first use, then branch before else), and whose branches are IR
 * graphs of their own (inputs: the captures; outputs: the If's outputs).
 * Outer constants need no capture: a branch's description reads them as its
 * own initializers (ORT resolves outer-scope initializers for it). */
#include <stdio.h>
#include <string.h>

#include "onnx_ops.h"
#include "onnx_registry.h"

static const char *const fbx__cf_branch_attr[2] = {"then_branch", "else_branch"};

/* The then/else branch descriptions of an If node (NULL when missing). */
static void fbx__cf_branches(const fbx_onnx_node *n, const fbx_onnx_graph *br[2]) {
  br[0] = br[1] = NULL;
  for (int k = 0; k < n->n_subgraphs; k++)
    for (int b = 0; b < 2; b++)
      if (n->subgraph_names && n->subgraph_names[k] && strcmp(n->subgraph_names[k], fbx__cf_branch_attr[b]) == 0)
        br[b] = n->subgraphs[k];
}

/* Index of the value named `name` in g, or -1. */
static int fbx__cf_find(const fbx_onnx_graph *g, const char *name) {
  for (int v = 0; name && v < g->n_values; v++)
    if (g->values[v].name && strcmp(g->values[v].name, name) == 0) return v;
  return -1;
}

/* Every node of body or branch g claimable, else false with a reason naming one. An ONNX node is
 * named first: when this node was declined at its body's own GetCapability already (ORT asks
 * bottom up), the body also holds nodes fused there, in the fusing EP's own domain, which say
 * nothing about why. */
static bool fbx__cf_nodes_ok(const fbx_onnx_cctx *c, const fbx_onnx_graph *g, const char *bn) {
  int bad = -1, bad_onnx = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    if (fbx_onnx_node_claimable(g, i, NULL, 0)) continue;
    const char *dom = g->nodes[i].domain;
    if (bad < 0) bad = i;
    if (bad_onnx < 0 && (!dom || !dom[0] || !strcmp(dom, "com.microsoft"))) bad_onnx = i;
  }
  if (bad_onnx >= 0) bad = bad_onnx;
  if (bad < 0) return true;
  char r[160];
  fbx_onnx_node_claimable(g, bad, r, sizeof r);
  const fbx_onnx_node *m = &g->nodes[bad];
  return fbx__onnx_fail(c, "%s node '%s' not claimable: %s", bn, m->name ? m->name : "", r);
}

/* The captures of both branches (names of their non-constant outer values),
 * union in order of first use; false when there are more than cap. */
static bool fbx__cf_captures(const fbx_onnx_graph *const br[2], const char **names, int cap, int *n) {
  *n = 0;
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < br[b]->n_inputs; i++) {
      const char *nm = br[b]->values[br[b]->inputs[i]].name;
      bool seen = false;
      for (int k = 0; k < *n && !seen; k++) seen = strcmp(names[k], nm) == 0;
      if (seen) continue;
      if (*n == cap) return false;
      names[(*n)++] = nm;
    }
  return true;
}

bool fbx__onnx_claim_cf_if(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  const fbx_onnx_graph *br[2];
  fbx__cf_branches(n, br);
  if (!br[0] || !br[1]) return fbx__onnx_fail(c, "then_branch/else_branch not described");
  const fbx_onnx_value *cv = fbx__onnx_cin(c, 0);
  if (!cv || cv->dtype != FBX_DTYPE_BOOL) return fbx__onnx_fail(c, "condition must be a bool tensor");
  for (int d = 0; d < cv->rank; d++)
    if (cv->dims[d] != 1) return fbx__onnx_fail(c, "condition must hold one element (dim %d is %lld)", d, (long long)cv->dims[d]);
  const char *names[FBX_IR_MAX_INPUTS - 1];
  int nc = 0;
  if (!fbx__cf_captures(br, names, FBX_IR_MAX_INPUTS - 1, &nc))
    return fbx__onnx_fail(c, "the branches read more than %d outer values", FBX_IR_MAX_INPUTS - 1);
  for (int o = 0; o < n->n_outputs; o++)
    if (!fbx__onnx_cout(c, o)) return fbx__onnx_fail(c, "output %d absent", o);
  for (int b = 0; b < 2; b++) {
    const fbx_onnx_graph *g = br[b];
    const char *bn = fbx__cf_branch_attr[b];
    if (g->n_outputs != n->n_outputs)
      return fbx__onnx_fail(c, "%s has %d outputs, the node %d", bn, g->n_outputs, n->n_outputs);
    if (!fbx__cf_nodes_ok(c, g, bn)) return false;
    for (int o = 0; o < g->n_outputs; o++) {
      const fbx_onnx_value *bv = &g->values[g->outputs[o]], *ov = fbx__onnx_cout(c, o);
      if (bv->kind != FBX_ONNX_VALUE_TENSOR || bv->rank < 0 || bv->rank > FBX_MAX_RANK)
        return fbx__onnx_fail(c, "%s output %d ('%s') is not a tensor of known rank", bn, o, bv->name ? bv->name : "");
      if (bv->dtype != ov->dtype) return fbx__onnx_fail(c, "%s output %d dtype differs from the node's", bn, o);
      if (ov->rank >= 0 && bv->rank != ov->rank)
        return fbx__onnx_fail(c, "%s output %d has rank %d, the node's output %d", bn, o, bv->rank, ov->rank);
      const fbx_onnx_graph *other = br[1 - b];
      if (o < other->n_outputs && other->values[other->outputs[o]].rank != bv->rank)
        return fbx__onnx_fail(c, "output %d: the branches' ranks differ", o);
    }
    for (int i = 0; i < g->n_inputs; i++) { /* captures: the outer value must be the same tensor */
      const fbx_onnx_value *bv = &g->values[g->inputs[i]];
      int ov = fbx__cf_find(c->g, bv->name);
      if (ov < 0) return fbx__onnx_fail(c, "%s reads '%s', not found outside", bn, bv->name ? bv->name : "");
      const fbx_onnx_value *o = &c->g->values[ov];
      if (o->kind != FBX_ONNX_VALUE_TENSOR || o->rank < 0 || o->rank != bv->rank || o->dtype != bv->dtype ||
          o->dtype == FBX_DTYPE_UNDEFINED)
        return fbx__onnx_fail(c, "%s reads '%s': type or rank unknown or not the outer value's", bn, bv->name);
    }
  }
  return true;
}

fbx_status *fbx__onnx_tr_cf_if(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  const fbx_onnx_graph *br[2];
  fbx__cf_branches(n, br);
  if (!br[0] || !br[1]) return FBX_ERR_NOTIMPL("If '%s': branches not described", n->name ? n->name : "");
  if (n->n_outputs > FBX_IR_MAX_OUTPUTS) return FBX_ERR_NOTIMPL("If: %d outputs", n->n_outputs);
  const char *names[FBX_IR_MAX_INPUTS - 1];
  int nc = 0, ins[FBX_IR_MAX_INPUTS], outs[FBX_IR_MAX_OUTPUTS];
  if (!fbx__cf_captures(br, names, FBX_IR_MAX_INPUTS - 1, &nc)) return FBX_ERR_NOTIMPL("If: too many captures");
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  for (int k = 0; k < nc; k++) {
    int ov = fbx__cf_find(t->g, names[k]);
    if (ov < 0) return FBX_ERR_ARG("If '%s': outer value '%s' not found", n->name ? n->name : "", names[k]);
    FBX_TRY(fbx__onnx_tvalue(t, ov, &ins[1 + k]));
  }
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  for (int b = 0; b < 2; b++) {
    fbx_ir_graph *sub = NULL;
    FBX_TRY(fbx__onnx_translate_body(br[b], nc, names, t->ir, ins + 1, &sub));
    FBX_TRY(fbx_ir_graph_adopt(t->ir, sub)); /* destroys sub on failure */
    if (sub->n_outputs != n->n_outputs)
      return FBX_ERR("If: %s translated to %d outputs, expected %d", fbx__cf_branch_attr[b], sub->n_outputs, n->n_outputs);
    p.cond.branch[b] = sub;
  }
  for (int o = 0; o < n->n_outputs; o++) {
    const fbx_ir_value *a = &p.cond.branch[0]->values[p.cond.branch[0]->outputs[o]];
    const fbx_ir_value *b = &p.cond.branch[1]->values[p.cond.branch[1]->outputs[o]];
    if (a->rank != b->rank || a->dtype != b->dtype) return FBX_ERR("If: output %d differs between the branches", o);
    FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, a->dtype, a->rank, &outs[o]));
    fbx_ir_value *v = &t->ir->values[outs[o]];
    for (int d = 0; d < a->rank; d++) v->dims[d] = a->dims[d] == b->dims[d] ? a->dims[d] : FBX_IR_DIM_DYNAMIC;
  }
  FBX_TRY(fbx_ir_graph_add_node(t->ir, FBX_IR_OP_IF, ins, 1 + nc, outs, n->n_outputs, &p, n->name ? n->name : "",
                                n->op_type, t->node_index, NULL));
  for (int o = 0; o < n->n_outputs; o++) fbx__onnx_bind(t, o, outs[o]);
  return NULL;
}

/* ---- Loop and Scan: the node claimed whole with its body ---- */
/* Loop (opset 11+): inputs (M, cond, v_initial...), body inputs (iteration,
 * cond, carried...), body outputs (cond, carried..., scan slices...).
 * Scan (opset 9+): inputs (state..., scan inputs...), body inputs (state...,
 * slices...), body outputs (state..., slices...). Either becomes one IR
 * LOOP/SCAN node whose inputs are the ONNX ones then the captures (the
 * body's non-constant outer values, in order of first use) and whose body
 * is an IR graph of its own (params.loop). */

/* The body description of a Loop/Scan node, NULL when missing. */
static const fbx_onnx_graph *fbx__cf_body(const fbx_onnx_node *n) {
  for (int k = 0; k < n->n_subgraphs; k++)
    if (n->subgraph_names && n->subgraph_names[k] && strcmp(n->subgraph_names[k], "body") == 0) return n->subgraphs[k];
  return NULL;
}

/* The body's own inputs (the description lists its outer values after them). */
static int fbx__cf_own_inputs(const fbx_onnx_graph *g) {
  int k = 0;
  while (k < g->n_inputs && !g->values[g->inputs[k]].is_outer) k++;
  return k;
}

/* Scan's axes and directions, normalised (in_axis against the scan inputs'
 * ranks, out_axis against the scan outputs', i.e. body output rank + 1). */
static bool fbx__cf_scan_attrs(const fbx_onnx_cctx *c, const fbx_onnx_node *n, const fbx_onnx_graph *g,
                               const fbx_onnx_value *const *xin, int N, int S, int K, fbx_ir_params *p) {
  static const char *const nm[4] = {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                                    "scan_output_directions"};
  for (int w = 0; w < 4; w++) {
    const fbx_onnx_attr *a = fbx_onnx_attr_find(n, nm[w]);
    int want = w < 2 ? S : K;
    if (a && a->n_ints != want)
      return fbx__onnx_fail(c, "%s has %d values, expected %d", nm[w], a->n_ints, want);
    for (int i = 0; i < want; i++) {
      int64_t v = a ? a->ints[i] : 0;
      if (w == 1 || w == 3) {
        if (v != 0 && v != 1) return fbx__onnx_fail(c, "%s[%d] = %lld (0 or 1)", nm[w], i, (long long)v);
        if (v) *(w == 1 ? &p->loop.in_rev : &p->loop.out_rev) |= 1u << i;
        continue;
      }
      int r = w == 0 ? xin[i]->rank : g->values[g->outputs[N + i]].rank + 1, ax;
      if (!fbx__onnx_axis(v, r, false, &ax)) return fbx__onnx_fail(c, "%s[%d] = %lld out of range for rank %d", nm[w], i, (long long)v, r);
      (w == 0 ? p->loop.in_axis : p->loop.out_axis)[i] = (int8_t)ax;
    }
  }
  return true;
}

bool fbx__onnx_claim_cf_loop(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  const bool loop = c->e->aux == FBX_IR_OP_LOOP;
  const fbx_onnx_graph *g = fbx__cf_body(n);
  if (!g) return fbx__onnx_fail(c, "body not described");
  const int own = fbx__cf_own_inputs(g), n_caps = g->n_inputs - own;
  const int S = loop ? 0 : (int)fbx_onnx_attr_int(n, "num_scan_inputs", -1);
  const int N = loop ? n->n_inputs - 2 : n->n_inputs - S, K = n->n_outputs - N;
  if (!loop && (S < 1 || S > n->n_inputs)) return fbx__onnx_fail(c, "num_scan_inputs %d of %d inputs", S, n->n_inputs);
  if (N < 0 || K < 0) return fbx__onnx_fail(c, "%d inputs and %d outputs: no loop-carried split", n->n_inputs, n->n_outputs);
  if (S > FBX_IR_SCAN_MAX || (!loop && K > FBX_IR_SCAN_MAX))
    return fbx__onnx_fail(c, "more than %d scan inputs or outputs", FBX_IR_SCAN_MAX);
  if (n->n_inputs + n_caps > FBX_IR_MAX_INPUTS || own + n_caps > FBX_IR_MAX_INPUTS || n->n_outputs > 63)
    return fbx__onnx_fail(c, "%d inputs, %d outer values, %d outputs: too many", n->n_inputs, n_caps, n->n_outputs);
  const int first = loop ? 2 : 0, body_first = loop ? 1 : 0;
  if (own != first + N + S) return fbx__onnx_fail(c, "body has %d inputs, expected %d", own, first + N + S);
  if (g->n_outputs != body_first + N + K)
    return fbx__onnx_fail(c, "body has %d outputs, expected %d", g->n_outputs, body_first + N + K);
  if (loop) {
    const fbx_onnx_value *m = fbx__onnx_cin(c, 0), *cv = fbx__onnx_cin(c, 1);
    if (m && (m->dtype != FBX_DTYPE_I64 || m->rank > 1)) return fbx__onnx_fail(c, "trip count M must be one int64");
    if (cv && (cv->dtype != FBX_DTYPE_BOOL || cv->rank > 1)) return fbx__onnx_fail(c, "cond must be one bool");
    static const fbx_dtype want[2] = {FBX_DTYPE_I64, FBX_DTYPE_BOOL};
    static const char *const what[2] = {"iteration number", "condition"};
    for (int i = 0; i < 2; i++) {
      const fbx_onnx_value *bv = &g->values[g->inputs[i]];
      if (bv->kind != FBX_ONNX_VALUE_TENSOR || bv->dtype != want[i] || bv->rank > 1 ||
          (bv->rank == 1 && bv->dims[0] > 1))
        return fbx__onnx_fail(c, "body input %d (%s) must be one %s (a scalar or [1]; rank %d)", i, what[i],
                              fbx_dtype_name(want[i]), bv->rank);
    }
    const fbx_onnx_value *co = &g->values[g->outputs[0]];
    if (co->kind != FBX_ONNX_VALUE_TENSOR || co->dtype != FBX_DTYPE_BOOL)
      return fbx__onnx_fail(c, "body output 0 (condition) must be bool");
  }
  const fbx_onnx_value *xin[FBX_IR_SCAN_MAX];
  for (int i = 0; i < N + S; i++) { /* carried / state values, then scan inputs */
    const fbx_onnx_value *iv = fbx__onnx_cin(c, first + i), *bv = &g->values[g->inputs[first + i]];
    const char *kind = i < N ? (loop ? "loop-carried value" : "state variable") : "scan input";
    int k = i < N ? i : i - N;
    if (!iv) return fbx__onnx_fail(c, "%s %d absent", kind, k);
    if (iv->kind != FBX_ONNX_VALUE_TENSOR || bv->kind != FBX_ONNX_VALUE_TENSOR)
      return fbx__onnx_fail(c, "%s %d ('%s') is not a tensor (sequence and optional values are not supported)", kind, k,
                            iv->name ? iv->name : "");
    if (iv->rank < 0 || iv->rank > FBX_MAX_RANK || iv->dtype == FBX_DTYPE_UNDEFINED)
      return fbx__onnx_fail(c, "%s %d ('%s'): dtype or rank unknown", kind, k, iv->name ? iv->name : "");
    if (i >= N) xin[k] = iv;
    int br = i < N ? iv->rank : iv->rank - 1;
    if (bv->dtype != iv->dtype || (bv->rank >= 0 && bv->rank != br))
      return fbx__onnx_fail(c, "%s %d: the body's input is %s rank %d, expected %s rank %d", kind, k,
                            fbx_dtype_name(bv->dtype), bv->rank, fbx_dtype_name(iv->dtype), br);
  }
  for (int o = 0; o < N + K; o++) {
    const fbx_onnx_value *bv = &g->values[g->outputs[body_first + o]], *ov = fbx__onnx_cout(c, o);
    const char *kind = o < N ? (loop ? "loop-carried value" : "state variable") : "scan output";
    int k = o < N ? o : o - N;
    if (!ov) return fbx__onnx_fail(c, "output %d absent", o);
    if (bv->kind != FBX_ONNX_VALUE_TENSOR || ov->kind != FBX_ONNX_VALUE_TENSOR)
      return fbx__onnx_fail(c, "%s %d is not a tensor (sequence and optional values are not supported)", kind, k);
    if (bv->rank < 0 || bv->rank + (o < N ? 0 : 1) > FBX_MAX_RANK)
      return fbx__onnx_fail(c, "body output for %s %d ('%s') has unknown or too large rank", kind, k,
                            bv->name ? bv->name : "");
    int want = o < N ? fbx__onnx_cin(c, first + o)->rank : bv->rank + 1;
    if (o < N && bv->rank != want)
      return fbx__onnx_fail(c, "%s %d: the body makes rank %d from rank %d (a carried rank must not change)", kind, k,
                            bv->rank, want);
    if (bv->dtype != ov->dtype || (o < N && bv->dtype != fbx__onnx_cin(c, first + o)->dtype))
      return fbx__onnx_fail(c, "%s %d: dtype differs between the body and the node", kind, k);
    if (ov->rank >= 0 && ov->rank != want)
      return fbx__onnx_fail(c, "%s %d: the node's output has rank %d, expected %d", kind, k, ov->rank, want);
  }
  if (!loop) {
    fbx_ir_params p;
    memset(&p, 0, sizeof p);
    if (!fbx__cf_scan_attrs(c, n, g, xin, N, S, K, &p)) return false;
  }
  if (!fbx__cf_nodes_ok(c, g, "body")) return false;
  for (int i = own; i < g->n_inputs; i++) { /* captures: the outer value must be the same tensor */
    const fbx_onnx_value *bv = &g->values[g->inputs[i]];
    int ov = fbx__cf_find(c->g, bv->name);
    if (ov < 0) return fbx__onnx_fail(c, "body reads '%s', not found outside", bv->name ? bv->name : "");
    const fbx_onnx_value *o = &c->g->values[ov];
    if (o->kind != FBX_ONNX_VALUE_TENSOR || o->rank < 0 || o->rank != bv->rank || o->dtype != bv->dtype ||
        o->dtype == FBX_DTYPE_UNDEFINED)
      return fbx__onnx_fail(c, "body reads '%s': type or rank unknown or not the outer value's", bv->name);
  }
  return true;
}

fbx_status *fbx__onnx_tr_cf_loop(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  const char *nm = n->name ? n->name : "";
  const bool loop = t->e->aux == FBX_IR_OP_LOOP;
  const fbx_onnx_graph *g = fbx__cf_body(n);
  if (!g) return FBX_ERR_NOTIMPL("%s '%s': body not described", n->op_type, nm);
  const int own = fbx__cf_own_inputs(g), n_caps = g->n_inputs - own;
  const int S = loop ? 0 : (int)fbx_onnx_attr_int(n, "num_scan_inputs", 0);
  const int N = loop ? n->n_inputs - 2 : n->n_inputs - S, K = n->n_outputs - N;
  const int first = loop ? 2 : 0, body_first = loop ? 1 : 0;
  if (N < 0 || K < 0 || n->n_inputs + n_caps > FBX_IR_MAX_INPUTS || n->n_outputs > 63 || own != first + N + S)
    return FBX_ERR_NOTIMPL("%s '%s': inputs/outputs do not fit", n->op_type, nm);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.loop.n_carried = N;
  p.loop.n_scan_in = S;
  if (!loop) {
    const fbx_onnx_value *xin[FBX_IR_SCAN_MAX];
    for (int i = 0; i < S; i++) xin[i] = fbx__onnx_tin_value(t, N + i);
    char r[160];
    fbx_onnx_cctx c = {t->g, n, t->e, r, sizeof r};
    if (!fbx__cf_scan_attrs(&c, n, g, xin, N, S, K, &p)) return FBX_ERR_NOTIMPL("%s", r);
  }
  int ins[FBX_IR_MAX_INPUTS], outs[FBX_IR_MAX_OUTPUTS];
  for (int i = 0; i < n->n_inputs; i++) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  const char *names[FBX_IR_MAX_INPUTS];
  for (int k = 0; k < n_caps; k++) {
    names[k] = g->values[g->inputs[own + k]].name;
    int ov = fbx__cf_find(t->g, names[k]);
    if (ov < 0) return FBX_ERR_ARG("%s '%s': outer value '%s' not found", n->op_type, nm, names[k] ? names[k] : "");
    FBX_TRY(fbx__onnx_tvalue(t, ov, &ins[n->n_inputs + k]));
  }
  /* the body's own inputs: [iteration: int64 (), cond: bool (),] carried as the node's inputs, slices */
  fbx_tensor ot[FBX_IR_MAX_INPUTS];
  memset(ot, 0, sizeof ot);
  for (int i = 0; loop && i < 2; i++) { /* a scalar, or [1] where the body declares that (exporters do) */
    ot[i].dtype = i ? FBX_DTYPE_BOOL : FBX_DTYPE_I64;
    ot[i].rank = g->values[g->inputs[i]].rank == 1 ? 1 : 0;
    ot[i].dims[0] = 1;
  }
  for (int i = 0; i < N + S; i++) {
    const fbx_ir_value *iv = &t->ir->values[ins[first + i]];
    const fbx_onnx_value *bv = &g->values[g->inputs[first + i]];
    fbx_tensor *d = &ot[first + i];
    d->dtype = iv->dtype;
    if (i < N) { /* the body's declared dims where static (a carried shape may change between iterations) */
      d->rank = iv->rank;
      for (int k = 0; k < d->rank; k++) d->dims[k] = bv->rank == d->rank ? bv->dims[k] : FBX_IR_DIM_DYNAMIC;
    } else { /* a slice: the input's dims without the scan axis */
      int a = p.loop.in_axis[i - N];
      d->rank = iv->rank - 1;
      for (int k = 0, j = 0; k < iv->rank; k++)
        if (k != a) d->dims[j++] = iv->dims[k];
    }
  }
  fbx_ir_graph *sub = NULL;
  FBX_TRY(fbx__onnx_translate_body_io(g, own, ot, n_caps, names, t->ir, ins + n->n_inputs, &sub));
  FBX_TRY(fbx_ir_graph_adopt(t->ir, sub)); /* destroys sub on failure */
  if (sub->n_outputs != body_first + N + K)
    return FBX_ERR("%s '%s': body translated to %d outputs, expected %d", n->op_type, nm, sub->n_outputs,
                   body_first + N + K);
  p.loop.body = sub;
  /* output shapes, inferred where the body allows: a carried dim that the body keeps; a scan
   * output's dims from the body's slice, with the iteration count (Scan: the scan axis's length) */
  int64_t T = FBX_IR_DIM_DYNAMIC;
  if (!loop) T = t->ir->values[ins[N]].dims[p.loop.in_axis[0]];
  for (int o = 0; o < N + K; o++) {
    const fbx_ir_value *bv = &sub->values[sub->outputs[body_first + o]];
    int rank = o < N ? bv->rank : bv->rank + 1;
    FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, bv->dtype, rank, &outs[o]));
    fbx_ir_value *v = &t->ir->values[outs[o]];
    if (o < N) {
      const fbx_ir_value *iv = &t->ir->values[ins[first + o]];
      for (int d = 0; d < rank; d++) v->dims[d] = iv->dims[d] == bv->dims[d] ? bv->dims[d] : FBX_IR_DIM_DYNAMIC;
    } else {
      int axis = loop ? 0 : p.loop.out_axis[o - N];
      for (int d = 0, j = 0; d < rank; d++) v->dims[d] = d == axis ? T : bv->dims[j++];
    }
  }
  FBX_TRY(fbx_ir_graph_add_node(t->ir, loop ? FBX_IR_OP_LOOP : FBX_IR_OP_SCAN, ins, n->n_inputs + n_caps, outs,
                                N + K, &p, nm, n->op_type, t->node_index, NULL));
  for (int o = 0; o < N + K; o++) fbx__onnx_bind(t, o, outs[o]);
  return NULL;
}
