// test_e2e_vad: the Silero-style VAD (models/gen_vad.py: an LSTM inside each branch of an If
// chosen by the sample rate, state carried in and out) through ORT with Fusebox and on ORT's
// CPU EP alone. Checks:
//   - placement (ORT's own record): on a host-visible device the If is claimed with both branches,
//     so the whole main graph (Equal -> If -> ReduceMean -> Identity) is ONE Fusebox subgraph; on
//     the opaque test backend (FUSEBOX_TEST_BACKEND=opaque: memory the host cannot read) the If is
//     declined and stays on ORT, and both branches' LSTMs and every other node of the branches run
//     on Fusebox (ORT calls GetCapability per subgraph);
//   - a stream of chunks at 16 kHz and at 8 kHz, each EP carrying its own state: every chunk's
//     probability and state equal ORT's within 1e-5, and the state really evolves (it is not
//     a stream of zeros that would match trivially).
// The LSTM kernel's own independent reference is tests/backend/test_cpu_rnn.c and the ONNX
// backend node tests (tests/conformance).
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/ort_host.h"

#define CHUNKS 24

static bool host_visible_backend(void) {
  const char *tb = getenv("FUSEBOX_TEST_BACKEND");
  return !tb || !tb[0] || strcmp(tb, "cpu") == 0;
}

static void check_placement(fbx_host_session *sf) {
  fbx_host_assign *as = NULL;
  size_t na = 0, on = 0, lstm_on = 0, lstm = 0, off_not_if = 0, if_on = 0, subgraphs = 0;
  int sg = -1;
  char *e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "assignment: %s", e ? e : "");
  fbx_host_err_free(e);
  for (size_t i = 0; i < na; i++) {
    bool fb = !strcmp(as[i].ep, FBX_HOST_EP_NAME);
    on += fb;
    if (fb && as[i].subgraph != sg) sg = as[i].subgraph, subgraphs++;
    if (!strcmp(as[i].op_type, "LSTM")) lstm++, lstm_on += fb;
    if (!strcmp(as[i].op_type, "If")) if_on += fb;
    if (!fb && strcmp(as[i].op_type, "If") != 0) {
      off_not_if++;
      fprintf(stderr, "  not on Fusebox: %s (%s) on %s\n", as[i].node, as[i].op_type, as[i].ep);
    }
  }
  CHECK(off_not_if == 0, "%zu nodes other than the If left to ORT", off_not_if);
  if (host_visible_backend()) { /* the If with its branches: ORT's record lists the main graph's nodes
                                  * (Equal, If, ReduceMean; ORT drops the Identity) */
    CHECK(if_on == 1 && on == na && na >= 3, "If on Fusebox: %zu, %zu/%zu nodes on Fusebox (want the If, all)", if_on,
          on, na);
    CHECK(subgraphs == 1, "main graph in %zu Fusebox subgraphs (want 1)", subgraphs);
  } else {
    CHECK(if_on == 0, "If on Fusebox on a device that is not host-visible");
    CHECK(lstm == 2 && lstm_on == 2, "LSTM nodes: %zu, on Fusebox %zu (want 2 of 2, one per If branch)", lstm, lstm_on);
  }
  printf("  placement: %zu/%zu nodes on Fusebox in %zu subgraph(s), If %s, LSTM %zu/%zu\n", on, na, subgraphs,
         if_on ? "on Fusebox" : "on ORT", lstm_on, lstm);
  fbx_host_assign_free(as, na);
}

static void stream(fbx_host_session *s[2], int sr, int hidden) {
  const int chunk = sr == 16000 ? 512 : 256;
  fbx_host_tensor in[2][3];
  memset(in, 0, sizeof in);
  int64_t din[2] = {1, chunk}, dst[3] = {2, 1, hidden};
  char *e = NULL;
  for (int k = 0; k < 2 && !e; k++) {
    e = fbx_host_tensor_alloc(&in[k][0], "input", FBX_HOST_F32, 2, din);
    if (!e) e = fbx_host_tensor_alloc(&in[k][1], "state", FBX_HOST_F32, 3, dst);
    if (!e) e = fbx_host_tensor_alloc(&in[k][2], "sr", FBX_HOST_I64, 0, NULL);
    if (!e) fbx_host_tensor_set(&in[k][2], 0, sr);
  }
  double worst_p = 0, worst_s = 0, state_norm = 0, pmin = 1, pmax = 0;
  for (int c = 0; c < CHUNKS && !e; c++) {
    fbx_host_tensor_fill_uniform(&in[0][0], 1000 + (uint64_t)c, -0.5 * (c % 3), 0.5 * (c % 3)); /* 1 in 3 silent */
    memcpy(in[1][0].data, in[0][0].data, in[0][0].nbytes);
    fbx_host_tensor *o[2] = {NULL, NULL};
    size_t no[2] = {0, 0};
    for (int k = 0; k < 2 && !e; k++) e = fbx_host_session_run(s[k], in[k], 3, &o[k], &no[k]);
    if (!e) {
      long io = fbx_host_session_output_find(s[0], "output"), is = fbx_host_session_output_find(s[0], "stateN");
      fbx_host_cmp r;
      fbx_host_compare(&o[0][io], &o[1][io], 0, 1e-5, &r);
      worst_p = fmax(worst_p, r.shape_mismatch ? INFINITY : r.max_abs);
      fbx_host_compare(&o[0][is], &o[1][is], 0, 1e-5, &r);
      worst_s = fmax(worst_s, r.shape_mismatch ? INFINITY : r.max_abs);
      double p = fbx_host_tensor_get(&o[1][io], 0);
      pmin = fmin(pmin, p), pmax = fmax(pmax, p);
      for (int k = 0; k < 2; k++) memcpy(in[k][1].data, o[k][is].data, in[k][1].nbytes); /* carry the state */
      state_norm = 0;
      for (size_t i = 0; i < fbx_host_tensor_numel(&in[1][1]); i++)
        state_norm += fabs(fbx_host_tensor_get(&in[1][1], i));
    }
    for (int k = 0; k < 2; k++) fbx_host_tensors_free(o[k], no[k]);
  }
  CHECK(!e, "sr %d: %s", sr, e ? e : "");
  fbx_host_err_free(e);
  CHECK(worst_p <= 1e-5 && worst_s <= 1e-5, "sr %d: Fusebox vs ORT CPU: prob %.3g, state %.3g (want <= 1e-5)", sr,
        worst_p, worst_s);
  CHECK(state_norm > 1e-3 && pmax - pmin > 1e-4, "sr %d: the stream is trivial (state |sum| %.3g, prob %.3g..%.3g)",
        sr, state_norm, pmin, pmax);
  printf("  sr %d: %d chunks, max diff prob %.2g state %.2g, prob %.3f..%.3f\n", sr, CHUNKS, worst_p, worst_s, pmin,
         pmax);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 3; i++) fbx_host_tensor_free(&in[k][i]);
}

static void run_model(fbx_host *h, const char *rel);

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  /* vad_noshape: the branches declare no output shapes, so the If's output shapes (read by the
   * ReduceMean after it and by the graph outputs) are only what ORT infers from the branch bodies */
  static const char *const models[] = {"models/gen/vad.onnx", "models/gen/vad_noshape.onnx"};
  for (int mi = 0; mi < 2; mi++) run_model(h, models[mi]);
  fbx_host_close(h);
  printf("e2e_vad: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

static void run_model(fbx_host *h, const char *rel) {
  char model[1024];
  char *e = NULL;
  fbx_host_session *s[2] = {NULL, NULL};
  printf("  %s\n", rel);
  if (fbx_host_find_repo_file(rel, model, sizeof model)) {
    CHECK(0, "%s not found (run scripts/make_models.sh)", rel);
    goto out;
  }
  e = fbx_host_session_create_threads(h, model, 1, 2, 1, &s[0]);
  if (!e) e = fbx_host_session_create_threads(h, model, 0, 2, 0, &s[1]);
  CHECK(!e, "sessions: %s", e ? e : "");
  if (e) goto out;
  check_placement(s[0]);
  long is = fbx_host_session_input_find(s[0], "state");
  int hidden = is >= 0 ? (int)fbx_host_session_input(s[0], (size_t)is)->dims[2] : 0;
  CHECK(hidden > 0, "state input (2, 1, hidden) not found");
  if (hidden > 0) {
    stream(s, 16000, hidden);
    stream(s, 8000, hidden);
  }
out:
  fbx_host_err_free(e);
  for (int k = 0; k < 2; k++) fbx_host_session_destroy(s[k]);
}
