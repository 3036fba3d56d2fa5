/* EP option parsing (no ORT here; see ep_options.h). */
#include "ep_options.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#define FBX_EP_OPTION_KEYS "device, device_id, threads, compile, cache_limit, tf32, ort_stream"

void fbx_ep_options_default(fbx_ep_options *o) {
  o->device = FBX_EP_DEVICE_CPU;
  o->device_id = 0;
  o->threads = 0;
  o->compile = true;
  o->cache_limit = 16;
  o->tf32 = false;
  o->ort_stream = true;
  o->device_set = o->device_id_set = false;
}

/* The numeric options: one parser, one message. note: what the range means. */
typedef struct int_option {
  const char *key;
  int lo, hi;
  const char *note;
  size_t offset; /* of the int in fbx_ep_options */
} int_option;

static const int_option int_options[] = {
    {"device_id", 0, FBX_EP_DEVICE_ID_MAX, "", offsetof(fbx_ep_options, device_id)},
    {"threads", 0, FBX_EP_THREADS_MAX, ", 0 = all cores", offsetof(fbx_ep_options, threads)},
    {"cache_limit", 1, FBX_EP_CACHE_LIMIT_MAX, "", offsetof(fbx_ep_options, cache_limit)},
};

/* The whole string as a decimal integer in [lo, hi]: digits only, so " 2", "2 ",
 * "2x", "+2", "-1", "0x10", "" and values past hi (however long) are refused. */
static bool parse_int(const char *s, int lo, int hi, int *out) {
  if (!s || !*s) return false;
  long long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
    if (v > hi) return false; /* also stops before v can overflow */
  }
  if (v < lo) return false;
  *out = (int)v;
  return true;
}

fbx_status *fbx_ep_options_set(fbx_ep_options *o, const char *key, const char *value) {
  if (!key) return FBX_ERR_ARG("Fusebox: EP option with no key");
  if (!value) value = "";
  for (size_t i = 0; i < sizeof int_options / sizeof int_options[0]; i++) {
    const int_option *io = &int_options[i];
    if (strcmp(key, io->key) != 0) continue;
    if (!parse_int(value, io->lo, io->hi, (int *)((char *)o + io->offset)))
      return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option '%s' (accepted: an integer %d..%d%s, digits only)",
                         value, io->key, io->lo, io->hi, io->note);
    if (io->offset == offsetof(fbx_ep_options, device_id)) o->device_id_set = true;
    return NULL;
  }
  if (strcmp(key, "device") == 0) {
    if (strcasecmp(value, "cpu") == 0) o->device = FBX_EP_DEVICE_CPU;
    else if (strcasecmp(value, "cuda") == 0) o->device = FBX_EP_DEVICE_CUDA;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'device' (accepted: cpu, cuda)", value);
    o->device_set = true;
  } else if (strcmp(key, "compile") == 0) {
    if (strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0) o->compile = true;
    else if (strcasecmp(value, "off") == 0 || strcmp(value, "0") == 0) o->compile = false;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'compile' (accepted: on, off)", value);
  } else if (strcmp(key, "tf32") == 0) {
    if (strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0) o->tf32 = true;
    else if (strcasecmp(value, "off") == 0 || strcmp(value, "0") == 0) o->tf32 = false;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'tf32' (accepted: on, off)", value);
  } else if (strcmp(key, "ort_stream") == 0) {
    if (strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0) o->ort_stream = true;
    else if (strcasecmp(value, "off") == 0 || strcmp(value, "0") == 0) o->ort_stream = false;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'ort_stream' (accepted: on, off)", value);
  } else {
    return FBX_ERR_ARG("Fusebox: unknown EP option '%s' (accepted: " FBX_EP_OPTION_KEYS ")", key);
  }
  return NULL;
}

/* device=cuda is accepted here; whether this build, driver and machine have a
 * GPU is answered when the EP opens the CUDA backend (backend_cuda_loader.c). */
fbx_status *fbx_ep_options_validate(const fbx_ep_options *o) {
  /* the CPU is one device: Fusebox lists one OrtEpDevice for it */
  if (o->device == FBX_EP_DEVICE_CPU && o->device_id != 0)
    return FBX_ERR_ARG("Fusebox: bad value '%d' for EP option 'device_id' (accepted: 0; device 'cpu' has one device)",
                       o->device_id);
  if (o->tf32 && o->device != FBX_EP_DEVICE_CUDA)
    return FBX_ERR_ARG("Fusebox: EP option 'tf32' applies to device 'cuda' only");
  return NULL;
}
