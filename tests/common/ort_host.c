// ort_host.c — ORT library loading, environment, sessions, run, placement info.
// Tensors, .npy and comparison live in ort_host_tensor.c.
#include "ort_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

struct fbx_host {
  void *dl;                 // dlopen handle of libonnxruntime
  const OrtApi *api;
  OrtEnv *env;
  OrtAllocator *alloc;      // default CPU allocator (owned by ORT)
  OrtMemoryInfo *cpu_mem;
  char ort_path[PATH_MAX];
  char ep_path[PATH_MAX];   // "" if not found
  int ep_registered;
};

struct fbx_host_session {
  fbx_host *h;
  OrtSession *sess;
  size_t n_in, n_out;
  fbx_host_io *in, *out;
  const char **in_names, **out_names;  // point into in[]/out[] names (for Run)
};

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

void fbx_host_err_free(char *err) { free(err); }

char *fbx_host_errf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s ? s : strdup("ort_host: out of memory");
}

// Convert an OrtStatus into a heap message (and release the status). NULL -> NULL.
static char *host__status(const OrtApi *api, OrtStatus *st, const char *what) {
  if (!st) return NULL;
  char *e = fbx_host_errf("%s: %s (ORT code %d)", what, api->GetErrorMessage(st),
                          (int)api->GetErrorCode(st));
  api->ReleaseStatus(st);
  return e;
}

// Free memory ORT allocated with the default allocator (its status cannot usefully fail).
static void host__free(fbx_host *h, void *p) {
  OrtStatus *st = h->api->AllocatorFree(h->alloc, p);
  if (st) h->api->ReleaseStatus(st);
}

#define HOST_TRY(h, call, what)                                   \
  do {                                                            \
    char *e__ = host__status((h)->api, (h)->api->call, (what));  \
    if (e__) { err = e__; goto fail; }                            \
  } while (0)

void fbx_host_settle(int ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

double fbx_host_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------
// Path resolution
// ---------------------------------------------------------------------------------------

static int host__is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// Directory of the running executable into dir (no trailing slash). 0 on success.
static int host__exe_dir(char *dir, size_t cap) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *slash = strrchr(buf, '/');
  if (!slash) return -1;
  *slash = 0;
  if (strlen(buf) + 1 > cap) return -1;
  strcpy(dir, buf);
  return 0;
}

// Look for `rel` in the exe dir and up to `levels` parents. 0 and out filled on success.
static int host__find_up(const char *rel, int levels, char *out, size_t cap) {
  char dir[PATH_MAX];
  if (host__exe_dir(dir, sizeof dir) != 0) return -1;
  for (int i = 0; i <= levels; i++) {
    char cand[PATH_MAX + 256];
    snprintf(cand, sizeof cand, "%s/%s", dir, rel);
    if (host__is_file(cand) && strlen(cand) < cap) {
      char real[PATH_MAX];
      strcpy(out, realpath(cand, real) ? real : cand);
      return 0;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) break;
    *slash = 0;
  }
  return -1;
}

int fbx_host_find_repo_file(const char *rel, char *out, size_t cap) {
  const char *root = getenv("FUSEBOX_REPO");
  if (root && *root) {
    char cand[PATH_MAX + 256];
    snprintf(cand, sizeof cand, "%s/%s", root, rel);
    if (host__is_file(cand) && strlen(cand) < cap) {
      strcpy(out, cand);
      return 0;
    }
  }
  if (host__find_up(rel, 5, out, cap) == 0) return 0;
  if (host__is_file(rel) && strlen(rel) < cap) {  // relative to the working directory
    strcpy(out, rel);
    return 0;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------
// Library / environment
// ---------------------------------------------------------------------------------------

char *fbx_host_open(const char *ort_lib, const char *ep_lib, fbx_host **out) {
  *out = NULL;
  char *err = NULL;
  fbx_host *h = calloc(1, sizeof *h);
  if (!h) return fbx_host_errf("ort_host: out of memory");

  // ---- ORT library path ----
  if (!ort_lib || !*ort_lib) ort_lib = getenv("FUSEBOX_ORT_LIB");
  if (ort_lib && *ort_lib) {
    snprintf(h->ort_path, sizeof h->ort_path, "%s", ort_lib);
  } else if (host__find_up(".deps/lib/libonnxruntime.1.30.so", 4, h->ort_path,
                           sizeof h->ort_path) != 0) {
    err = fbx_host_errf("ort_host: ONNX Runtime library not found: pass --ort LIB or set "
                        "FUSEBOX_ORT_LIB (looked for .deps/lib/libonnxruntime.1.30.so above the "
                        "executable's directory)");
    goto fail;
  }

  // ---- EP library path (resolved now, registered lazily) ----
  if (!ep_lib || !*ep_lib) ep_lib = getenv("FUSEBOX_EP_LIB");
  if (ep_lib && *ep_lib) {
    snprintf(h->ep_path, sizeof h->ep_path, "%s", ep_lib);
  } else if (host__find_up("libfusebox_ep.so", 3, h->ep_path, sizeof h->ep_path) != 0) {
    h->ep_path[0] = 0;
  }

  // ---- load ORT ----
  h->dl = dlopen(h->ort_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h->dl) {
    err = fbx_host_errf("ort_host: dlopen(%s) failed: %s", h->ort_path, dlerror());
    goto fail;
  }
  typedef const OrtApiBase *(*get_api_base_fn)(void);
  get_api_base_fn get_base = (get_api_base_fn)dlsym(h->dl, "OrtGetApiBase");
  if (!get_base) {
    err = fbx_host_errf("ort_host: %s has no OrtGetApiBase: %s", h->ort_path, dlerror());
    goto fail;
  }
  const OrtApiBase *base = get_base();
  h->api = base ? base->GetApi(ORT_API_VERSION) : NULL;
  if (!h->api) {
    err = fbx_host_errf("ort_host: %s (version %s) does not provide ORT API version %d",
                        h->ort_path, base ? base->GetVersionString() : "?", ORT_API_VERSION);
    goto fail;
  }
  // ORT's own log: ERROR by default (its placement warnings are noise for our tools);
  // FUSEBOX_ORT_LOG=0..4 (verbose .. fatal) overrides.
  int level = ORT_LOGGING_LEVEL_ERROR;
  const char *lv = getenv("FUSEBOX_ORT_LOG");
  if (lv && *lv >= '0' && *lv <= '4' && !lv[1]) level = *lv - '0';
  HOST_TRY(h, CreateEnv((OrtLoggingLevel)level, "fusebox_host", &h->env), "CreateEnv");
  HOST_TRY(h, GetAllocatorWithDefaultOptions(&h->alloc), "GetAllocatorWithDefaultOptions");
  HOST_TRY(h, CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &h->cpu_mem),
           "CreateCpuMemoryInfo");
  *out = h;
  return NULL;

fail:
  fbx_host_close(h);
  return err;
}

void fbx_host_close(fbx_host *h) {
  if (!h) return;
  if (h->api) {
    if (h->cpu_mem) h->api->ReleaseMemoryInfo(h->cpu_mem);
    if (h->env && h->ep_registered) {
      OrtStatus *st = h->api->UnregisterExecutionProviderLibrary(h->env, FBX_HOST_EP_REGISTRATION);
      if (st) h->api->ReleaseStatus(st);
    }
    if (h->env) h->api->ReleaseEnv(h->env);
  }
  // ORT keeps process-wide state (thread pools, logging) that does not survive dlclose well;
  // keep the library mapped for the life of the process.
  free(h);
}

const char *fbx_host_ort_path(const fbx_host *h) { return h->ort_path; }
const char *fbx_host_ep_path(const fbx_host *h) { return h->ep_path; }
const void *fbx_host_ort_api(const fbx_host *h) { return h->api; }
void *fbx_host_ort_env(const fbx_host *h) { return h->env; }

const char *fbx_host_ort_version(const fbx_host *h) {
  typedef const OrtApiBase *(*get_api_base_fn)(void);
  get_api_base_fn get_base = (get_api_base_fn)dlsym(h->dl, "OrtGetApiBase");
  return get_base ? get_base()->GetVersionString() : "?";
}

char *fbx_host_register_fusebox(fbx_host *h) {
  if (h->ep_registered) return NULL;
  char *err = NULL;
  if (!h->ep_path[0])
    return fbx_host_errf("ort_host: libfusebox_ep.so not found: pass --ep LIB or set "
                         "FUSEBOX_EP_LIB (looked next to the executable and up to 3 parents)");
  if (!host__is_file(h->ep_path))
    return fbx_host_errf("ort_host: EP library %s does not exist", h->ep_path);
  // Keep the EP library mapped after ORT unloads it at teardown: leak reports at exit
  // can then name its frames (and third-party ones inside it) instead of stale addresses.
  // The handle is deliberately never closed.
  (void)dlopen(h->ep_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  HOST_TRY(h, RegisterExecutionProviderLibrary(h->env, FBX_HOST_EP_REGISTRATION, h->ep_path),
           "RegisterExecutionProviderLibrary(Fusebox)");
  h->ep_registered = 1;
  return NULL;
fail:
  return err;
}

// ---------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------

fbx_host_session_opts fbx_host_session_opts_default(void) {
  fbx_host_session_opts o;
  memset(&o, 0, sizeof o);
  o.opt_level = -1;
  return o;
}

static void host__io_free(fbx_host_io *io) {
  free(io->name);
  for (int d = 0; d < FBX_HOST_MAX_RANK; d++) free(io->dim_names[d]);
  memset(io, 0, sizeof *io);
}

// Fill io from a type info (released by caller).
static char *host__io_fill(fbx_host *h, const OrtTypeInfo *ti, fbx_host_io *io) {
  char *err = NULL;
  enum ONNXType ot;
  io->rank = -1;
  for (int d = 0; d < FBX_HOST_MAX_RANK; d++) {
    io->dims[d] = -1;
    io->dim_names[d] = strdup("");
    if (!io->dim_names[d]) return fbx_host_errf("ort_host: out of memory");
  }
  HOST_TRY(h, GetOnnxTypeFromTypeInfo(ti, &ot), "GetOnnxTypeFromTypeInfo");
  if (ot != ONNX_TYPE_TENSOR) {
    io->dtype = FBX_HOST_UNDEFINED;
    return NULL;
  }
  const OrtTensorTypeAndShapeInfo *tsi = NULL;
  HOST_TRY(h, CastTypeInfoToTensorInfo(ti, &tsi), "CastTypeInfoToTensorInfo");
  ONNXTensorElementDataType et;
  HOST_TRY(h, GetTensorElementType(tsi, &et), "GetTensorElementType");
  io->dtype = (int)et;
  size_t nd = 0;
  HOST_TRY(h, GetDimensionsCount(tsi, &nd), "GetDimensionsCount");
  if (nd > FBX_HOST_MAX_RANK)
    return fbx_host_errf("ort_host: %s has rank %zu > %d", io->name, nd, FBX_HOST_MAX_RANK);
  io->rank = (int)nd;
  if (nd) {
    HOST_TRY(h, GetDimensions(tsi, io->dims, nd), "GetDimensions");
    const char *sym[FBX_HOST_MAX_RANK] = {0};
    HOST_TRY(h, GetSymbolicDimensions(tsi, sym, nd), "GetSymbolicDimensions");
    for (size_t d = 0; d < nd; d++) {
      if (sym[d] && *sym[d]) {
        free(io->dim_names[d]);
        io->dim_names[d] = strdup(sym[d]);
        if (!io->dim_names[d]) return fbx_host_errf("ort_host: out of memory");
      }
    }
  }
  return NULL;
fail:
  return err;
}

static char *host__describe(fbx_host_session *s, int outputs) {
  fbx_host *h = s->h;
  char *err = NULL;
  size_t n = 0;
  if (outputs) HOST_TRY(h, SessionGetOutputCount(s->sess, &n), "SessionGetOutputCount");
  else HOST_TRY(h, SessionGetInputCount(s->sess, &n), "SessionGetInputCount");
  fbx_host_io *ios = calloc(n ? n : 1, sizeof *ios);
  const char **names = calloc(n ? n : 1, sizeof *names);
  if (outputs) { s->out = ios; s->out_names = names; s->n_out = n; }
  else { s->in = ios; s->in_names = names; s->n_in = n; }
  if (!ios || !names) return fbx_host_errf("ort_host: out of memory");
  for (size_t i = 0; i < n; i++) {
    char *nm = NULL;
    OrtTypeInfo *ti = NULL;
    if (outputs) {
      HOST_TRY(h, SessionGetOutputName(s->sess, i, h->alloc, &nm), "SessionGetOutputName");
      HOST_TRY(h, SessionGetOutputTypeInfo(s->sess, i, &ti), "SessionGetOutputTypeInfo");
    } else {
      HOST_TRY(h, SessionGetInputName(s->sess, i, h->alloc, &nm), "SessionGetInputName");
      HOST_TRY(h, SessionGetInputTypeInfo(s->sess, i, &ti), "SessionGetInputTypeInfo");
    }
    ios[i].name = strdup(nm);
    host__free(h, nm);
    names[i] = ios[i].name;
    err = ios[i].name ? host__io_fill(h, ti, &ios[i]) : fbx_host_errf("ort_host: out of memory");
    h->api->ReleaseTypeInfo(ti);
    if (err) return err;
  }
  return NULL;
fail:
  return err;
}

// Append the Fusebox EP to `so`: every device it offers, or only its CPU / GPU ones
// (o->fusebox_devices).
static char *host__append_fusebox(fbx_host *h, OrtSessionOptions *so,
                                  const fbx_host_session_opts *o) {
  char *err = fbx_host_register_fusebox(h);
  if (err) return err;
  const OrtEpDevice *const *devs = NULL;
  size_t n_devs = 0;
  HOST_TRY(h, GetEpDevices(h->env, &devs, &n_devs), "GetEpDevices");
  const OrtEpDevice *mine[16];
  size_t n_mine = 0;
  for (size_t i = 0; i < n_devs && n_mine < 16; i++) {
    const char *nm = h->api->EpDevice_EpName(devs[i]);
    if (!nm || strcmp(nm, FBX_HOST_EP_NAME) != 0) continue;
    int gpu = h->api->HardwareDevice_Type(h->api->EpDevice_Device(devs[i])) == OrtHardwareDeviceType_GPU;
    if ((o->fusebox_devices == FBX_HOST_DEVICES_CPU && gpu) || (o->fusebox_devices == FBX_HOST_DEVICES_GPU && !gpu))
      continue;
    mine[n_mine++] = devs[i];
  }
  if (n_mine == 0)
    return fbx_host_errf("ort_host: no OrtEpDevice with EP name %s after registering %s "
                         "(%zu device(s) in total)", FBX_HOST_EP_NAME, h->ep_path, n_devs);
  HOST_TRY(h, SessionOptionsAppendExecutionProvider_V2(so, h->env, mine, n_mine, o->ep_keys,
                                                       o->ep_vals, o->n_ep_opts),
           "SessionOptionsAppendExecutionProvider_V2(Fusebox)");
  return NULL;
fail:
  return err;
}

char *fbx_host_session_create(fbx_host *h, const char *model_path,
                              const fbx_host_session_opts *opts, fbx_host_session **out) {
  *out = NULL;
  fbx_host_session_opts def = fbx_host_session_opts_default();
  const fbx_host_session_opts *o = opts ? opts : &def;
  char *err = NULL;
  OrtSessionOptions *so = NULL;
  fbx_host_session *s = calloc(1, sizeof *s);
  if (!s) return fbx_host_errf("ort_host: out of memory");
  s->h = h;
  if (!host__is_file(model_path)) {
    err = fbx_host_errf("ort_host: model %s: %s", model_path, strerror(errno ? errno : ENOENT));
    goto fail;
  }
  HOST_TRY(h, CreateSessionOptions(&so), "CreateSessionOptions");
  if (o->intra_threads > 0)
    HOST_TRY(h, SetIntraOpNumThreads(so, o->intra_threads), "SetIntraOpNumThreads");
  if (o->opt_level >= 0)
    HOST_TRY(h, SetSessionGraphOptimizationLevel(so, (GraphOptimizationLevel)o->opt_level),
             "SetSessionGraphOptimizationLevel");
  for (size_t i = 0; i < o->n_cfg; i++) {
    char what[256];
    snprintf(what, sizeof what, "AddSessionConfigEntry(%s)", o->cfg_keys[i]);
    HOST_TRY(h, AddSessionConfigEntry(so, o->cfg_keys[i], o->cfg_vals[i]), what);
  }
  if (o->record_assignment)
    HOST_TRY(h, AddSessionConfigEntry(so, "session.record_ep_graph_assignment_info", "1"),
             "AddSessionConfigEntry(session.record_ep_graph_assignment_info)");
  if (o->profile_prefix) HOST_TRY(h, EnableProfiling(so, o->profile_prefix), "EnableProfiling");
  if (o->use_fusebox) {
    err = host__append_fusebox(h, so, o);
    if (err) goto fail;
  }
  {
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "CreateSession(%s)", model_path);
    HOST_TRY(h, CreateSession(h->env, model_path, so, &s->sess), what);
  }
  h->api->ReleaseSessionOptions(so);
  so = NULL;
  if ((err = host__describe(s, 0)) || (err = host__describe(s, 1))) goto fail;
  *out = s;
  return NULL;

fail:
  if (so) h->api->ReleaseSessionOptions(so);
  fbx_host_session_destroy(s);
  return err;
}

void fbx_host_session_destroy(fbx_host_session *s) {
  if (!s) return;
  if (s->sess) s->h->api->ReleaseSession(s->sess);
  for (size_t i = 0; i < s->n_in; i++) host__io_free(&s->in[i]);
  for (size_t i = 0; i < s->n_out; i++) host__io_free(&s->out[i]);
  free(s->in);
  free(s->out);
  free(s->in_names);
  free(s->out_names);
  free(s);
}

size_t fbx_host_session_input_count(const fbx_host_session *s) { return s->n_in; }
size_t fbx_host_session_output_count(const fbx_host_session *s) { return s->n_out; }
const fbx_host_io *fbx_host_session_input(const fbx_host_session *s, size_t i) {
  return i < s->n_in ? &s->in[i] : NULL;
}
const fbx_host_io *fbx_host_session_output(const fbx_host_session *s, size_t i) {
  return i < s->n_out ? &s->out[i] : NULL;
}
long fbx_host_session_input_find(const fbx_host_session *s, const char *name) {
  for (size_t i = 0; i < s->n_in; i++)
    if (strcmp(s->in[i].name, name) == 0) return (long)i;
  return -1;
}
long fbx_host_session_output_find(const fbx_host_session *s, const char *name) {
  for (size_t i = 0; i < s->n_out; i++)
    if (strcmp(s->out[i].name, name) == 0) return (long)i;
  return -1;
}
void *fbx_host_session_ort(const fbx_host_session *s) { return s->sess; }
fbx_host *fbx_host_session_host(const fbx_host_session *s) { return s->h; }

// ---------------------------------------------------------------------------------------
// Run
// ---------------------------------------------------------------------------------------

// Copy an ORT output value into an owned tensor.
static char *host__copy_out(fbx_host *h, OrtValue *v, const char *name, fbx_host_tensor *t) {
  char *err = NULL;
  OrtTensorTypeAndShapeInfo *info = NULL;
  enum ONNXType vt;
  HOST_TRY(h, GetValueType(v, &vt), "GetValueType");
  if (vt != ONNX_TYPE_TENSOR) return fbx_host_errf("ort_host: output %s is not a tensor", name);
  HOST_TRY(h, GetTensorTypeAndShape(v, &info), "GetTensorTypeAndShape");
  ONNXTensorElementDataType et;
  size_t nd = 0;
  int64_t dims[FBX_HOST_MAX_RANK];
  HOST_TRY(h, GetTensorElementType(info, &et), "GetTensorElementType");
  HOST_TRY(h, GetDimensionsCount(info, &nd), "GetDimensionsCount");
  if (nd > FBX_HOST_MAX_RANK) {
    err = fbx_host_errf("ort_host: output %s has rank %zu > %d", name, nd, FBX_HOST_MAX_RANK);
    goto fail;
  }
  if (nd) HOST_TRY(h, GetDimensions(info, dims, nd), "GetDimensions");
  h->api->ReleaseTensorTypeAndShapeInfo(info);
  info = NULL;
  if ((err = fbx_host_tensor_alloc_for_copy(t, name, (int)et, (int)nd, dims))) goto fail;
  if (t->nbytes) {
    void *src = NULL;
    HOST_TRY(h, GetTensorMutableData(v, &src), "GetTensorMutableData");
    memcpy(t->data, src, t->nbytes);
  }
  return NULL;
fail:
  if (info) h->api->ReleaseTensorTypeAndShapeInfo(info);
  return err;
}

char *fbx_host_session_run(fbx_host_session *s, const fbx_host_tensor *inputs, size_t n_inputs,
                           fbx_host_tensor **outputs, size_t *n_outputs) {
  fbx_host *h = s->h;
  char *err = NULL;
  *outputs = NULL;
  *n_outputs = 0;
  OrtValue **in_vals = calloc(s->n_in ? s->n_in : 1, sizeof *in_vals);
  OrtValue **out_vals = calloc(s->n_out ? s->n_out : 1, sizeof *out_vals);
  fbx_host_tensor *outs = calloc(s->n_out ? s->n_out : 1, sizeof *outs);
  if (!in_vals || !out_vals || !outs) {
    err = fbx_host_errf("ort_host: out of memory");
    goto fail;
  }
  for (size_t j = 0; j < n_inputs; j++) {
    if (!inputs[j].name || fbx_host_session_input_find(s, inputs[j].name) < 0) {
      err = fbx_host_errf("ort_host: input '%s' is not an input of the model",
                          inputs[j].name ? inputs[j].name : "(null)");
      goto fail;
    }
  }
  for (size_t i = 0; i < s->n_in; i++) {
    const fbx_host_tensor *t = NULL;
    for (size_t j = 0; j < n_inputs && !t; j++)
      if (strcmp(inputs[j].name, s->in[i].name) == 0) t = &inputs[j];
    if (!t) {
      err = fbx_host_errf("ort_host: model input '%s' was not given", s->in[i].name);
      goto fail;
    }
    // ORT wants a non-NULL pointer even for an empty tensor.
    static int64_t empty_dummy;
    void *p = t->data ? t->data : (void *)&empty_dummy;
    char what[512];
    snprintf(what, sizeof what, "CreateTensorWithDataAsOrtValue(%s)", t->name);
    HOST_TRY(h, CreateTensorWithDataAsOrtValue(h->cpu_mem, p, t->nbytes, t->dims, (size_t)t->rank,
                                               (ONNXTensorElementDataType)t->dtype, &in_vals[i]),
             what);
  }
  HOST_TRY(h, Run(s->sess, NULL, s->in_names, (const OrtValue *const *)in_vals, s->n_in,
                  s->out_names, s->n_out, out_vals),
           "Run");
  for (size_t i = 0; i < s->n_out; i++) {
    if ((err = host__copy_out(h, out_vals[i], s->out[i].name, &outs[i]))) goto fail;
  }
  *outputs = outs;
  *n_outputs = s->n_out;
  outs = NULL;
fail:
  for (size_t i = 0; in_vals && i < s->n_in; i++)
    if (in_vals[i]) h->api->ReleaseValue(in_vals[i]);
  for (size_t i = 0; out_vals && i < s->n_out; i++)
    if (out_vals[i]) h->api->ReleaseValue(out_vals[i]);
  free(in_vals);
  free(out_vals);
  if (outs) fbx_host_tensors_free(outs, s->n_out);
  return err;
}

char *fbx_host_session_end_profiling(fbx_host_session *s, char **path) {
  fbx_host *h = s->h;
  char *err = NULL;
  char *p = NULL;
  *path = NULL;
  HOST_TRY(h, SessionEndProfiling(s->sess, h->alloc, &p), "SessionEndProfiling");
  *path = strdup(p ? p : "");
  if (p) host__free(h, p);
  return NULL;
fail:
  return err;
}

// ---------------------------------------------------------------------------------------
// Placement (ORT's own view)
// ---------------------------------------------------------------------------------------

void fbx_host_assign_free(fbx_host_assign *nodes, size_t n) {
  if (!nodes) return;
  for (size_t i = 0; i < n; i++) {
    free(nodes[i].ep);
    free(nodes[i].op_type);
    free(nodes[i].domain);
    free(nodes[i].node);
  }
  free(nodes);
}

char *fbx_host_session_assignment(fbx_host_session *s, fbx_host_assign **nodes, size_t *n) {
  fbx_host *h = s->h;
  char *err = NULL;
  *nodes = NULL;
  *n = 0;
  const OrtEpAssignedSubgraph *const *sgs = NULL;
  size_t n_sg = 0;
  fbx_host_assign *arr = NULL;
  size_t k = 0;
  HOST_TRY(h, Session_GetEpGraphAssignmentInfo(s->sess, &sgs, &n_sg),
           "Session_GetEpGraphAssignmentInfo");
  size_t total = 0;
  for (size_t i = 0; i < n_sg; i++) {
    const OrtEpAssignedNode *const *ns = NULL;
    size_t nn = 0;
    HOST_TRY(h, EpAssignedSubgraph_GetNodes(sgs[i], &ns, &nn), "EpAssignedSubgraph_GetNodes");
    total += nn;
  }
  arr = calloc(total ? total : 1, sizeof *arr);
  if (!arr) return fbx_host_errf("ort_host: out of memory");
  for (size_t i = 0; i < n_sg; i++) {
    const char *ep = NULL;
    const OrtEpAssignedNode *const *ns = NULL;
    size_t nn = 0;
    HOST_TRY(h, EpAssignedSubgraph_GetEpName(sgs[i], &ep), "EpAssignedSubgraph_GetEpName");
    HOST_TRY(h, EpAssignedSubgraph_GetNodes(sgs[i], &ns, &nn), "EpAssignedSubgraph_GetNodes");
    for (size_t j = 0; j < nn && k < total; j++, k++) {
      const char *nm = NULL, *dom = NULL, *op = NULL;
      HOST_TRY(h, EpAssignedNode_GetName(ns[j], &nm), "EpAssignedNode_GetName");
      HOST_TRY(h, EpAssignedNode_GetDomain(ns[j], &dom), "EpAssignedNode_GetDomain");
      HOST_TRY(h, EpAssignedNode_GetOperatorType(ns[j], &op), "EpAssignedNode_GetOperatorType");
      arr[k].ep = strdup(ep ? ep : "");
      arr[k].node = strdup(nm ? nm : "");
      arr[k].domain = strdup(dom ? dom : "");
      arr[k].op_type = strdup(op ? op : "");
      arr[k].subgraph = (int)i;
    }
  }
  *nodes = arr;
  *n = k;
  return NULL;
fail:
  fbx_host_assign_free(arr, k);
  return err;
}
