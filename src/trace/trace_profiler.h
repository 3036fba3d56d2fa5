/* The store of our events for ONNX Runtime's own profiler (src/ep/ep_profiler.c).
 * ORT-free: the ep layer converts records into OrtProfilingEvents.
 * While at least one profiler is active, FBX_TRACE_F_PROFILER is set and every
 * fbx_trace_complete / fbx_trace_instant is also kept here (bounded by
 * FUSEBOX_TRACE_MAX_EVENTS; overflow is counted). */
#ifndef FBX_TRACE_PROFILER_H
#define FBX_TRACE_PROFILER_H

#include <stdint.h>

#include "trace/trace.h"

typedef struct fbx_trace_prof_event {
  const char *name, *cat;
  uint64_t t0_ns, t1_ns;            /* fbx_trace_now_ns() clock; t1 == t0 for instants */
  int tid;
  const fbx_trace_session *session; /* bound on the recording thread (device records: the node's), or NULL */
  uint64_t parent;                  /* the ORT event it ran inside (correlation id), 0: not known */
  const char *parent_name;          /* that event's name ("<fused node>_kernel_time"), or NULL */
  int n_args;
  const char *const *keys;          /* n_args strings each; numbers already formatted */
  const char *const *values;
} fbx_trace_prof_event;

typedef void (*fbx_trace_prof_visit_fn)(void *ctx, const fbx_trace_prof_event *ev);

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)
/* One profiler starts/stops collecting (reference counted; the store is
 * emptied when the last one ends). */
void fbx_trace_profiler_begin(void);
void fbx_trace_profiler_end(void);
/* ORT's event `id` begins / ends on the calling thread (OrtEpProfilerImpl
 * StartEvent/StopEvent; name: the ended event's, copied). Our events recorded
 * on a thread inside an open ORT event carry its id and name; device records
 * carry the id of the event their eval began in (fbx_trace_profiler_eval_parent,
 * called at the eval's start on the running thread). */
void fbx_trace_profiler_parent_push(uint64_t id);
void fbx_trace_profiler_parent_pop(uint64_t id, const char *name);
void fbx_trace_profiler_eval_parent(uint64_t eval);
/* Calls fn for every stored event with t0_ns >= since_ns whose session is
 * `session` or NULL (session == NULL: every event). Pointers are valid only
 * during the call. Returns the number of events dropped by the cap so far. */
int64_t fbx_trace_profiler_collect(uint64_t since_ns, const fbx_trace_session *session,
                                   fbx_trace_prof_visit_fn fn, void *ctx);
#else /* compiled out: ORT's profile simply gets no Fusebox events */
static inline void fbx_trace_profiler_begin(void) {}
static inline void fbx_trace_profiler_end(void) {}
static inline void fbx_trace_profiler_parent_push(uint64_t id) { (void)id; }
static inline void fbx_trace_profiler_parent_pop(uint64_t id, const char *name) { (void)id; (void)name; }
static inline void fbx_trace_profiler_eval_parent(uint64_t eval) { (void)eval; }
static inline int64_t fbx_trace_profiler_collect(uint64_t since_ns, const fbx_trace_session *session,
                                                 fbx_trace_prof_visit_fn fn, void *ctx) {
  (void)since_ns; (void)session; (void)fn; (void)ctx;
  return 0;
}
#endif

#endif
