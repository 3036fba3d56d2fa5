// test_e2e_test_backend: FUSEBOX_TEST_BACKEND through a real ORT, on models/gen/cnn_small.onnx.
//   opaque               -> every node on Fusebox (ORT's own placement record), output matches
//                           ORT's CPU EP: the CNN ran on buffers the host cannot read
//   opaque:decline=CONV  -> the device's supports() is asked at GetCapability: every Conv is
//                           placed on ORT's CPU EP, the rest on Fusebox, output still matches
//   nonsense             -> session creation fails with a message naming the variable
// The variable is read when ORT creates the EP (per session), so each case sets it first.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ort_host.h"

#include "common/check.h"

static char kModel[4096];

// One run on random input (seed 7) of a session with or without Fusebox; placement counts
// (Conv nodes / other nodes on Fusebox) when with_fusebox.
static char *run(fbx_host *h, int with_fusebox, fbx_host_tensor **out, size_t *n_out, int *conv_fb, int *other_fb,
                 int *conv_total) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = with_fusebox;
  o.record_assignment = with_fusebox;
  fbx_host_session *s = NULL;
  fbx_host_tensor in = {0};
  char *err = fbx_host_session_create(h, kModel, &o, &s);
  if (!err) {
    const fbx_host_io *io = fbx_host_session_input(s, 0);
    err = fbx_host_tensor_alloc(&in, io->name, io->dtype, io->rank, io->dims);
  }
  if (!err) {
    fbx_host_tensor_fill_normal(&in, 7);
    err = fbx_host_session_run(s, &in, 1, out, n_out);
  }
  if (!err && with_fusebox) {
    fbx_host_assign *nodes = NULL;
    size_t n = 0;
    err = fbx_host_session_assignment(s, &nodes, &n);
    *conv_fb = *other_fb = *conv_total = 0;
    for (size_t i = 0; !err && i < n; i++) {
      int conv = !strcmp(nodes[i].op_type, "Conv"), fb = !strcmp(nodes[i].ep, "FuseboxExecutionProvider");
      *conv_total += conv;
      if (fb) conv ? (*conv_fb)++ : (*other_fb)++;
    }
    fbx_host_assign_free(nodes, n);
  }
  fbx_host_tensor_free(&in);
  fbx_host_session_destroy(s);
  return err;
}

static double max_diff(const fbx_host_tensor *a, const fbx_host_tensor *b) {
  size_t n = fbx_host_tensor_numel(a);
  if (n != fbx_host_tensor_numel(b)) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs(fbx_host_tensor_get(a, i) - fbx_host_tensor_get(b, i));
    if (!(d <= m)) m = d; // NaN propagates
  }
  return m;
}

int main(void) {
  if (fbx_host_find_repo_file("models/gen/cnn_small.onnx", kModel, sizeof kModel) != 0) {
    fprintf(stderr, "FAIL: models/gen/cnn_small.onnx not found (run scripts/make_models.sh)\n");
    return 1;
  }
  const char *saved = getenv("FUSEBOX_TEST_BACKEND");
  char *saved_copy = saved ? strdup(saved) : NULL;
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  fbx_host_tensor *ref = NULL, *out = NULL;
  size_t n_ref = 0, n_out = 0;
  int cf = 0, of = 0, ct = 0;
  err = run(h, 0, &ref, &n_ref, &cf, &of, &ct);
  CHECK(!err && n_ref == 1, "ORT CPU EP reference: %s", err ? err : "");
  fbx_host_err_free(err);

  setenv("FUSEBOX_TEST_BACKEND", "opaque", 1);
  err = run(h, 1, &out, &n_out, &cf, &of, &ct);
  CHECK(!err, "opaque: %s", err ? err : "");
  if (!err && n_out == 1 && n_ref == 1) {
    double d = max_diff(&out[0], &ref[0]);
    printf("opaque: %d Conv + %d other nodes on Fusebox; max |diff| vs ORT CPU EP %.3g\n", cf, of, d);
    CHECK(ct > 0 && cf == ct && of > 0, "opaque: every node on Fusebox (%d/%d Conv)", cf, ct);
    CHECK(d < 1e-4, "opaque: output matches ORT's CPU EP (max |diff| %.3g)", d);
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(out, n_out);
  out = NULL, n_out = 0;

  setenv("FUSEBOX_TEST_BACKEND", "opaque:decline=CONV", 1);
  err = run(h, 1, &out, &n_out, &cf, &of, &ct);
  CHECK(!err, "opaque:decline=CONV: %s", err ? err : "");
  if (!err && n_out == 1 && n_ref == 1) {
    double d = max_diff(&out[0], &ref[0]);
    printf("opaque:decline=CONV: %d/%d Conv and %d other nodes on Fusebox; max |diff| %.3g\n", cf, ct, of, d);
    CHECK(ct > 0 && cf == 0 && of > 0, "decline=CONV: no Conv on Fusebox, the rest is (%d Conv, %d other)", cf, of);
    CHECK(d < 1e-4, "decline=CONV: output matches ORT's CPU EP (max |diff| %.3g)", d);
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(out, n_out);
  out = NULL, n_out = 0;

  setenv("FUSEBOX_TEST_BACKEND", "nonsense", 1);
  err = run(h, 1, &out, &n_out, &cf, &of, &ct);
  CHECK(err && strstr(err, "FUSEBOX_TEST_BACKEND"), "a bad FUSEBOX_TEST_BACKEND fails session creation: %s",
        err ? err : "(accepted)");
  fbx_host_err_free(err);
  fbx_host_tensors_free(out, n_out);

  if (saved_copy) setenv("FUSEBOX_TEST_BACKEND", saved_copy, 1);
  else unsetenv("FUSEBOX_TEST_BACKEND");
  free(saved_copy);
  fbx_host_tensors_free(ref, n_ref);
  fbx_host_close(h);
  printf("%s\n", failed ? "test_e2e_test_backend: FAILED" : "test_e2e_test_backend: ok");
  return failed ? 1 : 0;
}
