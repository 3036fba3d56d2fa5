/* OrtAllocator over a GPU's backend: DEFAULT memory is the backend's DEVICE
 * buffers (buffer_alloc / buffer_free), HOST_ACCESSIBLE memory its pinned
 * host buffers (host_alloc, plain aligned host memory where the backend has
 * none). ORT calls these from any thread; the backend serialises what needs
 * it. A failed allocation returns NULL, which ORT reports as out of memory. */
#include <string.h>

#include "ep_internal.h"

static void *ORT_API_CALL alloc_impl(OrtAllocator *this_, size_t size) {
  fbx_ep_allocator *a = (fbx_ep_allocator *)this_;
  if (!size) return NULL;
  fbx_backend *be = NULL;
  fbx_status *st = fbx_ep_gpu_backend(a->gpu, &be);
  void *p = NULL;
  if (!st) st = a->type == FBX_BUFT_DEVICE ? be->vt->buffer_alloc(be, size, &p) : fbx_backend_host_alloc(be, a->type, size, &p);
  if (st) {
    fbx_status_free(st); /* ORT turns NULL into its own out-of-memory error, naming the allocator */
    return NULL;
  }
  return p;
}

static void ORT_API_CALL free_impl(OrtAllocator *this_, void *p) {
  fbx_ep_allocator *a = (fbx_ep_allocator *)this_;
  if (!p) return;
  fbx_backend *be = a->gpu->be; /* made by the Alloc that returned p */
  if (!FBX_ASSERT(be)) return;
  if (a->type == FBX_BUFT_DEVICE) {
    /* Queued work may still read p (on ORT's stream ORT frees a value once its last reader's
     * Compute returned, before the GPU ran it): the block goes to the backend's cache, and its
     * next user, a Compute or a copy of ours, first waits on the device for everything the EP
     * enqueued on this GPU (ep_stream.c, ordering); a block CUDA really frees, cudaFree waits for. */
    be->vt->buffer_free(be, p);
  } else {
    fbx_backend_host_free(be, a->type, p); /* CUDA: cudaFreeHost synchronises the device first */
  }
}

static const OrtMemoryInfo *ORT_API_CALL info_impl(const OrtAllocator *this_) {
  return ((const fbx_ep_allocator *)this_)->info;
}

void fbx_ep_allocator_init(fbx_ep_allocator *a, fbx_ep_gpu *g, fbx_buft type, const OrtMemoryInfo *info) {
  memset(a, 0, sizeof *a);
  a->base.version = ORT_API_VERSION;
  a->base.Alloc = alloc_impl;
  a->base.Free = free_impl;
  a->base.Info = info_impl;
  a->base.Reserve = alloc_impl; /* initializers and the like: same memory */
  /* GetStats, AllocOnStream: optional, left NULL */
  a->gpu = g;
  a->type = type;
  a->info = info;
}
