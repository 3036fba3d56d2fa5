/* Internal: a plan (the graph after passes, for one cache key) and the
 * executor that runs it. Shared by exec_plan.c, exec_run.c, exec_compiled.c.
 * Not part of the public IR API. */
#ifndef FBX_IR_PLAN_H
#define FBX_IR_PLAN_H

#include <pthread.h>

#include "exec_compiled.h"
#include "../ir/ir_passes.h"
#include "../trace/trace.h"

typedef struct fbx__ir_plan_opts {
  fbx_backend *host;  /* host-visible backend for folding and host steps: the backend itself when
                         it is host-visible, else the compiled object's host backend or NULL */
  bool fold;          /* constant folding (needs host) */
  bool fold_shapes;   /* also fold SHAPE of graph inputs (shape-keyed paths) */
  bool fuse;          /* elementwise fusion */
  bool prepare;       /* backend node_prepare for nodes with constant inputs */
  bool reuse_slots;   /* liveness-based slot sharing (false: one slot per value) */
  bool dev_outputs;   /* the first run writes its outputs to device memory (fbx_exec_run_io): an append
                         output kept in place there needs no host copy of its row positions */
} fbx__ir_plan_opts;

/* A run's launch signature (exec_run.c): what a device step and an upload
 * were given (node, state, data pointers, shapes; upload dst/src/bytes), one
 * word each. Two runs with equal signatures enqueue identical work. */
typedef struct fbx__ir_sig {
  int64_t *w;
  int n, cap;
} fbx__ir_sig;

/* A graph segment (exec_run.c): steps [s0, s1) whose launch shapes never
 * changed between runs, captured into one backend graph once two runs in a
 * row enqueued the same work there, and replayed while they still do. */
typedef struct fbx__ir_seg {
  int s0, s1;                /* step indices */
  fbx__ir_sig prev, cap;     /* its words in the last run / in the captured graph */
  bool have_prev, stable;    /* stable: the last two runs' words were equal (capture next) */
  bool off;                  /* never captured again (a capture failed, or too many misses) */
  int misses;                /* replays refused because the work changed */
  fbx_backend_graph *graph;  /* or NULL */
  struct fbx_trace_gpu_map *obs_map; /* traced: its nodes in capture order (the trace's; exec_gpuobs.h) */
} fbx__ir_seg;

typedef enum fbx__ir_mode {
  FBX__IR_RUN,      /* enqueue every step */
  FBX__IR_DRY,      /* shapes, bindings, host steps and the signature only: the device work is replayed */
  FBX__IR_CAPTURE,  /* enqueue every step into a backend graph (graph_begin .. graph_end) */
} fbx__ir_mode;

/* How a graph output is written in one run (exec_run.c). */
typedef enum fbx__ir_out_mode {
  FBX__IR_OUT_LATE,      /* copied in full at the end (device result, input, constant) */
  FBX__IR_OUT_DIRECT,    /* the kernel wrote output_fn's buffer (host-visible) */
  FBX__IR_OUT_IN_PLACE,  /* append output on its input's own buffer: new rows only */
  FBX__IR_OUT_PRIVATE,   /* computed in priv_ptr (output_fn's buffer is an input's), copied at the end */
} fbx__ir_out_mode;

typedef struct fbx__ir_plan {
  fbx_ir_graph *g;        /* plan graph: a shallow clone after passes, or the borrowed original */
  bool owns_graph;
  fbx_backend *be;
  int *steps; int n_steps;             /* live node ids, topological */
  void **states;                       /* per node id: node_prepare state or NULL (plan-owned or shared) */
  bool *prepared;                      /* per node id: node_prepare was called by this plan (release it) */
  const char **fast_names;             /* per node id: "Add+Mul+Tanh" for FUSED_EW (or a conv's epilogue), else NULL */
  fbx_trace_op_site **sites;           /* per node id: trace site, made on the node's first traced run */
  const fbx_ir_graph *scope;           /* the compiled object's original graph: every plan of it runs
                                          serially, under its owner's lock (the sites' scope) */
  int *slot_of;                        /* per value id: slot or -1 */
  bool *direct_out;                    /* per value id: written straight into output_fn's buffer */
  int *out_pos;                        /* per value id: first graph-output position or -1 */
  int n_slots; void **slot_ptr; size_t *slot_cap;  /* backend buffers, grown x1.5 (64-byte rounded) */
  void **owned_const;                  /* per value id: backend copy owned by this plan (or NULL) */
  fbx_tensor *rt;                      /* per value id: run-time tensor (shape + data) */
  void **in_buf; size_t *in_cap;       /* per graph input: device copy when !host_visible */
  /* Staging (graphs on, device-memory io; exec_run.c): a device input or output whose address moved
   * between two runs is copied through a plan-owned buffer from then on, so that a graph can replay */
  void **in_last; bool *in_stage;      /* per graph input: last run's device address; staged (sticky) */
  void **out_last; bool *out_stage;    /* per graph-output position: the same */
  /* Non-host-visible backends only (all NULL / false otherwise): */
  fbx_backend *host;                   /* runs the host steps; NULL: shape data is read back instead */
  bool *host_step;                     /* per node id: runs on host (its outputs are shape data, or feed some) */
  bool *need_dev;                      /* per value id: some device step reads it (host values are uploaded) */
  bool *view;                          /* (every backend) per node id: a step whose output may be its input's buffer
                                          (Reshape/Squeeze/Unsqueeze/Flatten always, Transpose when it only
                                          moves size-1 dims): no kernel, and the input lives as long as it */
  bool *in_dev;                        /* per graph input: uploaded (a device step reads it) */
  void **hdata;                        /* per value id: host copy valid in this run (inputs, constants,
                                          host-step outputs, read-backs), or NULL */
  void **host_ptr; size_t *host_cap;   /* per value id: plan-owned host buffer (host steps, read-backs) */
  int64_t run_allocs, run_syncs;       /* this run's counters (fbx_exec_run_report allocs / host_syncs) */
  /* Outputs that may alias an input (fbx_exec_output_fn same_as_input; exec_run.c): */
  int *app_node;                       /* per value id: the node whose append output it is, when it may
                                          be written in place (a graph output whose appended input is a
                                          graph input no other step reads), else -1 */
  int *app_out, *app_in;               /* per value id: that output's index; the graph-input index */
  void **priv_ptr; size_t *priv_cap;   /* per value id: a direct output whose buffer is an input's
                                          (host-visible), or a staged device output, is computed here
                                          and copied at the end */
  void **out_bound;                    /* per graph-output position, this run: output_fn's buffer or NULL */
  int *out_alias;                      /*   its same_as_input */
  unsigned char *out_mode;             /*   fbx__ir_out_mode */
  int64_t *out_delta;                  /*   in place on a host-visible backend: the new rows' bytes */
  const fbx_exec_run_io *io;             /* this run's device-memory inputs/outputs, or NULL (host memory) */
  struct fbx__gpuobs_eval *gobs;       /* this run's GPU observation state (exec_gpuobs.h), or NULL */
  /* Graphs (backends with graph_begin; see exec_run.c): */
  fbx__ir_mode mode;                   /* of the pass in progress */
  fbx__ir_sig sig;                     /* this run's words, step after step */
  int *sig_at;                         /* per step index: where its words start in sig (this run) */
  uint64_t *shape_h, *shape_h_prev;    /* per step index: hash of its launch shapes, this run / the last */
  uint64_t cur_h;                      /* the hash of the step being recorded */
  bool *dyn;                           /* per step index: its shapes changed between two runs (sticky) */
  int *seg_at;                         /* per step index: the segment starting there, or -1 */
  fbx__ir_seg *segs; int n_segs;       /* graph segments, in step order */
  bool reseg;                          /* dyn changed (or no segments yet): rebuild them at the next run */
  bool seg_on;                         /* steps may become dynamic (FUSEBOX_GRAPH_SEGMENTS=0: never, so a
                                          plan whose shapes change never captures; for A/B measurements) */
  int64_t n_runs;                      /* runs with graphs on, so far */
  bool graph_off;                      /* this plan cannot be captured (read-backs) */
  void **cf;                           /* per node id: LOOP/SCAN run state (exec_control.c), made at the
                                          node's first run, freed with the plan; NULL until one runs */
  bool dev_outputs;                    /* built for device-memory outputs (fbx__ir_plan_opts) */
  int64_t run_captures, run_replays;   /* this run's graph counters */
  int64_t run_invalidated;             /* this run: captured graphs dropped because the backend's graph
                                          epoch moved (a buffer they used inside was reallocated) */
  /* cache bookkeeping (exec_compiled.c) */
  fbx_exec_compiled *owner;              /* the compiled object whose cache holds the plan (its IF branches) */
  fbx_exec_path path;
  char key[256];
  uint64_t last_used;
} fbx__ir_plan;

/* Node states prepared once per compiled subgraph and shared by all its
 * plans, indexed by original node id (see exec_prep.c). Owns the states;
 * destroy after every plan that uses them. */
typedef struct fbx__ir_prep_cache {
  const fbx_ir_graph *g;       /* the original graph (borrowed) */
  fbx_backend *be;             /* borrowed */
  void *const *const_bufs;     /* per value id: backend copy of an original constant, or NULL */
  void **state;                /* per original node id: node_prepare state */
  bool *done;                  /* per original node id: node_prepare ran (state may be NULL) */
  bool *failed;                /* per original node id: node_prepare failed (not retried) */
  int n_prepared;
  bool folds;                  /* plans fold all-constant nodes (they need no shared state) */
  uint64_t eager_ns;           /* time of fbx__ir_prep_cache_eager */
} fbx__ir_prep_cache;

fbx_status *fbx__ir_prep_cache_create(const fbx_ir_graph *g, fbx_backend *be, void *const *const_bufs,
                                      fbx__ir_prep_cache **out);
void fbx__ir_prep_cache_destroy(fbx__ir_prep_cache *pc);  /* releases the states; NULL is fine */
/* Prepare now every node that has constant inputs and will stay a run-time
 * step of every plan (all-constant nodes are left to folding). Errors are
 * not fatal here: such nodes prepare per plan, which reports them. */
void fbx__ir_prep_cache_eager(fbx__ir_prep_cache *pc);
/* The shared state of plan node nid of plan graph pg (prepared on first use):
 * true when the node is the original node unchanged over the same constants
 * and node_prepare succeeded; the plan must not release *state. */
bool fbx__ir_prep_cache_get(fbx__ir_prep_cache *pc, const fbx_ir_graph *pg, int nid, void **state);
/* One node_prepare call for node nid of g: constant inputs pass host data in
 * const_inputs and dev[v] (or the host data when dev/dev[v] is NULL) in
 * inputs. *called: node_prepare ran (the node has a constant input). */
fbx_status *fbx__ir_node_prepare(fbx_backend *be, const fbx_ir_graph *g, int nid, void *const *dev, void **state,
                                 bool *called);

/* The compiled object of IF branch or LOOP/SCAN body `branch` of c's graph (exec_compiled.c), or NULL. */
fbx_exec_compiled *fbx__ir_compiled_branch(const fbx_exec_compiled *c, const fbx_ir_graph *branch);
/* Run IF branch or LOOP/SCAN body c (exec_control.c; host memory). When the
 * inputs have the dtypes and shapes of c's last run, that run's plan is run
 * again at once: no input validation, path choice, shape-key string or cache
 * lookup (the per-iteration cost of a loop, the per-run cost of a branch);
 * otherwise the run goes the way of fbx_exec_compiled_run. */
fbx_status *fbx__exec_compiled_run_body(fbx_exec_compiled *c, const fbx_tensor *inputs, int n_inputs,
                                        fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *r);

/* Build a plan for graph g. inputs (the run's inputs) give concrete shapes
 * for fold_shapes. const_bufs[v] (may be NULL) is the compiled object's
 * backend copy of original constant v. prep (may be NULL) supplies shared
 * node states (used when o->prepare). On failure *out is NULL. */
fbx_status *fbx__ir_plan_build(fbx_ir_graph *g, fbx_backend *be, void *const *const_bufs,
                               fbx__ir_prep_cache *prep, const fbx__ir_plan_opts *o, const fbx_tensor *inputs,
                               int n_inputs, fbx__ir_plan **out);
void fbx__ir_plan_destroy(fbx__ir_plan *p);
/* Frees the plan-owned host buffer of value v (pinned when device steps read v). */
void fbx__ir_host_free(fbx__ir_plan *p, int v);

/* Run the plan once (see fbx_exec_compiled_run). report counters are added to. */
fbx_status *fbx__ir_plan_run(fbx__ir_plan *p, const fbx_tensor *inputs, int n_inputs, const fbx_exec_run_io *io,
                             fbx_exec_output_fn output_fn, void *output_ctx, fbx_exec_run_report *report);

/* ---- shared by exec_run.c and exec_control.c ---- */
/* Grow backend buffer *ptr to need bytes (x1.5, 64-byte rounded); contents are dead. Counted. */
fbx_status *fbx__ir_buf_ensure(fbx__ir_plan *p, void **ptr, size_t *cap, size_t need);
/* Node n's input tensors for one step (exec_run.c). */
fbx_status *fbx__ir_step_inputs(fbx__ir_plan *p, const fbx_ir_node *n, unsigned read_mask, unsigned host_mask,
                                fbx_tensor *in);
/* Where output o of step nid is written this run: out->data (shape from *out). */
fbx_status *fbx__ir_bind_step_out(fbx__ir_plan *p, int nid, int o, fbx_tensor *out, fbx_exec_output_fn output_fn,
                                  void *output_ctx);
/* One traced execution of step nid from t0 to t1. */
void fbx__ir_trace_step(fbx__ir_plan *p, int nid, const fbx_tensor *in, int n_in, const fbx_tensor *out, int n_out,
                        const fbx_kernel_info *info, uint64_t t0, uint64_t t1);
/* Control-flow steps (exec_control.c), host-visible engines only: IF runs
 * the branch its condition picks; LOOP and SCAN run their body once per
 * iteration. Outputs are bound through output_fn like any step's. */
fbx_status *fbx__exec_run_if(fbx__ir_plan *p, int nid, fbx_exec_output_fn output_fn, void *output_ctx,
                             uint64_t *clock);
fbx_status *fbx__exec_run_loop(fbx__ir_plan *p, int nid, fbx_exec_output_fn output_fn, void *output_ctx,
                               uint64_t *clock);
/* Frees the LOOP/SCAN state of node nid (NULL is fine). */
void fbx__exec_cf_free(fbx__ir_plan *p, void *state);

/* Passes over a plan graph (a clone the plan owns). dead[n] marks removed nodes. */
fbx_status *fbx__ir_fold(fbx_ir_graph *g, fbx_backend *be, bool *dead, bool fold_shapes,
                         const fbx_tensor *inputs, int n_inputs);
/* Conv epilogues (exec_fuse_epilogue.c), after fbx__ir_fuse: sets
 * fast_names[conv] to the absorbed ops ("Mul+Add+..."). use_inputs: shapes of
 * the run's inputs hold for every run of this plan (shape-keyed). */
fbx_status *fbx__ir_fuse_epilogue(fbx_ir_graph *g, fbx_backend *be, bool *dead, const char **fast_names,
                                  bool use_inputs, const fbx_tensor *inputs, int n_inputs);

#endif
