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
  const fbx_trace_session *session; /* bound on the recording thread, or NULL */
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
/* Calls fn for every stored event with t0_ns >= since_ns whose session is
 * `session` or NULL (session == NULL: every event). Pointers are valid only
 * during the call. Returns the number of events dropped by the cap so far. */
int64_t fbx_trace_profiler_collect(uint64_t since_ns, const fbx_trace_session *session,
                                   fbx_trace_prof_visit_fn fn, void *ctx);
#else /* compiled out: ORT's profile simply gets no Fusebox events */
static inline void fbx_trace_profiler_begin(void) {}
static inline void fbx_trace_profiler_end(void) {}
static inline int64_t fbx_trace_profiler_collect(uint64_t since_ns, const fbx_trace_session *session,
                                                 fbx_trace_prof_visit_fn fn, void *ctx) {
  (void)since_ns; (void)session; (void)fn; (void)ctx;
  return 0;
}
#endif

#endif
