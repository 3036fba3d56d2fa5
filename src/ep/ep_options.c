/* EP option parsing (no ORT here; see ep_options.h). */
#include "ep_options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FBX_EP_OPTION_KEYS "device, device_id, threads, compile, cache_limit, tf32"

void fbx_ep_options_default(fbx_ep_options *o) {
  o->device = FBX_EP_DEVICE_CPU;
  o->device_id = 0;
  o->threads = 0;
  o->compile = true;
  o->cache_limit = 16;
  o->tf32 = false;
}

/* Whole-string decimal integer in [lo, INT_MAX]. */
static bool parse_int(const char *s, int lo, int *out) {
  if (!s || !*s) return false;
  errno = 0;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (errno || *end != '\0' || v < lo || v > INT_MAX) return false;
  *out = (int)v;
  return true;
}

fbx_status *fbx_ep_options_set(fbx_ep_options *o, const char *key, const char *value) {
  if (!key) return FBX_ERR_ARG("Fusebox: EP option with no key");
  if (!value) value = "";
  if (strcmp(key, "device") == 0) {
    if (strcasecmp(value, "cpu") == 0) o->device = FBX_EP_DEVICE_CPU;
    else if (strcasecmp(value, "cuda") == 0) o->device = FBX_EP_DEVICE_CUDA;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'device' (accepted: cpu, cuda)", value);
  } else if (strcmp(key, "device_id") == 0) {
    if (!parse_int(value, 0, &o->device_id))
      return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'device_id' (accepted: an integer >= 0)", value);
  } else if (strcmp(key, "threads") == 0) {
    if (!parse_int(value, 0, &o->threads))
      return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'threads' (accepted: an integer >= 0, 0 = all cores)", value);
  } else if (strcmp(key, "compile") == 0) {
    if (strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0) o->compile = true;
    else if (strcasecmp(value, "off") == 0 || strcmp(value, "0") == 0) o->compile = false;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'compile' (accepted: on, off)", value);
  } else if (strcmp(key, "cache_limit") == 0) {
    if (!parse_int(value, 1, &o->cache_limit))
      return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'cache_limit' (accepted: an integer >= 1)", value);
  } else if (strcmp(key, "tf32") == 0) {
    if (strcasecmp(value, "on") == 0 || strcmp(value, "1") == 0) o->tf32 = true;
    else if (strcasecmp(value, "off") == 0 || strcmp(value, "0") == 0) o->tf32 = false;
    else return FBX_ERR_ARG("Fusebox: bad value '%s' for EP option 'tf32' (accepted: on, off)", value);
  } else {
    return FBX_ERR_ARG("Fusebox: unknown EP option '%s' (accepted: " FBX_EP_OPTION_KEYS ")", key);
  }
  return NULL;
}

/* device=cuda is accepted here; whether this build, driver and machine have a
 * GPU is answered when the EP opens the CUDA backend (backend_cuda_loader.c). */
fbx_status *fbx_ep_options_validate(const fbx_ep_options *o) {
  if (o->tf32 && o->device != FBX_EP_DEVICE_CUDA)
    return FBX_ERR_ARG("Fusebox: EP option 'tf32' applies to device 'cuda' only");
  return NULL;
}
