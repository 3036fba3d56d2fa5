/* EP option parsing: defaults, every key, bad values and unknown keys name
 * the key and the accepted values; numbers are digits only, within a documented range. ep_options.c has no ORT dependency and is
 * not part of fusebox_core, so it is compiled into this program directly. */
#include <stdio.h>
#include <string.h>

#include "ep/ep_options.c"

#include "common/check.h"

/* Sets key=value; returns 1 on success. On failure checks the message has all needles. */
static int set_ok(fbx_ep_options *o, const char *k, const char *v) {
  fbx_status *s = fbx_ep_options_set(o, k, v);
  int ok = s == NULL;
  fbx_status_free(s);
  return ok;
}
static int set_fails_with(fbx_ep_options *o, const char *k, const char *v, const char *n1, const char *n2) {
  fbx_status *s = fbx_ep_options_set(o, k, v);
  if (!s) return 0;
  const char *m = fbx_status_message(s);
  int ok = fbx_status_code_of(s) == FBX_STATUS_INVALID_ARG && strstr(m, n1) && (!n2 || strstr(m, n2));
  if (!ok) fprintf(stderr, "  message was: %s\n", m);
  fbx_status_free(s);
  return ok;
}

int main(void) {
  fbx_ep_options o;
  fbx_ep_options_default(&o);
  CHECK(o.device == FBX_EP_DEVICE_CPU && o.device_id == 0 && o.threads == 0 && o.compile && o.cache_limit == 16,
        "defaults");
  fbx_status *s = fbx_ep_options_validate(&o);
  CHECK(s == NULL, "defaults validate");
  fbx_status_free(s);

  /* whether the host gave device / device_id: the GPU OrtEpDevice decides the rest (ep_ep.c) */
  CHECK(!o.device_set && !o.device_id_set, "defaults: neither device nor device_id given");
  CHECK(set_ok(&o, "device_id", "0") && o.device_id_set && !o.device_set, "device_id=0 marks device_id given");
  CHECK(set_ok(&o, "device", "cuda") && o.device_set && o.device == FBX_EP_DEVICE_CUDA, "device=cuda marks device given");
  CHECK(set_fails_with(&o, "device", "gpu", "'device'", "cpu, cuda") && o.device == FBX_EP_DEVICE_CUDA,
        "device=gpu refused, value kept");
  fbx_ep_options_default(&o);
  CHECK(!o.device_set && !o.device_id_set && o.device == FBX_EP_DEVICE_CPU, "defaults clear the flags");

  CHECK(set_ok(&o, "threads", "2") && o.threads == 2, "threads=2");
  CHECK(set_ok(&o, "threads", "0") && o.threads == 0, "threads=0");
  CHECK(set_ok(&o, "threads", "256") && o.threads == 256, "threads=256 (the maximum)");
  /* every numeric option refuses the same malformed strings, naming the key and the range */
  static const char *const bad_numbers[] = {"-1", "2x", "", " 2", "2 ", " 2 ", "+2", "0x10", "2.0", "1e3",
                                            "99999999999", "99999999999999999999999999", "\t2", "2\n"};
  static const char *const keys[] = {"threads", "device_id", "cache_limit"};
  static const char *const ranges[] = {"0..256", "0..1023", "1..1024"};
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
      char key[32];
      snprintf(key, sizeof key, "'%s'", keys[k]);
      CHECK(set_fails_with(&o, keys[k], bad_numbers[i], key, ranges[k]), "%s='%s' rejected naming key and range",
            keys[k], bad_numbers[i]);
    }
  fbx_ep_options_default(&o);
  CHECK(set_fails_with(&o, "threads", "257", "'threads'", "0..256") && o.threads == 0,
        "threads=257 rejected, value unchanged");
  CHECK(set_ok(&o, "device_id", "3") && o.device_id == 3, "device_id=3 parses");
  s = fbx_ep_options_validate(&o);
  CHECK(s && strstr(fbx_status_message(s), "'device_id'") && strstr(fbx_status_message(s), "accepted: 0"),
        "device_id=3 refused by validate: the CPU is one device (%s)", s ? fbx_status_message(s) : "accepted");
  fbx_status_free(s);
  CHECK(set_ok(&o, "device_id", "0") && o.device_id == 0, "device_id=0");
  s = fbx_ep_options_validate(&o);
  CHECK(s == NULL, "device_id=0 validates");
  fbx_status_free(s);
  CHECK(set_ok(&o, "compile", "off") && !o.compile, "compile=off");
  CHECK(set_ok(&o, "compile", "on") && o.compile, "compile=on");
  CHECK(set_fails_with(&o, "compile", "maybe", "'compile'", "on, off"), "compile=maybe rejected");
  CHECK(set_ok(&o, "cache_limit", "1") && o.cache_limit == 1, "cache_limit=1");
  CHECK(set_fails_with(&o, "cache_limit", "0", "'cache_limit'", "1..1024"), "cache_limit=0 rejected");
  CHECK(set_ok(&o, "cache_limit", "1024") && o.cache_limit == 1024, "cache_limit=1024 (the maximum)");
  CHECK(set_fails_with(&o, "cache_limit", "1025", "'cache_limit'", "1..1024"), "cache_limit=1025 rejected");
  CHECK(set_ok(&o, "device", "cpu") && o.device == FBX_EP_DEVICE_CPU, "device=cpu");
  CHECK(set_fails_with(&o, "device", "tpu", "'device'", "cpu, cuda"), "device=tpu rejected");
  CHECK(set_ok(&o, "device", "cuda") && o.device == FBX_EP_DEVICE_CUDA, "device=cuda parses");
  s = fbx_ep_options_validate(&o);
  CHECK(!s, "device=cuda passes validate (the backend says at creation whether a GPU is there)");
  fbx_status_free(s);
  CHECK(set_ok(&o, "tf32", "on") && o.tf32, "tf32=on");
  CHECK(set_fails_with(&o, "tf32", "fast", "'tf32'", "on, off"), "tf32=fast rejected");
  CHECK(set_ok(&o, "device", "cpu"), "device=cpu again");
  s = fbx_ep_options_validate(&o);
  CHECK(s && strstr(fbx_status_message(s), "'tf32' applies to device 'cuda' only"), "tf32 with device=cpu refused");
  fbx_status_free(s);
  o.tf32 = false;
  CHECK(set_fails_with(&o, "treads", "2", "unknown EP option 'treads'",
                       "(accepted: device, device_id, threads, compile, cache_limit, tf32, ort_stream)"),
        "unknown key names key and accepted keys");
  CHECK(set_fails_with(&o, "", "2", "unknown EP option ''", NULL), "empty key rejected");
  printf("options: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
