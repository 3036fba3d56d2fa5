/* OrtEpProfilerImpl over the trace module's profiler store (src/trace/trace_profiler.h).
 *
 * Linking: StartEvent/StopEvent keep, per thread, ORT's open events in the
 * store, so each of our events (CPU spans on the thread that runs Compute,
 * device records through the eval they belong to) knows the ORT event it ran
 * inside; EndProfiling gives it the args ort_event_correlation_id and
 * parent_name (that event's name: "<fused node>_kernel_time" for the fused
 * node's run), besides its place on the timeline. */
#include "ep_profiler.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/alloc.h"
#include "../trace/trace_profiler.h"

enum { BATCH = 256, MAX_ARGS = 35 };

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
  char corr[24];
  if (ev->parent) { /* the ORT event it ran inside */
    snprintf(corr, sizeof corr, "%llu", (unsigned long long)ev->parent);
    keys[n] = "ort_event_correlation_id";
    vals[n++] = corr;
    if (ev->parent_name) {
      keys[n] = "parent_name";
      vals[n++] = ev->parent_name;
    }
  }
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

static OrtStatus *ORT_API_CALL prof_event_start(OrtEpProfilerImpl *this_ptr, uint64_t ort_event_correlation_id) {
  fbx_ep_profiler *p = (fbx_ep_profiler *)this_ptr;
  if (p->started) fbx_trace_profiler_parent_push(ort_event_correlation_id);
  return NULL;
}

static OrtStatus *ORT_API_CALL prof_event_stop(OrtEpProfilerImpl *this_ptr, uint64_t ort_event_correlation_id,
                                               const OrtProfilingEvent *ort_event) {
  fbx_ep_profiler *p = (fbx_ep_profiler *)this_ptr;
  if (!p->started) return NULL;
  const char *name = NULL;
  if (ort_event && p->ep_api->ProfilingEvent_GetName) {
    OrtStatus *st = p->ep_api->ProfilingEvent_GetName(ort_event, &name);
    if (st) {
      p->api->ReleaseStatus(st);
      name = NULL;
    }
  }
  fbx_trace_profiler_parent_pop(ort_event_correlation_id, name);
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
  p->base.StartEvent = prof_event_start; /* ORT's open events: the link of ours to them */
  p->base.StopEvent = prof_event_stop;
  p->base.EndProfiling = prof_end;
  p->api = api;
  p->ep_api = ep_api;
  p->session = session;
  *out = &p->base;
  return NULL;
}
