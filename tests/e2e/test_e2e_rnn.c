// test_e2e_rnn: one-node LSTM / GRU / RNN models whose attributes go through ORT's attribute
// API to the translator (activation lists as STRINGS, activation_alpha/beta as FLOATS, clip,
// direction, input_forget, linear_before_reset, subsets of the outputs), run on ORT's CPU EP and
// with Fusebox. Fusebox must claim the node and match ORT within 1e-5; and a node whose
// activation_alpha reads differently per activation and in order of use must be declined.
// (The kernels' own reference is tests/backend/test_cpu_rnn.c; the ONNX node tests run in
// tests/conformance.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/node_model.h"

typedef struct rnn_case {
  const char *name, *op, *direction;
  int64_t S, B, I, H;
  const char *const *acts;
  int n_acts;
  const float *alpha, *beta;
  int n_alpha, n_beta;
  float clip;
  int input_forget, lbr, bias, lens, init, peep;
  int outs;          // bitmask of Y (1), Y_h (2), Y_c (4)
  int expect_claim;  // 0: the node must be left to ORT
} rnn_case;

static void fill(fbx_host_tensor *t, const char *name, int rank, const int64_t *dims, uint64_t seed, double a) {
  char *e = fbx_host_tensor_alloc(t, name, FBX_HOST_F32, rank, dims);
  if (e) {
    CHECK(0, "alloc %s: %s", name, e);
    fbx_host_err_free(e);
    return;
  }
  fbx_host_tensor_fill_uniform(t, seed, -a, a);
}

static void run_case(fbx_host *h, const rnn_case *c) {
  const int lstm = !strcmp(c->op, "LSTM"), gru = !strcmp(c->op, "GRU");
  const int64_t G = lstm ? 4 : gru ? 3 : 1, D = !strcmp(c->direction, "bidirectional") ? 2 : 1;
  fbx_host_tensor x = {0}, w = {0}, r = {0}, b = {0}, sl = {0}, h0 = {0}, c0 = {0}, p = {0};
  fill(&x, "X", 3, (int64_t[]){c->S, c->B, c->I}, 1, 1.0);
  fill(&w, "W", 3, (int64_t[]){D, G * c->H, c->I}, 2, 0.6);
  fill(&r, "R", 3, (int64_t[]){D, G * c->H, c->H}, 3, 0.6);
  nm_model m = nm_model_init(c->op, "");
  nm_input(&m, &x, "");
  nm_init(&m, &w);
  nm_init(&m, &r);
  int last = 2; /* trailing absent inputs are not written */
  if (c->bias) fill(&b, "B", 2, (int64_t[]){D, 2 * G * c->H}, 4, 0.5), last = 3;
  if (c->lens) {
    char *e = fbx_host_tensor_alloc(&sl, "sequence_lens", FBX_HOST_I32, 1, (int64_t[]){c->B});
    fbx_host_err_free(e);
    for (int64_t i = 0; i < c->B; i++) fbx_host_tensor_set(&sl, (size_t)i, (double)(c->S - i % c->S));
    last = 4;
  }
  if (c->init) {
    fill(&h0, "initial_h", 3, (int64_t[]){D, c->B, c->H}, 5, 1.0), last = 5;
    if (lstm) fill(&c0, "initial_c", 3, (int64_t[]){D, c->B, c->H}, 6, 1.0), last = 6;
  }
  if (c->peep) fill(&p, "P", 2, (int64_t[]){D, 3 * c->H}, 7, 0.5), last = 7;
  const fbx_host_tensor *opt[5] = {&b, &sl, &h0, &c0, &p};
  for (int i = 3; i <= last; i++) {
    const fbx_host_tensor *t = opt[i - 3];
    if (!t->data) nm_absent(&m);
    else if (i == 4) nm_input(&m, t, "");
    else nm_init(&m, t);
  }
  static const char *const onames[3] = {"Y", "Y_h", "Y_c"};
  int n_out = lstm ? 3 : 2, last_out = 0;
  for (int o = 0; o < n_out; o++)
    if (c->outs & (1 << o)) last_out = o;
  for (int o = 0; o <= last_out; o++) nm_output(&m, c->outs & (1 << o) ? onames[o] : "", FBX_HOST_F32);
  nm_attr_i(&m, "hidden_size", c->H);
  nm_attr_s(&m, "direction", c->direction);
  if (c->acts) nm_attr_ss(&m, "activations", c->acts, c->n_acts);
  if (c->alpha) nm_attr_fs(&m, "activation_alpha", c->alpha, c->n_alpha);
  if (c->beta) nm_attr_fs(&m, "activation_beta", c->beta, c->n_beta);
  if (c->clip > 0) nm_attr_f(&m, "clip", c->clip);
  if (c->input_forget) nm_attr_i(&m, "input_forget", 1);
  if (c->lbr) nm_attr_i(&m, "linear_before_reset", 1);
  char path[] = "/tmp/fbx_e2e_rnn_XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  CHECK(fd >= 0 && nm_write(&m, path) == 0, "%s: write model", c->name);
  fbx_host_tensor feeds[2] = {x, sl};
  size_t nf = c->lens ? 2 : 1;
  fbx_host_tensor *o_ort = NULL, *o_fb = NULL;
  size_t n_ort = 0, n_fb = 0;
  int claimed = 0;
  char *e = nm_run(h, path, 0, feeds, nf, &o_ort, &n_ort, NULL);
  if (!e) e = nm_run(h, path, 1, feeds, nf, &o_fb, &n_fb, &claimed);
  CHECK(!e, "%s: %s", c->name, e ? e : "");
  if (!e) {
    CHECK(claimed == c->expect_claim, "%s: claimed %d, want %d", c->name, claimed, c->expect_claim);
    CHECK(n_ort == n_fb && n_ort > 0, "%s: %zu vs %zu outputs", c->name, n_fb, n_ort);
    double worst = 0;
    for (size_t k = 0; k < n_ort && k < n_fb; k++) {
      fbx_host_cmp cmp;
      fbx_host_compare(&o_fb[k], &o_ort[k], 0, 1e-5, &cmp);
      worst = fmax(worst, cmp.shape_mismatch ? INFINITY : cmp.max_abs);
    }
    CHECK(worst <= 1e-5, "%s: Fusebox vs ORT max abs diff %.3g", c->name, worst);
    printf("  %-44s claimed %d, %zu outputs, max diff %.2g\n", c->name, claimed, n_fb, worst);
  }
  fbx_host_err_free(e);
  fbx_host_tensors_free(o_ort, n_ort);
  fbx_host_tensors_free(o_fb, n_fb);
  unlink(path);
  fbx_host_tensor *all[8] = {&x, &w, &r, &b, &sl, &h0, &c0, &p};
  for (int i = 0; i < 8; i++) fbx_host_tensor_free(all[i]);
}

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  /* every activation takes an alpha: per activation and in order of use read the same */
  static const char *const lstm_acts[6] = {"HardSigmoid", "LeakyRelu", "Elu", "hardsigmoid", "leakyrelu", "elu"};
  static const float lstm_al[6] = {0.3f, 0.1f, 0.9f, 0.25f, 0.05f, 1.1f}, lstm_be[2] = {0.6f, 0.5f};
  static const char *const gru_acts[2] = {"Softsign", "Softplus"};
  static const char *const rnn_acts[1] = {"Affine"};
  static const float rnn_al[1] = {0.5f}, rnn_be[1] = {0.1f};
  static const char *const amb_acts[2] = {"Tanh", "LeakyRelu"};  /* alpha 0.2: LeakyRelu's by use, Tanh's by position */
  static const float amb_al[1] = {0.2f};
  static const char *const scaled[1] = {"ScaledTanh"};           /* no alpha/beta: defaults disagree -> declined */
  const rnn_case cases[] = {
      {"LSTM bidi HardSigmoid/LeakyRelu/Elu clip", "LSTM", "bidirectional", 5, 3, 4, 6, lstm_acts, 6, lstm_al,
       lstm_be, 6, 2, 3.0f, 0, 0, 1, 1, 1, 1, 7, 1},
      {"LSTM forward input_forget, Y_c only", "LSTM", "forward", 4, 2, 3, 5, NULL, 0, NULL, NULL, 0, 0, 0, 1, 0, 1, 0,
       1, 0, 4, 1},
      {"GRU reverse linear_before_reset Softsign/Softplus", "GRU", "reverse", 6, 2, 5, 4, gru_acts, 2, NULL, NULL, 0,
       0, 0, 0, 1, 1, 0, 1, 0, 3, 1},
      {"GRU bidi sequence_lens, Y_h only", "GRU", "bidirectional", 5, 3, 3, 4, NULL, 0, NULL, NULL, 0, 0, 0, 0, 0, 1,
       1, 0, 0, 2, 1},
      {"RNN forward Affine", "RNN", "forward", 4, 2, 3, 5, rnn_acts, 1, rnn_al, rnn_be, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1,
       1},
      {"RNN alpha ambiguous -> declined", "RNN", "bidirectional", 3, 1, 2, 3, amb_acts, 2, amb_al, NULL, 1, 0, 0, 0, 0,
       0, 0, 0, 0, 3, 0},
      {"RNN ScaledTanh without alpha -> declined", "RNN", "forward", 3, 1, 2, 3, scaled, 1, NULL, NULL, 0, 0, 0, 0, 0,
       0, 0, 0, 0, 3, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(h, &cases[i]);
  fbx_host_close(h);
  printf("e2e_rnn: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
