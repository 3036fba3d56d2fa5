/* Generated elementwise kernels at run time: look the launch's key up in the
 * backend's table; on a miss generate the source (cuda_ew_gen.c), get its
 * cubin (cuda_nvrtc.c: disk cache or compile), load it as a CUDA library and
 * keep it for the backend's life. A miss never happens during a graph
 * capture (loading is not a stream operation): the launch then takes the
 * interpreter, as it does when NVRTC is unavailable or a compile failed
 * (remembered, not retried). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_ew_gen.h"
#include "cuda_internal.h"
#include "cuda_nvrtc.h"

struct fbx_cuda_rtc_kernel {
  uint64_t hash;          /* 0: empty slot */
  unsigned char *key;     /* fbx_cuda_ew_gen_key bytes (owned) */
  size_t key_len;
  cudaLibrary_t lib;      /* NULL when the kernel could not be made */
  cudaKernel_t fn;
};

static uint64_t fbx__hash(const unsigned char *k, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull;
  return h ? h : 1;
}

static fbx_cuda_rtc_kernel *fbx__find(fbx_cuda_ctx *c, uint64_t h, const unsigned char *key, size_t n) {
  if (!c->n_rtc_slots) return NULL;
  for (size_t i = h & (c->n_rtc_slots - 1);; i = (i + 1) & (c->n_rtc_slots - 1)) {
    fbx_cuda_rtc_kernel *e = &c->rtc[i];
    if (!e->hash) return NULL;
    if (e->hash == h && e->key_len == n && !memcmp(e->key, key, n)) return e;
  }
}

/* A free slot for h (the table at most half full; grows x2). NULL on OOM. */
static fbx_cuda_rtc_kernel *fbx__slot(fbx_cuda_ctx *c, uint64_t h) {
  if (2 * (c->n_rtc_used + 1) > c->n_rtc_slots) {
    size_t n = c->n_rtc_slots ? 2 * c->n_rtc_slots : 64;
    fbx_cuda_rtc_kernel *t = fbx_calloc(n, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < c->n_rtc_slots; i++) {
      if (!c->rtc[i].hash) continue;
      size_t j = c->rtc[i].hash & (n - 1);
      while (t[j].hash) j = (j + 1) & (n - 1);
      t[j] = c->rtc[i];
    }
    fbx_free(c->rtc);
    c->rtc = t;
    c->n_rtc_slots = n;
  }
  size_t i = h & (c->n_rtc_slots - 1);
  while (c->rtc[i].hash) i = (i + 1) & (c->n_rtc_slots - 1);
  c->n_rtc_used++;
  return &c->rtc[i];
}

/* Make the kernel of e (generate, cubin, load). Failure leaves e->fn NULL. */
static void fbx__make(fbx_cuda_ctx *c, fbx_cuda_rtc_kernel *e, const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog,
                      bool idx32) {
  char *src = NULL;
  void *bin = NULL;
  size_t size = 0;
  bool disk = false;
  fbx_status *st = fbx_cuda_ew_gen_source(a, prog, idx32, &src);
  if (!st) st = fbx_cuda_nvrtc_cubin(src, c->arch, &bin, &size, &disk);
  if (!st) {
    cudaError_t r = cudaLibraryLoadData(&e->lib, bin, NULL, NULL, 0, NULL, NULL, 0);
    if (r == cudaSuccess) r = cudaLibraryGetKernel(&e->fn, e->lib, FBX_CUDA_EW_GEN_ENTRY);
    if (r != cudaSuccess) {
      st = FBX_ERR("device 'cuda': loading a generated kernel: %s", cudaGetErrorString(r));
      if (e->lib) cudaLibraryUnload(e->lib);
      e->lib = NULL;
      e->fn = NULL;
    }
  }
  if (st) {
    if (getenv("FUSEBOX_VERBOSE")) fprintf(stderr, "[fusebox] %s (the interpreter runs it)\n", fbx_status_message(st));
    fbx_status_free(st);
  }
  c->rtc_made++;
  if (disk) c->rtc_disk++;
  fbx_free(src);
  fbx_free(bin);
}

bool fbx_cuda_ew_rtc_launch(fbx_cuda_ctx *c, const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog, int *err) {
  *err = 0;
  if (!c->arch || !fbx_cuda_nvrtc_available(NULL)) return false;
  bool idx32 = fbx_cuda_ew_gen_idx32(a);
  unsigned char key[FBX_CUDA_EW_GEN_KEY_MAX];
  size_t n = fbx_cuda_ew_gen_key(a, prog, idx32, key);
  uint64_t h = fbx__hash(key, n);
  fbx_cuda_rtc_kernel *e = fbx__find(c, h, key, n);
  if (!e) {
    if (fbx_cuda_capturing(c)) return false; /* made on a run that is not captured */
    unsigned char *k = fbx_malloc(n);
    if (!k || !(e = fbx__slot(c, h))) {
      fbx_free(k);
      return false;
    }
    memcpy(k, key, n);
    *e = (fbx_cuda_rtc_kernel){.hash = h, .key = k, .key_len = n};
    fbx__make(c, e, a, prog, idx32);
  }
  if (!e->fn) return false;
  long long blocks = (a->n + 255) / 256;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  void *args[] = {(void *)a};
  /* the generated kernel begins with griddepcontrol.wait (cuda_ew_gen.c), so it may launch with
   * programmatic stream serialization like the .cu kernels (cuda_launch.cuh) */
  cudaLaunchAttribute attr = {.id = cudaLaunchAttributeProgrammaticStreamSerialization};
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {.gridDim = {(unsigned)blocks, 1, 1}, .blockDim = {256, 1, 1}, .stream = c->stream,
                            .attrs = &attr, .numAttrs = fbx_cuda_pdl ? 1 : 0};
  *err = (int)cudaLaunchKernelExC(&cfg, (const void *)e->fn, args);
  return true;
}

void fbx_cuda_ew_rtc_destroy(fbx_cuda_ctx *c) {
  for (size_t i = 0; i < c->n_rtc_slots; i++) {
    if (!c->rtc[i].hash) continue;
    if (c->rtc[i].lib) cudaLibraryUnload(c->rtc[i].lib);
    fbx_free(c->rtc[i].key);
  }
  fbx_free(c->rtc);
  c->rtc = NULL;
  c->n_rtc_slots = c->n_rtc_used = 0;
}
