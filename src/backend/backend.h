/* The backend interface: a table of function pointers plus a context.
 * Backends know nothing of ONNX or ORT; they run IR nodes on tensors.
 *
 * Memory: buffers come from buffer_alloc and live in the backend's memory
 * (host RAM for CPU, device memory for CUDA). host_visible says whether the
 * IR executor may read/write buffer memory directly (CPU: yes).
 *
 * Execution is asynchronous in principle: run_node may enqueue work and
 * return; synchronize() is the explicit point after which outputs are
 * complete and readable. The CPU backend runs synchronously. */
#ifndef FBX_BACKEND_H
#define FBX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/status.h"
#include "../ir/ir_graph.h"

/* A strided-free, row-major tensor view. data points into backend memory. */
typedef struct fbx_tensor {
  fbx_dtype dtype;
  int rank;
  int64_t dims[FBX_MAX_RANK];
  void *data;
} fbx_tensor;

int64_t fbx_tensor_numel(const fbx_tensor *t);
size_t fbx_tensor_nbytes(const fbx_tensor *t);

/* What a kernel tells the tracer about the variant it chose (static strings). */
typedef struct fbx_kernel_info {
  const char *variant;   /* e.g. "gemv_f32_packed", "gemm_f32_blocked", "ew_fused" */
  const char *reason;    /* e.g. "M=1: bandwidth-bound GEMV", "constant B packed at compile" */
  double flops;          /* estimate, 0 if unknown */
} fbx_kernel_info;

typedef struct fbx_backend fbx_backend;

typedef struct fbx_backend_vtable {
  const char *name;      /* "cpu", "cuda" */
  bool host_visible;     /* buffers readable/writable by the host directly */

  fbx_status *(*buffer_alloc)(fbx_backend *be, size_t bytes, void **out);
  void (*buffer_free)(fbx_backend *be, void *p);
  /* Copies; for a host-visible backend these are memcpy. */
  fbx_status *(*copy_from_host)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  fbx_status *(*copy_to_host)(fbx_backend *be, void *dst, const void *src, size_t bytes);
  fbx_status *(*copy_device)(fbx_backend *be, void *dst, const void *src, size_t bytes);

  /* Compile-time preparation of one node whose constant inputs are known
   * (const_inputs[i] non-NULL for constant input i, host data). May return a
   * state (e.g. packed weights) passed to every run_node of this node; NULL
   * state is fine. Optional (NULL = nothing to prepare). */
  fbx_status *(*node_prepare)(fbx_backend *be, const fbx_ir_node *node,
                              const fbx_tensor *const *const_inputs, const fbx_tensor *inputs,
                              void **state);
  void (*node_release)(fbx_backend *be, const fbx_ir_node *node, void *state);

  /* Run one node. Output tensors have dtype, shape and data set by the caller
   * (shape inference ran before); an absent optional input has data == NULL
   * and rank -1. info may be NULL; when non-NULL the kernel fills it. */
  fbx_status *(*run_node)(fbx_backend *be, const fbx_ir_node *node, void *state,
                          const fbx_tensor *inputs, int n_inputs,
                          fbx_tensor *outputs, int n_outputs, fbx_kernel_info *info);

  fbx_status *(*synchronize)(fbx_backend *be);
  /* Engine memory currently held by buffer_alloc, in bytes. */
  size_t (*memory_in_use)(fbx_backend *be);
  void (*destroy)(fbx_backend *be);
  /* Whether run_node applies params.conv.epilogue for this node (see
   * ir_graph.h); the plan only attaches epilogues when this says so.
   * Optional (NULL = never). */
  bool (*supports_epilogue)(fbx_backend *be, const fbx_ir_node *node);
} fbx_backend_vtable;

struct fbx_backend {
  const fbx_backend_vtable *vt;
  void *ctx;
};

/* Whether this backend has a kernel for this node configuration (dtype etc.);
 * used by the IR executor to pick the eager/CPU fallback. */
typedef bool (*fbx_backend_supports_fn)(const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs);

/* ---- the CPU backend ---- */
typedef struct fbx_cpu_options {
  int threads;           /* 0 = number of online cores */
} fbx_cpu_options;

fbx_status *fbx_cpu_backend_create(const fbx_cpu_options *opt, fbx_backend **out);
/* Convenience: destroy any backend (NULL is fine). */
void fbx_backend_destroy(fbx_backend *be);

#endif
