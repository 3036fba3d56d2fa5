/* Device activity in the trace (GPU track) and the FUSEBOX_GPU_CAPTURE file.
 *
 * Records arrive from the executor's glue (src/exec/exec_gpuobs.c) after a
 * drain of the backend's activity buffers: off the hot path, in batches,
 * in completion order per stream. Each becomes a slice on the GPU track of
 * its stream (a synthetic thread "GPU stream <n>", tid GPU_TID_BASE + n).
 * Slices are built streaming, per stream, with O(1) state:
 *   fusebox.eval (cat device)   first record of an eval .. last record of it
 *     <Op> (cat op.device)      consecutive records of one node of that eval
 *       <kernel> (cat gpu.kernel) / memcpy <dir> / memset (cat gpu.memcpy|gpu.memset)
 * An op.device slice closes when a record of another node or eval arrives
 * on its stream, the eval slice when one of another eval does, and both at
 * a final drain (teardown, the end of the captured eval). A node's device
 * time is the sum of its records' durations (gaps between its kernels are
 * not counted; the slice's extent shows them). Attribution is by the tags
 * the executor set when it enqueued the work, so:
 *   - a fused kernel (FusedElementwise, a GEMM with its epilogue) is one IR
 *     node: all of its time goes to that node's op span;
 *   - a CUDA-graph replay is one launch: its kernels carry the tags of the
 *     launch (the eval, no node) and are grouped under the pseudo-node
 *     "CUDAGraphReplay" (arg graph=1), not split per node.
 * Records of the captured eval are also formatted into a buffer that
 * fbx_trace_gpu_capture_write writes to FUSEBOX_GPU_CAPTURE's path. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

enum { GPU_TID_BASE = 1 << 20, MAX_STREAMS = 32 };

static char *g_cap_path;            /* FUSEBOX_GPU_CAPTURE */
static int64_t g_cap_eval = -1;     /* FUSEBOX_GPU_CAPTURE_EVAL (index from 0), -1: no capture */
static uint64_t g_cap_seq;          /* the captured eval's number, once it began */
static uint64_t g_evals;            /* evals begun (atomic) */

int fbx__trace_gpu_env(void) {
  const char *p = getenv("FUSEBOX_GPU_CAPTURE");
  if (!p || !*p) return 0;
  const char *e = getenv("FUSEBOX_GPU_CAPTURE_EVAL");
  int64_t n = 0;
  if (e && *e) {
    char *end = NULL;
    long long v = strtoll(e, &end, 10);
    if (end && *end == '\0' && v >= 0) n = v;
    else fprintf(stderr, "[fusebox] FUSEBOX_GPU_CAPTURE_EVAL=%s is not an eval index; capturing eval 0\n", e);
  }
  if (!(g_cap_path = fbx_strdup(p))) return 0;
  g_cap_eval = n;
  return FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_NVTX;
}

int64_t fbx_trace_gpu_capture_eval(void) {
  return (fbx_trace_flags() & FBX_TRACE_F_GPU_CAPTURE) ? g_cap_eval : -1;
}

uint64_t fbx_trace_gpu_eval_begin(bool *capture) {
  uint64_t idx = __atomic_fetch_add(&g_evals, 1, __ATOMIC_RELAXED);
  *capture = (fbx_trace_flags() & FBX_TRACE_F_GPU_CAPTURE) && (int64_t)idx == g_cap_eval;
  if (*capture) __atomic_store_n(&g_cap_seq, idx + 1, __ATOMIC_RELEASE);
  return idx + 1;
}

const char *fbx_trace_op_site_name(const fbx_trace_op_site *site) { return site && site->op ? site->op : ""; }

/* ---- streaming slice state ---- */
typedef struct stream_state {
  uint32_t stream;
  int named;                        /* thread_name metadata written (main trace) */
  int cap_named;                    /* ... in the capture file */
  uint64_t eval;                    /* open eval slice (0: none) */
  uint64_t ev_t0, ev_t1, ev_busy;
  int64_t ev_records;
  int op_open;
  fbx_trace_op_site *site;          /* open op.device slice's node (NULL + op_graph: graph replay) */
  int op_graph;
  uint64_t op_t0, op_t1, op_busy;
  int64_t op_records;
} stream_state;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static stream_state g_streams[MAX_STREAMS];
static int g_n_streams;
static fbx__sbuf g_cap;             /* the capture file's events, comma-separated */
static int64_t g_cap_events;

static uint64_t rel(uint64_t ns) { return ns > fbx__trace_t0_ns ? ns - fbx__trace_t0_ns : 0; }

/* Under g_mu: one formatted event to the main trace and/or the capture file. */
static void put_event(fbx__sbuf *ev, uint64_t eval) {
  if (ev->oom || !ev->len) return;
  if (fbx_trace_flags() & FBX_TRACE_F_JSON) fbx__trace_emit_raw(ev->p, ev->len, true);
  uint64_t cap = __atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE);
  if (cap && eval == cap && g_cap_path) {
    if (g_cap_events++) fbx__sbuf_puts(&g_cap, ",\n");
    fbx__sbuf_put(&g_cap, ev->p, ev->len);
  }
}

static void head(fbx__sbuf *b, const char *name, const char *cat, const char *ph, uint32_t stream) {
  fbx__sbuf_puts(b, "{\"name\":");
  fbx__sbuf_str(b, name);
  if (cat) {
    fbx__sbuf_puts(b, ",\"cat\":");
    fbx__sbuf_str(b, cat);
  }
  fbx__sbuf_puts(b, ",\"ph\":\"");
  fbx__sbuf_puts(b, ph);
  fbx__sbuf_puts(b, "\",\"pid\":");
  fbx__sbuf_i64(b, (int64_t)getpid());
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, GPU_TID_BASE + (int64_t)stream);
}

static void span(fbx__sbuf *b, const char *name, const char *cat, uint32_t stream, uint64_t t0, uint64_t t1,
                 const fbx_trace_arg *args, int n_args) {
  /* ORT profiling on: the device slices go to ORT's profile too, on the ORT timeline by their
   * device times, tagged like every Fusebox event (fbx_cat) and bound to the draining session */
  if (fbx_trace_flags() & FBX_TRACE_F_PROFILER) fbx__trace_profiler_record(name, cat, t0, t1, args, n_args);
  head(b, name, cat, "X", stream);
  fbx__sbuf_puts(b, ",\"ts\":");
  fbx__sbuf_ts(b, rel(t0));
  fbx__sbuf_puts(b, ",\"dur\":");
  fbx__sbuf_ts(b, t1 > t0 ? t1 - t0 : 0);
  fbx__sbuf_puts(b, ",\"args\":");
  fbx__sbuf_args(b, args, n_args);
  fbx__sbuf_puts(b, "}");
}

/* Under g_mu: the thread_name metadata of a stream's track, once per destination. */
static void name_track(stream_state *st, uint64_t eval) {
  uint64_t cap = __atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE);
  int to_main = (fbx_trace_flags() & FBX_TRACE_F_JSON) && !st->named;
  int to_cap = cap && eval == cap && g_cap_path && !st->cap_named;
  if (!to_main && !to_cap) return;
  char name[64];
  snprintf(name, sizeof name, "GPU stream %u", st->stream);
  fbx__sbuf b = {0};
  head(&b, "thread_name", NULL, "M", st->stream);
  fbx__sbuf_puts(&b, ",\"args\":{\"name\":");
  fbx__sbuf_str(&b, name);
  fbx__sbuf_puts(&b, "}}");
  if (!b.oom) {
    if (to_main) fbx__trace_emit_raw(b.p, b.len, false);
    if (to_cap) {
      if (g_cap_events++) fbx__sbuf_puts(&g_cap, ",\n");
      fbx__sbuf_put(&g_cap, b.p, b.len);
    }
  }
  st->named |= to_main;
  st->cap_named |= to_cap;
  fbx__sbuf_free(&b);
}

static void close_op(stream_state *st) {
  if (!st->op_open) return;
  const char *op = st->op_graph ? "CUDAGraphReplay" : st->site ? st->site->op : "(no node)";
  fbx_trace_arg a[6];
  int n = 0;
  a[n++] = FBX_TARG_S("node", st->site ? st->site->node : "");
  a[n++] = FBX_TARG_I("node_id", st->site ? st->site->node_id : -1);
  a[n++] = FBX_TARG_I("eval", st->eval);
  a[n++] = FBX_TARG_D("device_us", (double)st->op_busy / 1e3);
  a[n++] = FBX_TARG_I("records", st->op_records);
  if (st->op_graph) a[n++] = FBX_TARG_I("graph", 1);
  fbx__sbuf b = {0};
  span(&b, op, "op.device", st->stream, st->op_t0, st->op_t1, a, n);
  put_event(&b, st->eval);
  fbx__sbuf_free(&b);
  if (st->site) __atomic_add_fetch(&st->site->dev_calls, 1, __ATOMIC_RELAXED);
  st->op_open = 0;
}

static void close_eval(stream_state *st) {
  close_op(st);
  if (!st->eval) return;
  fbx_trace_arg a[] = {FBX_TARG_I("eval", st->eval), FBX_TARG_S("side", "device"),
                       FBX_TARG_D("device_us", (double)st->ev_busy / 1e3), FBX_TARG_I("records", st->ev_records),
                       FBX_TARG_I("stream", st->stream)};
  fbx__sbuf b = {0};
  span(&b, "fusebox.eval", "device", st->stream, st->ev_t0, st->ev_t1, a, 5);
  put_event(&b, st->eval);
  fbx__sbuf_free(&b);
  st->eval = 0;
}

static stream_state *stream_of(uint32_t stream) {
  for (int i = 0; i < g_n_streams; i++)
    if (g_streams[i].stream == stream) return &g_streams[i];
  if (g_n_streams == MAX_STREAMS) return NULL;
  stream_state *st = &g_streams[g_n_streams++];
  memset(st, 0, sizeof *st);
  st->stream = stream;
  return st;
}

static const char *copy_dir(int k) {
  switch (k) {
    case 1: return "memcpy HtoD";
    case 2: return "memcpy DtoH";
    case 8: return "memcpy DtoD";
    default: return "memcpy";
  }
}

void fbx_trace_gpu_activity(const fbx_trace_gpu_act *a) {
  if (!(fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_PROFILER)) ||
      !a)
    return;
  pthread_mutex_lock(&g_mu);
  stream_state *st = stream_of(a->stream);
  if (!st) {
    pthread_mutex_unlock(&g_mu);
    return;
  }
  name_track(st, a->eval);
  uint64_t t0 = a->start_ns, t1 = a->end_ns > a->start_ns ? a->end_ns : a->start_ns, d = t1 - t0;
  if (st->eval != a->eval) close_eval(st);
  fbx_trace_op_site *site = a->graph ? NULL : a->site;
  if (st->op_open && (st->site != site || st->op_graph != (a->graph != 0))) close_op(st);
  if (a->eval) {
    if (!st->eval) {
      st->eval = a->eval;
      st->ev_t0 = t0;
      st->ev_t1 = t1;
      st->ev_busy = 0;
      st->ev_records = 0;
    }
    if (t1 > st->ev_t1) st->ev_t1 = t1;
    st->ev_busy += d;
    st->ev_records++;
    if (site || a->graph) {
      if (!st->op_open) {
        st->op_open = 1;
        st->site = site;
        st->op_graph = a->graph != 0;
        st->op_t0 = t0;
        st->op_t1 = t1;
        st->op_busy = 0;
        st->op_records = 0;
      }
      if (t1 > st->op_t1) st->op_t1 = t1;
      st->op_busy += d;
      st->op_records++;
      if (site) __atomic_add_fetch(&site->dev_ns, d, __ATOMIC_RELAXED);
    }
  }
  fbx_trace_arg args[12];
  int n = 0;
  char grid[48], block[48];
  const char *name = a->name && *a->name ? a->name : "kernel", *cat = "gpu.kernel";
  if (site) {
    args[n++] = FBX_TARG_S("op", site->op);
    args[n++] = FBX_TARG_S("node", site->node);
    args[n++] = FBX_TARG_I("node_id", site->node_id);
  }
  args[n++] = FBX_TARG_I("eval", a->eval);
  if (a->kind == 1) {
    snprintf(grid, sizeof grid, "%dx%dx%d", a->grid[0], a->grid[1], a->grid[2]);
    snprintf(block, sizeof block, "%dx%dx%d", a->block[0], a->block[1], a->block[2]);
    args[n++] = FBX_TARG_S("grid", grid);
    args[n++] = FBX_TARG_S("block", block);
    args[n++] = FBX_TARG_I("registers", a->registers);
    args[n++] = FBX_TARG_I("shared_bytes", a->shared_bytes);
  } else {
    name = a->kind == 2 ? copy_dir(a->copy_kind) : "memset";
    cat = a->kind == 2 ? "gpu.memcpy" : "gpu.memset";
    args[n++] = FBX_TARG_I("bytes", (int64_t)a->bytes);
  }
  args[n++] = FBX_TARG_I("correlation", a->correlation);
  if (a->graph) args[n++] = FBX_TARG_I("graph", 1);
  fbx__sbuf b = {0};
  span(&b, name, cat, a->stream, t0, t1, args, n);
  put_event(&b, a->eval);
  fbx__sbuf_free(&b);
  pthread_mutex_unlock(&g_mu);
}

void fbx_trace_gpu_drained(bool final) {
  if (!final) return;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_n_streams; i++) close_eval(&g_streams[i]);
  pthread_mutex_unlock(&g_mu);
}

int fbx_trace_gpu_capture_write(void) {
  if (!__atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE)) return 0;
  pthread_mutex_lock(&g_mu);
  if (!g_cap_path) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  int rc = 0;
  if (g_cap.oom) rc = -1;
  FILE *f = rc ? NULL : fopen(g_cap_path, "w");
  if (!rc && !f) rc = -1;
  if (f) {
    fprintf(f, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"fusebox GPU capture (eval index %lld = eval number %llu)\"}}%s",
            (int)getpid(), (long long)g_cap_eval, (unsigned long long)g_cap_seq, g_cap_events ? ",\n" : "");
    if (g_cap.len) fwrite(g_cap.p, 1, g_cap.len, f);
    fputs("\n]}\n", f);
    if (fclose(f)) rc = -1;
  }
  if (rc) fprintf(stderr, "[fusebox] cannot write the GPU capture file %s\n", g_cap_path);
  /* one capture per process: the records are written; later ones are not collected */
  fbx__sbuf_free(&g_cap);
  g_cap_events = 0;
  fbx_free(g_cap_path);
  g_cap_path = NULL;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

#else
typedef int fbx__trace_gpu_compiled_out;
#endif
