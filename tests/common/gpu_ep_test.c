#include "common/gpu_ep_test.h"

#include <stdio.h>
#include <string.h>

#include "common/ort_host_decode.h"

const int64_t fbx_test_dec_prompt[5] = {3, 17, 42, 5, 99}, fbx_test_dec_next[3] = {7, 120, 64};

char *fbx_test_ort_err(const OrtApi *ort, OrtStatus *st, const char *what) {
  if (!st) return NULL;
  char *e = fbx_host_errf("%s: %s", what, ort->GetErrorMessage(st));
  ort->ReleaseStatus(st);
  return e;
}

int fbx_test_close_enough(const fbx_host_tensor *a, const fbx_host_tensor *ref, double rtol, double atol,
                          const char *what) {
  fbx_host_cmp c;
  int ok = fbx_host_compare(a, ref, rtol, atol, &c);
  if (!ok)
    fprintf(stderr, "  %s: %zu of %zu elements off (max_abs %.3g)%s\n", what, c.n_bad, c.numel, c.max_abs,
            c.shape_mismatch ? ", shape/dtype differ" : "");
  return ok;
}

char *fbx_test_run_decoder(fbx_host *h, const char *model, const fbx_host_session_opts *opts,
                           fbx_host_tensor logits[4]) {
  fbx_host_session_opts cpu = fbx_host_session_opts_default();
  fbx_host_session *s = NULL;
  fbx_host_decoder d;
  memset(&d, 0, sizeof d);
  char *err = fbx_host_session_create(h, model, opts ? opts : &cpu, &s);
  if (!err) err = fbx_host_decoder_init(&d, s);
  for (int step = 0; !err && step < 4; step++) {
    err = step ? fbx_host_decoder_step(&d, &fbx_test_dec_next[step - 1], 1)
               : fbx_host_decoder_step(&d, fbx_test_dec_prompt, 5);
    if (!err) err = fbx_host_tensor_copy(&logits[step], &d.logits);
  }
  fbx_host_decoder_free(&d);
  fbx_host_session_destroy(s);
  return err;
}
