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
  /* a graph capture in progress (fbx__gpuobs_capture_begin): the nodes of the
   * launches counted so far, in order (kernels, copies), for the graph's map */
  bool capturing;
  fbx_trace_op_site *cap_site;  /* the node whose launches are being counted */
  uint64_t cap_k, cap_c;        /* the backend's launch counts at the last node boundary */
  fbx_trace_op_site **ks, **cs;
  int64_t nk, nc, capk, capc;
} fbx__gpuobs_eval;

void fbx__gpuobs_begin_slow(fbx_backend *be, fbx__gpuobs_eval *e);
void fbx__gpuobs_end_slow(fbx_backend *be, fbx__gpuobs_eval *e);
void fbx__gpuobs_node_slow(fbx_backend *be, fbx__gpuobs_eval *e, fbx_trace_op_site *site);
void fbx__gpuobs_capture_begin(fbx_backend *be, fbx__gpuobs_eval *e);
fbx_trace_gpu_map *fbx__gpuobs_capture_end(fbx_backend *be, fbx__gpuobs_eval *e);
void fbx__gpuobs_graph(fbx_backend *be, fbx__gpuobs_eval *e, const fbx_trace_gpu_map *map);

/* Around one plan run (after its final synchronisation). */
static inline void fbx__gpuobs_begin(fbx_backend *be, fbx__gpuobs_eval *e) {
  e->eval = 0;
  e->capture = e->nvtx = e->tagging = e->nvtx_node = e->capturing = false;
  e->ks = e->cs = NULL; /* the capture's arrays (freed at the end) */
  e->nk = e->nc = e->capk = e->capc = 0;
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

/* Around a graph capture of a traced run (the caller tests that tracing is
 * on): the steps' launches are counted per node (the backend's
 * activity_counts), so that the graph's replays are attributed to nodes by
 * capture order; capture_end returns the graph's map (the trace's; NULL when
 * the backend does not count or on OOM), which the launch hook hands over. */
static inline void fbx__gpuobs_capture(fbx_backend *be, fbx__gpuobs_eval *e) {
  if (be->vt->obs && e) fbx__gpuobs_capture_begin(be, e);
}
static inline fbx_trace_gpu_map *fbx__gpuobs_captured(fbx_backend *be, fbx__gpuobs_eval *e) {
  return be->vt->obs && e ? fbx__gpuobs_capture_end(be, e) : NULL;
}
/* Before a graph launch of a traced run: its work is the eval's, its
 * records are split over map's nodes (NULL map: not split). */
static inline void fbx__gpuobs_launch(fbx_backend *be, fbx__gpuobs_eval *e, const fbx_trace_gpu_map *map) {
  if (be->vt->obs && e) fbx__gpuobs_graph(be, e, map);
}

/* Teardown (the ep layer, before the trace session is destroyed): every
 * record still buffered goes to the trace and the open device slices close
 * (recording itself stays on: the profiling library is process-wide and
 * other backends may still record). NULL or a backend without obs: nothing. */
void fbx_exec_gpuobs_finish(fbx_backend *be);

#endif
