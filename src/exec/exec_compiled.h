/* A compiled subgraph: one per fused ORT node. Owns the IR graph and the
 * compile cache; picks an execution path per run (see DESIGN.md):
 *
 *   decode  : the graph is a decoder step (see fbx_exec_path_classify) and the
 *             query length is 1 -> one shapeless plan serves every past length
 *   prefill : decoder graph, query length > 1 -> plan keyed by input shapes
 *   general : any other graph -> plan keyed by input shapes
 *   eager   : compile off, or compiling failed -> interpret the graph node by
 *             node, no folding, no fusion; always correct (one plan, kept:
 *             one buffer per value, grown geometrically, none per run)
 *
 * A plan is the graph after constant folding (shape-dependent folding only on
 * the shape-keyed paths), elementwise fusion and buffer-slot assignment. Shape
 * inference runs per node at every run, on the host (cheap); buffers grow
 * geometrically so the steady state allocates nothing. On a backend that is
 * not host-visible, steps whose results shape inference needs as data run on
 * the host backend (see fbx_exec_compile_options.host), so a run synchronises
 * with the device once, at the end. The cache is an LRU bounded by
 * cache_limit entries per compiled subgraph. */
#ifndef FBX_EXEC_COMPILED_H
#define FBX_EXEC_COMPILED_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../ir/ir_graph.h"
#include "../ir/ir_shape.h"

typedef enum fbx_exec_path {
  FBX_EXEC_PATH_DECODE, FBX_EXEC_PATH_PREFILL, FBX_EXEC_PATH_GENERAL, FBX_EXEC_PATH_EAGER,
  FBX_EXEC_PATH_COUNT
} fbx_exec_path;

typedef enum fbx_exec_cache_event {
  FBX_EXEC_CACHE_NONE,      /* eager: no cache */
  FBX_EXEC_CACHE_HIT, FBX_EXEC_CACHE_MISS, FBX_EXEC_CACHE_RETRACE,
} fbx_exec_cache_event;

const char *fbx_exec_path_name(fbx_exec_path p);          /* "decode", ... */
const char *fbx_exec_cache_event_name(fbx_exec_cache_event e); /* "HIT", ... */

typedef struct fbx_exec_compile_options {
  bool compile;          /* false: always eager */
  int cache_limit;       /* max cached plans per subgraph (>= 1) */
  /* A host-visible backend for plan-time host work when the backend is not
   * host-visible: constant folding (folded on the host, then uploaded) and
   * shape-data steps (Shape/Gather/Concat/... chains evaluated on the host
   * at run time, so no device read-back). Borrowed, must outlive the
   * compiled object. NULL: the backend itself when host-visible; otherwise
   * no folding, and shape data is read back from the device (a sync each). */
  fbx_backend *host;
} fbx_exec_compile_options;

/* Per-run facts for the tracer. Times in nanoseconds. */
typedef struct fbx_exec_run_report {
  fbx_exec_path path;
  fbx_exec_cache_event cache;
  char shape_key[256];        /* e.g. "1x1|1x4x*x16" ; '*' marks a shapeless dim */
  uint64_t compile_ns;        /* plan building on MISS/RETRACE */
  uint64_t eval_ns;           /* running the steps (incl. synchronize) */
  uint64_t copy_ns;           /* output copies */
  int64_t wrap_count, wrap_bytes;       /* inputs used in place */
  int64_t copywrap_count, copywrap_bytes; /* device inputs copied into engine memory on the device: their
                                           address moved from run to run (staged, exec_run.c) */
  int64_t copyout_count, copyout_bytes; /* outputs copied or written whole: not written in place,
                                           or an append output written to a buffer of its own
                                           (its past copied in) */
  int64_t delta_count, delta_bytes;     /* append outputs written in place, new rows only (a KV
                                           buffer shared by past and present): the rows' bytes */
  int64_t allocs;             /* buffers allocated by the run itself (device buffers, host staging);
                                 0 in the steady state; plan building on MISS is not counted */
  int64_t host_syncs;         /* times the host waited for the device: synchronize calls and
                                 shape-data read-backs; 1 per run when no read-back is needed */
  int64_t graph_captures;     /* backend graphs captured by this run: one per graph segment of the plan
                                 captured (a plan whose dynamic steps split it has several segments) */
  int64_t graph_replays;      /* graph segments of this run replayed instead of launched step by step */
  int64_t graph_invalidated;  /* captured graphs dropped (and captured again) because a backend buffer
                                 they used inside was reallocated (backend.h graph_epoch) */
  bool fell_back;             /* compile failed -> eager */
  char fallback_reason[160];
} fbx_exec_run_report;

/* Output binding: called once per graph output per run, after its shape is
 * known and before any kernel writes it. Return a host buffer of
 * numel*dtype_size bytes: a host-visible backend writes there in place;
 * otherwise the output is copied there once, through the backend, before the
 * run returns.
 * *same_as_input (-1 on entry): set it to i when the buffer is graph input
 * i's own memory (same data pointer, dtype and shape: a KV cache the host
 * binds as both past and present). The executor then writes only the new
 * rows in place when the output is an append of that very input
 * (fbx_ir_op_append_input; a delta copy-out), else computes the output
 * elsewhere and copies it at the end of the run, after every step has read
 * the input. The executor never compares pointers itself. */
typedef fbx_status *(*fbx_exec_output_fn)(void *ctx, int output_index, const fbx_tensor *shape,
                                        void **data, int *same_as_input);

typedef struct fbx_exec_compiled fbx_exec_compiled;

/* Where a run's inputs and outputs live, for a backend that is not host-visible
 * (a GPU whose buffers ORT allocated through the EP, e.g. with IOBinding):
 * a device input is wrapped in place (zero-copy: no upload; shape data it
 * feeds is read back, a sync each); device outputs are written in place by
 * the node that makes them (others are copied on the device). NULL io, or
 * all false: host memory both ways (fbx_exec_compiled_run). */
typedef struct fbx_exec_run_io {
  const bool *input_on_device;  /* (n_inputs) or NULL: inputs[i].data is a DEVICE buffer of the backend */
  bool outputs_on_device;       /* output_fn returns DEVICE buffers of the backend */
  /* The backend is bound to the caller's queue (ORT's stream, set_stream) and the
   * caller orders and waits for it: with outputs_on_device the run ends without
   * waiting for the device (0 host syncs when no shape data is read back; an
   * error, or the FUSEBOX_GPU_CAPTURE eval, still waits). */
  bool caller_stream;
} fbx_exec_run_io;

/* Takes ownership of g (destroyed with the compiled object, or on failure).
 * be is borrowed and must outlive the compiled object. name labels traces. */
fbx_status *fbx_exec_compiled_create(fbx_ir_graph *g, fbx_backend *be,
                                   const fbx_exec_compile_options *opt, const char *name,
                                   fbx_exec_compiled **out);
void fbx_exec_compiled_destroy(fbx_exec_compiled *c);

/* Run once. inputs[i] are host tensors (ORT buffers) in graph-input order,
 * read in place where possible. report may be NULL. Thread-safe: concurrent
 * runs of one compiled object are serialised internally. */
fbx_status *fbx_exec_compiled_run(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                fbx_exec_output_fn output_fn, void *output_ctx,
                                fbx_exec_run_report *report);

/* fbx_exec_compiled_run with inputs/outputs in device memory as io says (may be NULL). */
fbx_status *fbx_exec_compiled_run_io(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                   const fbx_exec_run_io *io, fbx_exec_output_fn output_fn, void *output_ctx,
                                   fbx_exec_run_report *report);

const fbx_ir_graph *fbx_exec_compiled_graph(const fbx_exec_compiled *c);

/* ---- pieces exposed for unit tests ---- */

/* Is the graph a decoder step graph? True when its inputs carry at least two
 * distinct non-empty symbolic dim names outside dim 0 (e.g. sequence_length and
 * past_sequence_length). Then a run is "decode" when one of those symbolic dims
 * is 1 and "prefill" otherwise. */
bool fbx_exec_graph_is_decoder(const fbx_ir_graph *g);
fbx_exec_path fbx_exec_path_classify(const fbx_ir_graph *g, bool compile, const fbx_tensor *inputs,
                                 int n_inputs);


#endif
