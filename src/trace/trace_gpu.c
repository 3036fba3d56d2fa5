/* Device activity in the trace (GPU track) and the FUSEBOX_GPU_CAPTURE file.
 *
 * Records arrive from the executor's glue (src/exec/exec_gpuobs.c) as the
 * backend's profiling library delivers them (on its own thread, off the hot
 * path), in batches, in completion order per stream. Arrival does no
 * formatting (helper "traceoh"): a record is copied as a 96-byte binary
 * gpu_rec (its kernel name interned) into a list of chunks, under a lock held
 * for that copy alone. The slices and their JSON are made from those records
 * later, in arrival order, by fbx__trace_gpu_process: inside the writer's
 * flush (session teardown, fbx_trace_flush, exit, the writer's memory
 * budget), at a final drain (teardown, the end of the captured eval), before
 * the summary and ORT's profiler read them, and by the arriving thread once
 * PENDING_MAX records wait (memory stays bounded on long runs). Formatting at
 * arrival had cost 2.5-3.6 us per record on the profiling library's thread
 * (~146 records per decode step on the H200: about a core at decode rates).
 *
 * Each record becomes a slice on the GPU track of its stream (a synthetic
 * thread "GPU stream <n>", tid GPU_TID_BASE + n). Slices are built streaming,
 * per stream, O(1) state:
 *   fusebox.eval (cat device)   first record of an eval .. last record of it
 *     <Op> (cat op.device)      consecutive records of one node of that eval
 *       <kernel> (cat gpu.kernel) / memcpy <dir> / memset (cat gpu.memcpy|gpu.memset) /
 *       "CUDA graph" (cat gpu.graph: a replay recorded whole, FUSEBOX_CUPTI_GRAPHS=whole)
 * An op.device slice closes when a record of another node or eval arrives
 * on its stream, the eval slice when one of another eval does, and both at
 * a final drain (teardown, the end of the captured eval).
 *
 * What adds up (per device-side eval slice, its args):
 *   span_us  = last record's end - first record's start;
 *   dev_us   = busy time: the sum of the records' busy durations, the union
 *              of busy intervals (see "early start" below);
 *   idle_us  = span_us - dev_us: the device waited between records (on a
 *              launch-bound decode, for the host to enqueue the next one);
 *   op_us    = the part of dev_us attributed to nodes (the sum of the eval's
 *              op.device dev_us), unattributed_us the rest.
 * Early start: with programmatic dependent launch (cuda_launch.cuh) a kernel
 * is resident, and CUPTI's record starts, before the kernel before it on
 * the stream has ended; it waits for it in griddepcontrol.wait. A stream's
 * kernel records arrive in completion order (copies may come apart from
 * them), so a kernel record that begins before the previous kernel's end (of
 * the same eval)
 * and ends after it is cut to begin there: its slice and its busy time start
 * at the previous kernel's end, and the time it spent resident before is its
 * argument "early_start_us". Slices of a stream thus do not overlap (they
 * nest as the table above says) and no time is counted twice.
 * So span = op + unattributed + idle exactly; the session summary prints the
 * totals with idle as its own "idle (host-bound)" entry. A node's device time
 * (op.device dev_us, the slowest-ops table) is the sum of its records'
 * durations; the slice's extent shows the gaps between them.
 *
 * Attribution (op.device arg "attribution"): by the tags the executor set
 * when it enqueued the work:
 *   "correlation": a live launch's record carries its node through the
 *     launch's correlation id; a fused kernel (FusedElementwise, a GEMM with
 *     its epilogue) is one IR node: all of its time goes to that node;
 *   "capture order": a CUDA-graph replay is one launch; its records carry the
 *     graph's map (fbx_trace_gpu_map_create: per captured node, how many
 *     kernels and copies it enqueued during capture) and the i-th kernel (j-th
 *     copy) of a replay goes to the map's i-th kernel (j-th copy) node;
 *   "graph launch (not split)": a replay without a map (the backend could not
 *     count launches at capture) is the pseudo-node "CUDAGraphReplay" (graph=1);
 *   "none": work tagged with the eval but no node (input uploads before the
 *     first step, output copies after the last) is the pseudo-node "(no node)".
 * So the op.device slices of an eval add up to its dev_us; op_us counts the
 * nodes' alone.
 * Records of the captured eval are also formatted into a buffer that
 * fbx_trace_gpu_capture_write writes to FUSEBOX_GPU_CAPTURE's path.
 *
 * Locks, in the order they nest: the writer's (trace_writer.c, when its
 * flush runs the builder) > g_mu (the builder: stream states, totals, the
 * capture buffer) > g_rec_mu (the waiting records, kernel names, maps) > the
 * profiler store's. Nothing under g_mu or g_rec_mu calls into the writer. */
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

/* FUSEBOX_GPU_DETAIL=<n>|all: device records (kernels, copies, memsets) for evals 0..n-1
 * (default FBX__GPU_DETAIL_DEFAULT), extended to the captured eval, none after: per-kernel
 * records cost the device time of every launch they time (about +60% on a replayed graph of
 * ~1 us kernels, measured on the H200). A window rather than every n-th eval: a replayed
 * kernel's record gets its end time from that graph node's next recorded run (CUPTI on the
 * H200, measured: switched back on after 16 evals, a 2 us kernel lasted 20 ms), so the eval
 * after the window (the lead-out) is recorded too and its records dropped, and recording
 * stays off after it; switching to whole-graph records (GRAPH_TRACE) mid-run instead crashed
 * the process in our one try (not investigated). */
#define FBX__GPU_DETAIL_DEFAULT 16
static int64_t g_detail_n = FBX__GPU_DETAIL_DEFAULT; /* -1: all */
static uint64_t g_detailed;                           /* evals with per-kernel records (atomic) */

static void detail_env(void) {
  const char *e = getenv("FUSEBOX_GPU_DETAIL");
  if (!e || !*e) return;
  char *end = NULL;
  long long v = strtoll(e, &end, 10);
  if (!strcmp(e, "all")) g_detail_n = -1;
  else if (end && *end == '\0' && v >= 0) g_detail_n = v;
  else fprintf(stderr, "[fusebox] FUSEBOX_GPU_DETAIL=%s is not a count or 'all'; device records for the first "
                       "%lld evals\n", e, (long long)g_detail_n);
}

/* The index of the first eval after the window, -1: no end (all, or ORT's profiler on). */
static int64_t window_end(void) {
  const int f = fbx_trace_flags();
  if (g_detail_n < 0 || (f & FBX_TRACE_F_PROFILER)) return -1;
  int64_t end = g_detail_n;
  if ((f & FBX_TRACE_F_GPU_CAPTURE) && g_cap_eval >= end) end = g_cap_eval + 1;
  return end;
}

bool fbx_trace_gpu_eval_in_window(uint64_t eval) {
  const int64_t end = window_end();
  return end < 0 || (int64_t)eval - 1 < end;
}

bool fbx_trace_gpu_eval_detailed(uint64_t eval) {
  const bool on = fbx_trace_gpu_eval_in_window(eval);
  if (on) __atomic_fetch_add(&g_detailed, 1, __ATOMIC_RELAXED);
  return on;
}

bool fbx_trace_gpu_eval_lead_out(uint64_t eval) {
  const int64_t end = window_end();
  return end >= 0 && (int64_t)eval - 1 == end;
}

int fbx__trace_gpu_env(void) {
  detail_env();
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

/* ---- graph maps ---- */
struct fbx_trace_gpu_map {
  struct fbx_trace_gpu_map *next; /* all maps, for the process */
  int64_t nk, nc;
  fbx_trace_op_site **ks, **cs;
};

/* ---- binary device records: what arrival stores ---- */
/* A kernel name, interned by content for the process (records refer to it
 * long after the producer's string is gone). */
typedef struct gpu_name {
  struct gpu_name *next; /* hash chain */
  uint64_t hash;
  char *json;            /* the escaped JSON string, made at the first format (under g_mu) */
  size_t json_len;
  char s[];
} gpu_name;

/* One record as fbx_trace_gpu_activity got it. Kernels keep their launch
 * geometry, copies and memsets their bytes (and direction). */
typedef struct gpu_rec {
  uint64_t t0, t1;       /* host clock ns, t1 >= t0 */
  uint64_t eval;         /* 0: outside any eval */
  const void *who;       /* graph: the replay's map (NULL: not known); else the node's site (NULL: none) */
  const gpu_name *name;  /* kernels: the interned name (NULL: none) */
  uint32_t stream, correlation;
  union {
    struct { int32_t grid[3], block[3], registers, shared_bytes; } k;
    struct { uint64_t bytes; int32_t copy_kind; } c;
  } u;
  uint8_t kind;          /* 1 kernel, 2 memcpy, 3 memset, 4 a whole graph replay (FBX_DEVACT_*) */
  uint8_t graph;
} gpu_rec;
_Static_assert(sizeof(gpu_rec) <= 96, "a device record stays small: arrival copies it");

enum {
  CHUNK_RECS = 2048,       /* records per chunk (192 KiB) */
  SPARE_CHUNKS = 16,       /* processed chunks kept for reuse */
  PENDING_MAX = 1 << 18,   /* records waiting (24 MiB) before the arriving thread processes them */
  NAME_CACHE = 256,        /* producer's pointer -> interned name, direct-mapped */
  NAME_BUCKETS = 1024,
  MAX_NAMES = 1 << 16,     /* distinct kernel names kept; more are "kernel" */
};
typedef struct rec_chunk {
  struct rec_chunk *next;
  int n;
  gpu_rec r[CHUNK_RECS];
} rec_chunk;

static pthread_mutex_t g_rec_mu = PTHREAD_MUTEX_INITIALIZER; /* everything in this block */
static rec_chunk *g_head, *g_tail, *g_spare;
static int g_n_spare;
static int64_t g_pending;      /* records in g_head.. */
static int64_t g_lost;         /* records not kept (out of memory) */
static fbx_trace_gpu_map *g_maps;  /* every map made (kept for the process) */
static gpu_name *g_names[NAME_BUCKETS];
static int g_n_names;
static struct { const char *p; const gpu_name *n; } g_name_cache[NAME_CACHE];

/* ---- streaming slice state: what processing builds ---- */
enum { HOW_NONE, HOW_CORR, HOW_CAPTURE, HOW_UNSPLIT };
static const char *const how_names[] = {"none (the eval's own work: input uploads, output copies)", "correlation",
                                        "capture order", "graph launch (not split)"};

typedef struct stream_state {
  uint32_t stream;
  int named;                        /* thread_name metadata written (main trace) */
  int cap_named;                    /* ... in the capture file */
  uint64_t eval;                    /* open eval slice (0: none) */
  uint64_t ev_t0, ev_t1, ev_busy, ev_attr;
  int64_t ev_records;
  const fbx_trace_session *ev_session; /* the session of the eval's first node (ORT's profiler) */
  int op_open;
  fbx_trace_op_site *site;          /* open op.device slice's node (NULL + HOW_UNSPLIT: graph replay) */
  int op_how;                       /* HOW_* */
  uint64_t op_t0, op_t1, op_busy;
  int64_t op_records;
  uint64_t busy_end, busy_eval;     /* end of the stream's last kernel record, its eval (early start) */
  const fbx_trace_gpu_map *rep_map; /* the graph replay being attributed (NULL: none) */
  uint32_t rep_corr;                /* its launch's correlation id */
  int64_t rep_k, rep_c;             /* its kernels and copies seen so far */
} stream_state;

/* Process-wide totals over closed device-side eval slices (the summary). */
static struct {
  int64_t evals, records;
  uint64_t span, busy, by_how[4];
} g_tot;
static char g_mode[24];

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the builder: everything below */
static stream_state g_streams[MAX_STREAMS];
static int g_n_streams;
static fbx__sbuf g_cap;             /* the capture file's events, comma-separated */
static int64_t g_cap_events;
static const fbx__trace_out *g_out; /* the writer's output during a process pass (NULL: no trace file) */
static int64_t g_pid;               /* the process id events carry */
static fbx__sbuf g_ev;              /* one event being formatted: reused, no allocation per event */

/* ---- arrival ---- */

static uint64_t name_hash(const char *s) { /* FNV-1a */
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Under g_rec_mu: the interned copy of s (NULL: none, or out of memory / names).
 * A producer that hands the same pointer again (CUPTI's names live for the
 * process) costs one compare with the copy. */
static const gpu_name *name_intern(const char *s) {
  if (!s || !*s) return NULL;
  size_t c = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull >> 56; /* NAME_CACHE = 2^8 slots */
  if (g_name_cache[c].p == s && !strcmp(g_name_cache[c].n->s, s)) return g_name_cache[c].n;
  uint64_t h = name_hash(s);
  gpu_name *n = g_names[h % NAME_BUCKETS];
  while (n && (n->hash != h || strcmp(n->s, s))) n = n->next;
  if (!n) {
    size_t len = strlen(s);
    if (g_n_names >= MAX_NAMES || !(n = fbx_malloc(sizeof *n + len + 1))) return NULL;
    n->hash = h;
    n->json = NULL;
    n->json_len = 0;
    memcpy(n->s, s, len + 1);
    n->next = g_names[h % NAME_BUCKETS];
    g_names[h % NAME_BUCKETS] = n;
    g_n_names++;
  }
  g_name_cache[c].p = s;
  g_name_cache[c].n = n;
  return n;
}

static void process_now(bool final);

void fbx_trace_gpu_activity(const fbx_trace_gpu_act *a) {
  if (!(fbx_trace_flags() & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_GPU_CAPTURE | FBX_TRACE_F_PROFILER)) ||
      !a)
    return;
  gpu_rec r;
  r.t0 = a->start_ns;
  r.t1 = a->end_ns > a->start_ns ? a->end_ns : a->start_ns;
  r.eval = a->eval;
  r.who = a->graph ? (const void *)a->map : (const void *)a->site;
  r.stream = a->stream;
  r.correlation = a->correlation;
  r.kind = (uint8_t)(a->kind >= 1 && a->kind <= 4 ? a->kind : 3);
  r.graph = a->graph != 0;
  if (r.kind == 1) {
    memcpy(r.u.k.grid, a->grid, sizeof r.u.k.grid);
    memcpy(r.u.k.block, a->block, sizeof r.u.k.block);
    r.u.k.registers = a->registers;
    r.u.k.shared_bytes = a->shared_bytes;
  } else {
    r.u.c.bytes = a->bytes;
    r.u.c.copy_kind = a->copy_kind;
  }
  bool over = false;
  pthread_mutex_lock(&g_rec_mu);
  r.name = r.kind == 1 ? name_intern(a->name) : NULL;
  rec_chunk *c = g_tail;
  if (__builtin_expect(!c || c->n == CHUNK_RECS, 0)) {
    if ((c = g_spare)) {
      g_spare = c->next;
      g_n_spare--;
    } else {
      c = fbx_malloc(sizeof *c);
    }
    if (!c) {
      g_lost++;
      pthread_mutex_unlock(&g_rec_mu);
      return;
    }
    c->next = NULL;
    c->n = 0;
    if (g_tail) g_tail->next = c;
    else g_head = c;
    g_tail = c;
  }
  c->r[c->n++] = r;
  over = ++g_pending == PENDING_MAX;
  pthread_mutex_unlock(&g_rec_mu);
  if (__builtin_expect(over, 0)) process_now(false); /* long runs: memory stays bounded */
}

fbx_trace_gpu_map *fbx_trace_gpu_map_create(fbx_trace_op_site *const *kernel_sites, int64_t n_kernels,
                                            fbx_trace_op_site *const *copy_sites, int64_t n_copies) {
  if (n_kernels < 0 || n_copies < 0) return NULL;
  fbx_trace_gpu_map *m = fbx_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->ks = fbx_malloc(sizeof *m->ks * (size_t)(n_kernels ? n_kernels : 1));
  m->cs = fbx_malloc(sizeof *m->cs * (size_t)(n_copies ? n_copies : 1));
  if (!m->ks || !m->cs) {
    fbx_free(m->ks);
    fbx_free(m->cs);
    fbx_free(m);
    return NULL;
  }
  if (n_kernels) memcpy(m->ks, kernel_sites, sizeof *m->ks * (size_t)n_kernels);
  if (n_copies) memcpy(m->cs, copy_sites, sizeof *m->cs * (size_t)n_copies);
  m->nk = n_kernels;
  m->nc = n_copies;
  pthread_mutex_lock(&g_rec_mu);
  m->next = g_maps;
  g_maps = m;
  pthread_mutex_unlock(&g_rec_mu);
  return m;
}

void fbx_trace_gpu_set_mode(const char *mode) {
  pthread_mutex_lock(&g_mu);
  snprintf(g_mode, sizeof g_mode, "%s", mode ? mode : "");
  pthread_mutex_unlock(&g_mu);
}

/* ---- processing: slices and their JSON (under g_mu) ---- */

/* The reused event buffer, emptied. */
static fbx__sbuf *ev_buf(void) {
  g_ev.len = 0;
  g_ev.oom = 0;
  return &g_ev;
}

static uint64_t rel(uint64_t ns) { return ns > fbx__trace_t0_ns ? ns - fbx__trace_t0_ns : 0; }

/* name_json: the name already as a JSON string (len bytes), or NULL: name is escaped here. */
static void head(fbx__sbuf *b, const char *name, const char *name_json, size_t len, const char *cat, const char *ph,
                 uint32_t stream) {
  fbx__sbuf_puts(b, "{\"name\":");
  if (name_json) fbx__sbuf_put(b, name_json, len);
  else fbx__sbuf_str(b, name);
  if (cat) {
    fbx__sbuf_puts(b, ",\"cat\":");
    fbx__sbuf_str(b, cat);
  }
  fbx__sbuf_puts(b, ",\"ph\":\"");
  fbx__sbuf_puts(b, ph);
  fbx__sbuf_puts(b, "\",\"pid\":");
  fbx__sbuf_i64(b, g_pid);
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, GPU_TID_BASE + (int64_t)stream);
}

enum { TO_MAIN = 1, TO_CAP = 2 };
/* Where one counted event of eval goes: TO_MAIN (a trace file is open and its cap has room;
 * past the cap it is counted as dropped, not formatted), TO_CAP (the captured eval's). */
static int dest_of(uint64_t eval) {
  uint64_t cap = __atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE);
  int d = (cap && eval == cap && g_cap_path) ? TO_CAP : 0;
  if (g_out) {
    if (g_out->room()) d |= TO_MAIN;
    else g_out->emit(NULL, 0, true);
  }
  return d;
}

/* The formatted event b to its destinations. */
static void put_event(const fbx__sbuf *b, int dest) {
  if (b->oom) {
    if (dest & TO_MAIN) g_out->emit(NULL, 0, true); /* lost: counted as dropped */
    return;
  }
  if (dest & TO_MAIN) g_out->emit(b->p, b->len, true);
  if (dest & TO_CAP) {
    if (g_cap_events++) fbx__sbuf_puts(&g_cap, ",\n");
    fbx__sbuf_put(&g_cap, b->p, b->len);
  }
}

/* One slice (op.device, the device-side eval) on a stream's GPU track: to ORT's profiler
 * store (when profiling), the main trace and the capture file (dest_of). */
static void slice(const char *name, const char *cat, uint32_t stream, uint64_t t0, uint64_t t1,
                  const fbx_trace_arg *args, int n_args, uint64_t eval, const fbx_trace_session *session) {
  /* ORT profiling on: the device slices go to ORT's profile too, on the ORT timeline by their
   * device times, tagged like every Fusebox event (fbx_cat), owned by the node's session (else
   * the eval's) and linked to the ORT event the eval ran in (trace_profiler.c) */
  if (fbx_trace_flags() & FBX_TRACE_F_PROFILER)
    fbx__trace_profiler_record_dev(name, cat, t0, t1, args, n_args, eval,
                                   session ? session : fbx_trace_session_current());
  int dest = dest_of(eval);
  if (!dest) return;
  fbx__sbuf *b = ev_buf();
  head(b, name, NULL, 0, cat, "X", stream);
  fbx__sbuf_puts(b, ",\"ts\":");
  fbx__sbuf_ts(b, rel(t0));
  fbx__sbuf_puts(b, ",\"dur\":");
  fbx__sbuf_ts(b, t1 > t0 ? t1 - t0 : 0);
  fbx__sbuf_puts(b, ",\"args\":");
  fbx__sbuf_args(b, args, n_args);
  fbx__sbuf_puts(b, "}");
  put_event(b, dest);
}

/* The thread_name metadata of a stream's track, once per destination. */
static void name_track(stream_state *st, uint64_t eval) {
  uint64_t cap = __atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE);
  int to_main = g_out && !st->named;
  int to_cap = cap && eval == cap && g_cap_path && !st->cap_named;
  if (!to_main && !to_cap) return;
  char name[64];
  snprintf(name, sizeof name, "GPU stream %u", st->stream);
  fbx__sbuf *b = ev_buf();
  head(b, "thread_name", NULL, 0, NULL, "M", st->stream);
  fbx__sbuf_puts(b, ",\"args\":{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, "}}");
  if (!b->oom) {
    if (to_main) g_out->emit(b->p, b->len, false);
    if (to_cap) {
      if (g_cap_events++) fbx__sbuf_puts(&g_cap, ",\n");
      fbx__sbuf_put(&g_cap, b->p, b->len);
    }
  }
  st->named |= to_main;
  st->cap_named |= to_cap;
}

static void close_op(stream_state *st) {
  if (!st->op_open) return;
  const char *op = st->op_how == HOW_UNSPLIT ? "CUDAGraphReplay" : st->site ? st->site->op : "(no node)";
  fbx_trace_arg a[7];
  int n = 0;
  a[n++] = FBX_TARG_S("node", st->site ? st->site->node : "");
  a[n++] = FBX_TARG_I("node_id", st->site ? st->site->node_id : -1);
  a[n++] = FBX_TARG_I("eval", st->eval);
  a[n++] = FBX_TARG_D("dev_us", (double)st->op_busy / 1e3);
  a[n++] = FBX_TARG_I("records", st->op_records);
  a[n++] = FBX_TARG_S("attribution", how_names[st->op_how]);
  if (st->op_how == HOW_UNSPLIT) a[n++] = FBX_TARG_I("graph", 1);
  slice(op, "op.device", st->stream, st->op_t0, st->op_t1, a, n, st->eval,
        st->site ? st->site->session : st->ev_session);
  if (st->site) __atomic_add_fetch(&st->site->dev_calls, 1, __ATOMIC_RELAXED);
  st->op_open = 0;
}

static void close_eval(stream_state *st) {
  close_op(st);
  if (!st->eval) return;
  uint64_t span_ns = st->ev_t1 - st->ev_t0, idle = span_ns > st->ev_busy ? span_ns - st->ev_busy : 0;
  fbx_trace_arg a[] = {FBX_TARG_I("eval", st->eval), FBX_TARG_S("side", "device"),
                       FBX_TARG_D("dev_us", (double)st->ev_busy / 1e3), FBX_TARG_D("span_us", (double)span_ns / 1e3),
                       FBX_TARG_D("idle_us", (double)idle / 1e3), FBX_TARG_D("op_us", (double)st->ev_attr / 1e3),
                       FBX_TARG_D("unattributed_us", (double)(st->ev_busy - st->ev_attr) / 1e3),
                       FBX_TARG_I("records", st->ev_records), FBX_TARG_I("stream", st->stream),
                       FBX_TARG_S("attribution", g_mode[0] ? g_mode : "tags")};
  slice("fusebox.eval", "device", st->stream, st->ev_t0, st->ev_t1, a, (int)(sizeof a / sizeof a[0]), st->eval,
        st->ev_session);
  g_tot.evals++;
  g_tot.records += st->ev_records;
  g_tot.span += span_ns;
  g_tot.busy += st->ev_busy;
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

/* "64x2x1" without snprintf (out: at least 36 bytes). */
static const char *dims3(char *out, const int32_t d[3]) {
  char *o = out;
  for (int i = 0; i < 3; i++) {
    if (i) *o++ = 'x';
    char tmp[12], *e = tmp + sizeof tmp, *q = e;
    uint32_t v = d[i] < 0 ? (uint32_t)0 - (uint32_t)d[i] : (uint32_t)d[i];
    do *--q = (char)('0' + v % 10);
    while (v /= 10);
    if (d[i] < 0) *o++ = '-';
    memcpy(o, q, (size_t)(e - q));
    o += e - q;
  }
  *o = '\0';
  return out;
}

#define PUTL(b, lit) fbx__sbuf_put((b), lit, sizeof lit - 1)

/* A site's constant arguments of its device records, "op":"MatMul","node":"mm","node_id":0,
 * escaped once (NULL on OOM: then formatted each time). */
static const char *site_json(fbx_trace_op_site *site, size_t *len) {
  if (!site->dev_json) {
    fbx__sbuf t = {0};
    PUTL(&t, "\"op\":");
    fbx__sbuf_str(&t, site->op);
    PUTL(&t, ",\"node\":");
    fbx__sbuf_str(&t, site->node);
    PUTL(&t, ",\"node_id\":");
    fbx__sbuf_i64(&t, site->node_id);
    PUTL(&t, ",");
    if (t.oom) {
      fbx__sbuf_free(&t);
      return NULL;
    }
    site->dev_json = t.p;
    site->dev_json_len = t.len;
  }
  *len = site->dev_json_len;
  return site->dev_json;
}

/* The kernel name's escaped text, once per name (NULL on OOM). */
static const char *name_json(const gpu_name *nm, size_t *len) {
  if (!nm->json) {
    fbx__sbuf t = {0};
    fbx__sbuf_str(&t, nm->s);
    if (t.oom) {
      fbx__sbuf_free(&t);
      return NULL;
    }
    ((gpu_name *)nm)->json_len = t.len;
    ((gpu_name *)nm)->json = t.p;
  }
  *len = nm->json_len;
  return nm->json;
}

/* One record's own event (kernel, memcpy, memset), written straight from the record: the
 * same text as the generic arguments' writer (fbx__sbuf_args) gives for
 * {op, node, node_id}? eval, {grid, block, registers, shared_bytes} | {bytes} (not for a whole
 * graph), correlation,
 * graph?, attribution?, with the constant pieces escaped once. */
static void record_json(fbx__sbuf *b, const gpu_rec *a, const char *name, const char *cat,
                        fbx_trace_op_site *site, int how, uint64_t early_ns) {
  size_t len = 0;
  const char *nj = a->kind == 1 && a->name ? name_json(a->name, &len) : NULL;
  head(b, name, nj, len, cat, "X", a->stream);
  PUTL(b, ",\"ts\":");
  fbx__sbuf_ts(b, rel(a->t0));
  PUTL(b, ",\"dur\":");
  fbx__sbuf_ts(b, a->t1 - a->t0);
  PUTL(b, ",\"args\":{");
  if (site) {
    const char *sj = site_json(site, &len);
    if (sj) {
      fbx__sbuf_put(b, sj, len);
    } else {
      PUTL(b, "\"op\":");
      fbx__sbuf_str(b, site->op);
      PUTL(b, ",\"node\":");
      fbx__sbuf_str(b, site->node);
      PUTL(b, ",\"node_id\":");
      fbx__sbuf_i64(b, site->node_id);
      PUTL(b, ",");
    }
  }
  PUTL(b, "\"eval\":");
  fbx__sbuf_i64(b, (int64_t)a->eval);
  if (a->kind == 1) {
    char d[40];
    PUTL(b, ",\"grid\":\"");
    fbx__sbuf_puts(b, dims3(d, a->u.k.grid));
    PUTL(b, "\",\"block\":\"");
    fbx__sbuf_puts(b, dims3(d, a->u.k.block));
    PUTL(b, "\",\"registers\":");
    fbx__sbuf_i64(b, a->u.k.registers);
    PUTL(b, ",\"shared_bytes\":");
    fbx__sbuf_i64(b, a->u.k.shared_bytes);
  } else if (a->kind != 4) {
    PUTL(b, ",\"bytes\":");
    fbx__sbuf_i64(b, (int64_t)a->u.c.bytes);
  }
  if (early_ns) {
    PUTL(b, ",\"early_start_us\":");
    fbx__sbuf_ts(b, early_ns);
  }
  PUTL(b, ",\"correlation\":");
  fbx__sbuf_i64(b, a->correlation);
  if (a->graph) PUTL(b, ",\"graph\":1");
  if (how != HOW_NONE) { /* how_names are plain ASCII without quotes or backslashes: no escaping */
    PUTL(b, ",\"attribution\":\"");
    fbx__sbuf_puts(b, how_names[how]);
    PUTL(b, "\"");
  }
  PUTL(b, "}}");
}

/* One record through the slice builder, its events formatted. */
static void build_one(const gpu_rec *rec) {
  stream_state *st = stream_of(rec->stream);
  if (!st) return;
  name_track(st, rec->eval);
  gpu_rec busy = *rec; /* a kernel from the previous kernel's end on (early start, above) */
  if (rec->kind == 1) {
    if (st->busy_eval != rec->eval) st->busy_end = 0; /* kernels of one eval only */
    st->busy_eval = rec->eval;
    if (busy.t0 < st->busy_end && busy.t1 > st->busy_end) busy.t0 = st->busy_end;
    if (busy.t1 > st->busy_end) st->busy_end = busy.t1;
  }
  const uint64_t early_ns = busy.t0 - rec->t0;
  const gpu_rec *a = &busy;
  uint64_t t0 = a->t0, t1 = a->t1, d = t1 - t0;
  if (st->eval != a->eval) close_eval(st);
  /* the record's node: its own tag, or in a graph replay its place in the replay (capture order) */
  fbx_trace_op_site *site = a->graph ? NULL : (fbx_trace_op_site *)a->who;
  int how = site ? HOW_CORR : HOW_NONE;
  if (a->kind == 4) { /* a whole replay: no record per node to split by capture order */
    site = NULL;
    how = HOW_UNSPLIT;
  } else if (a->graph && a->who) {
    const fbx_trace_gpu_map *m = a->who;
    if (st->rep_map != m || st->rep_corr != a->correlation) { /* a new replay on this stream */
      st->rep_map = m;
      st->rep_corr = a->correlation;
      st->rep_k = st->rep_c = 0;
    }
    int64_t i = a->kind == 1 ? st->rep_k++ : st->rep_c++;
    site = a->kind == 1 ? (i < m->nk ? m->ks[i] : NULL) : (i < m->nc ? m->cs[i] : NULL);
    how = site ? HOW_CAPTURE : HOW_UNSPLIT;
  } else if (a->graph) {
    how = HOW_UNSPLIT;
  }
  if (st->op_open && (st->site != site || st->op_how != how)) close_op(st);
  if (a->eval) {
    if (!st->eval) {
      st->eval = a->eval;
      st->ev_t0 = t0;
      st->ev_t1 = t1;
      st->ev_busy = st->ev_attr = 0;
      st->ev_records = 0;
      st->ev_session = NULL;
    }
    if (t0 < st->ev_t0) st->ev_t0 = t0;
    if (t1 > st->ev_t1) st->ev_t1 = t1;
    st->ev_busy += d;
    st->ev_records++;
    g_tot.by_how[how] += d;
    if (site) st->ev_attr += d;
    if (site && !st->ev_session) st->ev_session = site->session;
    { /* every record of an eval is in an op.device slice: a node's, a graph's, or "(no node)" */
      if (!st->op_open) {
        st->op_open = 1;
        st->site = site;
        st->op_how = how;
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
  const char *name = a->name ? a->name->s : "kernel", *cat = "gpu.kernel";
  if (a->kind == 4) {
    name = "CUDA graph";
    cat = "gpu.graph";
  } else if (a->kind != 1) {
    name = a->kind == 2 ? copy_dir(a->u.c.copy_kind) : "memset";
    cat = a->kind == 2 ? "gpu.memcpy" : "gpu.memset";
  }
  if (fbx_trace_flags() & FBX_TRACE_F_PROFILER) { /* ORT's store takes generic arguments */
    fbx_trace_arg args[14];
    int n = 0;
    char grid[40], block[40];
    if (site) {
      args[n++] = FBX_TARG_S("op", site->op);
      args[n++] = FBX_TARG_S("node", site->node);
      args[n++] = FBX_TARG_I("node_id", site->node_id);
    }
    args[n++] = FBX_TARG_I("eval", a->eval);
    if (a->kind == 1) {
      args[n++] = FBX_TARG_S("grid", dims3(grid, a->u.k.grid));
      args[n++] = FBX_TARG_S("block", dims3(block, a->u.k.block));
      args[n++] = FBX_TARG_I("registers", a->u.k.registers);
      args[n++] = FBX_TARG_I("shared_bytes", a->u.k.shared_bytes);
    } else if (a->kind != 4) {
      args[n++] = FBX_TARG_I("bytes", (int64_t)a->u.c.bytes);
    }
    args[n++] = FBX_TARG_I("correlation", a->correlation);
    if (a->graph) args[n++] = FBX_TARG_I("graph", 1);
    if (how != HOW_NONE) args[n++] = FBX_TARG_S("attribution", how_names[how]);
    const fbx_trace_session *ses = site ? site->session : st->ev_session;
    fbx__trace_profiler_record_dev(name, cat, t0, t1, args, n, a->eval, ses ? ses : fbx_trace_session_current());
  }
  int dest = dest_of(a->eval);
  if (!dest) return;
  fbx__sbuf *b = ev_buf();
  record_json(b, a, name, cat, site, how, early_ns);
  put_event(b, dest);
}

void fbx__trace_gpu_process(const fbx__trace_out *out, bool final) {
  pthread_mutex_lock(&g_mu);
  g_out = out;
  g_pid = out ? out->pid : (int64_t)getpid();
  pthread_mutex_lock(&g_rec_mu); /* take what waits; arrivals go on into fresh chunks meanwhile */
  rec_chunk *c = g_head;
  g_head = g_tail = NULL;
  g_pending = 0;
  pthread_mutex_unlock(&g_rec_mu);
  while (c) {
    for (int i = 0; i < c->n; i++) build_one(&c->r[i]);
    rec_chunk *next = c->next;
    pthread_mutex_lock(&g_rec_mu);
    if (g_n_spare < SPARE_CHUNKS) {
      c->next = g_spare;
      g_spare = c;
      g_n_spare++;
      c = NULL;
    }
    pthread_mutex_unlock(&g_rec_mu);
    fbx_free(c);
    c = next;
  }
  if (final)
    for (int i = 0; i < g_n_streams; i++) close_eval(&g_streams[i]);
  if (g_ev.cap > (1u << 16)) fbx__sbuf_free(&g_ev);
  g_out = NULL;
  pthread_mutex_unlock(&g_mu);
}

/* The waiting records (and, final, the open slices) into the trace file through the writer's
 * flush, or without a trace file straight into the capture buffer, statistics and ORT's store. */
static void process_now(bool final) {
  if (fbx_trace_flags() & FBX_TRACE_F_JSON) fbx__trace_flush_all(final);
  else fbx__trace_gpu_process(NULL, final);
}

void fbx_trace_gpu_drained(bool final) {
  if (final) process_now(true);
}

void fbx__trace_gpu_pending_flush(void) { process_now(false); }

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

void fbx__trace_gpu_summary(fbx__sbuf *o) {
  /* the session's teardown processed the waiting records (fbx__trace_gpu_pending_flush) and its
   * final drain closed the open slices */
  pthread_mutex_lock(&g_mu);
  char line[512];
  if (g_tot.evals) {
    uint64_t idle = g_tot.span > g_tot.busy ? g_tot.span - g_tot.busy : 0;
    uint64_t attr = g_tot.by_how[HOW_CORR] + g_tot.by_how[HOW_CAPTURE];
    snprintf(line, sizeof line,
             "  gpu:     %lld device-side eval(s) in the process so far, %lld records: span %.1fus = busy %.1fus + "
             "idle (host-bound: the device waited for work) %.1fus (%.1f%% of the span)\n",
             (long long)g_tot.evals, (long long)g_tot.records, (double)g_tot.span / 1e3, (double)g_tot.busy / 1e3,
             (double)idle / 1e3, pct(idle, g_tot.span));
    fbx__sbuf_puts(o, line);
    snprintf(line, sizeof line,
             "           busy attributed to nodes %.1fus (%.1f%%): by correlation id %.1fus, graph replays by capture "
             "order %.1fus; graph replays not split %.1fus; no node %.1fus (tags: %s)\n",
             (double)attr / 1e3, pct(attr, g_tot.busy), (double)g_tot.by_how[HOW_CORR] / 1e3,
             (double)g_tot.by_how[HOW_CAPTURE] / 1e3, (double)g_tot.by_how[HOW_UNSPLIT] / 1e3,
             (double)g_tot.by_how[HOW_NONE] / 1e3, g_mode[0] ? g_mode : "backend");
    fbx__sbuf_puts(o, line);
    const uint64_t all = __atomic_load_n(&g_evals, __ATOMIC_RELAXED);
    const uint64_t det = __atomic_load_n(&g_detailed, __ATOMIC_RELAXED);
    if (det < all) {
      snprintf(line, sizeof line,
               "           device records for %llu of %llu evals (FUSEBOX_GPU_DETAIL=%lld: the first ones; 'all' for "
               "every eval): device times above are theirs\n",
               (unsigned long long)det, (unsigned long long)all, (long long)g_detail_n);
      fbx__sbuf_puts(o, line);
    }
  }
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_lock(&g_rec_mu);
  int64_t lost = g_lost;
  pthread_mutex_unlock(&g_rec_mu);
  if (lost) {
    snprintf(line, sizeof line, "           %lld device record(s) lost (out of memory)\n", (long long)lost);
    fbx__sbuf_puts(o, line);
  }
}

int fbx_trace_gpu_capture_write(void) {
  if (!__atomic_load_n(&g_cap_seq, __ATOMIC_ACQUIRE)) return 0;
  process_now(true); /* the captured eval is complete: its records and slices into the capture buffer */
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
