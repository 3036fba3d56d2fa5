/* Chrome Trace Event JSON writer.
 *
 * Each thread formats its events into its own buffer (registered in a global
 * list under g_mu at the thread's first event; the buffer's own mutex is
 * uncontended except while a flush drains it). Buffers drain into the one
 * file when they pass FLUSH_BYTES, when their thread exits, at every session
 * teardown and at exit. The file is kept as
 *     {"traceEvents":[ <event> ,<event> ... \n],"displayTimeUnit":"ms","otherData":{...}}
 * where g_body_end is the offset just past the last event: a drain writes
 * the new events there and rewrites the trailer, so after each drain the file
 * is complete, valid JSON. Memory stays bounded: at most FLUSH_BYTES (+ one
 * event) per live thread; the event cap bounds the file. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

enum { FLUSH_BYTES = 256 * 1024 };

typedef struct tbuf {
  pthread_mutex_t mu;
  fbx__sbuf b;        /* events, each preceded by ',' */
  int tid;
  struct tbuf *next;  /* g_list, under g_mu */
} tbuf;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* g_list, the file */
static tbuf *g_list = NULL;
static int g_fd = -1;
static long long g_body_end = 0;
static int64_t g_recorded = 0; /* counted events accepted (atomic) */
static int64_t g_dropped = 0;  /* counted events refused by the cap (atomic) */
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static __thread tbuf *tl_buf = NULL;
static int g_pid = 0; /* getpid() is a system call: cached, refreshed in a forked child */

static void pid_refresh(void) { __atomic_store_n(&g_pid, (int)getpid(), __ATOMIC_RELAXED); }
static void pid_once(void) { pthread_atfork(NULL, NULL, pid_refresh); }
static int pid_get(void) {
  int p = __atomic_load_n(&g_pid, __ATOMIC_RELAXED);
  if (__builtin_expect(p != 0, 1)) return p;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, pid_once);
  pid_refresh();
  return g_pid;
}

int64_t fbx__trace_dropped(void) { return __atomic_load_n(&g_dropped, __ATOMIC_RELAXED); }
int64_t fbx__trace_recorded(void) { return __atomic_load_n(&g_recorded, __ATOMIC_RELAXED); }

/* ============================ string buffer ============================ */

static int sbuf_grow(fbx__sbuf *b, size_t extra) {
  if (b->oom) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = fbx_realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void fbx__sbuf_put(fbx__sbuf *b, const char *s, size_t n) {
  if (sbuf_grow(b, n)) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void fbx__sbuf_puts(fbx__sbuf *b, const char *s) { fbx__sbuf_put(b, s, strlen(s)); }

void fbx__sbuf_free(fbx__sbuf *b) {
  fbx_free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return (s[1] & 0xC0) == 0x80 ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogates */
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;
    if (c == 0xF4 && s[1] >= 0x90) return 0;
    return 4;
  }
  return 0;
}

/* JSON string: escapes '"', '\\' and control characters; valid UTF-8 passes
 * through; an invalid byte becomes U+FFFD so the file always parses. */
void fbx__sbuf_str(fbx__sbuf *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  if (!s) s = "";
  size_t n = strlen(s);
  if (sbuf_grow(b, n * 6 + 2)) return; /* worst case: every byte -> \u00XX */
  char *o = b->p + b->len;
  *o++ = '"';
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      *o++ = (char)c;
      p++;
      continue;
    }
    if (c < 0x80) {
      *o++ = '\\';
      switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
          *o++ = 'u'; *o++ = '0'; *o++ = '0';
          *o++ = hex[c >> 4]; *o++ = hex[c & 15];
      }
      p++;
      continue;
    }
    int l = utf8_len(p);
    if (l) {
      memcpy(o, p, (size_t)l);
      o += l;
      p += l;
    } else {
      memcpy(o, "\\ufffd", 6);
      o += 6;
      p++;
    }
  }
  *o++ = '"';
  b->len = (size_t)(o - b->p);
  b->p[b->len] = '\0';
}

void fbx__sbuf_i64(fbx__sbuf *b, int64_t v) {
  char tmp[24];
  char *e = tmp + sizeof tmp, *q = e;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--q = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) *--q = '-';
  fbx__sbuf_put(b, q, (size_t)(e - q));
}

void fbx__sbuf_dbl(fbx__sbuf *b, double v) {
  if (!isfinite(v)) {
    fbx__sbuf_put(b, "null", 4);
    return;
  }
  /* integral values (flops, counters) without snprintf: it dominates an op span's cost */
  if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
    fbx__sbuf_i64(b, (int64_t)v);
    return;
  }
  char tmp[40];
  int n = snprintf(tmp, sizeof tmp, "%.10g", v);
  fbx__sbuf_put(b, tmp, (size_t)n);
}

void fbx__sbuf_ts(fbx__sbuf *b, uint64_t ns) {
  fbx__sbuf_i64(b, (int64_t)(ns / 1000));
  char frac[4];
  unsigned r = (unsigned)(ns % 1000);
  frac[0] = '.';
  frac[1] = (char)('0' + r / 100);
  frac[2] = (char)('0' + r / 10 % 10);
  frac[3] = (char)('0' + r % 10);
  fbx__sbuf_put(b, frac, 4);
}

void fbx__sbuf_args(fbx__sbuf *b, const fbx_trace_arg *args, int n_args) {
  fbx__sbuf_put(b, "{", 1);
  for (int i = 0; i < n_args; i++) {
    if (i) fbx__sbuf_put(b, ",", 1);
    fbx__sbuf_str(b, args[i].key);
    fbx__sbuf_put(b, ":", 1);
    switch (args[i].type) {
      case FBX_TARG_INT: fbx__sbuf_i64(b, args[i].i); break;
      case FBX_TARG_DBL: fbx__sbuf_dbl(b, args[i].d); break;
      default: fbx__sbuf_str(b, args[i].s); break;
    }
  }
  fbx__sbuf_put(b, "}", 1);
}

/* ================================ file ================================= */

static int write_all_at(int fd, const char *p, size_t n, long long off) {
  while (n) {
    ssize_t w = pwrite(fd, p, n, (off_t)off);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
    off += w;
  }
  return 0;
}

/* Under g_mu. */
static void write_trailer_locked(void) {
  fbx__sbuf t = {0};
  fbx__sbuf_puts(&t, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"fusebox\",\"recorded_events\":");
  fbx__sbuf_i64(&t, fbx__trace_recorded());
  fbx__sbuf_puts(&t, ",\"dropped_events\":");
  fbx__sbuf_i64(&t, fbx__trace_dropped());
  fbx__sbuf_puts(&t, ",\"max_events\":");
  fbx__sbuf_i64(&t, fbx__trace_max_events);
  fbx__sbuf_puts(&t, "}}\n");
  if (!t.oom && write_all_at(g_fd, t.p, t.len, g_body_end) == 0)
    if (ftruncate(g_fd, (off_t)(g_body_end + (long long)t.len))) { /* best effort */ }
  fbx__sbuf_free(&t);
}

/* Under g_mu and tb->mu. */
static void drain_locked(tbuf *tb) {
  if (tb->b.len && g_fd >= 0 && !tb->b.oom) {
    if (write_all_at(g_fd, tb->b.p, tb->b.len, g_body_end) == 0) g_body_end += (long long)tb->b.len;
  }
  tb->b.len = 0;
  tb->b.oom = 0;
  if (tb->b.p) tb->b.p[0] = '\0';
}

static void append_meta(fbx__sbuf *b, const char *kind, int tid, const char *name) {
  fbx__sbuf_puts(b, "{\"name\":");
  fbx__sbuf_str(b, kind);
  fbx__sbuf_puts(b, ",\"ph\":\"M\",\"pid\":");
  fbx__sbuf_i64(b, (int64_t)pid_get());
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, tid);
  fbx__sbuf_puts(b, ",\"args\":{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, "}}");
}

int fbx__trace_writer_open(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  fbx__sbuf h = {0};
  fbx__sbuf_puts(&h, "{\"traceEvents\":[\n");
  append_meta(&h, "process_name", 0, "fusebox");
  if (h.oom || write_all_at(fd, h.p, h.len, 0)) {
    fbx__sbuf_free(&h);
    close(fd);
    return -1;
  }
  pthread_mutex_lock(&g_mu);
  g_fd = fd;
  g_body_end = (long long)h.len;
  write_trailer_locked();
  pthread_mutex_unlock(&g_mu);
  fbx__sbuf_free(&h);
  return 0;
}

/* ============================ thread buffers =========================== */

static void tbuf_thread_exit(void *p) {
  tbuf *tb = p;
  pthread_mutex_lock(&g_mu);
  pthread_mutex_lock(&tb->mu);
  drain_locked(tb);
  if (g_fd >= 0) write_trailer_locked();
  pthread_mutex_unlock(&tb->mu);
  for (tbuf **pp = &g_list; *pp; pp = &(*pp)->next)
    if (*pp == tb) {
      *pp = tb->next;
      break;
    }
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_destroy(&tb->mu);
  fbx__sbuf_free(&tb->b);
  fbx_free(tb);
  tl_buf = NULL;
}

static void key_create(void) { pthread_key_create(&g_key, tbuf_thread_exit); }

static void thread_meta(tbuf *tb, const char *name) {
  fbx__sbuf_put(&tb->b, ",\n", 2);
  append_meta(&tb->b, "thread_name", tb->tid, name);
}

static tbuf *tbuf_get(void) {
  if (__builtin_expect(tl_buf != NULL, 1)) return tl_buf;
  tbuf *tb = fbx_calloc(1, sizeof *tb);
  if (!tb) return NULL;
  pthread_mutex_init(&tb->mu, NULL);
  tb->tid = fbx__trace_tid();
  char name[64] = "";
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0 || !name[0])
    snprintf(name, sizeof name, "thread %d", tb->tid);
  thread_meta(tb, name);
  pthread_once(&g_key_once, key_create);
  pthread_setspecific(g_key, tb);
  pthread_mutex_lock(&g_mu);
  tb->next = g_list;
  g_list = tb;
  pthread_mutex_unlock(&g_mu);
  tl_buf = tb;
  return tb;
}

/* Called with tb->mu held; returns with it held. */
static void tbuf_maybe_drain(tbuf *tb) {
  if (tb->b.len < FLUSH_BYTES) return;
  pthread_mutex_unlock(&tb->mu);
  pthread_mutex_lock(&g_mu); /* lock order: g_mu, then a buffer */
  pthread_mutex_lock(&tb->mu);
  drain_locked(tb);
  write_trailer_locked();
  pthread_mutex_unlock(&g_mu);
}

void fbx__trace_emit_raw(const char *json, size_t n, bool counted) {
  if (counted) {
    if (__atomic_fetch_add(&g_recorded, 1, __ATOMIC_RELAXED) >= fbx__trace_max_events) {
      __atomic_fetch_sub(&g_recorded, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
      return;
    }
  }
  tbuf *tb = tbuf_get();
  if (!tb) {
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  pthread_mutex_lock(&tb->mu);
  fbx__sbuf_put(&tb->b, ",\n", 2);
  fbx__sbuf_put(&tb->b, json, n);
  tbuf_maybe_drain(tb);
  pthread_mutex_unlock(&tb->mu);
}

void fbx_trace_flush(void) {
  if (!(fbx_trace_flags() & FBX_TRACE_F_JSON)) return;
  pthread_mutex_lock(&g_mu);
  for (tbuf *tb = g_list; tb; tb = tb->next) {
    pthread_mutex_lock(&tb->mu);
    drain_locked(tb);
    pthread_mutex_unlock(&tb->mu);
  }
  if (g_fd >= 0) write_trailer_locked();
  pthread_mutex_unlock(&g_mu);
}

void fbx_trace_thread_name_set(const char *name) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  tbuf *tb = tbuf_get();
  if (!tb) return;
  pthread_mutex_lock(&tb->mu);
  thread_meta(tb, name ? name : "");
  tbuf_maybe_drain(tb);
  pthread_mutex_unlock(&tb->mu);
}

/* ============================== events ================================= */

/* Formats the common head of an event into the thread's buffer directly
 * (no temporary), under the buffer's lock. */
static void emit_event(const char *name, const char *cat, char ph, uint64_t t0_ns, uint64_t t1_ns,
                       const fbx_trace_arg *args, int n_args, double counter_value) {
  if (__atomic_fetch_add(&g_recorded, 1, __ATOMIC_RELAXED) >= fbx__trace_max_events) {
    __atomic_fetch_sub(&g_recorded, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  tbuf *tb = tbuf_get();
  if (!tb) {
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  uint64_t base = fbx__trace_t0_ns;
  pthread_mutex_lock(&tb->mu);
  fbx__sbuf *b = &tb->b;
  size_t start = b->len;
  fbx__sbuf_puts(b, ",\n{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, ",\"cat\":");
  fbx__sbuf_str(b, cat ? cat : "fusebox");
  static const char ph_x[] = ",\"ph\":\"X\",\"ts\":", ph_i[] = ",\"ph\":\"i\",\"s\":\"t\",\"ts\":",
                    ph_c[] = ",\"ph\":\"C\",\"ts\":";
  if (ph == 'X') fbx__sbuf_put(b, ph_x, sizeof ph_x - 1);
  else if (ph == 'i') fbx__sbuf_put(b, ph_i, sizeof ph_i - 1);
  else fbx__sbuf_put(b, ph_c, sizeof ph_c - 1);
  fbx__sbuf_ts(b, t0_ns >= base ? t0_ns - base : 0);
  if (ph == 'X') {
    fbx__sbuf_puts(b, ",\"dur\":");
    fbx__sbuf_ts(b, t1_ns >= t0_ns ? t1_ns - t0_ns : 0);
  }
  fbx__sbuf_puts(b, ",\"pid\":");
  fbx__sbuf_i64(b, (int64_t)pid_get());
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, tb->tid);
  if (ph == 'C') {
    fbx__sbuf_puts(b, ",\"args\":{\"value\":");
    fbx__sbuf_dbl(b, counter_value);
    fbx__sbuf_puts(b, "}");
  } else if (n_args > 0) {
    fbx__sbuf_puts(b, ",\"args\":");
    fbx__sbuf_args(b, args, n_args);
  }
  fbx__sbuf_put(b, "}", 1);
  if (b->oom) { /* keep what was flushed before; this event is lost */
    b->oom = 0;
    b->len = start;
    if (b->p) b->p[start] = '\0';
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
  }
  tbuf_maybe_drain(tb);
  pthread_mutex_unlock(&tb->mu);
}

void fbx_trace_complete(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                        const fbx_trace_arg *args, int n_args) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_PROFILER)), 1)) return;
  if (f & FBX_TRACE_F_SUMMARY) fbx__trace_session_note_span(name, cat, args, n_args);
  if (f & FBX_TRACE_F_PROFILER) fbx__trace_profiler_record(name, cat, t0_ns, t1_ns, args, n_args);
  if (f & FBX_TRACE_F_JSON) emit_event(name, cat, 'X', t0_ns, t1_ns, args, n_args, 0);
}

void fbx_trace_instant(const char *name, const char *cat, const fbx_trace_arg *args, int n_args) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_PROFILER)), 1)) return;
  uint64_t t = fbx_trace_now_ns();
  if (f & FBX_TRACE_F_PROFILER) fbx__trace_profiler_record(name, cat, t, t, args, n_args);
  if (f & FBX_TRACE_F_JSON) emit_event(name, cat, 'i', t, t, args, n_args, 0);
}

void fbx_trace_counter(const char *name, double value) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  uint64_t t = fbx_trace_now_ns();
  emit_event(name, "counter", 'C', t, t, NULL, 0, value);
}

#else
typedef int fbx__trace_writer_compiled_out;
#endif
