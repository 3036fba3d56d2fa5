/* Event store for ORT's profiler (see trace_profiler.h). One mutex: this path
 * is only live while the application profiles, where ORT itself locks too. */
#include "trace/trace_profiler.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "trace/trace_internal.h"

enum { MAX_ARGS = 32 };

typedef struct record {
  uint64_t t0, t1;
  uint64_t parent; /* the ORT event it ran inside (its correlation id), 0: unknown */
  int tid;
  const fbx_trace_session *session;
  int n_args;
  char *data; /* name \0 cat \0 (key \0 value \0) * n_args */
} record;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_active = 0;
static record *g_rec = NULL;
static int64_t g_n = 0, g_cap = 0, g_dropped = 0;

/* ORT's open events per thread (fbx_trace_profiler_parent_push/pop), the
 * names of the ended ones, and per eval the event it began in: how our
 * events are linked to ORT's (the fused node's kernel_time event). */
enum { PT_THREADS = 64, PT_DEPTH = 16, EVAL_RING = 4096 };
typedef struct parent_stack { int tid, depth; uint64_t ids[PT_DEPTH]; } parent_stack;
typedef struct parent_name { uint64_t id; char *name; } parent_name;
static parent_stack g_ps[PT_THREADS];
static struct { uint64_t eval, parent; const fbx_trace_session *session; } g_eval_parent[EVAL_RING];
static parent_name *g_pn;
static int64_t g_npn, g_cappn;

/* Under g_mu: the calling thread's stack (claimed on first use; NULL when all are taken). */
static parent_stack *stack_of(int tid, bool claim) {
  for (int i = 0; i < PT_THREADS; i++)
    if (g_ps[i].tid == tid) return &g_ps[i];
  if (!claim) return NULL;
  for (int i = 0; i < PT_THREADS; i++)
    if (!g_ps[i].tid || !g_ps[i].depth) {
      g_ps[i].tid = tid;
      g_ps[i].depth = 0;
      return &g_ps[i];
    }
  return NULL;
}
static uint64_t parent_now(int tid) {
  parent_stack *p = stack_of(tid, false);
  return p && p->depth > 0 && p->depth <= PT_DEPTH ? p->ids[p->depth - 1] : 0;
}

void fbx_trace_profiler_parent_push(uint64_t id) {
  int tid = fbx__trace_tid();
  pthread_mutex_lock(&g_mu);
  parent_stack *p = stack_of(tid, true);
  if (p) {
    if (p->depth < PT_DEPTH) p->ids[p->depth] = id;
    p->depth++;
  }
  pthread_mutex_unlock(&g_mu);
}

void fbx_trace_profiler_parent_pop(uint64_t id, const char *name) {
  int tid = fbx__trace_tid();
  char *copy = name && *name ? fbx_strdup(name) : NULL;
  pthread_mutex_lock(&g_mu);
  parent_stack *p = stack_of(tid, false);
  if (p && p->depth > 0) p->depth--;
  if (copy && g_active && g_npn < fbx__trace_max_events) {
    if (g_npn == g_cappn) {
      int64_t cap = g_cappn ? 2 * g_cappn : 256;
      parent_name *q = fbx_realloc(g_pn, (size_t)cap * sizeof *q);
      if (q) {
        g_pn = q;
        g_cappn = cap;
      }
    }
    if (g_npn < g_cappn) {
      g_pn[g_npn++] = (parent_name){id, copy};
      copy = NULL;
    }
  }
  pthread_mutex_unlock(&g_mu);
  fbx_free(copy);
}

void fbx_trace_profiler_eval_parent(uint64_t eval) {
  if (!eval) return;
  int tid = fbx__trace_tid();
  pthread_mutex_lock(&g_mu);
  g_eval_parent[eval % EVAL_RING].eval = eval;
  g_eval_parent[eval % EVAL_RING].parent = parent_now(tid);
  g_eval_parent[eval % EVAL_RING].session = fbx_trace_session_current();
  pthread_mutex_unlock(&g_mu);
}

static int pn_cmp(const void *a, const void *b) {
  uint64_t x = ((const parent_name *)a)->id, y = ((const parent_name *)b)->id;
  return x < y ? -1 : x > y;
}
static const char *pn_find(uint64_t id) {
  int64_t lo = 0, hi = g_npn - 1;
  while (lo <= hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (g_pn[mid].id == id) return g_pn[mid].name;
    if (g_pn[mid].id < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

void fbx_trace_profiler_begin(void) {
  fbx_trace_init();
  pthread_mutex_lock(&g_mu);
  if (g_active++ == 0) fbx__trace_flags_set(FBX_TRACE_F_PROFILER);
  pthread_mutex_unlock(&g_mu);
}

static void clear_locked(void) {
  for (int64_t i = 0; i < g_n; i++) fbx_free(g_rec[i].data);
  fbx_free(g_rec);
  g_rec = NULL;
  g_n = g_cap = 0;
  for (int64_t i = 0; i < g_npn; i++) fbx_free(g_pn[i].name);
  fbx_free(g_pn);
  g_pn = NULL;
  g_npn = g_cappn = 0;
}

void fbx_trace_profiler_end(void) {
  pthread_mutex_lock(&g_mu);
  if (g_active > 0 && --g_active == 0) {
    fbx__trace_flags_clear(FBX_TRACE_F_PROFILER);
    clear_locked();
  }
  pthread_mutex_unlock(&g_mu);
}

static void record_one(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns, const fbx_trace_arg *args,
                       int n_args, bool dev, uint64_t eval, const fbx_trace_session *session);

void fbx__trace_profiler_record(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                const fbx_trace_arg *args, int n_args) {
  record_one(name, cat, t0_ns, t1_ns, args, n_args, false, 0, fbx_trace_session_current());
}

void fbx__trace_profiler_record_dev(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                    const fbx_trace_arg *args, int n_args, uint64_t eval,
                                    const fbx_trace_session *session) {
  record_one(name, cat, t0_ns, t1_ns, args, n_args, true, eval, session);
}

/* dev: a device record (any thread): its ORT event is its eval's; else the calling thread's open one. */
static void record_one(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns, const fbx_trace_arg *args,
                       int n_args, bool dev, uint64_t eval, const fbx_trace_session *session) {
  if (n_args > MAX_ARGS) n_args = MAX_ARGS;
  if (n_args < 0) n_args = 0;
  fbx__sbuf b = {0};
  fbx__sbuf_put(&b, name ? name : "", strlen(name ? name : "") + 1);
  fbx__sbuf_put(&b, cat ? cat : "", strlen(cat ? cat : "") + 1);
  for (int i = 0; i < n_args; i++) {
    const char *k = args[i].key ? args[i].key : "";
    fbx__sbuf_put(&b, k, strlen(k) + 1);
    char num[40];
    const char *v = num;
    if (args[i].type == FBX_TARG_SHAPES) { /* text, NUL-terminated, in place */
      fbx__sbuf_shapes(&b, (const int64_t *)(const void *)args[i].s, args[i].i);
      fbx__sbuf_put(&b, "", 1);
      continue;
    }
    if (args[i].type == FBX_TARG_INT) snprintf(num, sizeof num, "%lld", (long long)args[i].i);
    else if (args[i].type == FBX_TARG_DBL) snprintf(num, sizeof num, "%.10g", args[i].d);
    else v = args[i].s ? args[i].s : "";
    fbx__sbuf_put(&b, v, strlen(v) + 1);
  }
  if (b.oom) {
    fbx__sbuf_free(&b);
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  int tid = fbx__trace_tid();
  record r = {t0_ns, t1_ns, 0, tid, session, n_args, b.p};
  pthread_mutex_lock(&g_mu);
  if (!dev) r.parent = parent_now(tid);
  else if (eval && g_eval_parent[eval % EVAL_RING].eval == eval) {
    r.parent = g_eval_parent[eval % EVAL_RING].parent;
    if (!r.session) r.session = g_eval_parent[eval % EVAL_RING].session;
  }
  if (!g_active || g_n >= fbx__trace_max_events) goto drop;
  if (g_n == g_cap) {
    int64_t cap = g_cap ? 2 * g_cap : 1024;
    record *p = fbx_realloc(g_rec, (size_t)cap * sizeof *p);
    if (!p) goto drop;
    g_rec = p;
    g_cap = cap;
  }
  g_rec[g_n++] = r;
  pthread_mutex_unlock(&g_mu);
  return;
drop:
  if (g_active) g_dropped++;
  pthread_mutex_unlock(&g_mu);
  fbx__sbuf_free(&b);
}

int64_t fbx_trace_profiler_collect(uint64_t since_ns, const fbx_trace_session *session,
                                   fbx_trace_prof_visit_fn fn, void *ctx) {
  const char *keys[MAX_ARGS], *vals[MAX_ARGS];
  fbx__trace_gpu_pending_flush(); /* device records delivered so far wait binary: their slices into the store */
  pthread_mutex_lock(&g_mu);
  if (g_npn > 1) qsort(g_pn, (size_t)g_npn, sizeof *g_pn, pn_cmp);
  for (int64_t i = 0; i < g_n; i++) {
    record *r = &g_rec[i];
    if (r->t0 < since_ns) continue;
    if (session && r->session && r->session != session) continue;
    fbx_trace_prof_event ev = {0};
    const char *p = r->data;
    ev.name = p;
    p += strlen(p) + 1;
    ev.cat = p;
    p += strlen(p) + 1;
    for (int k = 0; k < r->n_args; k++) {
      keys[k] = p;
      p += strlen(p) + 1;
      vals[k] = p;
      p += strlen(p) + 1;
    }
    ev.t0_ns = r->t0;
    ev.t1_ns = r->t1;
    ev.tid = r->tid;
    ev.session = r->session;
    ev.parent = r->parent;
    ev.parent_name = r->parent ? pn_find(r->parent) : NULL;
    ev.n_args = r->n_args;
    ev.keys = keys;
    ev.values = vals;
    fn(ctx, &ev);
  }
  int64_t d = g_dropped;
  pthread_mutex_unlock(&g_mu);
  return d;
}

#else
typedef int fbx__trace_profiler_compiled_out;
#endif
