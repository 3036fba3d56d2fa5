/* The CUDA backend loader (backend_cuda_loader.c): every way of not having
 * a GPU is a clear status naming the device, never a crash, and the CPU
 * build stays free of CUDA.
 *   - a missing library -> NOT_IMPLEMENTED naming the path;
 *   - a bad device id -> INVALID_ARG;
 *   - the built library (when this build has one) either opens a device or
 *     says "no NVIDIA GPU found" (this is what a machine without a GPU sees);
 *   - supports() on no backend is false with a reason. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_cuda.h"
#include "common/check.h"

int main(void) {
  fbx_backend *be = NULL;
  fbx_cuda_options bad = {.device_id = 0, .library = "/nonexistent/dir/libfusebox_cuda.so"};
  fbx_status *st = fbx_cuda_backend_open(&bad, &be);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED && !be, "missing library -> NOT_IMPLEMENTED");
  CHECK(st && strstr(fbx_status_message(st), "device 'cuda'") && strstr(fbx_status_message(st), "/nonexistent/dir"),
        "missing library message names the device and the path: %s", fbx_status_message(st));
  fbx_status_free(st);

  fbx_cuda_options neg = {.device_id = -1};
  st = fbx_cuda_backend_open(&neg, &be);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG, "device_id -1 -> INVALID_ARG (%s)", fbx_status_message(st));
  fbx_status_free(st);

  char why[256] = "";
  CHECK(!fbx_cuda_backend_supports(NULL, NULL, NULL, 0, why, sizeof why) && strstr(why, "device 'cuda'"),
        "supports without a backend is false: %s", why);

  /* the library of this build, if the toolkit was found */
  char exe[PATH_MAX], lib[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(lib, sizeof lib, "%s/../libfusebox_cuda.so", exe);
  if (access(lib, R_OK) != 0) {
    printf("test_cuda_loader: no %s in this build (CPU-only): skipping the library checks\n", lib);
  } else {
    fbx_cuda_options o = {.device_id = 0, .library = lib};
    st = fbx_cuda_backend_open(&o, &be);
    if (st) {
      CHECK(fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED && strstr(fbx_status_message(st), "no NVIDIA GPU found"),
            "built library without a GPU: %s", fbx_status_message(st));
      printf("test_cuda_loader: no GPU here: %s\n", fbx_status_message(st));
      fbx_status_free(st);
    } else {
      CHECK(be && be->vt && strcmp(be->vt->name, "cuda") == 0 && !be->vt->host_visible, "opened a cuda backend");
      fbx_backend_destroy(be);
      fbx_cuda_options far = {.device_id = 4096, .library = lib};
      st = fbx_cuda_backend_open(&far, &be);
      CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG && strstr(fbx_status_message(st), "out of range"),
            "device_id 4096 -> out of range (%s)", fbx_status_message(st));
      fbx_status_free(st);
    }
    /* once loaded, another path is refused rather than mixed */
    fbx_cuda_options other = {.device_id = 0, .library = "/tmp/other/libfusebox_cuda.so"};
    st = fbx_cuda_backend_open(&other, &be);
    CHECK(st != NULL, "a second, different library path is refused or fails: %s", fbx_status_message(st));
    fbx_status_free(st);
  }
  printf("test_cuda_loader: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
