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

/* ---- the factory (ep_factory.c) ---- */
typedef struct fbx_ep_factory {
  OrtEpFactory base;          /* first */
  char *registration_name;    /* given by the host at RegisterExecutionProviderLibrary */
  const OrtLogger *logger;
} fbx_ep_factory;

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
  const OrtLogger *logger;
  int n_compiled;             /* fused subgraphs compiled so far (names) */
} fbx_ep;

fbx_status *fbx_ep_create(fbx_ep_factory *f, const OrtSessionOptions *so, const OrtLogger *logger,
                          fbx_ep **out);
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
  fbx_ir_compiled *compiled;  /* owned */
  char *name;                 /* owned: fused node name */
  int n_nodes;                /* ONNX nodes fused (trace args) */
  int n_inputs, n_outputs;    /* as ORT passes them to Compute */
  fbx_tensor *inputs;         /* owned, (n_inputs): scratch, guarded by mu */
  char **input_desc;          /* owned, (n_inputs): "'<value>' (read by node '<name>' (<op>))", for errors */
  pthread_mutex_t mu;         /* Compute may be called concurrently */
  bool mu_ready;              /* mu initialised (destroy only then) */
} fbx_ep_kernel;

OrtStatus *ORT_API_CALL fbx_ep_kernel_create_state(OrtNodeComputeInfo *this_ptr,
                                                   OrtNodeComputeContext *ctx, void **state);
OrtStatus *ORT_API_CALL fbx_ep_kernel_compute(OrtNodeComputeInfo *this_ptr, void *state,
                                              OrtKernelContext *kctx);
void ORT_API_CALL fbx_ep_kernel_release_state(OrtNodeComputeInfo *this_ptr, void *state);
void fbx_ep_kernel_destroy(fbx_ep_kernel *k);

#endif
