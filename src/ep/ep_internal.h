/* Internal declarations of the ORT ABI layer. Only src/ep/ includes ORT
 * headers. onnxruntime_c_api.h pulls in onnxruntime_ep_c_api.h (which has no
 * include guard), so nothing here includes the EP header directly.
 *
 * Object layout: each of our ABI objects embeds the ORT struct as its FIRST
 * member, so the OrtEp* / OrtEpFactory* / OrtNodeComputeInfo* ORT hands back
 * is cast to ours. */
#ifndef FBX_EP_INTERNAL_H
#define FBX_EP_INTERNAL_H

#include <onnxruntime_c_api.h>
#include <pthread.h>

#include "../backend/backend.h"
#include "../base/status.h"
#include "../exec/exec_compiled.h"
#include "../trace/trace.h"
#include "ep_options.h"

#define FBX_EP_VENDOR "Fusebox"
#define FBX_EP_VERSION "0.1.0"

/* The ORT function tables, set once by CreateEpFactories (one ORT per process). */
typedef struct fbx_ep_ort {
  const OrtApi *api;
  const OrtEpApi *ep;
} fbx_ep_ort;
extern fbx_ep_ort fbx__ep_ort;
#define FBX_ORT (fbx__ep_ort.api)
#define FBX_ORT_EP (fbx__ep_ort.ep)

/* ---- ep_status.c: the one place fbx_status and OrtStatus meet ---- */
/* Converts and frees s; NULL -> NULL (success). */
OrtStatus *fbx_ep_status_to_ort(fbx_status *s);
/* Converts and releases os; NULL -> NULL. what prefixes the message (may be NULL). */
fbx_status *fbx_ep_status_from_ort(OrtStatus *os, const char *what);
/* ep_value.c: v's ONNX element type and rank, and its dims when rank <= FBX_MAX_RANK
 * (a larger rank is returned for the caller to refuse). what: context for an ORT error. */
fbx_status *fbx_ep_value_type_shape(const OrtValue *v, int *onnx_type, int64_t dims[FBX_MAX_RANK], size_t *rank,
                                    const char *what);
/* Return early from an fbx_status-returning function when an ORT call fails. */
#define FBX_ORT_TRY(call)                                              \
  do {                                                                 \
    OrtStatus *fbx__os = (call);                                       \
    if (fbx__os) return fbx_ep_status_from_ort(fbx__os, #call);        \
  } while (0)

/* ---- GPU devices (ep_gpu.c, ep_allocator.c, ep_data_transfer.c) ---- */
#define FBX_EP_VENDOR_NVIDIA 0x10DEu   /* PCI vendor id ORT gives NVIDIA GPUs */
#define FBX_EP_VENDOR_SIM 0xFB0Eu      /* the simulated GPU of FUSEBOX_TEST_DEVICE=gpu-sim */
#define FBX_EP_MAX_GPUS 16

typedef enum fbx_ep_gpu_kind {
  FBX_EP_GPU_CUDA,            /* an NVIDIA GPU through libfusebox_cuda.so */
  FBX_EP_GPU_SIM,             /* test aid: the opaque backend posing as a GPU (no GPU needed) */
} fbx_ep_gpu_kind;

struct fbx_ep_gpu;

/* An OrtAllocator over one buffer type of a GPU's backend. */
typedef struct fbx_ep_allocator {
  OrtAllocator base;          /* first */
  struct fbx_ep_gpu *gpu;     /* borrowed: the factory owns both */
  fbx_buft type;              /* FBX_BUFT_DEVICE (OrtDeviceMemoryType_DEFAULT) or FBX_BUFT_HOST_PINNED (HOST_ACCESSIBLE) */
  const OrtMemoryInfo *info;  /* borrowed from the gpu */
} fbx_ep_allocator;

/* One GPU the factory lists as an OrtEpDevice. Owned by the factory; sessions borrow it. */
typedef struct fbx_ep_gpu {
  fbx_ep_gpu_kind kind;
  int ordinal;                         /* CUDA device id (sim: 0) */
  OrtMemoryInfo *mem_device;           /* owned: GPU, DEFAULT */
  OrtMemoryInfo *mem_pinned;           /* owned: GPU, HOST_ACCESSIBLE */
  const OrtMemoryDevice *md_device;    /* of mem_device (ORT-owned, lives with it) */
  const OrtMemoryDevice *md_pinned;
  const OrtHardwareDevice *hw;         /* ORT's, or hw_owned */
  OrtHardwareDevice *hw_owned;         /* one we created (the simulated GPU, or a GPU ORT's discovery missed),
                                          released with the factory; else NULL */
  fbx_ep_allocator alloc_device, alloc_pinned;
  pthread_mutex_t mu;                  /* guards be's creation */
  fbx_backend *be;                     /* owned, made on first use: allocations, data transfer, ORT's streams */
  pthread_mutex_t order_mu;            /* guards tail */
  pthread_mutex_t dt_mu;               /* the data transfer binds be to ORT's stream for a copy: one at a time */
  fbx_backend_event *tail;             /* owned (be's), made on first use: marks everything the EP enqueued on this
                                          GPU so far, on any queue (ep_stream.c, "ordering") */
} fbx_ep_gpu;

/* The GPU's own backend (made on first use; NULL + status on failure). */
fbx_status *fbx_ep_gpu_backend(fbx_ep_gpu *g, fbx_backend **out);
/* Whether md is this GPU's DEFAULT (device) memory. */
bool fbx_ep_gpu_owns(const fbx_ep_gpu *g, const OrtMemoryDevice *md);
/* Fills g (memory infos, allocators) for kind/ordinal; on failure g is left empty. fbx_ep_gpu_fini
 * undoes it (the backend and an owned hardware device included). */
fbx_status *fbx_ep_gpu_init(fbx_ep_gpu *g, fbx_ep_gpu_kind kind, int ordinal);
void fbx_ep_gpu_fini(fbx_ep_gpu *g);
/* "cuda" or "gpu-sim": the ep_metadata value of key FBX_EP_META_DEVICE. */
const char *fbx_ep_gpu_kind_name(fbx_ep_gpu_kind k);
#define FBX_EP_META_DEVICE "fusebox.device"
#define FBX_EP_META_DEVICE_ID "fusebox.device_id"

/* ---- ORT's streams on our GPUs (ep_stream.c) ----
 * Ordering: ORT may run sessions on several streams of one GPU and copies on
 * the GPU's own queue, and freed device buffers are reused by any of them.
 * Every piece of work the EP enqueues on a GPU (a Compute on ORT's stream, a
 * data transfer) first waits for the GPU's tail event (device side) and at
 * its end re-records it on its queue, so the EP's work on one GPU is one
 * chain in enqueue order, without host waits. */
typedef struct fbx_ep_stream {
  OrtSyncStreamImpl base;     /* first */
  fbx_ep_gpu *gpu;            /* borrowed (factory-owned); NULL: a host stream, for a session that runs on the CPU
                                 (ORT asks for one per GPU memory info it was given): no handle, nothing queued */
  fbx_backend_stream *s;      /* owned by gpu->be; NULL with gpu */
} fbx_ep_stream;

/* A new stream on g (NULL: a host stream). Released by ORT through its Release. */
fbx_status *fbx_ep_stream_create(fbx_ep_gpu *g, OrtSyncStreamImpl **out);
/* Later work on be's bound queue follows everything the EP enqueued on g before. */
fbx_status *fbx_ep_gpu_order_before(fbx_ep_gpu *g, fbx_backend *be);
/* Later work on g (any queue) follows everything on be's bound queue so far. */
fbx_status *fbx_ep_gpu_order_after(fbx_ep_gpu *g, fbx_backend *be);
/* The stream's native handle when it is one of ours on g, else NULL. */
fbx_backend_stream *fbx_ep_stream_of(OrtSyncStream *stream, const fbx_ep_gpu *g);

void fbx_ep_allocator_init(fbx_ep_allocator *a, fbx_ep_gpu *g, fbx_buft type, const OrtMemoryInfo *info);

/* The factory's one OrtDataTransferImpl (Release is a no-op: the factory owns it). */
typedef struct fbx_ep_data_transfer {
  OrtDataTransferImpl base;   /* first */
  struct fbx_ep_factory *factory;
} fbx_ep_data_transfer;
void fbx_ep_data_transfer_init(fbx_ep_data_transfer *dt, struct fbx_ep_factory *f);

/* ---- the factory (ep_factory.c) ---- */
typedef struct fbx_ep_factory {
  OrtEpFactory base;          /* first */
  char *registration_name;    /* given by the host at RegisterExecutionProviderLibrary */
  const OrtLogger *logger;
  fbx_ep_gpu gpus[FBX_EP_MAX_GPUS];  /* the GPUs listed as OrtEpDevices (first n_gpus made) */
  int n_gpus;
  bool probed;                /* GetSupportedDevices has looked for GPUs */
  fbx_ep_data_transfer dt;
} fbx_ep_factory;

/* The GPU whose DEFAULT or HOST_ACCESSIBLE memory md is, or NULL. */
fbx_ep_gpu *fbx_ep_factory_gpu_of_memory(fbx_ep_factory *f, const OrtMemoryDevice *md);
/* The GPU that an OrtEpDevice's metadata (FBX_EP_META_*) names, or NULL (the CPU). */
fbx_ep_gpu *fbx_ep_factory_gpu_of(fbx_ep_factory *f, const OrtKeyValuePairs *ep_metadata);

fbx_status *fbx_ep_factory_create(const char *registration_name, const OrtLogger *logger,
                                  fbx_ep_factory **out);
void fbx_ep_factory_destroy(fbx_ep_factory *f);

/* ---- one OrtEp per session (ep_ep.c) ---- */
typedef struct fbx_ep {
  OrtEp base;                 /* first */
  fbx_ep_factory *factory;
  fbx_ep_options opt;
  fbx_backend *backend;       /* owned; one per OrtEp */
  fbx_backend *host_backend;  /* owned; host CPU backend for plan-time work when backend is not host-visible; or NULL */
  fbx_trace_session *trace;   /* owned; NULL when tracing is off */
  fbx_ep_gpu *gpu;            /* borrowed from the factory: the session's GPU OrtEpDevice, or NULL (CPU device) */
  const OrtLogger *logger;
  int n_compiled;             /* fused subgraphs compiled so far (names) */
  pthread_mutex_t stream_mu;  /* a Compute on ORT's stream binds it to backend for its whole run (ep_compute.c) */
} fbx_ep;

/* gpu: the GPU among the OrtEpDevices the session was given, or NULL; has_cpu: the CPU one is among
 * them too. The options choose between the two (device=cuda: the GPU), see ep_ep.c. */
fbx_status *fbx_ep_create(fbx_ep_factory *f, fbx_ep_gpu *gpu, bool has_cpu, const OrtSessionOptions *so,
                          const OrtLogger *logger, fbx_ep **out);
void fbx_ep_destroy(fbx_ep *ep);

/* Reads ep.fuseboxexecutionprovider.* session config entries into o (after defaults). */
fbx_status *fbx_ep_options_from_session(const OrtSessionOptions *so, fbx_ep_options *o);

/* ---- GetCapability / Compile (ep_capability.c, ep_compile.c) ---- */
OrtStatus *ORT_API_CALL fbx_ep_get_capability(OrtEp *this_ptr, const OrtGraph *graph,
                                              OrtEpGraphSupportInfo *info);
OrtStatus *ORT_API_CALL fbx_ep_compile(OrtEp *this_ptr, const OrtGraph **graphs,
                                       const OrtNode **fused_nodes, size_t count,
                                       OrtNodeComputeInfo **node_compute_infos,
                                       OrtNode **ep_context_nodes);
void ORT_API_CALL fbx_ep_release_node_compute_infos(OrtEp *this_ptr, OrtNodeComputeInfo **infos,
                                                    size_t n);

/* ---- one compiled fused node (ep_compile.c creates, ep_compute.c runs) ---- */
typedef struct fbx_ep_kernel {
  OrtNodeComputeInfo base;    /* first */
  fbx_ep *ep;                 /* borrowed: the OrtEp outlives its compute infos */
  fbx_exec_compiled *compiled;  /* owned */
  char *name;                 /* owned: fused node name */
  int n_nodes;                /* ONNX nodes fused (trace args) */
  int n_inputs, n_outputs;    /* as ORT passes them to Compute */
  fbx_tensor *inputs;         /* owned, (n_inputs): scratch, guarded by mu */
  bool *input_dev;            /* owned, (n_inputs): scratch, guarded by mu: input i is in the GPU's memory */
  char **input_desc;          /* owned, (n_inputs): "'<value>' (read by node '<name>' (<op>))", for errors */
  pthread_mutex_t mu;         /* Compute may be called concurrently */
  bool mu_ready;              /* mu initialised (destroy only then) */
  fbx_backend_event *done;    /* owned (ep->backend's), made by the first Compute on ORT's stream: recorded at
                                 the end of each such run; the next one waits for it on the host before it
                                 rewrites the plan's host staging buffers (immediate once ORT flushed the stream) */
} fbx_ep_kernel;

OrtStatus *ORT_API_CALL fbx_ep_kernel_create_state(OrtNodeComputeInfo *this_ptr,
                                                   OrtNodeComputeContext *ctx, void **state);
OrtStatus *ORT_API_CALL fbx_ep_kernel_compute(OrtNodeComputeInfo *this_ptr, void *state,
                                              OrtKernelContext *kctx);
void ORT_API_CALL fbx_ep_kernel_release_state(OrtNodeComputeInfo *this_ptr, void *state);
void fbx_ep_kernel_destroy(fbx_ep_kernel *k);

#endif
