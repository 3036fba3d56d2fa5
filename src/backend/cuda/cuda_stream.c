/* Events and handed-out streams of the CUDA backend (backend.h, "events",
 * "streams", set_stream): what the EP's OrtSyncStreamImpl is made of.
 *
 *   event   : a cudaEvent_t without timing. Events of any CUDA backend of
 *             the process can be waited for by any other (one primary
 *             context per device), which the EP uses to order the GPU's
 *             data transfer queue and the sessions' queues.
 *   stream  : a non-blocking cudaStream_t the caller (ORT) drives; its
 *             handle is the cudaStream_t itself, so ORT and other EPs can
 *             use it as one.
 *   binding : set_stream makes c->stream the given cudaStream_t; every
 *             kernel, copy, cuBLASLt call and capture of the backend reads
 *             c->stream under c->lock, so from then on all of it goes there.
 *             A switch records c->switch_ev on the old stream and makes the
 *             new one wait for it (device side): the backend's buffers,
 *             parameter tables and scratch are reused in stream order
 *             across the switch as within one stream. The backend's own
 *             stream is remembered in c->own_stream (destroy uses it).
 *   errors  : kernels report bad indices in c->err_flag, read at
 *             synchronize; a run on a caller's stream never synchronises, so
 *             leaving that stream enqueues a copy of the flag into pinned
 *             c->err_async (no wait), and the next bind reports a set flag as
 *             an error of that Compute ("... in an earlier run on ORT's
 *             stream") and clears it: one or more runs late, never lost. */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

struct fbx_backend_event {
  cudaEvent_t e;
};

struct fbx_backend_stream {
  cudaStream_t s;
};

static fbx_cuda_ctx *ctx_of(fbx_backend *be) { return be->ctx; }

fbx_status *fbx_cuda_event_create(fbx_backend *be, fbx_backend_event **out) {
  fbx_cuda_ctx *c = ctx_of(be);
  *out = NULL;
  fbx_backend_event *ev = fbx_calloc(1, sizeof *ev);
  if (!ev) return FBX_ERR_OOM();
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming), "cudaEventCreate");
  if (st) {
    fbx_free(ev);
    return st;
  }
  *out = ev;
  return NULL;
}

void fbx_cuda_event_destroy(fbx_backend *be, fbx_backend_event *ev) {
  (void)be;
  if (!ev) return;
  cudaEventDestroy(ev->e); /* released once the work it marks is done */
  fbx_free(ev);
}

fbx_status *fbx_cuda_event_record(fbx_backend *be, fbx_backend_event *ev) {
  fbx_cuda_ctx *c = ctx_of(be);
  fbx_cuda_lock(c);
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaEventRecord(ev->e, c->stream), "cudaEventRecord");
  pthread_mutex_unlock(&c->lock);
  return st;
}

fbx_status *fbx_cuda_event_wait(fbx_backend *be, fbx_backend_event *ev) {
  fbx_cuda_ctx *c = ctx_of(be);
  fbx_cuda_lock(c);
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaStreamWaitEvent(c->stream, ev->e, 0), "cudaStreamWaitEvent");
  pthread_mutex_unlock(&c->lock);
  return st;
}

fbx_status *fbx_cuda_event_synchronize(fbx_backend *be, fbx_backend_event *ev) {
  fbx_cuda_ctx *c = ctx_of(be);
  cudaSetDevice(c->device);
  return fbx_cuda_check(cudaEventSynchronize(ev->e), "cudaEventSynchronize");
}

fbx_status *fbx_cuda_stream_create(fbx_backend *be, fbx_backend_stream **out) {
  fbx_cuda_ctx *c = ctx_of(be);
  *out = NULL;
  fbx_backend_stream *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  cudaSetDevice(c->device);
  fbx_status *st = fbx_cuda_check(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking), "cudaStreamCreate");
  if (st) {
    fbx_free(s);
    return st;
  }
  *out = s;
  return NULL;
}

void fbx_cuda_stream_destroy(fbx_backend *be, fbx_backend_stream *s) {
  if (!s) return;
  fbx_cuda_ctx *c = ctx_of(be);
  cudaSetDevice(c->device);
  cudaStreamSynchronize(s->s); /* nothing of ours still runs on it */
  cudaStreamDestroy(s->s);
  fbx_free(s);
}

void *fbx_cuda_stream_handle(fbx_backend *be, fbx_backend_stream *s) {
  (void)be;
  return s ? (void *)s->s : NULL;
}

fbx_status *fbx_cuda_stream_record(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev) {
  cudaSetDevice(ctx_of(be)->device);
  return fbx_cuda_check(cudaEventRecord(ev->e, s->s), "cudaEventRecord (stream)");
}

fbx_status *fbx_cuda_stream_wait(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev) {
  cudaSetDevice(ctx_of(be)->device);
  return fbx_cuda_check(cudaStreamWaitEvent(s->s, ev->e, 0), "cudaStreamWaitEvent (stream)");
}

fbx_status *fbx_cuda_stream_synchronize(fbx_backend *be, fbx_backend_stream *s) {
  cudaSetDevice(ctx_of(be)->device);
  return fbx_cuda_check(cudaStreamSynchronize(s->s), "cudaStreamSynchronize (stream)");
}

fbx_status *fbx_cuda_set_stream(fbx_backend *be, void *native) {
  fbx_cuda_ctx *c = ctx_of(be);
  fbx_cuda_lock(c); /* waits out another thread's capture */
  cudaSetDevice(c->device);
  fbx_status *st = NULL;
  if (!c->own_stream) c->own_stream = c->stream;
  cudaStream_t next = native ? (cudaStream_t)native : c->own_stream;
  if (next != c->stream) {
    if (!native && c->stream != c->own_stream) { /* leaving a caller's stream: its runs' error flag, no wait */
      if (!c->err_async) {
        st = fbx_cuda_check(cudaMallocHost((void **)&c->err_async, sizeof(int)), "pinned error flag (stream)");
        if (!st) *c->err_async = 0;
      }
      if (!st)
        st = fbx_cuda_check(cudaMemcpyAsync(c->err_async, c->err_flag, sizeof(int), cudaMemcpyDeviceToHost, c->stream),
                            "set_stream: read error flag");
    }
    if (!st && !c->switch_ev)
      st = fbx_cuda_check(cudaEventCreateWithFlags(&c->switch_ev, cudaEventDisableTiming), "cudaEventCreate (switch)");
    if (!st) st = fbx_cuda_check(cudaEventRecord(c->switch_ev, c->stream), "set_stream: cudaEventRecord");
    if (!st) st = fbx_cuda_check(cudaStreamWaitEvent(next, c->switch_ev, 0), "set_stream: cudaStreamWaitEvent");
    if (!st) c->stream = next;
  }
  int code = native && !st && c->err_async ? *(volatile int *)c->err_async : 0;
  if (code) { /* an earlier run's device-side error; cleared in stream order on the bound stream */
    *c->err_async = 0;
    cudaMemsetAsync(c->err_flag, 0, sizeof(int), c->stream);
    st = fbx_cuda_err_code_status(code, " (in an earlier run on ORT's stream)");
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

void fbx_cuda_stream_fini(fbx_cuda_ctx *c) {
  if (c->own_stream) c->stream = c->own_stream; /* never destroy a stream the caller owns */
  if (c->switch_ev) cudaEventDestroy(c->switch_ev);
  c->switch_ev = NULL;
}
