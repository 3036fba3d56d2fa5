/* Recurrent ops: ONNX LSTM, GRU, RNN (opsets 7..22) -> IR LSTM / GRU / RNN.
 *
 * The IR node always has every output (Y, Y_h[, Y_c]); the ones the model
 * leaves out are simply not bound. Activations are resolved here, alpha and
 * beta included, so the kernel sees no strings:
 *   - names are matched case-insensitively (ORT lowercases them);
 *   - a bidirectional node given one direction's list uses it for both (as
 *     ORT does), only when no activation_alpha/beta is given;
 *   - activation_alpha/beta are consumed in list order by the activations
 *     that take one (ORT's reading of "consumed in the order of activation
 *     functions"); where reading them positionally (one entry per
 *     activation) would give a different value the node is declined;
 *   - Affine, ThresholdedRelu and ScaledTanh need their alpha (and beta)
 *     given: their defaults differ between the ONNX operators and ORT. */
#include <ctype.h>
#include <string.h>

#include "onnx_ops.h"

typedef struct fbx__rnn_act_desc {
  const char *name;     /* lower case */
  fbx_ir_rnn_act act;
  int uses_alpha, uses_beta;
  float alpha, beta;    /* defaults (ONNX operators); NAN-free */
  int need_given;       /* default not agreed between ONNX and ORT: must be given */
} fbx__rnn_act_desc;

static const fbx__rnn_act_desc fbx__rnn_acts[] = {
    {"sigmoid", FBX_IR_ACT_SIGMOID, 0, 0, 0.f, 0.f, 0},
    {"tanh", FBX_IR_ACT_TANH, 0, 0, 0.f, 0.f, 0},
    {"relu", FBX_IR_ACT_RELU, 0, 0, 0.f, 0.f, 0},
    {"affine", FBX_IR_ACT_AFFINE, 1, 1, 1.f, 0.f, 1},
    {"leakyrelu", FBX_IR_ACT_LEAKY_RELU, 1, 0, 0.01f, 0.f, 0},
    {"thresholdedrelu", FBX_IR_ACT_THRESHOLDED_RELU, 1, 0, 1.f, 0.f, 1},
    {"scaledtanh", FBX_IR_ACT_SCALED_TANH, 1, 1, 1.f, 1.f, 1},
    {"hardsigmoid", FBX_IR_ACT_HARD_SIGMOID, 1, 1, 0.2f, 0.5f, 0},
    {"elu", FBX_IR_ACT_ELU, 1, 0, 1.f, 0.f, 0},
    {"softsign", FBX_IR_ACT_SOFTSIGN, 0, 0, 0.f, 0.f, 0},
    {"softplus", FBX_IR_ACT_SOFTPLUS, 0, 0, 0.f, 0.f, 0},
};
#define FBX__RNN_NACTS ((int)(sizeof fbx__rnn_acts / sizeof fbx__rnn_acts[0]))

static const fbx__rnn_act_desc *fbx__rnn_act_find(const char *s) {
  char low[32];
  size_t n = strlen(s);
  if (n >= sizeof low) return NULL;
  for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)s[i]);
  for (int i = 0; i < FBX__RNN_NACTS; i++)
    if (strcmp(fbx__rnn_acts[i].name, low) == 0) return &fbx__rnn_acts[i];
  return NULL;
}

static int fbx__rnn_per_dir(fbx_ir_op op) { return op == FBX_IR_OP_LSTM ? 3 : op == FBX_IR_OP_GRU ? 2 : 1; }

/* Resolves direction, activations (with alpha/beta) into p->rnn; on failure
 * writes the reason (without the op prefix) into why and returns false. */
static bool fbx__rnn_params(const fbx_onnx_node *n, fbx_ir_op op, fbx_ir_params *p, char *why, size_t why_size) {
  memset(p, 0, sizeof *p);
  const char *dir = fbx_onnx_attr_string(n, "direction", "forward");
  if (strcmp(dir, "forward") == 0) p->rnn.direction = 0;
  else if (strcmp(dir, "reverse") == 0) p->rnn.direction = 1;
  else if (strcmp(dir, "bidirectional") == 0) p->rnn.direction = 2;
  else return snprintf(why, why_size, "direction '%s' not supported", dir), false;
  const int D = p->rnn.direction == 2 ? 2 : 1, npd = fbx__rnn_per_dir(op);
  p->rnn.n_per_dir = npd;
  p->rnn.layout = (int)fbx_onnx_attr_int(n, "layout", 0);
  if (p->rnn.layout != 0 && p->rnn.layout != 1) return snprintf(why, why_size, "layout %d", p->rnn.layout), false;
  p->rnn.hidden = fbx_onnx_attr_int(n, "hidden_size", 0);
  p->rnn.input_forget = (int)fbx_onnx_attr_int(n, "input_forget", 0) != 0;
  p->rnn.linear_before_reset = (int)fbx_onnx_attr_int(n, "linear_before_reset", 0) != 0;
  const fbx_onnx_attr *clip = fbx_onnx_attr_find(n, "clip");
  if (clip) {
    if (!(clip->f > 0)) return snprintf(why, why_size, "clip %g must be > 0", (double)clip->f), false;
    p->rnn.clip = clip->f;
  }
  /* activation names: defaults, or the list (maybe one direction's) */
  static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const char *names[FBX_IR_RNN_MAX_ACTS];
  const fbx_onnx_attr *acts = fbx_onnx_attr_find(n, "activations");
  const fbx_onnx_attr *aa = fbx_onnx_attr_find(n, "activation_alpha"), *ab = fbx_onnx_attr_find(n, "activation_beta");
  int na = D * npd;
  if (acts) {
    if (acts->type != FBX_ONNX_ATTR_STRINGS || !acts->strs)
      return snprintf(why, why_size, "activations not readable"), false;
    bool dup = D == 2 && acts->n_strs == npd;
    /* RNN's schema default is {Tanh, Tanh} (ORT fills it in): a forward or
     * reverse node uses the first */
    bool rnn_two = npd == 1 && D == 1 && acts->n_strs == 2;
    if (acts->n_strs != na && !dup && !rnn_two)
      return snprintf(why, why_size, "%d activations, expected %d", acts->n_strs, na), false;
    if (dup && (aa || ab))
      return snprintf(why, why_size, "one direction's activations for a bidirectional node with activation_alpha/beta"),
             false;
    const char *s = acts->strs;
    for (int i = 0; i < na; i++) {
      if (i < acts->n_strs) {
        names[i] = s;
        s += strlen(s) + 1;
      } else {
        names[i] = names[i - npd];
      }
    }
  } else {
    for (int i = 0; i < na; i++) names[i] = defaults[npd - 1][i % npd];
  }
  const int n_al = aa ? (aa->type == FBX_ONNX_ATTR_FLOATS ? aa->n_floats : -1) : 0;
  const int n_be = ab ? (ab->type == FBX_ONNX_ATTR_FLOATS ? ab->n_floats : -1) : 0;
  if (n_al < 0 || n_be < 0) return snprintf(why, why_size, "activation_alpha/beta must be floats"), false;
  int ka = 0, kb = 0; /* ORT: consumed by the activations that use them, in order */
  for (int i = 0; i < na; i++) {
    const fbx__rnn_act_desc *a = fbx__rnn_act_find(names[i]);
    if (!a) return snprintf(why, why_size, "activation '%s' not supported", names[i]), false;
    p->rnn.act[i] = a->act;
    float al = a->alpha, be = a->beta;
    if (a->uses_alpha) {
      if (ka < n_al) al = aa->floats[ka++];
      else if (a->need_given) return snprintf(why, why_size, "activation '%s' needs activation_alpha", names[i]), false;
      float pos = i < n_al ? aa->floats[i] : a->alpha;
      if (pos != al)
        return snprintf(why, why_size, "activation_alpha reads differently per activation and in order of use"), false;
    }
    if (a->uses_beta) {
      if (kb < n_be) be = ab->floats[kb++];
      else if (a->need_given) return snprintf(why, why_size, "activation '%s' needs activation_beta", names[i]), false;
      float pos = i < n_be ? ab->floats[i] : a->beta;
      if (pos != be)
        return snprintf(why, why_size, "activation_beta reads differently per activation and in order of use"), false;
    }
    p->rnn.act_alpha[i] = al;
    p->rnn.act_beta[i] = be;
  }
  if (ka < n_al || kb < n_be) return snprintf(why, why_size, "more activation_alpha/beta values than activations use"), false;
  return true;
}

static fbx_ir_op fbx__rnn_op(const fbx_onnx_entry *e) { return (fbx_ir_op)e->aux; }

#define FBX__RNN_MAX_HIDDEN (1 << 24)

bool fbx__onnx_claim_rnn(const fbx_onnx_cctx *c) {
  const fbx_onnx_node *n = c->n;
  const fbx_ir_op op = fbx__rnn_op(c->e);
  const bool lstm = op == FBX_IR_OP_LSTM;
  fbx_ir_params p;
  char why[160];
  if (!fbx__rnn_params(n, op, &p, why, sizeof why)) return fbx__onnx_fail(c, "%s", why);
  if (!lstm && p.rnn.input_forget) return fbx__onnx_fail(c, "input_forget");
  if (op != FBX_IR_OP_GRU && p.rnn.linear_before_reset) return fbx__onnx_fail(c, "linear_before_reset");
  const fbx_onnx_value *x = fbx__onnx_cin(c, 0), *w = fbx__onnx_cin(c, 1), *r = fbx__onnx_cin(c, 2);
  if (!x || !w || !r) return fbx__onnx_fail(c, "X, W and R are required");
  for (int i = 0; i < n->n_inputs && i < (lstm ? 8 : 6); i++) {
    const fbx_onnx_value *v = fbx__onnx_cin(c, i);
    if (v && !fbx__onnx_dt_ok(c, v, i == 4 ? FBX__DT(I32) : FBX__DT(F32), i == 4 ? "sequence_lens" : "input"))
      return false;
  }
  if (n->n_inputs > (lstm ? 8 : 6)) return fbx__onnx_fail(c, "%d inputs", n->n_inputs);
  if (x->rank != 3 || w->rank != 3 || r->rank != 3) return fbx__onnx_fail(c, "X, W, R must be 3-D");
  const int64_t G = fbx_ir_rnn_gates(op), D = p.rnn.direction == 2 ? 2 : 1;
  int64_t H = p.rnn.hidden > 0 ? p.rnn.hidden : r->dims[2];
  if (H < 1) return fbx__onnx_fail(c, "hidden_size unknown (no attribute, R's last dim dynamic)");
  if (H > FBX__RNN_MAX_HIDDEN) /* keeps gates * hidden and every product with it far from overflow */
    return fbx__onnx_fail(c, "hidden_size %lld above %d", (long long)H, FBX__RNN_MAX_HIDDEN);
  if (r->dims[2] >= 0 && r->dims[2] != H) return fbx__onnx_fail(c, "R's last dim %lld != hidden_size %lld",
                                                                (long long)r->dims[2], (long long)H);
  if ((w->dims[0] >= 0 && w->dims[0] != D) || (w->dims[1] >= 0 && w->dims[1] != G * H) ||
      (r->dims[0] >= 0 && r->dims[0] != D) || (r->dims[1] >= 0 && r->dims[1] != G * H))
    return fbx__onnx_fail(c, "W/R must be (%lld, %lld, .)", (long long)D, (long long)(G * H));
  for (int o = 0; o < n->n_outputs; o++) {
    const fbx_onnx_value *v = fbx__onnx_cout(c, o);
    if (v && !fbx__onnx_dt_ok(c, v, FBX__DT(F32), "output")) return false;
  }
  if (n->n_outputs > (lstm ? 3 : 2)) return fbx__onnx_fail(c, "%d outputs", n->n_outputs);
  return true;
}

fbx_status *fbx__onnx_tr_rnn(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  const fbx_ir_op op = fbx__rnn_op(t->e);
  const bool lstm = op == FBX_IR_OP_LSTM;
  fbx_ir_params p;
  char why[160];
  if (!fbx__rnn_params(n, op, &p, why, sizeof why)) return FBX_ERR_ARG("%s '%s': %s", n->op_type, n->name, why);
  if (p.rnn.hidden <= 0) p.rnn.hidden = fbx__onnx_tin_value(t, 2)->dims[2];
  const int n_ins = lstm ? 8 : 6, n_outs = lstm ? 3 : 2;
  int ins[8], outs[3];
  for (int i = 0; i < n_ins; i++) {
    ins[i] = FBX_IR_NONE;
    if (i < n->n_inputs) FBX_TRY(fbx__onnx_tin(t, i, &ins[i]));
  }
  for (int o = 0; o < n_outs; o++) FBX_TRY(fbx_ir_graph_add_value(t->ir, NULL, FBX_DTYPE_F32, o ? 3 : 4, &outs[o]));
  FBX_TRY(fbx_ir_graph_add_node(t->ir, op, ins, n_ins, outs, n_outs, &p, n->name ? n->name : "", n->op_type,
                                t->node_index, NULL));
  for (int o = 0; o < n_outs; o++) fbx__onnx_bind(t, o, outs[o]);
  return NULL;
}
