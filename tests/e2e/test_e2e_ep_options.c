// test_e2e_ep_options: EP options reach Fusebox through ORT (SessionOptionsAppendExecutionProvider_V2)
// and bad ones fail session creation with a message that names the key:
//   threads=abc  -> error mentioning "threads"
//   treads=2     -> error mentioning "treads" (unknown key)
//   compile=maybe -> error mentioning "compile"
//   device_id=1 (one CPU device), threads=" 2" / "2 " / "2x" / "-1" / huge / "" , cache_limit=0
//                 -> error naming the key, the bad value and the accepted values
// and good ones (threads=1, compile=off, cache_limit=4) give a working session whose output
// matches the hand-computed x + y.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/ort_host.h"

#include "common/check.h"

static const char *kModel = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";

static char *make(fbx_host *h, const char *k, const char *v, fbx_host_session **s) {
  const char *keys[1] = {k}, *vals[1] = {v};
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  o.ep_keys = keys;
  o.ep_vals = vals;
  o.n_ep_opts = 1;
  return fbx_host_session_create(h, kModel, &o, s);
}

static void expect_error(fbx_host *h, const char *k, const char *v) {
  fbx_host_session *s = NULL;
  char *err = make(h, k, v, &s);
  CHECK(err != NULL, "%s='%s': session creation succeeded, expected an error", k, v);
  if (err) {
    CHECK(strstr(err, k) != NULL, "%s='%s': error does not name the key: %s", k, v, err);
    CHECK(strstr(err, "(accepted: ") != NULL, "%s='%s': error does not give the accepted values: %s", k, v, err);
    printf("%s='%s' -> %s\n", k, v, err);
  }
  fbx_host_err_free(err);
  fbx_host_session_destroy(s);
}

static void expect_ok(fbx_host *h, const char *k, const char *v) {
  fbx_host_session *s = NULL;
  fbx_host_tensor in[2] = {{0}}, *outs = NULL;
  size_t n_out = 0;
  char *err = make(h, k, v, &s);
  for (int i = 0; i < 2 && !err; i++) {
    const fbx_host_io *io = fbx_host_session_input(s, (size_t)i);
    err = fbx_host_tensor_alloc(&in[i], io->name, io->dtype, io->rank, io->dims);
    if (!err) fbx_host_tensor_fill_normal(&in[i], 5 + (uint64_t)i);
  }
  if (!err) err = fbx_host_session_run(s, in, 2, &outs, &n_out);
  CHECK(err == NULL, "%s=%s: %s", k, v, err ? err : "");
  if (!err && n_out == 1) {
    const float *a = in[0].data, *b = in[1].data, *y = outs[0].data;
    size_t n = fbx_host_tensor_numel(&in[0]), bad = 0;
    for (size_t i = 0; i < n; i++) bad += fabsf(y[i] - (a[i] + b[i])) > 1e-6f;
    CHECK(bad == 0, "%s=%s: %zu elements of x + y wrong", k, v, bad);
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(outs, n_out);
  fbx_host_tensor_free(&in[0]);
  fbx_host_tensor_free(&in[1]);
  fbx_host_session_destroy(s);
}

int main(void) {
  if (access(kModel, R_OK) != 0) {
    fprintf(stderr, "FAIL: %s missing (Debian libonnx-testdata)\n", kModel);
    return 1;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    fbx_host_err_free(err);
    return 1;
  }
  expect_error(h, "threads", "abc");
  expect_error(h, "treads", "2");
  expect_error(h, "compile", "maybe");
  /* issue 8, defect 7: these were accepted silently */
  expect_error(h, "device_id", "1");
  expect_error(h, "threads", " 2");
  expect_error(h, "threads", "2 ");
  expect_error(h, "threads", "2x");
  expect_error(h, "threads", "-1");
  expect_error(h, "threads", "100000");
  expect_error(h, "threads", "");
  expect_error(h, "cache_limit", "0");
  expect_error(h, "cache_limit", "4096");
  expect_ok(h, "device_id", "0");
  expect_ok(h, "threads", "1");
  expect_ok(h, "compile", "off");
  expect_ok(h, "cache_limit", "4");
  fbx_host_close(h);
  printf("%s\n", failed ? "test_e2e_ep_options: FAILED" : "test_e2e_ep_options: ok");
  return failed ? 1 : 0;
}
