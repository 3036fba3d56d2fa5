/* The backend interface: a table of function pointers plus a context.
 * Backends know nothing of ONNX or ORT; they run IR nodes on tensors.
 *
 * A backend is a device (DESIGN.md, "The device engine"), described by:
 *
 *   memory : buffer types (device, pinned host, host), each with an alignment
 *            and whether the host may touch it; how much device memory is free.
 *            host_visible is shorthand for "device buffers are host memory"
 *            (CPU: yes; the opaque test backend and CUDA: no).
 *   work   : one backend instance is one in-order queue (a stream). run_node
 *            and the *_async copies are enqueued on it and may return before
 *            the work is done; events mark points in that queue;
 *            synchronize() waits for everything enqueued so far. The executor
 *            synchronises once per run, after enqueueing the output copies
 *            (not at all when the run is bound to the caller's queue, ORT's
 *            stream: set_stream, fbx_exec_run_io.caller_stream).
 *   claims : supports() says whether the device has a kernel for a node
 *            configuration, so GetCapability can decline with the device's
 *            reason.
 *
 * Every member added after the first version (everything below "optional")
 * may be NULL: the helpers in this header then give the synchronous,
 * host-memory behaviour, so a backend written against the first table keeps
 * working unchanged. Sizes are in bytes. One backend serves every compiled
 * subgraph of a session, so its members may be called from several threads
 * at once; the backend serialises internally what needs it (the CPU backend
 * runs one node at a time on its pool). */
#ifndef FBX_BACKEND_H
#define FBX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/status.h"
#include "../base/tensor.h"
#include "../ir/ir_graph.h"
#include "backend_obs.h"


/* What a kernel tells the tracer about the variant it chose (static strings). */
typedef struct fbx_kernel_info {
  const char *variant;   /* e.g. "gemv_f32_packed", "gemm_f32_blocked", "ew_fused" */
  const char *reason;    /* e.g. "M=1: bandwidth-bound GEMV", "constant B packed at compile" */
  double flops;          /* estimate, 0 if unknown */
} fbx_kernel_info;

typedef struct fbx_backend fbx_backend;

/* Where a buffer lives. */
typedef enum fbx_buft {
  FBX_BUFT_DEVICE,       /* the backend's working memory: what run_node reads and writes */
  FBX_BUFT_HOST_PINNED,  /* host memory the device copies from/to directly (staging of async copies) */
  FBX_BUFT_HOST,         /* ordinary host memory */
  FBX_BUFT_COUNT
} fbx_buft;

/* One buffer type of a backend. A zero entry (alignment 0) in a table means
 * "not described": fbx_backend_buft_info then reports alignment 64, and host
 * access for the host types and, for DEVICE, host_visible. */
typedef struct fbx_buft_info {
  size_t alignment;      /* every buffer of this type is aligned to this (a power of two) */
  bool host_access;      /* the host may read/write these buffers with plain loads and stores */
} fbx_buft_info;

/* An event: a point in a backend's queue (opaque to everyone but the backend). */
typedef struct fbx_backend_event fbx_backend_event;

/* A queue of the device handed out to a caller (a cudaStream_t; opaque to everyone but the backend). */
typedef struct fbx_backend_stream fbx_backend_stream;

/* A recorded sequence of enqueued work (a CUDA graph), replayable as a whole. */
typedef struct fbx_backend_graph fbx_backend_graph;

typedef struct fbx_backend_vtable {
  const char *name;      /* "cpu", "cuda", "opaque": device name used in traces and decline reasons */
  bool host_visible;     /* DEVICE buffers are host memory: the executor may read/write them directly */

  /* DEVICE buffers. buffer_alloc returns a buffer of at least `bytes`
   * (aligned as buft[FBX_BUFT_DEVICE] says) owned by the caller, who frees
   * it with buffer_free (NULL is fine). Contents are undefined. Neither
   * call waits for queued work: the caller frees only buffers no queued
   * work uses (the executor frees after a synchronize). */
  fbx_status *(*buffer_alloc)(fbx_backend *be, size_t bytes, void **out);
  void (*buffer_free)(fbx_backend *be, void *p);
  /* Synchronous copies: they wait for queued work first and the data has
   * arrived when they return. src of copy_from_host and dst of copy_to_host
   * are host memory; the other pointers are DEVICE buffers (pointer
   * arithmetic inside a buffer is allowed). For a host-visible backend these
   * are memcpy. */
  fbx_status *(*copy_from_host)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  fbx_status *(*copy_to_host)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  /* Device-to-device, enqueued in order with run_node (may return early). */
  fbx_status *(*copy_device)(fbx_backend *be, void *dst, const void *src, size_t bytes);

  /* Compile-time preparation of one node whose constant inputs are known
   * (const_inputs[i] non-NULL for constant input i: HOST data; inputs[i]:
   * the same constants in DEVICE memory, other inputs shape only). May
   * return a state (e.g. packed weights) passed to every run_node of this
   * node; NULL state is fine, and run_node must accept NULL state for any
   * node. Optional (NULL = nothing to prepare). */
  fbx_status *(*node_prepare)(fbx_backend *be, const fbx_ir_node *node,
                              const fbx_tensor *const *const_inputs, const fbx_tensor *inputs,
                              void **state);
  void (*node_release)(fbx_backend *be, const fbx_ir_node *node, void *state);

  /* Enqueue one node. Every data pointer is a DEVICE buffer of this backend
   * (or NULL for an empty tensor). Output tensors have dtype, shape and data
   * set by the caller (shape inference ran on the host before); an absent
   * optional input has data == NULL and rank -1. Inputs listed in
   * fbx_ir_op_shape_data_inputs are passed in device memory too: kernels
   * that need their values read them on the device. info may be NULL; when
   * non-NULL the kernel fills it. */
  fbx_status *(*run_node)(fbx_backend *be, const fbx_ir_node *node, void *state,
                          const fbx_tensor *inputs, int n_inputs,
                          fbx_tensor *outputs, int n_outputs, fbx_kernel_info *info);

  /* Wait until everything enqueued on this backend is complete. */
  fbx_status *(*synchronize)(fbx_backend *be);
  /* Engine memory currently held by buffer_alloc, in bytes. */
  size_t (*memory_in_use)(fbx_backend *be);
  void (*destroy)(fbx_backend *be);
  /* Whether run_node applies params.conv.epilogue for this node (see
   * ir_graph.h); the plan only attaches epilogues when this says so.
   * Optional (NULL = never). */
  bool (*supports_epilogue)(fbx_backend *be, const fbx_ir_node *node);

  /* ---- optional: memory ---- */

  /* The buffer types (indexed by fbx_buft); zero entries as fbx_buft_info says. */
  fbx_buft_info buft[FBX_BUFT_COUNT];
  /* Host buffers for staging: FBX_BUFT_HOST_PINNED or FBX_BUFT_HOST (DEVICE
   * goes through buffer_alloc). Owned by the caller, freed with host_free
   * and the same type. NULL: aligned host malloc for both types. */
  fbx_status *(*host_alloc)(fbx_backend *be, fbx_buft type, size_t bytes, void **out);
  void (*host_free)(fbx_backend *be, fbx_buft type, void *p);
  /* Free and total DEVICE memory in bytes. NULL: unknown (both 0). */
  fbx_status *(*mem_info)(fbx_backend *be, size_t *free_bytes, size_t *total_bytes);

  /* ---- optional: asynchronous work ---- */

  /* Enqueue a copy in order with run_node; may return before it is done.
   * The host side (src of from_host, dst of to_host) must stay valid and
   * unchanged, resp. unread, until a later synchronize or event_synchronize
   * of an event recorded after the copy. NULL: the synchronous copy. */
  fbx_status *(*copy_from_host_async)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  fbx_status *(*copy_to_host_async)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  /* Run on a queue the caller owns (e.g. ORT's cudaStream_t: the handle of a
   * stream_create'd stream of this or another backend of the same device)
   * from now on; NULL returns to the backend's own. Switching orders the
   * new queue after the work enqueued on the old one (a device-side wait, no
   * host wait), so buffers and scratch stay in stream order across the
   * switch. The caller keeps the queue alive while it is set and serialises
   * set_stream with the work it brackets (one bound queue per backend).
   * NULL member: the backend has one queue only. */
  fbx_status *(*set_stream)(fbx_backend *be, void *native_stream);
  /* Events. create/destroy pair; record marks "everything enqueued so far";
   * event_wait makes later work on this backend's queue wait for the event
   * (no host wait); event_synchronize blocks the host until it has passed.
   * An event may be recorded and waited for by any backend of the same kind
   * and device (CUDA: one context per device), not only the one that made it
   * (the EP orders its sessions' queues and the GPU's own queue this way).
   * NULL members: see the fbx_backend_event_* helpers (a synchronous
   * backend needs none). */
  fbx_status *(*event_create)(fbx_backend *be, fbx_backend_event **out);
  void (*event_destroy)(fbx_backend *be, fbx_backend_event *ev);
  fbx_status *(*event_record)(fbx_backend *be, fbx_backend_event *ev);
  fbx_status *(*event_wait)(fbx_backend *be, fbx_backend_event *ev);
  fbx_status *(*event_synchronize)(fbx_backend *be, fbx_backend_event *ev);

  /* ---- optional: streams handed out (ORT's OrtSyncStreamImpl) ----
   * A stream is a queue of this backend's device that someone else drives:
   * stream_handle is its native handle (cudaStream_t), which set_stream of
   * any backend of the same device accepts. stream_record marks everything
   * enqueued on s so far in ev (an event of this backend); stream_wait makes
   * later work on s wait for ev (device side); stream_synchronize blocks the
   * host until s is idle (ORT's Flush). stream_destroy waits for s first.
   * All six or none (NULL: the backend hands out no streams; ORT then gives
   * the EP none and every run synchronises, as before). */
  fbx_status *(*stream_create)(fbx_backend *be, fbx_backend_stream **out);
  void (*stream_destroy)(fbx_backend *be, fbx_backend_stream *s);
  void *(*stream_handle)(fbx_backend *be, fbx_backend_stream *s);
  fbx_status *(*stream_record)(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev);
  fbx_status *(*stream_wait)(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev);
  fbx_status *(*stream_synchronize)(fbx_backend *be, fbx_backend_stream *s);

  /* ---- optional: capability ---- */

  /* Whether this device runs node with these inputs/outputs. Tensors carry
   * dtype and rank; dims may be FBX_IR_DIM_DYNAMIC and data is NULL (asked at
   * claim time, before any run). On false, writes a one-line reason (without
   * the device name: the caller prefixes it) into reason[0..cap). NULL:
   * every IR node is supported. */
  bool (*supports)(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                   const fbx_tensor *outputs, int n_outputs, char *reason, size_t cap);

  /* ---- optional: graphs (capture once, replay per run) ----
   * Between graph_begin and graph_end, the work the calling thread enqueues
   * (run_node, copy_device, copy_from_host_async) is recorded, not run, into
   * a graph; graph_launch enqueues the recorded work again, with the same
   * pointers and kernel parameters. Device buffers are addressed by the
   * pointers they had at capture; host sources of copy_from_host_async are
   * read again at each launch (their current contents), so the caller keeps
   * them allocated while the graph lives. Nothing else may be called on the
   * backend by the capturing thread between begin and end except buffer
   * reads of shape, and no synchronising call (synchronize, copy_to_host):
   * those make graph_end fail. graph_end always ends the capture: on error
   * *out is NULL, nothing recorded ran, and the caller runs the work
   * normally. The executor captures only what it proved identical over two
   * runs (exec_run.c). NULL members: no graphs (all four or none). */
  fbx_status *(*graph_begin)(fbx_backend *be);
  fbx_status *(*graph_end)(fbx_backend *be, fbx_backend_graph **out); /* *out owned by caller */
  fbx_status *(*graph_launch)(fbx_backend *be, fbx_backend_graph *g);
  void (*graph_destroy)(fbx_backend *be, fbx_backend_graph *g);       /* NULL g is fine */
  /* Optional with the graph members: a counter that moves whenever memory the
   * backend uses inside run_node, unseen by the caller (a scratch buffer, a
   * kernel parameter buffer), is reallocated. A graph captured under another
   * epoch may address freed memory: the executor drops and re-captures it
   * (exec_run.c), so a regrowth costs a re-capture, never a wrong result.
   * NULL: the epoch never moves. */
  uint64_t (*graph_epoch)(fbx_backend *be);

  /* ---- optional: observability (backend_obs.h; NULL = none) ---- */
  const struct fbx_backend_obs *obs;
} fbx_backend_vtable;

struct fbx_backend {
  const fbx_backend_vtable *vt;
  void *ctx;
};

/* ---- helpers: the optional members with their fallbacks ---- */

/* The description of buffer type t (filled in as fbx_buft_info says). */
fbx_buft_info fbx_backend_buft_info(const fbx_backend *be, fbx_buft t);
/* Host staging buffers (t: FBX_BUFT_HOST_PINNED or FBX_BUFT_HOST). */
fbx_status *fbx_backend_host_alloc(fbx_backend *be, fbx_buft t, size_t bytes, void **out);
void fbx_backend_host_free(fbx_backend *be, fbx_buft t, void *p);
/* Enqueued copies (synchronous where the backend has no async member). */
fbx_status *fbx_backend_copy_from_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes);
fbx_status *fbx_backend_copy_to_host_async(fbx_backend *be, void *dst, const void *src, size_t bytes);
fbx_status *fbx_backend_synchronize(fbx_backend *be);
/* Events; without event members create gives a NULL event, record and wait do
 * nothing, and event_synchronize is synchronize (correct for any in-order
 * queue, only coarser). */
fbx_status *fbx_backend_event_create(fbx_backend *be, fbx_backend_event **out);
void fbx_backend_event_destroy(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_backend_event_record(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_backend_event_wait(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_backend_event_synchronize(fbx_backend *be, fbx_backend_event *ev);
/* Whether the backend hands out streams (all stream_* members and set_stream set). */
bool fbx_backend_has_streams(const fbx_backend *be);
/* supports() with its default (true) and a reason of "<device>: <why>". */
bool fbx_backend_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                          const fbx_tensor *outputs, int n_outputs, char *reason, size_t cap);

/* Whether this backend has a kernel for this node configuration (dtype etc.);
 * used by the IR executor to pick the eager/CPU fallback. */
typedef bool (*fbx_backend_supports_fn)(const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs);

/* MatMul geometry shared by every backend's MATMUL kernel: numpy batched
 * matmul with broadcast batch dims and 1-D operands, params.matmul
 * trans_a/trans_b/alpha (Gemm). Batch strides are in matrices (0 = broadcast). */
typedef struct fbx_matmul_geom {
  bool ta, tb;
  float alpha;
  int64_t M, N, K;   /* op(A) is (M, K), op(B) is (K, N) */
  int obr;           /* batch rank of the output */
  int64_t nbatch;    /* product of the output's batch dims */
  int64_t sa, sb;    /* matrices in A's / B's batch */
  int64_t ast[FBX_MAX_RANK], bst[FBX_MAX_RANK], odims[FBX_MAX_RANK];
} fbx_matmul_geom;

/* Fills g from the node and its tensors; an error (inner dims differ, bad output
 * rank, scalar operand) names the op. */
fbx_status *fbx_matmul_geom_get(const fbx_ir_node *node, const fbx_tensor *A, const fbx_tensor *B,
                                const fbx_tensor *Y, fbx_matmul_geom *g);
/* The matrix offsets in A and B (in matrices) of output batch bi. */
void fbx_matmul_geom_batch(const fbx_matmul_geom *g, int64_t bi, int64_t *oa, int64_t *ob);

/* ---- the CPU backend ---- */
typedef struct fbx_cpu_options {
  int threads;           /* 0 = number of online cores */
} fbx_cpu_options;

fbx_status *fbx_cpu_backend_create(const fbx_cpu_options *opt, fbx_backend **out);

/* ---- the opaque test backend (backend/opaque/) ----
 * The CPU kernels behind DEVICE buffers the host cannot dereference (tagged
 * handles: a load or store through one faults), with copies only through the
 * table, async copies, events and supports(). It exercises every
 * !host_visible path of the engine on a machine without a GPU. Test aid:
 * selected in the EP by FUSEBOX_TEST_BACKEND=opaque. */
typedef struct fbx_opaque_stats {
  int64_t allocs, frees;          /* buffer_alloc / buffer_free calls */
  int64_t syncs;                  /* synchronize + event_synchronize + synchronous copy_to_host calls */
  int64_t h2d, d2h, d2d;          /* copies by direction (sync and async) */
  int64_t launches;               /* run_node calls (not counting graph replays) */
  int64_t graph_captures;         /* graph_end calls that returned a graph */
  int64_t graph_launches;         /* graph_launch calls */
  int64_t replayed;               /* operations run by graph_launch */
  int64_t streams;                /* stream_create calls */
  int64_t stream_binds;           /* set_stream calls with a stream (not NULL) */
  int64_t stream_syncs;           /* stream_synchronize calls (counted in syncs too) */
} fbx_opaque_stats;

typedef struct fbx_opaque_options {
  int threads;                    /* the CPU kernels' pool; 0 = all cores */
  int decline_op;                 /* an fbx_ir_op supports() refuses (tests of the claim path); -1 = none */
} fbx_opaque_options;

fbx_status *fbx_opaque_backend_create(const fbx_opaque_options *opt, fbx_backend **out);
/* Counters since creation; false when be is not an opaque backend. */
bool fbx_opaque_backend_stats(const fbx_backend *be, fbx_opaque_stats *out);
/* Test aid: move the graph epoch as a reallocated internal buffer would (backend.h graph_epoch);
 * from then on a graph captured before fails to launch, as one that addresses freed memory
 * would fault. false when be is not an opaque backend. */
bool fbx_opaque_backend_epoch_bump(fbx_backend *be);

/* Convenience: destroy any backend (NULL is fine). */
void fbx_backend_destroy(fbx_backend *be);

#endif
