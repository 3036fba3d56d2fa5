/* The CPU LSTM / GRU / RNN kernels (cpu_rnn.c) against a naive reference
 * written here from the ONNX operator equations: double arithmetic, one dot
 * product per gate and time step, batch by batch (no GEMM, no shared state).
 * Covered: forward / reverse / bidirectional, layout 0 and 1, batch 1 (the
 * GEMV recurrence) and batch 3 (GEMM), sequence_lens (with 0 and full
 * lengths), initial_h / initial_c, bias, peepholes, clip, input_forget,
 * linear_before_reset, and every activation the spec allows with alpha/beta. */
#include "cpu_test_util.h"

#include "ir/ir_graph.h"

/* ---- the reference ---- */
static double act_ref(fbx_ir_rnn_act a, double al, double be, double x) {
  switch (a) {
    case FBX_IR_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FBX_IR_ACT_TANH: return tanh(x);
    case FBX_IR_ACT_RELU: return x > 0 ? x : 0;
    case FBX_IR_ACT_AFFINE: return al * x + be;
    case FBX_IR_ACT_LEAKY_RELU: return x >= 0 ? x : al * x;
    case FBX_IR_ACT_THRESHOLDED_RELU: return x > al ? x : 0;
    case FBX_IR_ACT_SCALED_TANH: return al * tanh(be * x);
    case FBX_IR_ACT_HARD_SIGMOID: return fmax(0, fmin(1, al * x + be));
    case FBX_IR_ACT_ELU: return x >= 0 ? x : al * (exp(x) - 1);
    case FBX_IR_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case FBX_IR_ACT_SOFTPLUS: return log(1 + exp(x));
  }
  return NAN;
}

typedef struct rcase {
  fbx_ir_op op;
  int64_t S, B, I, H;
  int dir, layout, bias, lens, init, peep, input_forget, lbr;
  float clip;
  fbx_ir_rnn_act act[3];
  float al[3], be[3];
} rcase;

/* element offsets of the layouts */
static int64_t xo(const rcase *c, int64_t t, int64_t b, int64_t i) {
  return (c->layout ? b * c->S + t : t * c->B + b) * c->I + i;
}
static int64_t so(const rcase *c, int64_t D, int64_t d, int64_t b, int64_t k) {
  return (c->layout ? b * D + d : d * c->B + b) * c->H + k;
}
static int64_t yo(const rcase *c, int64_t D, int64_t t, int64_t d, int64_t b, int64_t k) {
  return (c->layout ? (b * c->S + t) * D + d : (t * D + d) * c->B + b) * c->H + k;
}

static double clipv(const rcase *c, double x) { return c->clip > 0 ? fmax(-c->clip, fmin(c->clip, x)) : x; }

static void reference(const rcase *c, const float *X, const float *W, const float *R, const float *Bb,
                      const int32_t *lens, const float *h0, const float *c0, const float *P, double *Y, double *Yh,
                      double *Yc) {
  const int64_t D = c->dir == 2 ? 2 : 1, H = c->H, I = c->I;
  const int G = c->op == FBX_IR_OP_LSTM ? 4 : c->op == FBX_IR_OP_GRU ? 3 : 1;
  double h[64], cs[64], g[4][64];
  for (int64_t d = 0; d < D; d++) {
    const bool rev = c->dir == 1 || d == 1;
    const float *w = W + d * G * H * I, *r = R + d * G * H * H;
    const float *wb = Bb ? Bb + d * 2 * G * H : NULL, *rb = wb ? wb + G * H : NULL;
    for (int64_t b = 0; b < c->B; b++) {
      int64_t L = lens ? lens[b] : c->S;
      for (int64_t k = 0; k < H; k++) {
        h[k] = h0 ? h0[so(c, D, d, b, k)] : 0;
        cs[k] = c0 ? c0[so(c, D, d, b, k)] : 0;
      }
      for (int64_t j = 0; j < L; j++) {
        int64_t t = rev ? L - 1 - j : j;
        /* xw[gate][k] and hw[gate][k] separately (GRU needs them apart) */
        double xw[4][64], hw[4][64];
        for (int q = 0; q < G; q++)
          for (int64_t k = 0; k < H; k++) {
            double sx = wb ? wb[q * H + k] : 0, sh = rb ? rb[q * H + k] : 0;
            for (int64_t i = 0; i < I; i++) sx += (double)X[xo(c, t, b, i)] * w[(q * H + k) * I + i];
            for (int64_t i = 0; i < H; i++) sh += h[i] * r[(q * H + k) * H + i];
            xw[q][k] = sx, hw[q][k] = sh;
          }
        if (c->op == FBX_IR_OP_RNN) {
          for (int64_t k = 0; k < H; k++) h[k] = act_ref(c->act[0], c->al[0], c->be[0], clipv(c, xw[0][k] + hw[0][k]));
        } else if (c->op == FBX_IR_OP_LSTM) { /* gates i, o, f, c; P: i, o, f */
          const float *p = P ? P + d * 3 * H : NULL;
          for (int64_t k = 0; k < H; k++) {
            double ci = xw[0][k] + hw[0][k] + (p ? p[k] * cs[k] : 0);
            double cf = xw[2][k] + hw[2][k] + (p ? p[2 * H + k] * cs[k] : 0);
            double gi = act_ref(c->act[0], c->al[0], c->be[0], clipv(c, ci));
            double gf = c->input_forget ? 1 - gi : act_ref(c->act[0], c->al[0], c->be[0], clipv(c, cf));
            double gc = act_ref(c->act[1], c->al[1], c->be[1], clipv(c, xw[3][k] + hw[3][k]));
            double cn = gf * cs[k] + gi * gc;
            double co = xw[1][k] + hw[1][k] + (p ? p[H + k] * cn : 0);
            double go = act_ref(c->act[0], c->al[0], c->be[0], clipv(c, co));
            cs[k] = cn;
            g[0][k] = go * act_ref(c->act[2], c->al[2], c->be[2], cn);
          }
          for (int64_t k = 0; k < H; k++) h[k] = g[0][k];
        } else { /* GRU: z, r, h */
          double z[64], rr[64];
          for (int64_t k = 0; k < H; k++) {
            z[k] = act_ref(c->act[0], c->al[0], c->be[0], clipv(c, xw[0][k] + hw[0][k]));
            rr[k] = act_ref(c->act[0], c->al[0], c->be[0], clipv(c, xw[1][k] + hw[1][k]));
          }
          for (int64_t k = 0; k < H; k++) {
            double pre;
            if (c->lbr) {
              pre = xw[2][k] + rr[k] * hw[2][k];
            } else { /* (r * h) @ R_h^T + Rb_h */
              double s = rb ? rb[2 * H + k] : 0;
              for (int64_t i = 0; i < H; i++) s += rr[i] * h[i] * r[(2 * H + k) * H + i];
              pre = xw[2][k] + s;
            }
            g[0][k] = act_ref(c->act[1], c->al[1], c->be[1], clipv(c, pre));
          }
          for (int64_t k = 0; k < H; k++) h[k] = (1 - z[k]) * g[0][k] + z[k] * h[k];
        }
        for (int64_t k = 0; k < H; k++) Y[yo(c, D, t, d, b, k)] = h[k];
      }
      for (int64_t k = 0; k < H; k++) {
        Yh[so(c, D, d, b, k)] = h[k];
        if (Yc) Yc[so(c, D, d, b, k)] = cs[k];
      }
    }
  }
}

static void run_case(const char *name, const rcase *c) {
  const int64_t D = c->dir == 2 ? 2 : 1, H = c->H;
  const bool lstm = c->op == FBX_IR_OP_LSTM;
  const int G = lstm ? 4 : c->op == FBX_IR_OP_GRU ? 3 : 1, npd = lstm ? 3 : c->op == FBX_IR_OP_GRU ? 2 : 1;
  fbx_tensor in[8];
  for (int i = 0; i < 8; i++) in[i] = tabsent();
  in[0] = c->layout ? T(FBX_DTYPE_F32, c->B, c->S, c->I) : T(FBX_DTYPE_F32, c->S, c->B, c->I);
  in[1] = T(FBX_DTYPE_F32, D, G * H, c->I);
  in[2] = T(FBX_DTYPE_F32, D, G * H, H);
  for (int i = 0; i < 3; i++) frand(&in[i]);
  if (c->bias) in[3] = T(FBX_DTYPE_F32, D, 2 * G * H), frand(&in[3]);
  if (c->lens) {
    in[4] = T(FBX_DTYPE_I32, c->B);
    for (int64_t b = 0; b < c->B; b++) ((int32_t *)in[4].data)[b] = (int32_t)(b == 0 ? c->S - 2 : b == 1 ? 0 : c->S);
  }
  if (c->init) {
    in[5] = c->layout ? T(FBX_DTYPE_F32, c->B, D, H) : T(FBX_DTYPE_F32, D, c->B, H);
    frand(&in[5]);
    if (lstm) in[6] = c->layout ? T(FBX_DTYPE_F32, c->B, D, H) : T(FBX_DTYPE_F32, D, c->B, H), frand(&in[6]);
  }
  if (c->peep) in[7] = T(FBX_DTYPE_F32, D, 3 * H), frand(&in[7]);
  fbx_tensor out[3];
  out[0] = c->layout ? T(FBX_DTYPE_F32, c->B, c->S, D, H) : T(FBX_DTYPE_F32, c->S, D, c->B, H);
  out[1] = c->layout ? T(FBX_DTYPE_F32, c->B, D, H) : T(FBX_DTYPE_F32, D, c->B, H);
  out[2] = out[1].rank >= 0 ? tmake(FBX_DTYPE_F32, 3, out[1].dims) : tabsent();
  for (int64_t i = 0; i < fbx_tensor_numel(&out[0]); i++) F(&out[0])[i] = 12345.f; /* must be overwritten */
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.rnn.hidden = H, p.rnn.direction = c->dir, p.rnn.layout = c->layout, p.rnn.input_forget = c->input_forget;
  p.rnn.linear_before_reset = c->lbr, p.rnn.n_per_dir = npd, p.rnn.clip = c->clip;
  for (int d = 0; d < D; d++)
    for (int k = 0; k < npd; k++)
      p.rnn.act[d * npd + k] = c->act[k], p.rnn.act_alpha[d * npd + k] = c->al[k], p.rnn.act_beta[d * npd + k] = c->be[k];
  int n_in = lstm ? 8 : 6, n_out = lstm ? 3 : 2;
  for (int pass = 0; pass < 2; pass++) {
  /* pass 0: W, R read in place (no state); pass 1: packed once by node_prepare as constants */
  void *state = NULL;
  if (pass == 1) {
    const fbx_tensor *cins[8] = {NULL, &in[1], &in[2]};
    fbx_ir_node nd = {.op = c->op, .n_inputs = n_in, .n_outputs = n_out, .params = p};
    fbx_status *st = g_be->vt->node_prepare(g_be, &nd, cins, in, &state);
    check(st == NULL && state != NULL, "%s: node_prepare: %s", name, st ? fbx_status_message(st) : "no state");
    fbx_status_free(st);
    for (int64_t i = 0; i < fbx_tensor_numel(&out[0]); i++) F(&out[0])[i] = 12345.f;
  }
  fbx_status *st = run_node(c->op, &p, in, n_in, out, n_out, state);
  check(st == NULL, "%s: run failed: %s", name, st ? fbx_status_message(st) : "");
  fbx_status_free(st);
  if (state) {
    fbx_ir_node nd = {.op = c->op};
    g_be->vt->node_release(g_be, &nd, state);
  }
  int64_t ny = fbx_tensor_numel(&out[0]), nh = fbx_tensor_numel(&out[1]);
  double *Y = calloc((size_t)ny, sizeof(double)), *Yh = calloc((size_t)nh, sizeof(double));
  double *Yc = lstm ? calloc((size_t)nh, sizeof(double)) : NULL;
  reference(c, F(&in[0]), F(&in[1]), F(&in[2]), c->bias ? F(&in[3]) : NULL, c->lens ? in[4].data : NULL,
            c->init ? F(&in[5]) : NULL, c->init && lstm ? F(&in[6]) : NULL, c->peep ? F(&in[7]) : NULL, Y, Yh, Yc);
  char what[160];
  snprintf(what, sizeof what, "%s%s Y", name, pass ? " packed" : "");
  fclose_arr(F(&out[0]), Y, ny, 2e-5, what);
  snprintf(what, sizeof what, "%s%s Y_h", name, pass ? " packed" : "");
  fclose_arr(F(&out[1]), Yh, nh, 2e-5, what);
  if (lstm) {
    snprintf(what, sizeof what, "%s%s Y_c", name, pass ? " packed" : "");
    fclose_arr(F(&out[2]), Yc, nh, 2e-5, what);
  }
  free(Y), free(Yh), free(Yc);
  }
  for (int i = 0; i < 8; i++) tfree(&in[i]);
  for (int i = 0; i < 3; i++) tfree(&out[i]);
}

#define SIG FBX_IR_ACT_SIGMOID
#define TANH FBX_IR_ACT_TANH

int main(void) {
  test_setup(2);
  static const char *const dname[] = {"fwd", "rev", "bidi"};
  char name[128];
  const fbx_ir_op ops[] = {FBX_IR_OP_LSTM, FBX_IR_OP_GRU, FBX_IR_OP_RNN};
  /* every op x direction x layout x batch (1: GEMV, 3: GEMM) x sequence_lens, defaults */
  for (int o = 0; o < 3; o++)
    for (int dir = 0; dir < 3; dir++)
      for (int layout = 0; layout < 2; layout++)
        for (int bi = 0; bi < 2; bi++)
          for (int lens = 0; lens < 2; lens++) {
            rcase c = {.op = ops[o], .S = 5, .B = bi ? 3 : 1, .I = 7, .H = 9, .dir = dir, .layout = layout,
                       .bias = 1, .lens = lens, .init = (dir + bi) & 1, .peep = ops[o] == FBX_IR_OP_LSTM && lens,
                       .lbr = ops[o] == FBX_IR_OP_GRU && layout,
                       .act = {ops[o] == FBX_IR_OP_RNN ? TANH : SIG, TANH, TANH}};
            snprintf(name, sizeof name, "%s %s layout%d B%lld lens%d", fbx_ir_op_name(ops[o]), dname[dir], layout,
                     (long long)c.B, lens);
            run_case(name, &c);
          }
  /* clip, input_forget, no bias, larger hidden (SIMD bodies + tails) */
  for (int o = 0; o < 3; o++) {
    rcase c = {.op = ops[o], .S = 4, .B = 2, .I = 19, .H = 37, .dir = 2, .init = 1, .clip = 0.7f,
               .act = {ops[o] == FBX_IR_OP_RNN ? TANH : SIG, TANH, TANH}};
    snprintf(name, sizeof name, "%s clip 0.7 H37", fbx_ir_op_name(ops[o]));
    run_case(name, &c);
  }
  {
    rcase c = {.op = FBX_IR_OP_LSTM, .S = 6, .B = 2, .I = 5, .H = 8, .dir = 0, .bias = 1, .input_forget = 1,
               .peep = 1, .init = 1, .act = {SIG, TANH, TANH}};
    run_case("LSTM input_forget", &c);
  }
  /* every activation the spec allows, with alpha/beta, in each slot */
  struct { fbx_ir_rnn_act a; float al, be; const char *n; } acts[] = {
      {FBX_IR_ACT_SIGMOID, 0, 0, "Sigmoid"},       {FBX_IR_ACT_TANH, 0, 0, "Tanh"},
      {FBX_IR_ACT_RELU, 0, 0, "Relu"},             {FBX_IR_ACT_AFFINE, 0.5f, 0.25f, "Affine"},
      {FBX_IR_ACT_LEAKY_RELU, 0.1f, 0, "LeakyRelu"}, {FBX_IR_ACT_THRESHOLDED_RELU, 0.3f, 0, "ThresholdedRelu"},
      {FBX_IR_ACT_SCALED_TANH, 1.5f, 0.7f, "ScaledTanh"}, {FBX_IR_ACT_HARD_SIGMOID, 0.3f, 0.4f, "HardSigmoid"},
      {FBX_IR_ACT_ELU, 0.8f, 0, "Elu"},            {FBX_IR_ACT_SOFTSIGN, 0, 0, "Softsign"},
      {FBX_IR_ACT_SOFTPLUS, 0, 0, "Softplus"},
  };
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
    for (int o = 0; o < 3; o++) {
      int slot = (int)(a % (o == 0 ? 3 : o == 1 ? 2 : 1));
      rcase c = {.op = ops[o], .S = 3, .B = 2, .I = 6, .H = 10, .dir = (int)(a % 3), .bias = 1, .init = 1,
                 .act = {ops[o] == FBX_IR_OP_RNN ? TANH : SIG, TANH, TANH}};
      c.act[slot] = acts[a].a, c.al[slot] = acts[a].al, c.be[slot] = acts[a].be;
      snprintf(name, sizeof name, "%s %s in slot %d", fbx_ir_op_name(ops[o]), acts[a].n, slot);
      run_case(name, &c);
    }
  /* sequence_lens outside [0, seq] is an error, not a read past X */
  {
    fbx_tensor in[6], out[2];
    for (int i = 0; i < 6; i++) in[i] = tabsent();
    in[0] = T(FBX_DTYPE_F32, 2, 1, 3), in[1] = T(FBX_DTYPE_F32, 1, 4, 3), in[2] = T(FBX_DTYPE_F32, 1, 4, 4);
    in[4] = T(FBX_DTYPE_I32, 1);
    ((int32_t *)in[4].data)[0] = 3;
    out[0] = T(FBX_DTYPE_F32, 2, 1, 1, 4), out[1] = T(FBX_DTYPE_F32, 1, 1, 4);
    fbx_ir_params p;
    memset(&p, 0, sizeof p);
    p.rnn.hidden = 4, p.rnn.n_per_dir = 1, p.rnn.act[0] = TANH;
    fbx_status *st = run_node(FBX_IR_OP_RNN, &p, in, 6, out, 2, NULL);
    check(st != NULL && strstr(fbx_status_message(st), "sequence_lens") != NULL, "sequence_lens 3 > seq 2 must fail: %s",
          st ? fbx_status_message(st) : "(no error)");
    fbx_status_free(st);
    for (int i = 0; i < 6; i++) tfree(&in[i]);
    for (int i = 0; i < 2; i++) tfree(&out[i]);
  }
  return test_finish("test_cpu_rnn");
}
