/* Host-side internals of the CUDA backend (libfusebox_cuda.so): the context,
 * the per-op kernel table and helpers shared by the op-family files.
 *
 * Execution model (step 1): one CUDA stream per backend; every kernel and
 * copy is enqueued on it, so stream order is the only ordering needed.
 * run_node never synchronises except to read the small shape-data inputs an
 * op needs on the host (Slice starts, Pad pads, ...); synchronize() waits
 * for the stream and reports device-side errors (bad gather indices). */
#ifndef FBX_CUDA_INTERNAL_H
#define FBX_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "../backend.h"
#include "../backend_cuda.h"
#include "cuda_kernels.h"

_Static_assert(FBX_CUDA_RANK == FBX_MAX_RANK, "cuda_kernels.h rank must match FBX_MAX_RANK");

typedef struct fbx_cuda_alloc_slot { void *p; size_t bytes; } fbx_cuda_alloc_slot;

typedef struct fbx_cuda_ctx {
  int device;
  char device_name[256];
  cudaStream_t stream;
  cublasLtHandle_t lt;
  void *lt_ws;                /* cuBLASLt workspace, lt_ws_size bytes of device memory */
  size_t lt_ws_size;
  bool tf32;
  void *params;               /* device copy of one launch's tables (an ew program) */
  size_t params_cap;
  void *scratch;              /* device scratch (im2col columns) */
  size_t scratch_cap;
  int *counters;              /* FBX_CUDA_COUNTERS device ints, zero between launches: a kernel's blocks
                                 count in on them and the last sets them back (cuda_attention.cu's
                                 one-launch split combine); allocated with the context */
  uint64_t graph_epoch;       /* moves when params or scratch is reallocated (backend.h graph_epoch) */
  int mnb_ksplit;             /* cuda_mnb.cu: M = 1 GEMVs with a long K split K over a block's warps
                                 (FUSEBOX_CUDA_MNB_KSPLIT=0: one warp per column group, for A/B) */
  int *err_flag;              /* device int: kernels set 1 on an out-of-range index */
  int *err_host;              /* pinned host copy read at synchronize */
  pthread_mutex_t lock;       /* one run_node at a time (the stream and scratch are shared) */
  size_t mem_in_use;          /* bytes held by buffer_alloc */
  fbx_cuda_alloc_slot *slots; /* open-addressing table pointer -> size (memory_in_use) */
  size_t n_slots, n_used;
  fbx_cuda_alloc_slot *cached; /* freed blocks kept for reuse (no cudaMalloc/cudaFree per run) */
  size_t n_cached, cap_cached, cached_bytes;
  struct fbx_cuda_gemm_plan *gemm_plans; /* cuda_matmul.c: descriptors + algorithm per GEMM shape */
  int n_gemm_plans, next_gemm_plan;
  const struct fbx_cuda_mirror *mirror; /* cuda_prepare.c: the running node's constant shape data (or NULL) */
  const void *node_state;     /* the running node's prepared state for ops that have one (MATMUL_NBITS) */
  struct fbx_backend_graph *capture; /* cuda_graph.c: the graph being captured, or NULL */
  pthread_t capturer;         /* the thread whose work the capture records */
  pthread_cond_t capture_done;/* other threads wait on it (with lock) while a capture is open */
  int arch;                   /* compute capability x10 (90 on an H100/H200): the generated kernels' target */
  struct fbx_cuda_rtc_kernel *rtc; /* cuda_ew_rtc.c: generated kernels by key (open addressing) */
  size_t n_rtc_slots, n_rtc_used;
  int64_t rtc_made, rtc_disk;  /* kernels generated (compiled or loaded from the disk cache) / of them from disk */
  cudaStream_t own_stream;    /* cuda_stream.c: the backend's own stream once set_stream was called (else NULL) */
  cudaEvent_t switch_ev;      /* cuda_stream.c: orders a newly bound stream after the old one */
  int *err_async;             /* cuda_stream.c: pinned copy of err_flag made, without a wait, when a caller's
                                 stream is unbound; checked at the next bind (NULL until first needed) */
} fbx_cuda_ctx;

#define FBX_CUDA_KERNEL_ARGS                                                                      \
  fbx_cuda_ctx *c, const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out, \
      int n_out, fbx_kernel_info *info
typedef fbx_status *(*fbx_cuda_kernel_fn)(FBX_CUDA_KERNEL_ARGS);
/* Whether the kernel takes this node with these input dtypes/shapes (data may
 * be NULL); on false, writes why (without the device prefix) into why. */
typedef bool (*fbx_cuda_supports_fn)(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why,
                                     size_t why_size);

typedef struct fbx_cuda_op_entry {
  fbx_cuda_kernel_fn run;
  fbx_cuda_supports_fn supports;  /* NULL = every float32 configuration the IR allows */
} fbx_cuda_op_entry;

/* cuda_ops.c: the op table (NULL run = no kernel on this device). */
const fbx_cuda_op_entry *fbx_cuda_op(fbx_ir_op op);
bool fbx_cuda_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why,
                       size_t why_size);

/* ---- cuda_util.c ---- */
/* cuda_backend.c: the error a nonzero err_flag code (FBX_CUDA_ERR_*) stands for; when (may be NULL)
 * is appended to the message. */
fbx_status *fbx_cuda_err_code_status(int code, const char *when);
/* NULL on cudaSuccess, else "device 'cuda': <what>: <cuda error string>". */
fbx_status *fbx_cuda_check(cudaError_t e, const char *what);
/* dtype -> kernel element kind; false for dtypes no kernel handles (F64, U64). */
bool fbx_cuda_ek(fbx_dtype dt, int *ek);
/* Row-major element strides of t (rank entries). */
void fbx_cuda_strides(const fbx_tensor *t, int64_t *st);
bool fbx_cuda_present(const fbx_tensor *in, int n_in, int i);
/* Copies a small device tensor to host memory dst (cap bytes) and waits for it:
 * for the shape-data inputs (starts, pads, scales) an op needs on the host. */
fbx_status *fbx_cuda_read_small(fbx_cuda_ctx *c, const fbx_tensor *t, void *dst, size_t cap);
/* Reads element i of a host copy as int64 / double (I64, I32, F32 ...). */
int64_t fbx_cuda_host_i64(fbx_dtype dt, const void *p, int64_t i);
double fbx_cuda_host_f64(fbx_dtype dt, const void *p, int64_t i);
/* Copies bytes of host data into the context's parameter buffer; *dev points at it.
 * Valid until the next node (the stream orders later overwrites after this node's kernels). */
fbx_status *fbx_cuda_upload_params(fbx_cuda_ctx *c, const void *host, size_t bytes, void **dev);
/* Device scratch of at least bytes, valid for the current node. */
fbx_status *fbx_cuda_scratch(fbx_cuda_ctx *c, size_t bytes, void **dev);
#define FBX_CUDA_COUNTERS 4096 /* ints of fbx_cuda_ctx.counters */
/* A launch's status: NULL or "device 'cuda': <op> kernel launch failed: ...". */
fbx_status *fbx_cuda_launched(int err, const char *op);
/* reads FUSEBOX_CUDA_PDL into fbx_cuda_pdl once per process (cuda_kernels.h) */
void fbx_cuda_pdl_init(void);

/* ---- cuda_prepare.c: host mirrors of constant shape-data inputs ---- */
typedef struct fbx_cuda_mirror fbx_cuda_mirror;
fbx_status *fbx_cuda_node_prepare(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                  const fbx_tensor *inputs, void **state);
void fbx_cuda_node_release(fbx_backend *be, const fbx_ir_node *node, void *state);
/* Makes node's prepared state (or NULL) the running node's: c->mirror or c->node_state. */
void fbx_cuda_node_bind(fbx_cuda_ctx *c, const fbx_ir_node *node, const void *state);
/* Copies t's host mirror into dst when t is a mirrored constant of bytes bytes. */
bool fbx_cuda_mirror_read(const fbx_cuda_mirror *m, const fbx_tensor *t, void *dst, size_t bytes);
/* A MATMUL's constant 2-D B (K, N), transposed to (N, K) at node_prepare for the
 * GEMV kernel, when b is that constant's device copy; else NULL. */
const float *fbx_cuda_mirror_bt(const fbx_cuda_mirror *m, const void *b, int64_t K, int64_t N);

/* ---- cuda_ew_rtc.c: NVRTC-generated elementwise kernels ---- */
typedef struct fbx_cuda_rtc_kernel fbx_cuda_rtc_kernel;
/* Launch a's generated kernel (made on first use). False: not launched (no
 * NVRTC, a failed compile, or a first use during a capture): run the
 * interpreter. True: launched, *err = the launch's cudaError_t. */
bool fbx_cuda_ew_rtc_launch(fbx_cuda_ctx *c, const fbx_cuda_ew_args *a, const fbx_cuda_ew_ins *prog, int *err);
void fbx_cuda_ew_rtc_destroy(fbx_cuda_ctx *c);

/* ---- cuda_graph.c: stream capture (backend.h, "graphs") ---- */
/* Takes c->lock, first waiting while another thread captures on the stream. */
void fbx_cuda_lock(fbx_cuda_ctx *c);
bool fbx_cuda_capturing(const fbx_cuda_ctx *c);
/* Enqueue a host-to-device copy of host memory that may change or die after
 * the call (parameter tables, host-computed outputs): during a capture the
 * bytes are staged in pinned memory the graph owns. */
fbx_status *fbx_cuda_upload_h2d(fbx_cuda_ctx *c, void *dst, const void *src, size_t bytes, const char *what);
fbx_status *fbx_cuda_graph_begin(fbx_backend *be);
uint64_t fbx_cuda_graph_epoch(fbx_backend *be);
fbx_status *fbx_cuda_graph_end(fbx_backend *be, fbx_backend_graph **out);
fbx_status *fbx_cuda_graph_launch(fbx_backend *be, fbx_backend_graph *g);
void fbx_cuda_graph_destroy(fbx_backend *be, fbx_backend_graph *g);

/* ---- cuda_stream.c: events, handed-out streams, set_stream (backend.h) ---- */
fbx_status *fbx_cuda_event_create(fbx_backend *be, fbx_backend_event **out);
void fbx_cuda_event_destroy(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_cuda_event_record(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_cuda_event_wait(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_cuda_event_synchronize(fbx_backend *be, fbx_backend_event *ev);
fbx_status *fbx_cuda_stream_create(fbx_backend *be, fbx_backend_stream **out);
void fbx_cuda_stream_destroy(fbx_backend *be, fbx_backend_stream *s);
void *fbx_cuda_stream_handle(fbx_backend *be, fbx_backend_stream *s);
fbx_status *fbx_cuda_stream_record(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev);
fbx_status *fbx_cuda_stream_wait(fbx_backend *be, fbx_backend_stream *s, fbx_backend_event *ev);
fbx_status *fbx_cuda_stream_synchronize(fbx_backend *be, fbx_backend_stream *s);
fbx_status *fbx_cuda_set_stream(fbx_backend *be, void *native);
/* At destroy: c->stream back to the backend's own (a bound stream is the caller's), switch event freed. */
void fbx_cuda_stream_fini(fbx_cuda_ctx *c);

/* ---- cuda_matmul.c: row-major, batched strided fp32 GEMM through cuBLASLt ----
 * C[b] (M x N, ldc) = alpha * op(A[b]) * op(B[b]) + beta * C[b]; op = transpose when t*.
 * Strides in elements between consecutive batch matrices (0 = broadcast). */
fbx_status *fbx_cuda_gemm_f32(fbx_cuda_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, int64_t stride_a, const float *B, int64_t ldb,
                              int64_t stride_b, float beta, float *C, int64_t ldc, int64_t stride_c,
                              int64_t batch);

void fbx_cuda_gemm_plans_destroy(fbx_cuda_ctx *c);

/* ---- cuda_cupti.c: observability members (backend_obs.h) and mem_info ---- */
/* Moves each time CUPTI recording is switched on or off, process-wide (part of the graph epoch:
 * cuda_graph.c). */
uint64_t fbx_cuda_activity_generation(void);
extern const fbx_backend_obs fbx_cuda_obs;
fbx_status *fbx_cuda_mem_info(fbx_backend *be, size_t *free_bytes, size_t *total_bytes);

/* ---- kernels, one per op family file ---- */
fbx_status *fbx_cuda_k_ew(FBX_CUDA_KERNEL_ARGS);           /* EW1/EW2/EW3 and FUSED_EW */
bool fbx_cuda_s_ew(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_matmul(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_f32(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
bool fbx_cuda_s_reduce(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_softmax(FBX_CUDA_KERNEL_ARGS);      /* SOFTMAX, LOG_SOFTMAX, HARDMAX */
fbx_status *fbx_cuda_k_layer_norm(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_instance_norm(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_reduce(FBX_CUDA_KERNEL_ARGS);       /* REDUCE_*, ARGMAX, ARGMIN */
fbx_status *fbx_cuda_k_copy(FBX_CUDA_KERNEL_ARGS);         /* RESHAPE/SQUEEZE/UNSQUEEZE/FLATTEN */
fbx_status *fbx_cuda_k_transpose(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_slice(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_expand(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_tile(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_concat(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_split(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_gather(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_shape(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_constant_of_shape(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_range(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_movement(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_conv(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_conv(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_conv_transpose(FBX_CUDA_KERNEL_ARGS);
fbx_status *fbx_cuda_k_pool(FBX_CUDA_KERNEL_ARGS);         /* MAXPOOL, AVGPOOL, LPPOOL */
fbx_status *fbx_cuda_k_global_pool(FBX_CUDA_KERNEL_ARGS);  /* GLOBAL_AVGPOOL, GLOBAL_MAXPOOL */
fbx_status *fbx_cuda_k_resize(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_resize(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);

/* ---- decoder ops (com.microsoft): cuda_mnb.c, cuda_attention.c, cuda_skipnorm.c ---- */
typedef struct fbx_cuda_mnb_state fbx_cuda_mnb_state;
/* Uploads B / scales / zero points (constants) for the GEMV; *out NULL when they are not constant. */
fbx_status *fbx_cuda_mnb_prepare(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                 fbx_cuda_mnb_state **out);
void fbx_cuda_mnb_release(fbx_backend *be, fbx_cuda_mnb_state *s);
fbx_status *fbx_cuda_k_mnb(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_mnb(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_gqa(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_gqa(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_rope(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_rope(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);
fbx_status *fbx_cuda_k_skipnorm(FBX_CUDA_KERNEL_ARGS);
bool fbx_cuda_s_skipnorm(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size);

#endif
