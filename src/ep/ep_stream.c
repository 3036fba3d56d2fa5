/* OrtSyncStreamImpl and OrtSyncNotificationImpl for our GPUs: ORT's streams
 * are streams of the GPU's own backend (backend.h, "streams"; a cudaStream_t
 * on CUDA, whose handle is what ORT and KernelContext_GetGPUComputeStream
 * hand out), and notifications are that backend's events.
 *
 *   GetHandle          the native handle (cudaStream_t); NULL for a host stream
 *   Flush              the host waits for the stream (ORT calls it at the end
 *                      of every Run of the main graph: the run's one wait)
 *   OnSessionRunEnd    nothing to do
 *   Activate           record the notification's event on its stream
 *   WaitOnDevice(c)    c waits for the event on the device when c is one of our
 *                      streams of the same GPU; another EP's stream (or another
 *                      GPU's): the host waits, which is never wrong
 *   WaitOnHost         the host waits for the event
 *
 * A host stream (gpu NULL) serves a session that runs on the CPU but was
 * given a GPU OrtEpDevice too: ORT asks for a stream per GPU memory info it
 * knows and insists on getting one; nothing is ever queued on it.
 *
 * Ordering across queues (ep_internal.h): fbx_ep_gpu_order_before/after keep
 * the GPU's tail event, so the data transfer's queue and every session's
 * bound stream form one chain on the device. */
#include <string.h>

#include "../base/alloc.h"
#include "ep_internal.h"

/* OrtSyncStreamImpl, OrtEp/OrtEpFactory CreateSyncStreamForDevice and SyncStream_GetImpl: API 23 */
#if ORT_API_VERSION < 23
#error "Fusebox's streams need ORT's plugin-EP stream API (ORT_API_VERSION >= 23)"
#endif

typedef struct fbx_ep_notification {
  OrtSyncNotificationImpl base; /* first */
  fbx_ep_gpu *gpu;              /* NULL: a host stream's (every call does nothing) */
  fbx_backend_stream *s;        /* the producer stream (ORT releases notifications before their stream) */
  fbx_backend_event *ev;        /* owned, gpu->be's */
} fbx_ep_notification;

/* ---- ordering ---- */

static fbx_status *tail_of(fbx_ep_gpu *g, fbx_backend_event **out) {
  if (!g->tail) {
    fbx_backend *gb = NULL;
    FBX_TRY(fbx_ep_gpu_backend(g, &gb));
    FBX_TRY(fbx_backend_event_create(gb, &g->tail));
  }
  *out = g->tail;
  return NULL;
}

fbx_status *fbx_ep_gpu_order_before(fbx_ep_gpu *g, fbx_backend *be) {
  pthread_mutex_lock(&g->order_mu);
  fbx_status *st = g->tail ? fbx_backend_event_wait(be, g->tail) : NULL;
  pthread_mutex_unlock(&g->order_mu);
  return st;
}

fbx_status *fbx_ep_gpu_order_after(fbx_ep_gpu *g, fbx_backend *be) {
  pthread_mutex_lock(&g->order_mu);
  fbx_backend_event *t = NULL;
  bool had = g->tail != NULL;
  fbx_status *st = tail_of(g, &t);
  /* the new mark must cover the old one too: another queue may have recorded it after our order_before */
  if (!st && had) st = fbx_backend_event_wait(be, t);
  if (!st) st = fbx_backend_event_record(be, t);
  pthread_mutex_unlock(&g->order_mu);
  return st;
}

/* ---- notifications ---- */

static void ORT_API_CALL note_release(OrtSyncNotificationImpl *this_ptr) {
  fbx_ep_notification *n = (fbx_ep_notification *)this_ptr;
  if (n->gpu) fbx_backend_event_destroy(n->gpu->be, n->ev);
  fbx_free(n);
}

static OrtStatus *ORT_API_CALL note_activate(OrtSyncNotificationImpl *this_ptr) {
  fbx_ep_notification *n = (fbx_ep_notification *)this_ptr;
  if (!n->gpu) return NULL;
  return fbx_ep_status_to_ort(n->gpu->be->vt->stream_record(n->gpu->be, n->s, n->ev));
}

static OrtStatus *ORT_API_CALL note_wait_on_host(OrtSyncNotificationImpl *this_ptr) {
  fbx_ep_notification *n = (fbx_ep_notification *)this_ptr;
  if (!n->gpu) return NULL;
  return fbx_ep_status_to_ort(fbx_backend_event_synchronize(n->gpu->be, n->ev));
}

static OrtStatus *ORT_API_CALL note_wait_on_device(OrtSyncNotificationImpl *this_ptr, OrtSyncStream *consumer) {
  fbx_ep_notification *n = (fbx_ep_notification *)this_ptr;
  if (!n->gpu) return NULL;
  fbx_backend_stream *cs = fbx_ep_stream_of(consumer, n->gpu);
  fbx_backend *be = n->gpu->be;
  if (cs) return fbx_ep_status_to_ort(be->vt->stream_wait(be, cs, n->ev));
  return fbx_ep_status_to_ort(fbx_backend_event_synchronize(be, n->ev)); /* not a queue we can order */
}

/* ---- streams ---- */

static void ORT_API_CALL stream_release(OrtSyncStreamImpl *this_ptr) {
  fbx_ep_stream *s = (fbx_ep_stream *)this_ptr;
  if (s->gpu && s->s) s->gpu->be->vt->stream_destroy(s->gpu->be, s->s);
  fbx_free(s);
}

static void *ORT_API_CALL stream_get_handle(OrtSyncStreamImpl *this_ptr) {
  fbx_ep_stream *s = (fbx_ep_stream *)this_ptr;
  return s->gpu ? s->gpu->be->vt->stream_handle(s->gpu->be, s->s) : NULL;
}

static OrtStatus *ORT_API_CALL stream_create_notification(OrtSyncStreamImpl *this_ptr,
                                                          OrtSyncNotificationImpl **out) {
  fbx_ep_stream *s = (fbx_ep_stream *)this_ptr;
  *out = NULL;
  fbx_ep_notification *n = fbx_calloc(1, sizeof *n);
  if (!n) return fbx_ep_status_to_ort(FBX_ERR_OOM());
  n->base.ort_version_supported = ORT_API_VERSION;
  n->base.Release = note_release;
  n->base.Activate = note_activate;
  n->base.WaitOnDevice = note_wait_on_device;
  n->base.WaitOnHost = note_wait_on_host;
  n->gpu = s->gpu;
  n->s = s->s;
  if (s->gpu) {
    fbx_status *st = fbx_backend_event_create(s->gpu->be, &n->ev);
    if (!st && !n->ev) st = FBX_ERR("Fusebox: %s: the GPU's backend has no events", s->gpu->be->vt->name);
    if (st) {
      fbx_free(n);
      return fbx_ep_status_to_ort(st);
    }
  }
  *out = &n->base;
  return NULL;
}

static OrtStatus *ORT_API_CALL stream_flush(OrtSyncStreamImpl *this_ptr) {
  fbx_ep_stream *s = (fbx_ep_stream *)this_ptr;
  if (!s->gpu) return NULL;
  return fbx_ep_status_to_ort(s->gpu->be->vt->stream_synchronize(s->gpu->be, s->s));
}

static OrtStatus *ORT_API_CALL stream_on_run_end(OrtSyncStreamImpl *this_ptr) {
  (void)this_ptr; /* Flush, which ORT calls next for the main graph, is the wait */
  return NULL;
}

fbx_backend_stream *fbx_ep_stream_of(OrtSyncStream *stream, const fbx_ep_gpu *g) {
  const OrtSyncStreamImpl *impl = stream ? FBX_ORT_EP->SyncStream_GetImpl(stream) : NULL;
  if (!impl || impl->Release != stream_release) return NULL; /* another EP's stream */
  const fbx_ep_stream *s = (const fbx_ep_stream *)impl;
  return s->gpu == g ? s->s : NULL;
}

fbx_status *fbx_ep_stream_create(fbx_ep_gpu *g, OrtSyncStreamImpl **out) {
  *out = NULL;
  fbx_backend *be = NULL;
  if (g) {
    FBX_TRY(fbx_ep_gpu_backend(g, &be));
    if (!fbx_backend_has_streams(be))
      return FBX_ERR_NOTIMPL("Fusebox: device '%s' hands out no streams", be->vt->name);
  }
  fbx_ep_stream *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  s->base.ort_version_supported = ORT_API_VERSION;
  s->base.Release = stream_release;
  s->base.GetHandle = stream_get_handle;
  s->base.CreateNotification = stream_create_notification;
  s->base.Flush = stream_flush;
  s->base.OnSessionRunEnd = stream_on_run_end;
  s->gpu = g;
  if (g) {
    fbx_status *st = be->vt->stream_create(be, &s->s);
    if (st) {
      fbx_free(s);
      return st;
    }
  }
  *out = &s->base;
  return NULL;
}
