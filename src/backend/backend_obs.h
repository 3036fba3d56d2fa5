/* Observability members of a device backend (backend.h: vt->obs, NULL on
 * backends without them). The backend knows nothing of ONNX or of the trace:
 * the executor's glue (src/exec/exec_gpuobs.c) tags the work it enqueues with
 * opaque 64-bit values and gets the device's activity records back with those
 * tags; src/trace/trace_gpu.c turns them into trace events. */
#ifndef FBX_BACKEND_OBS_H
#define FBX_BACKEND_OBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

struct fbx_backend;

typedef enum fbx_device_activity_kind {
  FBX_DEVACT_KERNEL = 1,
  FBX_DEVACT_MEMCPY = 2,
  FBX_DEVACT_MEMSET = 3,
  FBX_DEVACT_GRAPH = 4, /* one whole graph replay (a graph-level record: its nodes have no records of their own) */
} fbx_device_activity_kind;

/* One completed piece of device work (a CUPTI activity record, translated).
 * Times are on the host's CLOCK_MONOTONIC in ns (the backend converts the
 * device clock). tag: the tag that was set on the enqueueing thread when
 * the work was launched (0 = none); for work replayed from a backend graph,
 * the tag of the graph launch. */
typedef struct fbx_device_activity {
  int kind;                    /* fbx_device_activity_kind */
  const char *name;            /* kernel name (valid during the callback), or NULL */
  uint64_t start_ns, end_ns;
  uint32_t stream;             /* the device's stream id */
  uint32_t correlation;        /* the launching API call's correlation id */
  uint64_t tag;
  int32_t grid[3], block[3];   /* kernels */
  int32_t registers;           /* per thread (kernels) */
  int32_t shared_bytes;        /* static + dynamic shared memory per block (kernels) */
  uint64_t bytes;              /* memcpy / memset */
  int32_t copy_kind;           /* memcpy: 1 HtoD, 2 DtoH, 8 DtoD (CUPTI's numbering), else 0 */
  bool graph;                  /* launched by a graph replay */
} fbx_device_activity;

typedef void (*fbx_device_activity_fn)(void *ctx, const fbx_device_activity *a);

typedef struct fbx_backend_obs {
  /* The device's PCI bus id ("0000:17:00.0": NVML finds the device by it), or NULL. */
  const char *(*bus_id)(struct fbx_backend *be);
  /* Profiler capture range: start (cudaProfilerStart) / stop (cudaProfilerStop). */
  fbx_status *(*profiler_range)(struct fbx_backend *be, bool start);
  /* Recording of device activity (kernels, copies, memsets of this backend's
   * streams). Off by default: nothing is subscribed until the first on. An
   * error (no profiling library, no permission) leaves it off and says why. */
  fbx_status *(*activity_enable)(struct fbx_backend *be, bool on);
  /* Tags the work the calling thread enqueues from now on (0 clears; the
   * executor sets one per step). No device call, but not free (the profiling
   * library's per-thread correlation stack): call only while recording. */
  void (*activity_tag)(struct fbx_backend *be, uint64_t tag);
  /* Hands every record completed so far to fn (on the calling thread) and
   * forgets them. flush: first waits for the device and makes the profiling
   * library deliver its partly filled buffers (slow: teardown, the end of a
   * captured eval); without it only what was already delivered (cheap). */
  fbx_status *(*activity_drain)(struct fbx_backend *be, bool flush, fbx_device_activity_fn fn, void *ctx);
  /* Optional. Records are handed to fn as the profiling library delivers them,
   * on its own thread (one call at a time), instead of waiting for a drain:
   * the hot path never translates records. fn NULL: back to the queue. */
  void (*activity_sink)(struct fbx_backend *be, fbx_device_activity_fn fn, void *ctx);
  /* Optional. The calling thread's launches so far while recording (kernels;
   * copies and memsets), counted as they are enqueued, also into a graph
   * being captured: the executor attributes a graph's replayed records to
   * nodes by these counts per captured node. false: not counted. */
  bool (*activity_counts)(struct fbx_backend *be, uint64_t *kernels, uint64_t *copies);
  /* Optional. How records learn their tags ("callback", "extcorr", "none"), for the trace. */
  const char *(*activity_mode)(struct fbx_backend *be);
} fbx_backend_obs;

#endif
