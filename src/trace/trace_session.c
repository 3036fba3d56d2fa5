/* Per-session statistics and the summary printed (and traced) at teardown.
 * Counts are sums over every call of the session (GetCapability may run once
 * per graph level, so claimed/total add up across calls). */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

enum { MAX_NODE_NAMES = 3, TOP_OPS = 10 };

typedef struct unclaimed_entry {
  char *domain, *op_type, *reason;
  char *nodes[MAX_NODE_NAMES];
  int n_nodes;
  int64_t count;
} unclaimed_entry;

typedef struct op_entry {
  char *op_type;      /* NULL = empty slot */
  uint64_t ns;
  int64_t calls;
  bool device;        /* any sample was device time */
} op_entry;

typedef struct composed_entry {
  char *op, *reason;
  int64_t count;
} composed_entry;

enum { PH_TRANSLATE, PH_COMPILE, PH_EVAL, PH_COPY, PH_OTHER, PH_N };
static const char *const phase_names[PH_N] = {"translate", "compile", "eval", "copy", "other"};
enum { PATH_DECODE, PATH_PREFILL, PATH_GENERAL, PATH_EAGER, PATH_OTHER, PATH_N };
static const char *const path_names[PATH_N] = {"decode", "prefill", "general", "eager", "other"};
enum { CACHE_HIT, CACHE_MISS, CACHE_RETRACE, CACHE_N };
static const char *const cache_names[CACHE_N] = {"HIT", "MISS", "RETRACE"};

struct fbx_trace_session {
  pthread_mutex_t mu;
  char *label;
  int id;
  /* claim */
  int getcap_calls;
  int64_t claimed, total, fused;
  unclaimed_entry *unclaimed;
  int n_unclaimed, cap_unclaimed;
  /* compute */
  int64_t paths[PATH_N], caches[CACHE_N];
  /* device counters of the runs (fbx_trace_session_device) */
  int64_t dev_runs, dev_allocs, dev_alloc_runs, dev_syncs, dev_max_syncs, graph_captures, graph_replays;
  int64_t stream_runs;        /* Computes on ORT's stream */
  /* memory */
  int64_t wrap_n, wrap_bytes, cwrap_n, cwrap_bytes;
  int64_t delta_n, delta_bytes, full_n, full_bytes;
  /* time */
  uint64_t phase_ns[PH_N];
  int64_t phase_calls[PH_N];
  /* fast vs composed */
  int64_t fast_n, composed_n;
  composed_entry *composed;
  int n_composed, cap_composed;
  int64_t composed_live; /* composed executions so far (atomic): the counter track's value */
  /* ops: open addressing, power-of-two capacity */
  op_entry *ops;
  int n_ops, cap_ops;
  fbx__site_table sites; /* per-op sites (trace_op.c), merged into ops/fast/composed at teardown */
};

static int g_next_id = 0;
static __thread fbx_trace_session *tl_current = NULL;

static bool summary_on(void) { return (fbx_trace_flags() & (FBX_TRACE_F_SUMMARY | FBX_TRACE_F_JSON)) != 0; }

fbx_trace_session *fbx_trace_session_create(const char *label) {
  if (__builtin_expect(!summary_on(), 1)) return NULL;
  /* Out of memory (or no mutex): no session, so this session is not summarised;
   * every recording entry point takes NULL. */
  fbx_trace_session *s = fbx_calloc(1, sizeof *s);
  if (!s) return NULL;
  s->label = fbx_strdup(label ? label : "");
  if (!s->label || pthread_mutex_init(&s->mu, NULL) != 0) {
    fbx_free(s->label);
    fbx_free(s);
    return NULL;
  }
  s->id = __atomic_add_fetch(&g_next_id, 1, __ATOMIC_RELAXED);
  return s;
}

void fbx_trace_session_bind(fbx_trace_session *s) {
  if (__builtin_expect(!fbx_trace_enabled(), 1)) return;
  tl_current = s;
}
fbx_trace_session *fbx_trace_session_current(void) {
  if (__builtin_expect(!fbx_trace_enabled(), 1)) return NULL;
  return tl_current;
}

/* ============================== recording ============================== */

void fbx_trace_session_claim(fbx_trace_session *s, int claimed, int total, int fused_subgraphs) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  s->getcap_calls++;
  s->claimed += claimed;
  s->total += total;
  s->fused += fused_subgraphs;
  int64_t c = s->claimed, u = s->total - s->claimed, f = s->fused;
  pthread_mutex_unlock(&s->mu);
  fbx_trace_counter("fusebox.claimed_nodes", (double)c);
  fbx_trace_counter("fusebox.unclaimed_nodes", (double)u);
  fbx_trace_counter("fusebox.fused_subgraphs", (double)f);
}

static bool str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

void fbx_trace_session_unclaimed(fbx_trace_session *s, const char *domain, const char *op_type,
                                 const char *node_name, const char *reason) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  unclaimed_entry *e = NULL;
  for (int i = 0; i < s->n_unclaimed; i++)
    if (str_eq(s->unclaimed[i].domain, domain) && str_eq(s->unclaimed[i].op_type, op_type)) {
      e = &s->unclaimed[i];
      break;
    }
  if (!e) {
    if (s->n_unclaimed == s->cap_unclaimed) {
      int cap = s->cap_unclaimed ? 2 * s->cap_unclaimed : 16;
      unclaimed_entry *p = fbx_realloc(s->unclaimed, (size_t)cap * sizeof *p);
      if (!p) goto out;
      s->unclaimed = p;
      s->cap_unclaimed = cap;
    }
    e = &s->unclaimed[s->n_unclaimed];
    memset(e, 0, sizeof *e);
    e->domain = fbx_strdup(domain ? domain : "");
    e->op_type = fbx_strdup(op_type ? op_type : "?");
    e->reason = fbx_strdup(reason ? reason : "");
    if (!e->domain || !e->op_type || !e->reason) { /* out of memory: this node goes uncounted */
      fbx_free(e->domain);
      fbx_free(e->op_type);
      fbx_free(e->reason);
      goto out;
    }
    s->n_unclaimed++;
  }
  e->count++;
  if (e->n_nodes < MAX_NODE_NAMES && node_name && *node_name) {
    char *name = fbx_strdup(node_name);
    if (name) e->nodes[e->n_nodes++] = name;
  }
out:
  pthread_mutex_unlock(&s->mu);
}

static int index_of(const char *const *names, int n, const char *v) {
  for (int i = 0; i < n - 1; i++)
    if (v && !strcmp(names[i], v)) return i;
  return n - 1;
}

void fbx_trace_session_compute(fbx_trace_session *s, const char *path, const char *cache) {
  if (__builtin_expect(!s, 1)) return;
  int p = index_of(path_names, PATH_N, path);
  int c = -1;
  for (int i = 0; i < CACHE_N; i++)
    if (cache && !strcmp(cache, cache_names[i])) c = i;
  pthread_mutex_lock(&s->mu);
  s->paths[p]++;
  if (c >= 0) s->caches[c]++;
  pthread_mutex_unlock(&s->mu);
}

void fbx_trace_session_device(fbx_trace_session *s, int64_t allocs, int64_t host_syncs, int64_t captures,
                              int64_t replays) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  s->dev_runs++;
  s->dev_allocs += allocs;
  s->dev_alloc_runs += allocs > 0;
  s->dev_syncs += host_syncs;
  if (host_syncs > s->dev_max_syncs) s->dev_max_syncs = host_syncs;
  s->graph_captures += captures;
  s->graph_replays += replays;
  pthread_mutex_unlock(&s->mu);
}

void fbx_trace_session_stream_run(fbx_trace_session *s) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  s->stream_runs++;
  pthread_mutex_unlock(&s->mu);
}

void fbx_trace_session_wrap(fbx_trace_session *s, int64_t count, int64_t bytes) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  s->wrap_n += count;
  s->wrap_bytes += bytes;
  int64_t b = s->wrap_bytes;
  pthread_mutex_unlock(&s->mu);
  fbx_trace_counter("fusebox.mem_wrap_bytes", (double)b);
}

void fbx_trace_session_copy_wrap(fbx_trace_session *s, int64_t count, int64_t bytes) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  s->cwrap_n += count;
  s->cwrap_bytes += bytes;
  pthread_mutex_unlock(&s->mu);
}

void fbx_trace_session_copy_out(fbx_trace_session *s, bool delta, int64_t bytes) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  if (delta) {
    s->delta_n++;
    s->delta_bytes += bytes;
  } else {
    s->full_n++;
    s->full_bytes += bytes;
  }
  pthread_mutex_unlock(&s->mu);
  fbx_trace_counter("fusebox.copyout_bytes", (double)bytes);
}

void fbx_trace_session_phase(fbx_trace_session *s, const char *phase, uint64_t ns) {
  if (__builtin_expect(!s, 1)) return;
  int p = index_of(phase_names, PH_N, phase);
  pthread_mutex_lock(&s->mu);
  s->phase_ns[p] += ns;
  s->phase_calls[p]++;
  pthread_mutex_unlock(&s->mu);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Under s->mu. Returns the slot for op_type, inserting it; NULL on OOM. */
static op_entry *ops_slot(fbx_trace_session *s, const char *op_type) {
  if (2 * (s->n_ops + 1) > s->cap_ops) {
    int cap = s->cap_ops ? 2 * s->cap_ops : 64;
    op_entry *t = fbx_calloc((size_t)cap, sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < s->cap_ops; i++) {
      if (!s->ops[i].op_type) continue;
      uint64_t j = hash_str(s->ops[i].op_type) & (uint64_t)(cap - 1);
      while (t[j].op_type) j = (j + 1) & (uint64_t)(cap - 1);
      t[j] = s->ops[i];
    }
    fbx_free(s->ops);
    s->ops = t;
    s->cap_ops = cap;
  }
  uint64_t j = hash_str(op_type) & (uint64_t)(s->cap_ops - 1);
  while (s->ops[j].op_type) {
    if (!strcmp(s->ops[j].op_type, op_type)) return &s->ops[j];
    j = (j + 1) & (uint64_t)(s->cap_ops - 1);
  }
  s->ops[j].op_type = fbx_strdup(op_type);
  if (!s->ops[j].op_type) return NULL;
  s->n_ops++;
  return &s->ops[j];
}

void fbx_trace_session_op(fbx_trace_session *s, const char *op_type, uint64_t ns, bool device_time) {
  if (__builtin_expect(!s, 1)) return;
  pthread_mutex_lock(&s->mu);
  op_entry *e = ops_slot(s, op_type ? op_type : "?");
  if (e) {
    e->ns += ns;
    e->calls++;
    e->device |= device_time;
  }
  pthread_mutex_unlock(&s->mu);
}

fbx__site_table *fbx__trace_session_sites(fbx_trace_session *s) { return &s->sites; }

int64_t fbx__trace_session_composed_next(fbx_trace_session *s) {
  return s ? __atomic_add_fetch(&s->composed_live, 1, __ATOMIC_RELAXED) : 0;
}

void fbx__trace_session_composed_tick(fbx_trace_session *s) {
  if (!s) return;
  int64_t n = __atomic_add_fetch(&s->composed_live, 1, __ATOMIC_RELAXED);
  fbx_trace_counter("fusebox.composed_path_count", (double)n);
}

/* Under s->mu: the composed entry of op (inserted with reason); NULL on OOM. */
static composed_entry *composed_slot(fbx_trace_session *s, const char *op, const char *reason) {
  for (int i = 0; i < s->n_composed; i++)
    if (!strcmp(s->composed[i].op, op)) return &s->composed[i];
  if (s->n_composed == s->cap_composed) {
    int cap = s->cap_composed ? 2 * s->cap_composed : 8;
    composed_entry *p = fbx_realloc(s->composed, (size_t)cap * sizeof *p);
    if (!p) return NULL;
    s->composed = p;
    s->cap_composed = cap;
  }
  composed_entry *e = &s->composed[s->n_composed];
  e->op = fbx_strdup(op);
  e->reason = fbx_strdup(reason ? reason : "");
  if (!e->op || !e->reason) { /* a NULL op would reach the strcmp above next time */
    fbx_free(e->op);
    fbx_free(e->reason);
    return NULL;
  }
  e->count = 0;
  s->n_composed++;
  return e;
}

/* Under s->mu: one site's executions into the op times and fast/composed counts. */
static void merge_site(void *ctx, const fbx_trace_op_site *site) {
  fbx_trace_session *s = ctx;
  uint64_t calls = __atomic_load_n(&site->calls, __ATOMIC_RELAXED);
  uint64_t dev_calls = __atomic_load_n(&site->dev_calls, __ATOMIC_RELAXED);
  if (!calls && !dev_calls) return; /* a node replayed from a graph only has device executions */
  op_entry *e = ops_slot(s, site->op);
  if (e) {
    /* a node whose kernels the device timed counts its device time and executions (trace_gpu.c) */
    uint64_t dev = __atomic_load_n(&site->dev_ns, __ATOMIC_RELAXED);
    e->ns += dev_calls ? dev : __atomic_load_n(&site->ns, __ATOMIC_RELAXED);
    e->device |= dev_calls != 0;
    e->calls += (int64_t)(dev_calls ? dev_calls : calls);
  }
  if (site->fast_span) s->fast_n += (int64_t)calls;
  if (site->composed_op) {
    s->composed_n += (int64_t)calls;
    composed_entry *c = composed_slot(s, site->composed_op, site->composed_reason);
    if (c) c->count += (int64_t)calls;
  }
}

/* Spans of cat op.fast / op.composed emitted one by one (fbx_trace_complete)
 * feed the fast-vs-composed view of the session bound to this thread. */
void fbx__trace_session_note_span(const char *name, const char *cat, const fbx_trace_arg *args, int n_args) {
  if (!cat || cat[0] != 'o' || cat[1] != 'p' || cat[2] != '.') return;
  bool fast = !strcmp(cat, "op.fast");
  if (!fast && strcmp(cat, "op.composed")) return;
  fbx_trace_session *s = tl_current;
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  if (fast) {
    s->fast_n++;
    pthread_mutex_unlock(&s->mu);
    return;
  }
  s->composed_n++;
  /* op name: the span name up to " [" */
  char op[128];
  const char *n = name ? name : "?";
  const char *br = strstr(n, " [");
  size_t len = br ? (size_t)(br - n) : strlen(n);
  if (len >= sizeof op) len = sizeof op - 1;
  memcpy(op, n, len);
  op[len] = '\0';
  const char *reason = "";
  for (int i = 0; i < n_args; i++)
    if (args[i].type == FBX_TARG_STR && args[i].key && !strcmp(args[i].key, "reason") && args[i].s) reason = args[i].s;
  composed_entry *e = composed_slot(s, op, reason);
  if (e) e->count++;
  pthread_mutex_unlock(&s->mu);
  fbx__trace_session_composed_tick(s);
}

/* ============================== summary ================================ */

static void fmt_bytes(char *out, size_t n, int64_t b) {
  double v = (double)b;
  if (b >= (int64_t)1 << 30) snprintf(out, n, "%.2f GiB", v / (1 << 30));
  else if (b >= 1 << 20) snprintf(out, n, "%.2f MiB", v / (1 << 20));
  else if (b >= 1 << 10) snprintf(out, n, "%.2f KiB", v / (1 << 10));
  else snprintf(out, n, "%lld B", (long long)b);
}

static int op_cmp_desc(const void *a, const void *b) {
  const op_entry *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : strcmp(x->op_type, y->op_type);
}

/* Writes the summary text (DESIGN.md layout) into out. Under s->mu.
 * top/n_top: the ops sorted by time (caller frees top). */
static void summary_text(fbx_trace_session *s, fbx__sbuf *o, op_entry **top_out, int *n_top_out,
                         uint64_t *ops_total_out, bool *any_device_out, bool *all_device_out) {
  char line[512], b1[32], b2[32], b3[32], b4[32];
  fbx__sbuf_puts(o, "[fusebox] ===== session summary =====\n");
  if (s->label && *s->label) {
    snprintf(line, sizeof line, "  session: %s (#%d)\n", s->label, s->id);
    fbx__sbuf_puts(o, line);
  }
  double pct = s->total ? 100.0 * (double)s->claimed / (double)s->total : 0.0;
  snprintf(line, sizeof line,
           "  claim:   %lld/%lld nodes claimed (%.1f%%) across %lld fused subgraph(s), %d GetCapability call(s)\n",
           (long long)s->claimed, (long long)s->total, pct, (long long)s->fused, s->getcap_calls);
  fbx__sbuf_puts(o, line);
  if (s->n_unclaimed) {
    fbx__sbuf_puts(o, "           unclaimed (-> CPU):\n");
    for (int i = 0; i < s->n_unclaimed; i++) {
      unclaimed_entry *e = &s->unclaimed[i];
      snprintf(line, sizeof line, "             - %s%s%s x%lld: %s", e->domain && *e->domain ? e->domain : "",
               e->domain && *e->domain ? "." : "", e->op_type ? e->op_type : "?", (long long)e->count,
               e->reason && *e->reason ? e->reason : "(no reason given)");
      fbx__sbuf_puts(o, line);
      if (e->n_nodes) {
        fbx__sbuf_puts(o, " [");
        for (int k = 0; k < e->n_nodes; k++) {
          if (k) fbx__sbuf_puts(o, ", ");
          fbx__sbuf_puts(o, e->nodes[k] ? e->nodes[k] : "");
        }
        fbx__sbuf_puts(o, e->count > e->n_nodes ? ", ...]" : "]");
      }
      fbx__sbuf_puts(o, "\n");
    }
  }
  snprintf(line, sizeof line,
           "  compute: decode=%lld prefill=%lld general=%lld eager=%lld  (cache: %lld HIT / %lld MISS / %lld RETRACE)\n",
           (long long)s->paths[PATH_DECODE], (long long)s->paths[PATH_PREFILL], (long long)s->paths[PATH_GENERAL],
           (long long)s->paths[PATH_EAGER], (long long)s->caches[CACHE_HIT], (long long)s->caches[CACHE_MISS],
           (long long)s->caches[CACHE_RETRACE]);
  fbx__sbuf_puts(o, line);
  if (s->paths[PATH_OTHER]) {
    snprintf(line, sizeof line, "           other paths: %lld\n", (long long)s->paths[PATH_OTHER]);
    fbx__sbuf_puts(o, line);
  }
  if (s->dev_runs) { /* "allocs in 1 of N runs": only the first run allocated (the steady state allocates nothing) */
    char on_stream[64] = ""; /* runs that left the wait to ORT (its stream): their 0 syncs are why */
    if (s->stream_runs) snprintf(on_stream, sizeof on_stream, "; %lld on ORT's stream", (long long)s->stream_runs);
    snprintf(line, sizeof line,
             "           (graph: %lld capture / %lld replay; %lld allocs in %lld of %lld runs; %lld host syncs, "
             "at most %lld per run%s)\n",
             (long long)s->graph_captures, (long long)s->graph_replays, (long long)s->dev_allocs,
             (long long)s->dev_alloc_runs, (long long)s->dev_runs, (long long)s->dev_syncs,
             (long long)s->dev_max_syncs, on_stream);
    fbx__sbuf_puts(o, line);
  }
  fmt_bytes(b1, sizeof b1, s->wrap_bytes);
  fmt_bytes(b2, sizeof b2, s->cwrap_bytes);
  fmt_bytes(b3, sizeof b3, s->delta_bytes);
  fmt_bytes(b4, sizeof b4, s->full_bytes);
  snprintf(line, sizeof line, "  memory:  zero-copy wrap %lld (%s); copy-wrap %lld (%s); copy-out delta %lld (%s) vs full %lld (%s)\n",
           (long long)s->wrap_n, b1, (long long)s->cwrap_n, b2, (long long)s->delta_n, b3, (long long)s->full_n, b4);
  fbx__sbuf_puts(o, line);
  fbx__sbuf_puts(o, "  timing: ");
  for (int p = 0; p < PH_N; p++) {
    if (p == PH_OTHER && !s->phase_calls[p]) continue;
    snprintf(line, sizeof line, " %s=%.1fus (%lld call%s)", phase_names[p], (double)s->phase_ns[p] / 1e3,
             (long long)s->phase_calls[p], s->phase_calls[p] == 1 ? "" : "s");
    fbx__sbuf_puts(o, line);
  }
  fbx__sbuf_puts(o, "\n");
  snprintf(line, sizeof line, "  kernels: fast=%lld composed=%lld\n", (long long)s->fast_n, (long long)s->composed_n);
  fbx__sbuf_puts(o, line);
  for (int i = 0; i < s->n_composed; i++) {
    snprintf(line, sizeof line, "           composed: %s x%lld: %s\n", s->composed[i].op, (long long)s->composed[i].count,
             s->composed[i].reason && *s->composed[i].reason ? s->composed[i].reason : "(no reason given)");
    fbx__sbuf_puts(o, line);
  }

  /* slowest ops */
  op_entry *top = NULL;
  int n_top = 0;
  uint64_t total = 0;
  bool any_dev = false, all_dev = s->n_ops > 0;
  if (s->n_ops) top = fbx_malloc((size_t)s->n_ops * sizeof *top);
  if (top) {
    for (int i = 0; i < s->cap_ops; i++)
      if (s->ops[i].op_type) {
        top[n_top++] = s->ops[i];
        total += s->ops[i].ns;
        any_dev |= s->ops[i].device;
        all_dev &= s->ops[i].device;
      }
    qsort(top, (size_t)n_top, sizeof *top, op_cmp_desc);
  }
  const char *kind = !n_top ? "no op timings recorded" : all_dev ? "device time" : any_dev ? "device time where measured, else host time" : "host time";
  snprintf(line, sizeof line, "  slowest ops (%s):\n", kind);
  fbx__sbuf_puts(o, line);
  for (int i = 0; i < n_top && i < TOP_OPS; i++) {
    snprintf(line, sizeof line, "    %2d. %-28s %12.1fus %5.1f%%  %lld call%s%s\n", i + 1, top[i].op_type,
             (double)top[i].ns / 1e3, total ? 100.0 * (double)top[i].ns / (double)total : 0.0,
             (long long)top[i].calls, top[i].calls == 1 ? "" : "s", top[i].device ? " [device]" : "");
    fbx__sbuf_puts(o, line);
  }
  fbx__trace_gpu_summary(o); /* device time: span = busy + idle, and how busy time was attributed */
  int64_t dropped = fbx__trace_dropped();
  if (dropped) {
    snprintf(line, sizeof line, "  trace:   %lld event(s) dropped (FUSEBOX_TRACE_MAX_EVENTS=%lld)\n",
             (long long)dropped, (long long)fbx__trace_max_events);
    fbx__sbuf_puts(o, line);
  }
  *top_out = top;
  *n_top_out = n_top;
  *ops_total_out = total;
  *any_device_out = any_dev;
  *all_device_out = all_dev;
}

/* The head of a process-scoped instant named name at t (trace clock), on this thread, up to its args. */
static void instant_head(fbx__sbuf *b, const char *name, uint64_t t) {
  fbx__sbuf_puts(b, "{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, ",\"cat\":\"ep\",\"ph\":\"i\",\"s\":\"p\",\"ts\":");
  fbx__sbuf_ts(b, t);
  fbx__sbuf_puts(b, ",\"pid\":");
  fbx__sbuf_i64(b, (int64_t)getpid());
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, fbx__trace_tid());
}

/* The fusebox.session_summary and fusebox.slowest_ops instants (never dropped by the cap). */
static void summary_events(fbx_trace_session *s, op_entry *top, int n_top, uint64_t total, bool any_dev,
                           bool all_dev) {
  fbx__sbuf b = {0};
  uint64_t t = fbx_trace_now_ns() - fbx__trace_t0_ns;
  instant_head(&b, "fusebox.session_summary", t);
  fbx_trace_arg a[] = {
      FBX_TARG_S("session", s->label), FBX_TARG_I("session_id", s->id),
      FBX_TARG_I("getcapability_calls", s->getcap_calls), FBX_TARG_I("claimed", s->claimed),
      FBX_TARG_I("total", s->total), FBX_TARG_I("fused_subgraphs", s->fused),
      FBX_TARG_I("decode", s->paths[PATH_DECODE]), FBX_TARG_I("prefill", s->paths[PATH_PREFILL]),
      FBX_TARG_I("general", s->paths[PATH_GENERAL]), FBX_TARG_I("eager", s->paths[PATH_EAGER]),
      FBX_TARG_I("other_path", s->paths[PATH_OTHER]),
      FBX_TARG_I("cache_hit", s->caches[CACHE_HIT]), FBX_TARG_I("cache_miss", s->caches[CACHE_MISS]),
      FBX_TARG_I("cache_retrace", s->caches[CACHE_RETRACE]),
      FBX_TARG_I("wrap_count", s->wrap_n), FBX_TARG_I("wrap_bytes", s->wrap_bytes),
      FBX_TARG_I("copy_wrap_count", s->cwrap_n), FBX_TARG_I("copy_wrap_bytes", s->cwrap_bytes),
      FBX_TARG_I("copyout_delta_count", s->delta_n), FBX_TARG_I("copyout_delta_bytes", s->delta_bytes),
      FBX_TARG_I("copyout_full_count", s->full_n), FBX_TARG_I("copyout_full_bytes", s->full_bytes),
      FBX_TARG_D("translate_us", (double)s->phase_ns[PH_TRANSLATE] / 1e3), FBX_TARG_I("translate_calls", s->phase_calls[PH_TRANSLATE]),
      FBX_TARG_D("compile_us", (double)s->phase_ns[PH_COMPILE] / 1e3), FBX_TARG_I("compile_calls", s->phase_calls[PH_COMPILE]),
      FBX_TARG_D("eval_us", (double)s->phase_ns[PH_EVAL] / 1e3), FBX_TARG_I("eval_calls", s->phase_calls[PH_EVAL]),
      FBX_TARG_D("copy_us", (double)s->phase_ns[PH_COPY] / 1e3), FBX_TARG_I("copy_calls", s->phase_calls[PH_COPY]),
      FBX_TARG_I("fast_count", s->fast_n), FBX_TARG_I("composed_count", s->composed_n),
      FBX_TARG_I("device_runs", s->dev_runs), FBX_TARG_I("host_syncs", s->dev_syncs),
      FBX_TARG_I("stream_runs", s->stream_runs),
      FBX_TARG_I("recorded_events", fbx__trace_recorded()), FBX_TARG_I("dropped_events", fbx__trace_dropped()),
      FBX_TARG_I("max_events", fbx__trace_max_events),
  };
  fbx__sbuf_puts(&b, ",\"args\":");
  /* the args object, with "unclaimed" appended as an array */
  fbx__sbuf_args(&b, a, (int)(sizeof a / sizeof a[0]));
  if (!b.oom) b.len--; /* reopen the object */
  fbx__sbuf_puts(&b, ",\"unclaimed\":[");
  for (int i = 0; i < s->n_unclaimed; i++) {
    unclaimed_entry *e = &s->unclaimed[i];
    fbx__sbuf_puts(&b, i ? ",{\"domain\":" : "{\"domain\":");
    fbx__sbuf_str(&b, e->domain);
    fbx__sbuf_puts(&b, ",\"op_type\":");
    fbx__sbuf_str(&b, e->op_type);
    fbx__sbuf_puts(&b, ",\"count\":");
    fbx__sbuf_i64(&b, e->count);
    fbx__sbuf_puts(&b, ",\"reason\":");
    fbx__sbuf_str(&b, e->reason);
    fbx__sbuf_puts(&b, ",\"nodes\":[");
    for (int k = 0; k < e->n_nodes; k++) {
      if (k) fbx__sbuf_puts(&b, ",");
      fbx__sbuf_str(&b, e->nodes[k]);
    }
    fbx__sbuf_puts(&b, "]}");
  }
  fbx__sbuf_puts(&b, "]}}");
  if (!b.oom) fbx__trace_emit_raw(b.p, b.len, false);
  b.len = 0;
  b.oom = 0;

  instant_head(&b, "fusebox.slowest_ops", t);
  fbx__sbuf_puts(&b, ",\"args\":{\"session_id\":");
  fbx__sbuf_i64(&b, s->id);
  fbx__sbuf_puts(&b, ",\"time\":");
  fbx__sbuf_str(&b, !n_top ? "none" : all_dev ? "device" : any_dev ? "mixed" : "host");
  fbx__sbuf_puts(&b, ",\"total_us\":");
  fbx__sbuf_dbl(&b, (double)total / 1e3);
  fbx__sbuf_puts(&b, ",\"ops\":[");
  for (int i = 0; i < n_top && i < TOP_OPS; i++) {
    fbx__sbuf_puts(&b, i ? ",{\"op\":" : "{\"op\":");
    fbx__sbuf_str(&b, top[i].op_type);
    fbx__sbuf_puts(&b, ",\"us\":");
    fbx__sbuf_dbl(&b, (double)top[i].ns / 1e3);
    fbx__sbuf_puts(&b, ",\"pct\":");
    fbx__sbuf_dbl(&b, total ? 100.0 * (double)top[i].ns / (double)total : 0.0);
    fbx__sbuf_puts(&b, ",\"calls\":");
    fbx__sbuf_i64(&b, top[i].calls);
    fbx__sbuf_puts(&b, top[i].device ? ",\"device\":true}" : ",\"device\":false}");
  }
  fbx__sbuf_puts(&b, "]}}");
  if (!b.oom) fbx__trace_emit_raw(b.p, b.len, false);
  fbx__sbuf_free(&b);
}

void fbx_trace_session_destroy(fbx_trace_session *s) {
  if (__builtin_expect(!s, 1)) return;
  int f = fbx_trace_flags();
  /* events are admitted against the cap at flush time: flush first so the
   * summary's recorded/dropped counts cover everything recorded so far; the
   * device records waiting binary (trace_gpu.c) give the sites their device
   * time there, with or without a trace file */
  fbx__trace_gpu_pending_flush();
  pthread_mutex_lock(&s->mu);
  fbx__site_table_visit(&s->sites, merge_site, s);
  fbx__sbuf text = {0};
  op_entry *top = NULL;
  int n_top = 0;
  uint64_t total = 0;
  bool any_dev = false, all_dev = false;
  summary_text(s, &text, &top, &n_top, &total, &any_dev, &all_dev);
  if ((f & FBX_TRACE_F_SUMMARY) && text.p && !text.oom) fputs(text.p, stderr);
  if (f & FBX_TRACE_F_JSON) summary_events(s, top, n_top, total, any_dev, all_dev);
  pthread_mutex_unlock(&s->mu);
  fbx__sbuf_free(&text);
  fbx_free(top);
  fbx__trace_gpu_pending_flush(); /* every record naming one of our sites is formatted: free them */
  fbx__site_table_free(&s->sites);

  if (tl_current == s) tl_current = NULL;
  for (int i = 0; i < s->n_unclaimed; i++) {
    unclaimed_entry *e = &s->unclaimed[i];
    fbx_free(e->domain);
    fbx_free(e->op_type);
    fbx_free(e->reason);
    for (int k = 0; k < e->n_nodes; k++) fbx_free(e->nodes[k]);
  }
  fbx_free(s->unclaimed);
  for (int i = 0; i < s->cap_ops; i++) fbx_free(s->ops[i].op_type);
  fbx_free(s->ops);
  for (int i = 0; i < s->n_composed; i++) {
    fbx_free(s->composed[i].op);
    fbx_free(s->composed[i].reason);
  }
  fbx_free(s->composed);
  fbx_free(s->label);
  pthread_mutex_destroy(&s->mu);
  fbx_free(s);
}

#else
typedef int fbx__trace_session_compiled_out;
#endif
