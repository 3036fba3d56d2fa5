// ort_host_bind.c — IOBinding over host buffers (see ort_host.h, "IOBinding").
#include <stdlib.h>
#include <string.h>

#include <onnxruntime_c_api.h>

#include "ort_host.h"

struct fbx_host_binding {
  const OrtApi *api;
  OrtSession *sess;
  OrtIoBinding *io;
  OrtMemoryInfo *cpu;
};

static char *bind__status(const OrtApi *api, OrtStatus *st, const char *what, const char *name) {
  if (!st) return NULL;
  char *e = fbx_host_errf("%s(%s): %s (ORT code %d)", what, name ? name : "", api->GetErrorMessage(st),
                          (int)api->GetErrorCode(st));
  api->ReleaseStatus(st);
  return e;
}

char *fbx_host_binding_create(fbx_host_session *s, fbx_host_binding **out) {
  *out = NULL;
  fbx_host_binding *b = calloc(1, sizeof *b);
  if (!b) return fbx_host_errf("ort_host: out of memory");
  b->api = fbx_host_ort_api(fbx_host_session_host(s));
  b->sess = fbx_host_session_ort(s);
  char *err = bind__status(b->api, b->api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &b->cpu),
                           "CreateCpuMemoryInfo", NULL);
  if (!err) err = bind__status(b->api, b->api->CreateIoBinding(b->sess, &b->io), "CreateIoBinding", NULL);
  if (err) {
    fbx_host_binding_destroy(b);
    return err;
  }
  *out = b;
  return NULL;
}

void fbx_host_binding_destroy(fbx_host_binding *b) {
  if (!b) return;
  if (b->io) b->api->ReleaseIoBinding(b->io);
  if (b->cpu) b->api->ReleaseMemoryInfo(b->cpu);
  free(b);
}

// An OrtValue over t's buffer (ORT wants a non-NULL pointer even for an empty tensor).
static char *bind__value(fbx_host_binding *b, const char *name, const fbx_host_tensor *t, OrtValue **v) {
  static int64_t empty_dummy;
  void *p = t->data ? t->data : (void *)&empty_dummy;
  return bind__status(b->api,
                      b->api->CreateTensorWithDataAsOrtValue(b->cpu, p, t->nbytes, t->dims, (size_t)t->rank,
                                                             (ONNXTensorElementDataType)t->dtype, v),
                      "CreateTensorWithDataAsOrtValue", name);
}

// The binding keeps its own reference to the value: ours is released at once.
static char *bind__one(fbx_host_binding *b, const char *name, const fbx_host_tensor *t, int output) {
  if (!name) name = t->name;
  if (!name) return fbx_host_errf("ort_host: binding a tensor without a name");
  OrtValue *v = NULL;
  char *err = bind__value(b, name, t, &v);
  if (!err)
    err = output ? bind__status(b->api, b->api->BindOutput(b->io, name, v), "BindOutput", name)
                 : bind__status(b->api, b->api->BindInput(b->io, name, v), "BindInput", name);
  if (v) b->api->ReleaseValue(v);
  return err;
}

char *fbx_host_binding_input(fbx_host_binding *b, const char *name, const fbx_host_tensor *t) {
  return bind__one(b, name, t, 0);
}

char *fbx_host_binding_output(fbx_host_binding *b, const char *name, const fbx_host_tensor *t) {
  return bind__one(b, name, t, 1);
}

char *fbx_host_binding_run(fbx_host_binding *b) {
  return bind__status(b->api, b->api->RunWithBinding(b->sess, NULL, b->io), "RunWithBinding", NULL);
}
