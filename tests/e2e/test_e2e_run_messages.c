// test_e2e_run_messages: a Run that leaves a model input out fails with a message that names the
// input, the node reading it and the fused subgraph (issue 8, defect 7; before, the text was
// "FBX_ORT->GetTensorTypeAndShape(v, &info): the ort_value must contain a constructed tensor").
//   test_add (inputs x, y; an unnamed Add): Run fed only x -> "input 1, 'y' (read by an unnamed
//     Add node), has no value at Run", in the fused node's error, Fusebox's name first
//   fanin model (tests/common/partition_models.h, N=3, one input X): Run fed nothing -> names 'X' and
//     "read by node 'add<i>' (Add)"
// and after each failed Run the same session still runs correctly with every input fed.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

#include "common/partition_models.h"
#include "common/ort_host.h"

#include "common/check.h"

static const char *kAdd = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";

/* Runs s fed with inputs[0..n_fed) only (all model inputs are in inputs); returns ORT's
 * error text (heap) or NULL when Run succeeded. */
static char *run_fed(fbx_host *h, fbx_host_session *s, fbx_host_tensor *inputs, size_t n_fed) {
  const OrtApi *api = fbx_host_ort_api(h);
  OrtMemoryInfo *mi = NULL;
  OrtValue *vals[4] = {0}, *out = NULL;
  const char *names[4];
  const char *out_name = fbx_host_session_output(s, 0)->name;
  char *msg = NULL;
  OrtStatus *st = api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mi);
  for (size_t i = 0; i < n_fed && !st; i++) {
    names[i] = inputs[i].name;
    st = api->CreateTensorWithDataAsOrtValue(mi, inputs[i].data, inputs[i].nbytes, inputs[i].dims,
                                             (size_t)inputs[i].rank, (ONNXTensorElementDataType)inputs[i].dtype,
                                             &vals[i]);
  }
  if (!st) st = api->Run(fbx_host_session_ort(s), NULL, names, (const OrtValue *const *)vals, n_fed, &out_name, 1, &out);
  if (st) {
    msg = fbx_host_errf("%s", api->GetErrorMessage(st));
    api->ReleaseStatus(st);
  }
  for (size_t i = 0; i < 4; i++)
    if (vals[i]) api->ReleaseValue(vals[i]);
  if (out) api->ReleaseValue(out);
  if (mi) api->ReleaseMemoryInfo(mi);
  return msg;
}

/* Session on model with Fusebox; feeds n_fed of its inputs and checks the error has every needle,
 * then checks a full Run works. */
static void check_missing(fbx_host *h, const char *model, size_t n_fed, const char *const *needles, int n_needles) {
  fbx_host_session *s = NULL;
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  fbx_host_tensor in[4] = {{0}};
  char *err = fbx_host_session_create(h, model, &o, &s);
  size_t n_in = s ? fbx_host_session_input_count(s) : 0;
  for (size_t i = 0; i < n_in && i < 4 && !err; i++) {
    const fbx_host_io *io = fbx_host_session_input(s, i);
    err = fbx_host_tensor_alloc(&in[i], io->name, io->dtype, io->rank, io->dims);
    if (!err) fbx_host_tensor_fill_normal(&in[i], 3 + i);
  }
  CHECK(err == NULL, "%s: %s", model, err ? err : "");
  if (!err) {
    char *msg = run_fed(h, s, in, n_fed);
    CHECK(msg != NULL, "%s: Run with %zu of %zu inputs succeeded, expected an error", model, n_fed, n_in);
    for (int i = 0; msg && i < n_needles; i++)
      CHECK(strstr(msg, needles[i]) != NULL, "%s: the error lacks \"%s\": %s", model, needles[i], msg);
    if (msg) printf("%zu of %zu inputs fed -> %s\n", n_fed, n_in, msg);
    fbx_host_err_free(msg);
    fbx_host_tensor *outs = NULL;
    size_t n_out = 0;
    err = fbx_host_session_run(s, in, n_in, &outs, &n_out);
    CHECK(err == NULL && n_out == 1, "%s: the session still runs with every input: %s", model, err ? err : "");
    fbx_host_tensors_free(outs, n_out);
  }
  fbx_host_err_free(err);
  for (int i = 0; i < 4; i++) fbx_host_tensor_free(&in[i]);
  fbx_host_session_destroy(s);
}

int main(void) {
  if (access(kAdd, R_OK) != 0) {
    fprintf(stderr, "FAIL: %s missing (Debian libonnx-testdata)\n", kAdd);
    return 1;
  }
  fbx_host *h = NULL;
  char *err = fbx_host_open(NULL, NULL, &h);
  char fanin[64];
  snprintf(fanin, sizeof fanin, "/tmp/test_e2e_run_messages_%d.onnx", (int)getpid());
  if (!err) err = fbx_fanin_model_write(fanin, 3, 4);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    fbx_host_err_free(err);
    fbx_host_close(h);
    return 1;
  }
  const char *add_needles[] = {"Fusebox: FuseboxExecutionProvider", "input 1, 'y' (read by an unnamed Add node)",
                               "has no value at Run"};
  check_missing(h, kAdd, 1, add_needles, 3);
  const char *fanin_needles[] = {"Fusebox: FuseboxExecutionProvider", "input 0, 'X' (read by node 'add",
                                 "has no value at Run"};
  check_missing(h, fanin, 0, fanin_needles, 3);
  unlink(fanin);
  fbx_host_close(h);
  printf("%s\n", failed ? "test_e2e_run_messages: FAILED" : "test_e2e_run_messages: ok");
  return failed ? 1 : 0;
}
