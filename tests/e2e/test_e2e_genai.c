// test_e2e_genai: the GenAI-style int4 decoder of models/gen_genai.py (SimplifiedLayerNorm,
// SkipSimplifiedLayerNorm, MatMulNBits, GroupQueryAttention with rotary, SiLU), at
// accuracy_level 0 (models/gen/genai_tiny.onnx) and 4 (genai_tiny_q4.onnx), and its --float twin
// (genai_tiny_f32.onnx: MatMul on float32 weights, reference cases/genai_tiny_f32), through Fusebox and
// ORT's CPU EP:
//   - every node is placed on Fusebox (ORT's own assignment record);
//   - prefill logits and 32 teacher-forced decode steps (the reference's greedy tokens) match
//     the float64 numpy reference over the dequantised weights (models/gen/cases/genai_tiny/);
//   - at accuracy_level 0, 32 greedy steps give the same tokens as ORT's CPU EP, and the
//     logits agree with ORT's step by step.
// Tolerances, as a fraction of the largest |logit| of the step (max_abs(ref)):
//   level 0: 1e-4. Everything is float32 with float accumulation over <= 128 terms (~1e-6
//     relative per op), through 2 layers; 1e-4 leaves 100x room and still catches any wrong
//     row, head, position or block (those move logits by O(1)).
//   level 4: 8e-2, and no worse than 1.5x ORT's own deviation + 1e-3. MatMulNBits quantises
//     its input per block of 32 to int8 (step max|a|/127): each of the 9 quantised matmuls on
//     the path adds a relative error up to ~1/254 of its input's block maxima (bounded exactly
//     per op in test_e2e_msft_mnb), and they compound through the layers: ORT's CPU EP itself
//     lands 4.0e-2 from the float64 reference on this model. A wrong kernel is off by O(1).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#define STEPS 32

typedef struct refs {
  fbx_host_tensor prompt, tokens, prefill, decode; // (1,S) i64, (STEPS) i64, (1,S,V), (STEPS,V)
} refs;

static int load_refs(const char *dir, refs *r) {
  const char *names[4] = {"prompt.npy", "tokens.npy", "prefill_logits.npy", "decode_logits.npy"};
  fbx_host_tensor *t[4] = {&r->prompt, &r->tokens, &r->prefill, &r->decode};
  for (int i = 0; i < 4; i++) {
    char rel[512], path[1024];
    snprintf(rel, sizeof rel, "%s/%s", dir, names[i]);
    if (fbx_host_find_repo_file(rel, path, sizeof path)) return -1;
    char *e = fbx_host_npy_read(path, t[i]);
    if (e) {
      fprintf(stderr, "%s: %s\n", path, e);
      fbx_host_err_free(e);
      return -1;
    }
  }
  return 0;
}

// max |a - ref| over n values at a / ref, relative to max |ref|.
static double rel_err(const fbx_host_tensor *a, size_t a_off, const fbx_host_tensor *ref, size_t r_off, size_t n) {
  double mx = 0, d = 0;
  for (size_t i = 0; i < n; i++) {
    double x = fbx_host_tensor_get(ref, r_off + i), y = fbx_host_tensor_get(a, a_off + i);
    if (fabs(x) > mx) mx = fabs(x);
    if (fabs(x - y) > d || isnan(y)) d = isnan(y) ? INFINITY : fabs(x - y);
  }
  return d / (mx > 0 ? mx : 1);
}

static char *open_session(fbx_host *h, const char *model, int fusebox, fbx_host_session **s) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  o.record_assignment = fusebox;
  return fbx_host_session_create(h, model, &o, s);
}

static void run_model(fbx_host *h, const char *model_rel, const refs *r, double tol, int level) {
  char model[1024];
  if (fbx_host_find_repo_file(model_rel, model, sizeof model)) {
    CHECK(0, "%s not found (run scripts/make_models.sh)", model_rel);
    return;
  }
  fbx_host_session *sf = NULL, *sc = NULL;
  fbx_host_decoder df, dc;
  memset(&df, 0, sizeof df), memset(&dc, 0, sizeof dc);
  char *e = open_session(h, model, 1, &sf);
  if (!e) e = open_session(h, model, 0, &sc);
  if (!e) e = fbx_host_decoder_init(&df, sf);
  if (!e) e = fbx_host_decoder_init(&dc, sc);
  CHECK(!e, "%s: %s", model_rel, e ? e : "");
  if (e) goto out;
  // placement: every node on Fusebox
  fbx_host_assign *as = NULL;
  size_t na = 0, on = 0;
  e = fbx_host_session_assignment(sf, &as, &na);
  CHECK(!e, "%s: assignment: %s", model_rel, e ? e : "");
  fbx_host_err_free(e);
  e = NULL;
  for (size_t i = 0; i < na; i++) on += !strcmp(as[i].ep, FBX_HOST_EP_NAME);
  CHECK(na > 0 && on * 100 >= na * 99, "%s: %zu of %zu nodes on Fusebox (want >= 99%%)", model_rel, on, na);
  printf("  %s: %zu/%zu nodes on Fusebox\n", model_rel, on, na);
  fbx_host_assign_free(as, na);

  // prefill + teacher-forced decode against the float64 reference
  const int64_t S = r->prompt.dims[1], V = r->prefill.dims[2];
  const int64_t *prompt = r->prompt.data, *tok = r->tokens.data;
  double worst_ref = 0, worst_ort = 0;
  for (int pass = 0; pass < 1 && !e; pass++) {
    e = fbx_host_decoder_step(&df, prompt, S);
    if (!e) e = fbx_host_decoder_step(&dc, prompt, S);
    if (e) break;
    double er = rel_err(&df.logits, 0, &r->prefill, 0, (size_t)(S * V));
    CHECK(er <= tol, "%s: prefill logits off the float64 reference by %.3g (tolerance %.3g)", model_rel, er, tol);
    worst_ref = er;
    for (int t = 0; t < STEPS && !e; t++) {
      e = fbx_host_decoder_step(&df, &tok[t], 1);
      if (!e) e = fbx_host_decoder_step(&dc, &tok[t], 1);
      if (e) break;
      double a = rel_err(&df.logits, 0, &r->decode, (size_t)(t * V), (size_t)V);
      double b = rel_err(&dc.logits, 0, &r->decode, (size_t)(t * V), (size_t)V);
      double c = rel_err(&df.logits, 0, &dc.logits, 0, (size_t)V);
      CHECK(a <= tol, "%s: decode step %d: logits off the float64 reference by %.3g (tolerance %.3g; ORT: %.3g)",
            model_rel, t, a, tol, b);
      if (level == 4)
        CHECK(a <= 1.5 * b + 1e-3, "%s: decode step %d: int8 path less accurate than ORT's (%.3g vs %.3g)", model_rel,
              t, a, b);
      if (a > worst_ref) worst_ref = a;
      if (c > worst_ort) worst_ort = c;
    }
  }
  CHECK(!e, "%s: run: %s", model_rel, e ? e : "");
  fbx_host_err_free(e);
  e = NULL;
  printf("  %s: prefill + %d decode steps: worst error vs float64 reference %.3g, vs ORT CPU %.3g (of max |logit|)\n",
         model_rel, STEPS, worst_ref, worst_ort);

  // greedy decode, each EP on its own tokens
  int64_t gf[STEPS], gc[STEPS], same = 0;
  e = fbx_host_decoder_reset(&df);
  if (!e) e = fbx_host_decoder_reset(&dc);
  if (!e) e = fbx_host_decoder_step(&df, prompt, S);
  if (!e) e = fbx_host_decoder_step(&dc, prompt, S);
  for (int t = 0; t < STEPS && !e; t++) {
    gf[t] = fbx_host_decoder_argmax(&df);
    gc[t] = fbx_host_decoder_argmax(&dc);
    same += gf[t] == gc[t];
    e = fbx_host_decoder_step(&df, &gf[t], 1);
    if (!e) e = fbx_host_decoder_step(&dc, &gc[t], 1);
  }
  CHECK(!e, "%s: greedy: %s", model_rel, e ? e : "");
  int64_t ref_same = 0;
  for (int t = 0; t < STEPS && !e; t++) ref_same += gf[t] == tok[t];
  printf("  %s: greedy %d steps: %lld identical to ORT CPU, %lld to the float64 reference\n", model_rel, STEPS,
         (long long)same, (long long)ref_same);
  if (level == 0)
    CHECK(same == STEPS, "%s: greedy tokens differ from ORT CPU (%lld of %d same)", model_rel, (long long)same, STEPS);
out:
  fbx_host_err_free(e);
  fbx_host_decoder_free(&df);
  fbx_host_decoder_free(&dc);
  if (sf) fbx_host_session_destroy(sf);
  if (sc) fbx_host_session_destroy(sc);
}

int main(void) {
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  refs r;
  memset(&r, 0, sizeof r);
  if (load_refs("models/gen/cases/genai_tiny", &r)) {
    CHECK(0, "reference cases models/gen/cases/genai_tiny missing (run scripts/make_models.sh)");
  } else {
    run_model(h, "models/gen/genai_tiny.onnx", &r, 1e-4, 0);
    run_model(h, "models/gen/genai_tiny_q4.onnx", &r, 8e-2, 4);
  }
  fbx_host_tensor_free(&r.prompt), fbx_host_tensor_free(&r.tokens);
  fbx_host_tensor_free(&r.prefill), fbx_host_tensor_free(&r.decode);
  // gen_genai.py --float: the same graph with MatMul (+ Add) on float32 weights (the model
  // builder's -p fp32) and its own float64 reference; level 0's tolerance (float throughout)
  memset(&r, 0, sizeof r);
  if (load_refs("models/gen/cases/genai_tiny_f32", &r)) {
    CHECK(0, "reference cases models/gen/cases/genai_tiny_f32 missing (run scripts/make_models.sh)");
  } else {
    run_model(h, "models/gen/genai_tiny_f32.onnx", &r, 1e-4, 0);
  }
  fbx_host_tensor_free(&r.prompt), fbx_host_tensor_free(&r.tokens);
  fbx_host_tensor_free(&r.prefill), fbx_host_tensor_free(&r.decode);
  fbx_host_close(h);
  printf("genai: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
