/* Event store for ORT's profiler (see trace_profiler.h). One mutex: this path
 * is only live while the application profiles, where ORT itself locks too. */
#include "trace/trace_profiler.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "trace/trace_internal.h"

enum { MAX_ARGS = 32 };

typedef struct record {
  uint64_t t0, t1;
  int tid;
  const fbx_trace_session *session;
  int n_args;
  char *data; /* name \0 cat \0 (key \0 value \0) * n_args */
} record;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_active = 0;
static record *g_rec = NULL;
static int64_t g_n = 0, g_cap = 0, g_dropped = 0;

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
}

void fbx_trace_profiler_end(void) {
  pthread_mutex_lock(&g_mu);
  if (g_active > 0 && --g_active == 0) {
    fbx__trace_flags_clear(FBX_TRACE_F_PROFILER);
    clear_locked();
  }
  pthread_mutex_unlock(&g_mu);
}

void fbx__trace_profiler_record(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                                const fbx_trace_arg *args, int n_args) {
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
  record r = {t0_ns, t1_ns, fbx__trace_tid(), fbx_trace_session_current(), n_args, b.p};
  pthread_mutex_lock(&g_mu);
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
  pthread_mutex_lock(&g_mu);
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
