/* OrtEpProfilerImpl over the trace module's profiler store (src/trace/trace_profiler.h). */
#include "ep_profiler.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "../base/alloc.h"
#include "../trace/trace_profiler.h"

enum { BATCH = 256, MAX_ARGS = 33 };

typedef struct fbx_ep_profiler {
  OrtEpProfilerImpl base; /* first: ORT's pointer is ours */
  const OrtApi *api;
  const OrtEpApi *ep_api;
  fbx_trace_session *session;
  int64_t offset_ns;   /* ORT profiling clock at StartProfiling, relative to its start */
  uint64_t start_ns;   /* our clock at StartProfiling */
  bool started;
} fbx_ep_profiler;

typedef struct end_ctx {
  fbx_ep_profiler *p;
  OrtProfilingEventsContainer *container;
  OrtProfilingEvent *batch[BATCH];
  size_t n;
  OrtStatus *err; /* first failure; later events are skipped */
} end_ctx;

static void flush_batch(end_ctx *c) {
  if (c->n && !c->err) c->err = c->p->ep_api->ProfilingEventsContainer_AddEvents(c->container,
                                    (const OrtProfilingEvent *const *)c->batch, c->n);
  for (size_t i = 0; i < c->n; i++) c->p->ep_api->ReleaseProfilingEvent(c->batch[i]);
  c->n = 0;
}

static void visit(void *ctx, const fbx_trace_prof_event *ev) {
  end_ctx *c = ctx;
  if (c->err) return;
  fbx_ep_profiler *p = c->p;
  const char *keys[MAX_ARGS], *vals[MAX_ARGS];
  size_t n = 0;
  keys[n] = "fbx_cat";
  vals[n++] = ev->cat;
  for (int i = 0; i < ev->n_args && n < MAX_ARGS; i++) {
    keys[n] = ev->keys[i];
    vals[n++] = ev->values[i];
  }
  int64_t ts_us = (p->offset_ns + (int64_t)(ev->t0_ns - p->start_ns)) / 1000;
  int64_t dur_us = (int64_t)(ev->t1_ns - ev->t0_ns) / 1000;
  OrtProfilingEvent *e = NULL;
  c->err = p->ep_api->CreateProfilingEvent(OrtProfilingEventCategory_KERNEL, (int32_t)getpid(), ev->tid,
                                           ev->name, ts_us, dur_us, keys, vals, n, &e);
  if (c->err) return;
  c->batch[c->n++] = e;
  if (c->n == BATCH) flush_batch(c);
}

static void ORT_API_CALL prof_release(OrtEpProfilerImpl *this_ptr) {
  fbx_ep_profiler *p = (fbx_ep_profiler *)this_ptr;
  if (!p) return;
  if (p->started) fbx_trace_profiler_end();
  fbx_free(p);
}

static OrtStatus *ORT_API_CALL prof_start(OrtEpProfilerImpl *this_ptr, int64_t offset_ns) {
  uint64_t now = fbx_trace_now_ns(); /* first: every ns between ORT's clock read and ours shifts our events */
  fbx_ep_profiler *p = (fbx_ep_profiler *)this_ptr;
  if (p->started) return NULL; /* ORT calls it once; be safe about pairing */
  p->offset_ns = offset_ns;
  p->start_ns = now;
  fbx_trace_profiler_begin();
  p->started = true;
  return NULL;
}

static OrtStatus *ORT_API_CALL prof_end(OrtEpProfilerImpl *this_ptr, OrtProfilingEventsContainer *container) {
  fbx_ep_profiler *p = (fbx_ep_profiler *)this_ptr;
  if (!p->started) return NULL;
  end_ctx c = {.p = p, .container = container};
  fbx_trace_profiler_collect(p->start_ns, p->session, visit, &c);
  flush_batch(&c);
  fbx_trace_profiler_end();
  p->started = false;
  return c.err;
}

OrtStatus *fbx_ep_profiler_create(const OrtApi *api, const OrtEpApi *ep_api, fbx_trace_session *session,
                                  OrtEpProfilerImpl **out) {
  *out = NULL;
  fbx_ep_profiler *p = fbx_calloc(1, sizeof *p);
  if (!p) return api->CreateStatus(ORT_FAIL, "fusebox: out of memory creating the profiler");
  p->base.ort_version_supported = ORT_API_VERSION;
  p->base.Release = prof_release;
  p->base.StartProfiling = prof_start;
  p->base.StartEvent = NULL; /* optional: ORT's event stack is not needed */
  p->base.StopEvent = NULL;
  p->base.EndProfiling = prof_end;
  p->api = api;
  p->ep_api = ep_api;
  p->session = session;
  *out = &p->base;
  return NULL;
}
