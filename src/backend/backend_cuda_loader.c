/* Loads libfusebox_cuda.so on first use and forwards to its one entry point
 * (cuda/cuda_abi.h). libfusebox_ep.so links no CUDA library: without the
 * CUDA library, a driver or a GPU, opening the device fails with a status
 * that says which, and the CPU backend is unaffected. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend_cuda.h"
#include "cuda/cuda_abi.h"

#define FBX__CUDA_LIB_NAME "libfusebox_cuda.so"

static pthread_mutex_t fbx__cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static void *fbx__cuda_handle;      /* stays loaded for the process' lifetime */
static fbx_cuda_entry fbx__cuda_entry;
static char fbx__cuda_loaded_path[4096];

/* dir of the module (the .so or executable) that holds this function + name */
static fbx_status *fbx__cuda_default_path(char *buf, size_t size) {
  Dl_info di;
  if (!dladdr((void *)&fbx_cuda_backend_open, &di) || !di.dli_fname)
    return FBX_ERR("Fusebox: device 'cuda': cannot locate the loading module (dladdr failed)");
  const char *slash = strrchr(di.dli_fname, '/');
  int n = slash ? snprintf(buf, size, "%.*s/%s", (int)(slash - di.dli_fname), di.dli_fname, FBX__CUDA_LIB_NAME)
                : snprintf(buf, size, "%s", FBX__CUDA_LIB_NAME);
  if (n < 0 || (size_t)n >= size) return FBX_ERR("Fusebox: device 'cuda': library path too long");
  return NULL;
}

/* Called with fbx__cuda_lock held. */
static fbx_status *fbx__cuda_load(const char *library) {
  char path[4096];
  if (library) {
    if (snprintf(path, sizeof path, "%s", library) >= (int)sizeof path)
      return FBX_ERR_ARG("Fusebox: device 'cuda': library path too long");
  } else {
    FBX_TRY(fbx__cuda_default_path(path, sizeof path));
  }
  if (fbx__cuda_handle) {
    if (strcmp(path, fbx__cuda_loaded_path) == 0) return NULL;
    return FBX_ERR_ARG("Fusebox: device 'cuda': %s is already loaded; cannot also load %s",
                       fbx__cuda_loaded_path, path);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return FBX_ERR_NOTIMPL("Fusebox: device 'cuda': cannot load the CUDA backend library %s (%s); "
                           "a build without the CUDA toolkit is CPU-only", path, dlerror());
  fbx_cuda_entry_get_fn get = (fbx_cuda_entry_get_fn)dlsym(h, FBX_CUDA_ENTRY_SYMBOL);
  if (!get) {
    dlclose(h);
    return FBX_ERR("Fusebox: device 'cuda': %s has no entry point %s", path, FBX_CUDA_ENTRY_SYMBOL);
  }
  const fbx_cuda_abi_check check = FBX_CUDA_ABI_CHECK_INIT;
  fbx_cuda_entry e = {0};
  fbx_status *st = get(&check, &e);
  if (!st && (!e.open || !e.supports)) st = FBX_ERR("Fusebox: device 'cuda': %s returned an empty entry table", path);
  if (st) {
    dlclose(h);
    return st;
  }
  fbx__cuda_handle = h;
  fbx__cuda_entry = e;
  snprintf(fbx__cuda_loaded_path, sizeof fbx__cuda_loaded_path, "%s", path);
  return NULL;
}

fbx_status *fbx_cuda_backend_open(const fbx_cuda_options *opt, fbx_backend **out) {
  *out = NULL;
  fbx_cuda_options o = {0};
  if (opt) o = *opt;
  if (o.device_id < 0) return FBX_ERR_ARG("Fusebox: device 'cuda': bad device_id %d", o.device_id);
  pthread_mutex_lock(&fbx__cuda_lock);
  fbx_status *st = fbx__cuda_load(o.library);
  pthread_mutex_unlock(&fbx__cuda_lock);
  FBX_TRY(st);
  return fbx__cuda_entry.open(&o, out);
}

int fbx_cuda_device_count(fbx_status **why) {
  if (why) *why = NULL;
  pthread_mutex_lock(&fbx__cuda_lock);
  fbx_status *st = fbx__cuda_load(NULL);
  pthread_mutex_unlock(&fbx__cuda_lock);
  if (!st && !fbx__cuda_entry.device_count)
    st = FBX_ERR("Fusebox: device 'cuda': %s predates the device count entry", fbx__cuda_loaded_path);
  int n = st ? 0 : fbx__cuda_entry.device_count();
  if (!st && n == 0) st = FBX_ERR_NOTIMPL("Fusebox: device 'cuda': no NVIDIA GPU found");
  if (why) *why = st;
  else fbx_status_free(st);
  return n;
}

bool fbx_cuda_backend_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs,
                               int n_inputs, char *reason, size_t reason_size) {
  if (!fbx__cuda_entry.supports || !be) {
    if (reason && reason_size) snprintf(reason, reason_size, "device 'cuda': backend not loaded");
    return false;
  }
  return fbx__cuda_entry.supports(be, node, inputs, n_inputs, reason, reason_size);
}
