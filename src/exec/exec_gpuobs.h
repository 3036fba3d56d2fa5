/* The executor's side of GPU observability (exec_gpuobs.c): per eval on a
 * backend with observability members (backend_obs.h), counters, the
 * FUSEBOX_GPU_CAPTURE profiler range, device activity tags per node and the
 * drain of the backend's activity records into the trace. With tracing and
 * capture off each hook is one branch on the trace flags. */
#ifndef FBX_EXEC_GPUOBS_H
#define FBX_EXEC_GPUOBS_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../trace/trace.h"

/* One plan run's observation state, on the running thread's stack; the plan
 * points at it for the run (plans run one at a time, under their owner's
 * lock). Not thread-local storage: a __thread variable in this dlopened
 * library made LeakSanitizer's tracer crash at exit (ORT 1.29, AMD EPYC). */
typedef struct fbx__gpuobs_eval {
  uint64_t eval;    /* the trace's eval number, 0 = not observed */
  bool capture;     /* this is the FUSEBOX_GPU_CAPTURE eval */
  bool nvtx;        /* an NVTX range was pushed */
  bool tagging;     /* device activity is being tagged with eval (and the node) */
  bool nvtx_node;   /* a per-node NVTX range is open */
} fbx__gpuobs_eval;

void fbx__gpuobs_begin_slow(fbx_backend *be, fbx__gpuobs_eval *e);
void fbx__gpuobs_end_slow(fbx_backend *be, fbx__gpuobs_eval *e);
void fbx__gpuobs_node_slow(fbx_backend *be, fbx__gpuobs_eval *e, fbx_trace_op_site *site);

/* Around one plan run (after its final synchronisation). */
static inline void fbx__gpuobs_begin(fbx_backend *be, fbx__gpuobs_eval *e) {
  e->eval = 0;
  e->capture = e->nvtx = e->tagging = e->nvtx_node = false;
  if (__builtin_expect(fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_NVTX |
                                            FBX_TRACE_F_PROFILER), 0))
    fbx__gpuobs_begin_slow(be, e);
}
static inline void fbx__gpuobs_end(fbx_backend *be, fbx__gpuobs_eval *e) {
  if (__builtin_expect(e->eval != 0 || e->nvtx, 0)) fbx__gpuobs_end_slow(be, e);
}
/* Per traced step (the caller already tests that tracing is on): the work
 * enqueued from now on belongs to site's node (NULL: to no node). */
static inline void fbx__gpuobs_node(fbx_backend *be, fbx__gpuobs_eval *e, fbx_trace_op_site *site) {
  if (be->vt->obs && e) fbx__gpuobs_node_slow(be, e, site);
}

/* Teardown (the ep layer, before the trace session is destroyed): every
 * record still buffered goes to the trace and the open device slices close
 * (recording itself stays on: the profiling library is process-wide and
 * other backends may still record). NULL or a backend without obs: nothing. */
void fbx_exec_gpuobs_finish(fbx_backend *be);

#endif
