/* float16 for families whose CPU kernels are float32-only: the node is
 * claimed/translated as if every float16 input and output were float32 (a
 * shadow of the node and its values), the translation reads float16 inputs
 * through CAST(f16 -> f32) and writes float16 outputs through
 * CAST(f32 -> f16). Like ORT's CPU EP, which computes most float16 ops in
 * float32, results are rounded to float16 once, at the end. */
#include <string.h>

#include "onnx_ops.h"

#define FBX__ONNX_F16_MAXV (FBX_IR_MAX_INPUTS + FBX_IR_MAX_OUTPUTS)

/* A node whose input/output slots are renumbered 0..n_in+n_out-1 over a
 * private value array in which float16 reads as float32. */
typedef struct fbx__onnx_f16_shadow {
  fbx_onnx_graph g;
  fbx_onnx_node n;
  fbx_onnx_value vals[FBX__ONNX_F16_MAXV];
  int ins[FBX_IR_MAX_INPUTS], outs[FBX_IR_MAX_OUTPUTS];
} fbx__onnx_f16_shadow;

static bool fbx__onnx_f16_any(const fbx_onnx_graph *g, const fbx_onnx_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && n->inputs[i] < g->n_values && g->values[n->inputs[i]].dtype == FBX_DTYPE_F16) return true;
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] >= 0 && n->outputs[i] < g->n_values && g->values[n->outputs[i]].dtype == FBX_DTYPE_F16)
      return true;
  return false;
}

static bool fbx__onnx_f16_shadow_make(fbx__onnx_f16_shadow *s, const fbx_onnx_graph *g, const fbx_onnx_node *n) {
  if (n->n_inputs > FBX_IR_MAX_INPUTS || n->n_outputs > FBX_IR_MAX_OUTPUTS) return false;
  memset(&s->g, 0, sizeof s->g);
  s->n = *n;
  int k = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v < 0 || v >= g->n_values) { s->ins[i] = -1; continue; }
    s->vals[k] = g->values[v];
    if (s->vals[k].dtype == FBX_DTYPE_F16) s->vals[k].dtype = FBX_DTYPE_F32;
    s->ins[i] = k++;
  }
  for (int i = 0; i < n->n_outputs; i++) {
    int v = n->outputs[i];
    if (v < 0 || v >= g->n_values) { s->outs[i] = -1; continue; }
    s->vals[k] = g->values[v];
    if (s->vals[k].dtype == FBX_DTYPE_F16) s->vals[k].dtype = FBX_DTYPE_F32;
    s->outs[i] = k++;
  }
  s->g.n_values = k;
  s->g.values = s->vals;
  s->n.inputs = s->ins;
  s->n.outputs = s->outs;
  return true;
}

static bool fbx__onnx_f16_claim(const fbx_onnx_cctx *c, fbx_onnx_claim_fn fn) {
  if (!fbx__onnx_f16_any(c->g, c->n)) return fn(c);
  fbx__onnx_f16_shadow s;
  if (!fbx__onnx_f16_shadow_make(&s, c->g, c->n)) return fbx__onnx_fail(c, "too many inputs/outputs");
  fbx_onnx_cctx sc = *c;
  sc.g = &s.g;
  sc.n = &s.n;
  return fn(&sc);
}

static fbx_status *fbx__onnx_f16_tr(fbx_onnx_tctx *t, fbx_onnx_translate_fn fn) {
  if (!fbx__onnx_f16_any(t->g, t->n)) return fn(t);
  t->composed = "float16: computed by the float32 kernel between casts (no float16 kernel)";
  fbx__onnx_f16_shadow s;
  if (!fbx__onnx_f16_shadow_make(&s, t->g, t->n)) return FBX_ERR_NOTIMPL("%s: too many inputs/outputs", t->n->op_type);
  int lv[FBX__ONNX_F16_MAXV];
  for (int i = 0; i < t->n->n_inputs; i++) {
    if (s.ins[i] < 0) continue;
    int id;
    FBX_TRY(fbx__onnx_tin(t, i, &id));
    if (t->ir->values[id].dtype == FBX_DTYPE_F16) {
      fbx_ir_params p;
      memset(&p, 0, sizeof p);
      p.ew.to = FBX_DTYPE_F32;
      int src = id;
      FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CAST, &src, 1, &p, FBX_DTYPE_F32, t->ir->values[src].rank, &id));
    }
    lv[s.ins[i]] = id;
  }
  for (int i = 0; i < t->n->n_outputs; i++)
    if (s.outs[i] >= 0) lv[s.outs[i]] = -1;
  fbx_onnx_tctx st = *t;
  st.g = &s.g;
  st.n = &s.n;
  st.vmap = lv;
  FBX_TRY(fn(&st));
  for (int i = 0; i < t->n->n_outputs; i++) {
    if (s.outs[i] < 0) continue;
    int id = lv[s.outs[i]];
    if (id < 0) continue; /* the caller reports unmapped outputs */
    if (fbx__onnx_tout_value(t, i)->dtype == FBX_DTYPE_F16 && t->ir->values[id].dtype == FBX_DTYPE_F32) {
      fbx_ir_params p;
      memset(&p, 0, sizeof p);
      p.ew.to = FBX_DTYPE_F16;
      int src = id;
      if (t->ir->values[src].kind == FBX_IR_VALUE_NODE) t->ir->values[src].name = NULL;
      FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_CAST, &src, 1, &p, FBX_DTYPE_F16, t->ir->values[src].rank, &id));
    }
    fbx__onnx_bind(t, i, id);
  }
  return NULL;
}

#define FBX__ONNX_F16_WRAP(fam)                                                                           \
  bool fbx__onnx_claim_##fam##_h(const fbx_onnx_cctx *c) { return fbx__onnx_f16_claim(c, fbx__onnx_claim_##fam); } \
  fbx_status *fbx__onnx_tr_##fam##_h(fbx_onnx_tctx *t) { return fbx__onnx_f16_tr(t, fbx__onnx_tr_##fam); }

FBX__ONNX_F16_LIST(FBX__ONNX_F16_WRAP)
