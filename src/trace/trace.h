/* Observability: the one module every layer may call.
 *
 * Gating: fbx_trace_init() reads the environment once (the ep layer calls it
 * from CreateEpFactories; every entry point also calls it lazily). After that,
 * with every FUSEBOX_* variable unset, each entry point below is one
 * predictable branch on fbx__trace_flags and returns: no clock read, no
 * allocation, no lock. Callers that build arguments should guard with
 * fbx_trace_enabled() so they pay nothing either.
 *
 * Variables (see DESIGN.md): FUSEBOX_TRACE=<file.json>, FUSEBOX_VERBOSE=1,
 * FUSEBOX_CLAIM_DEBUG=1, FUSEBOX_NVTX=1, FUSEBOX_TRACE_MAX_EVENTS=<n>.
 *
 * Build with -DFBX_TRACE_COMPILED_OUT=1 and every entry point becomes an
 * empty inline stub (the overhead benchmark's baseline). */
#ifndef FBX_TRACE_H
#define FBX_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
  FBX_TRACE_F_INIT = 1 << 0,     /* set once the environment has been read */
  FBX_TRACE_F_JSON = 1 << 1,     /* FUSEBOX_TRACE: events go to the JSON file */
  FBX_TRACE_F_SUMMARY = 1 << 2,  /* summary at teardown (TRACE or VERBOSE) */
  FBX_TRACE_F_CLAIM = 1 << 3,    /* FUSEBOX_CLAIM_DEBUG */
  FBX_TRACE_F_NVTX = 1 << 4,     /* NVTX ranges */
  FBX_TRACE_F_PROFILER = 1 << 5, /* ORT profiling collects our events */
  FBX_TRACE_F_GPU_CAPTURE = 1 << 6, /* FUSEBOX_GPU_CAPTURE: one eval is captured (trace_gpu.c) */
};

/* ---- GPU observability (helper "gpuobs"; trace_gpu.c, trace_gpu_nvml.c) ----
 * One completed piece of device work, as the executor's glue hands it over
 * (src/exec/exec_gpuobs.c translates the backend's records). Times: host
 * CLOCK_MONOTONIC ns (fbx_trace_now_ns's clock). */
typedef struct fbx_trace_op_site fbx_trace_op_site;
/* The nodes of one captured graph in launch order (fbx_trace_gpu_map_create). */
typedef struct fbx_trace_gpu_map fbx_trace_gpu_map;
typedef struct fbx_trace_gpu_act {
  int kind;                        /* 1 kernel, 2 memcpy, 3 memset, 4 a whole graph replay (not split) */
  const char *name;                /* kernel name (copied), or NULL */
  uint64_t start_ns, end_ns;
  uint32_t stream, correlation;
  uint64_t eval;                   /* fbx_trace_gpu_eval_begin's number; 0 = outside any eval */
  fbx_trace_op_site *site;         /* the node that launched it (NULL: none known) */
  int32_t grid[3], block[3], registers, shared_bytes;
  uint64_t bytes;                  /* copies and memsets */
  int32_t copy_kind;               /* 1 HtoD, 2 DtoH, 8 DtoD, else 0 */
  int graph;                       /* replayed from a CUDA graph */
  const fbx_trace_gpu_map *map;    /* graph records: the launched graph's nodes (NULL: not known) */
} fbx_trace_gpu_act;

/* ---- events ---- */
typedef enum fbx_trace_arg_type { FBX_TARG_INT, FBX_TARG_DBL, FBX_TARG_STR, FBX_TARG_SHAPES } fbx_trace_arg_type;
typedef struct fbx_trace_arg {
  const char *key;
  fbx_trace_arg_type type;
  int64_t i;
  double d;
  const char *s;             /* copied by the callee */
} fbx_trace_arg;
#define FBX_TARG_I(k, v) ((fbx_trace_arg){.key = (k), .type = FBX_TARG_INT, .i = (int64_t)(v)})
#define FBX_TARG_D(k, v) ((fbx_trace_arg){.key = (k), .type = FBX_TARG_DBL, .d = (double)(v)})
#define FBX_TARG_S(k, v) ((fbx_trace_arg){.key = (k), .type = FBX_TARG_STR, .s = (v)})
/* (addition, helper "tracefast2") Tensor shapes as raw dims, formatted only when
 * written, as the string "1x16x64,1x64" (rank 0: "scalar", rank < 0: "none").
 * p: n int64_t values (copied by the callee): the tensor count, then per tensor
 * its rank and its dims. Carried in .s (cast) and .i (= n). */
#define FBX_TARG_SHAPES_V(k, p, n) \
  ((fbx_trace_arg){.key = (k), .type = FBX_TARG_SHAPES, .i = (int64_t)(n), .s = (const char *)(const void *)(p)})

/* ---- per-session statistics for the summary ---- */
typedef struct fbx_trace_session fbx_trace_session;

/* ---- per-op spans: the executor's hot path (trace_op.c) ----
 * A site holds what is constant about one executed node (op type, node name,
 * id, device, its [fast]/[composed] marking). The executor gets it once per
 * plan step (fbx_trace_op_site_get interns it by content in the session; the
 * session owns it and frees it at destroy, after the final flush) and per
 * execution passes only what varies (fbx_trace_op_run). One call then gives
 * the "op" span with every standard argument, the "[fast]" span (op.fast) and
 * the "[composed]" span (op.composed) where the site has one, and feeds the
 * session's per-op-type times and fast/composed counts: the same events and
 * statistics as emitting them one by one, at a fraction of the cost (the
 * constant text is formatted once per site, at flush). */
typedef struct fbx_trace_op_site_desc {
  const void *scope;           /* executions of sites of one scope never overlap (one scope per
                                  serially run graph); part of the site's identity */
  const char *op;              /* span name: the op type ("FusedElementwise" for a fused chain) */
  const char *node;            /* node name (may be "") */
  const char *domain;          /* the op's domain; NULL or "" = "ai.onnx" */
  int node_id;
  const char *device;          /* backend name: "cpu", "cuda" */
  const char *fast_span;       /* name of the "[fast]" span, or NULL */
  const char *fast_kernel;     /* its "kernel" arg; NULL: the run's kernel variant (with suffix) */
  const char *variant_suffix;  /* appended to each run's kernel variant ("+epilogue(Relu)"), or NULL */
  const char *composed_op;     /* op of the "<op> [composed]" span (a composed fallback), or NULL */
  const char *composed_reason; /* its reason */
} fbx_trace_op_site_desc;
/* One tensor of an executed node: its dims (read during the call only; may be
 * NULL when rank <= 0), rank (< 0: an absent optional input; at most
 * FBX_TRACE_MAX_RANK dims are kept) and element size in bytes. */
#define FBX_TRACE_MAX_RANK 16
typedef struct fbx_trace_tensor {
  const int64_t *dims;
  int32_t rank;
  uint32_t elem_bytes;
} fbx_trace_tensor;
/* What varies per execution. The span's "elements" (of output 0) and "bytes"
 * (read + written) are derived from the tensors when the event is written. */
typedef struct fbx_trace_op_run {
  const fbx_trace_tensor *in, *out;
  int n_in, n_out;                       /* at most 255 each */
  const char *dtype;                     /* output 0's dtype name */
  double flops;                          /* estimate, 0 if unknown */
  const char *variant, *reason;          /* kernel variant chosen and why (NULL -> "") */
} fbx_trace_op_run;

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

/* FBX_TRACE_F_INIT alone means "read, everything off". 0 means "not read yet". */
extern int fbx__trace_flags;
int fbx__trace_init_slow(void);

static inline int fbx_trace_flags(void) {
  int f = fbx__trace_flags;
  if (__builtin_expect(f == FBX_TRACE_F_INIT, 1)) return 0;
  return f ? (f & ~FBX_TRACE_F_INIT) : fbx__trace_init_slow();
}
/* True when any event or statistic is being collected. */
static inline bool fbx_trace_enabled(void) {
  return (fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_PROFILER)) != 0;
}
void fbx_trace_init(void);

/* Monotonic clock, nanoseconds. */
uint64_t fbx_trace_now_ns(void);
/* A complete span ("ph":"X") on the calling thread. */
void fbx_trace_complete(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                        const fbx_trace_arg *args, int n_args);
/* One worker's slice [begin, end) of a parallel op ("op.worker" span with args
 * worker, begin, end): the same event as fbx_trace_complete makes, cheaper. */
void fbx_trace_slice(const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t worker, int64_t begin, int64_t end);
/* An instant ("ph":"i") on the calling thread. */
void fbx_trace_instant(const char *name, const char *cat, const fbx_trace_arg *args, int n_args);
/* A counter sample ("ph":"C") on its own track. */
void fbx_trace_counter(const char *name, double value);

/* Create/destroy; destroy prints the summary (when on) and flushes the trace
 * file so it is valid JSON. Both are cheap no-ops when tracing is off
 * (create returns NULL; every call below accepts NULL). */
fbx_trace_session *fbx_trace_session_create(const char *label);
void fbx_trace_session_destroy(fbx_trace_session *s);

/* The session whose Compute is running on this thread (thread-local), so
 * lower layers can attribute op timings without knowing about sessions. */
void fbx_trace_session_bind(fbx_trace_session *s);
fbx_trace_session *fbx_trace_session_current(void);

/* One GetCapability call: claimed/total nodes, fused subgraph count. */
void fbx_trace_session_claim(fbx_trace_session *s, int claimed, int total, int fused_subgraphs);
/* One unclaimed node (call once per unclaimed node, after _claim). */
void fbx_trace_session_unclaimed(fbx_trace_session *s, const char *domain, const char *op_type,
                                 const char *node_name, const char *reason);
/* One Compute: path name ("decode"...), cache event ("HIT"/"MISS"/"RETRACE"/"" for eager). */
void fbx_trace_session_compute(fbx_trace_session *s, const char *path, const char *cache);
/* One Compute's device counters (fbx_exec_run_report): buffers the run
 * allocated, host synchronisations, backend graphs captured and replayed. */
void fbx_trace_session_device(fbx_trace_session *s, int64_t allocs, int64_t host_syncs, int64_t captures,
                              int64_t replays);
/* One Compute ran on ORT's stream (it left the wait for the device to ORT). */
void fbx_trace_session_stream_run(fbx_trace_session *s);
/* Memory movement. */
void fbx_trace_session_wrap(fbx_trace_session *s, int64_t count, int64_t bytes);       /* zero-copy */
void fbx_trace_session_copy_wrap(fbx_trace_session *s, int64_t count, int64_t bytes);  /* constants */
void fbx_trace_session_copy_out(fbx_trace_session *s, bool delta, int64_t bytes);
/* Phase time: phase is "translate" | "compile" | "eval" | "copy". */
void fbx_trace_session_phase(fbx_trace_session *s, const char *phase, uint64_t ns);
/* One op execution (host or device time). */
void fbx_trace_session_op(fbx_trace_session *s, const char *op_type, uint64_t ns, bool device_time);

/* The site of one executed node in session s (NULL s: a process-wide table);
 * NULL when tracing is off or on OOM. Strings are copied. */
fbx_trace_op_site *fbx_trace_op_site_get(fbx_trace_session *s, const fbx_trace_op_site_desc *d);
/* One execution of a site's node on the calling thread, from t0 to t1 (host
 * clock, fbx_trace_now_ns). NULL site: nothing. */
void fbx_trace_op(fbx_trace_op_site *site, uint64_t t0_ns, uint64_t t1_ns, const fbx_trace_op_run *r);

/* ---- additions (helper "trace") ---- */
/* Counter tracks fusebox.mem_bytes / mem_pct (of budget_bytes; skipped when 0),
 * fusebox.rss_bytes and fusebox.util_pct (process CPU time / wall time / cores,
 * sampled at most once a millisecond). The ep layer calls it after each Compute. */
void fbx_trace_sample_counters(size_t engine_bytes, size_t budget_bytes);
/* NVTX range push/pop (FUSEBOX_NVTX=1 or FUSEBOX_TRACE set); no-ops when the
 * NVTX v3 headers were absent at build time. Pop must pair with push per thread. */
void fbx_trace_nvtx_push(const char *name);
void fbx_trace_nvtx_pop(void);
/* Names the calling thread in the trace (thread_name metadata; name copied). */
void fbx_trace_thread_name_set(const char *name);
/* Writes every buffered event to the file and rewrites the trailer, so the
 * file is valid JSON (session destroy and exit do this already). */
void fbx_trace_flush(void);
/* FUSEBOX_CLAIM_DEBUG: one claim decision to stderr (reason may be NULL). */
void fbx_trace_claim_debug(const char *node_name, const char *domain, const char *op_type,
                           bool claimed, const char *reason);

/* ---- additions (helper "gpuobs"): GPU counters, capture, device activity ---- */
/* FUSEBOX_GPU_CAPTURE=<path> set: the index of the eval to capture
 * (FUSEBOX_GPU_CAPTURE_EVAL, default 0; evals on device backends are counted
 * process-wide from 0); -1 when unset. */
int64_t fbx_trace_gpu_capture_eval(void);
/* Counter tracks at an eval boundary of a device backend: fusebox.gpu_mem_bytes
 * (the engine's device memory, the backend's own accounting), fusebox.gpu_mem_pct
 * (of total_bytes; skipped when 0), and from NVML (libnvidia-ml.so.1, dlopened;
 * absent library, device or query = no sample, no error) fusebox.gpu_util_pct
 * and fusebox.gpu_sm_clock_mhz, read at most every 20 ms. bus_id: the device's
 * PCI bus id (NULL: NVML device 0). FUSEBOX_TRACE only. */
void fbx_trace_sample_gpu(const char *bus_id, size_t engine_bytes, size_t total_bytes);
/* Starts an eval on a device backend: returns its number (from 1), with
 * *capture true when it is the eval FUSEBOX_GPU_CAPTURE asks for. */
uint64_t fbx_trace_gpu_eval_begin(bool *capture);
/* Whether eval (fbx_trace_gpu_eval_begin's number) has its device work recorded:
 * the first FUSEBOX_GPU_DETAIL evals (default 16; 'all'), up to the captured one,
 * every eval with ORT's profiler on. Counted for the summary: ask once per eval. */
bool fbx_trace_gpu_eval_detailed(uint64_t eval);
/* The same without counting: whether eval's device records are kept. */
bool fbx_trace_gpu_eval_in_window(uint64_t eval);
/* Whether eval is the one right after the window: recorded (so that the last
 * kept eval's records are complete), its records dropped. */
bool fbx_trace_gpu_eval_lead_out(uint64_t eval);
/* One device record: a kernel slice on the GPU track of its stream (name,
 * grid, block, registers, shared memory, node), a copy or memset slice, and
 * per eval a device-side fusebox.eval slice enclosing per-node op.device
 * slices (consecutive records of one node of one eval) that enclose the
 * kernels; the node's site gets the device time (slowest ops in device time).
 * Records of the captured eval also go to the capture file. */
void fbx_trace_gpu_activity(const fbx_trace_gpu_act *a);
/* After a drain: closes the open device slices when final (teardown or the
 * end of the captured eval: no record of earlier evals can still come). */
void fbx_trace_gpu_drained(bool final);
/* Writes the capture file (FUSEBOX_GPU_CAPTURE) from the captured eval's
 * records: a trace of its own, valid JSON. 0 on success (or nothing to do). */
int fbx_trace_gpu_capture_write(void);
/* The op type a site's spans are named by ("MatMul"; "" for NULL): NVTX ranges per node. */
const char *fbx_trace_op_site_name(const fbx_trace_op_site *site);
/* (helper "gpuobs2") The nodes of a graph captured from one stream, in the
 * order their work was captured: kernel_sites[i] launched the graph's i-th
 * kernel, copy_sites[j] its j-th copy or memset (a site may repeat; NULL: no
 * node). A replay's records are attributed to nodes by their order within the
 * replay (a graph captured from one stream is a chain: it runs in capture
 * order). Arrays copied; the map is the trace's, kept for the process (a
 * record of a replay may arrive long after its graph is gone); NULL on OOM. */
fbx_trace_gpu_map *fbx_trace_gpu_map_create(fbx_trace_op_site *const *kernel_sites, int64_t n_kernels,
                                            fbx_trace_op_site *const *copy_sites, int64_t n_copies);
/* How the backend's records learn their nodes ("callback", "extcorr", ...): said in the summary. */
void fbx_trace_gpu_set_mode(const char *mode);

#else /* FBX_TRACE_COMPILED_OUT: every entry point is an empty inline stub */

static inline int fbx_trace_flags(void) { return 0; }
static inline bool fbx_trace_enabled(void) { return false; }
static inline void fbx_trace_init(void) {}
static inline uint64_t fbx_trace_now_ns(void) { return 0; }
static inline void fbx_trace_complete(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                      const fbx_trace_arg *args, int n_args) {
  (void)name; (void)cat; (void)t0_ns; (void)t1_ns; (void)args; (void)n_args;
}
static inline void fbx_trace_instant(const char *name, const char *cat, const fbx_trace_arg *args,
                                     int n_args) {
  (void)name; (void)cat; (void)args; (void)n_args;
}
static inline void fbx_trace_counter(const char *name, double value) { (void)name; (void)value; }
static inline void fbx_trace_slice(const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t worker, int64_t begin,
                                   int64_t end) {
  (void)name; (void)t0_ns; (void)t1_ns; (void)worker; (void)begin; (void)end;
}
static inline fbx_trace_session *fbx_trace_session_create(const char *label) { (void)label; return NULL; }
static inline void fbx_trace_session_destroy(fbx_trace_session *s) { (void)s; }
static inline void fbx_trace_session_bind(fbx_trace_session *s) { (void)s; }
static inline fbx_trace_session *fbx_trace_session_current(void) { return NULL; }
static inline void fbx_trace_session_claim(fbx_trace_session *s, int claimed, int total, int fused) {
  (void)s; (void)claimed; (void)total; (void)fused;
}
static inline void fbx_trace_session_unclaimed(fbx_trace_session *s, const char *domain,
                                               const char *op_type, const char *node_name,
                                               const char *reason) {
  (void)s; (void)domain; (void)op_type; (void)node_name; (void)reason;
}
static inline void fbx_trace_session_compute(fbx_trace_session *s, const char *path, const char *cache) {
  (void)s; (void)path; (void)cache;
}
static inline void fbx_trace_session_device(fbx_trace_session *s, int64_t allocs, int64_t host_syncs,
                                            int64_t captures, int64_t replays) {
  (void)s; (void)allocs; (void)host_syncs; (void)captures; (void)replays;
}
static inline void fbx_trace_session_stream_run(fbx_trace_session *s) { (void)s; }
static inline void fbx_trace_session_wrap(fbx_trace_session *s, int64_t count, int64_t bytes) {
  (void)s; (void)count; (void)bytes;
}
static inline void fbx_trace_session_copy_wrap(fbx_trace_session *s, int64_t count, int64_t bytes) {
  (void)s; (void)count; (void)bytes;
}
static inline void fbx_trace_session_copy_out(fbx_trace_session *s, bool delta, int64_t bytes) {
  (void)s; (void)delta; (void)bytes;
}
static inline void fbx_trace_session_phase(fbx_trace_session *s, const char *phase, uint64_t ns) {
  (void)s; (void)phase; (void)ns;
}
static inline void fbx_trace_session_op(fbx_trace_session *s, const char *op_type, uint64_t ns,
                                        bool device_time) {
  (void)s; (void)op_type; (void)ns; (void)device_time;
}
static inline fbx_trace_op_site *fbx_trace_op_site_get(fbx_trace_session *s, const fbx_trace_op_site_desc *d) {
  (void)s; (void)d; return NULL;
}
static inline void fbx_trace_op(fbx_trace_op_site *site, uint64_t t0_ns, uint64_t t1_ns, const fbx_trace_op_run *r) {
  (void)site; (void)t0_ns; (void)t1_ns; (void)r;
}
static inline void fbx_trace_sample_counters(size_t engine_bytes, size_t budget_bytes) {
  (void)engine_bytes; (void)budget_bytes;
}
static inline void fbx_trace_nvtx_push(const char *name) { (void)name; }
static inline void fbx_trace_nvtx_pop(void) {}
static inline void fbx_trace_thread_name_set(const char *name) { (void)name; }
static inline void fbx_trace_flush(void) {}
static inline void fbx_trace_claim_debug(const char *node_name, const char *domain, const char *op_type,
                                         bool claimed, const char *reason) {
  (void)node_name; (void)domain; (void)op_type; (void)claimed; (void)reason;
}

static inline int64_t fbx_trace_gpu_capture_eval(void) { return -1; }
static inline void fbx_trace_sample_gpu(const char *bus_id, size_t engine_bytes, size_t total_bytes) {
  (void)bus_id; (void)engine_bytes; (void)total_bytes;
}
static inline uint64_t fbx_trace_gpu_eval_begin(bool *capture) { *capture = false; return 0; }
static inline bool fbx_trace_gpu_eval_detailed(uint64_t eval) { (void)eval; return false; }
static inline bool fbx_trace_gpu_eval_in_window(uint64_t eval) { (void)eval; return false; }
static inline bool fbx_trace_gpu_eval_lead_out(uint64_t eval) { (void)eval; return false; }
static inline void fbx_trace_gpu_activity(const fbx_trace_gpu_act *a) { (void)a; }
static inline void fbx_trace_gpu_drained(bool final) { (void)final; }
static inline int fbx_trace_gpu_capture_write(void) { return 0; }
static inline const char *fbx_trace_op_site_name(const fbx_trace_op_site *site) { (void)site; return ""; }
static inline fbx_trace_gpu_map *fbx_trace_gpu_map_create(fbx_trace_op_site *const *kernel_sites, int64_t n_kernels,
                                                          fbx_trace_op_site *const *copy_sites, int64_t n_copies) {
  (void)kernel_sites; (void)n_kernels; (void)copy_sites; (void)n_copies;
  return NULL;
}
static inline void fbx_trace_gpu_set_mode(const char *mode) { (void)mode; }

#endif /* FBX_TRACE_COMPILED_OUT */

#endif
