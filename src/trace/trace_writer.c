/* Chrome Trace Event writer: binary recording on the hot path, JSON at flush.
 *
 * Hot path (fbx_trace_complete / _instant / _counter): the calling thread
 * appends one compact binary record (trace_internal.h) to its own buffer, a
 * list of CHUNK_BYTES chunks, under the buffer's spin lock (uncontended except
 * for the moment a flush detaches the chunks). Literal strings (this module's
 * read-only data) are stored as pointers; every other string is copied. No
 * formatting, no escaping, no shared atomic per event.
 *
 * Flush (fbx_trace_flush: session teardown, exit; a buffer's own thread at
 * its exit; a recording thread once all buffers together pass BUDGET_BYTES,
 * unless another one is flushing): under g_mu, each buffer's chunks are
 * detached, formatted to JSON and written into the one file, then the device
 * records that trace_gpu.c keeps binary (fbx__trace_gpu_process, through
 * out_emit); the file is kept as
 *     {"traceEvents":[ <event> ,<event> ... \n],"displayTimeUnit":"ms","otherData":{...}}
 * where g_body_end is the offset just past the last event: a drain writes
 * the new events there and rewrites the trailer, so after each flush the file
 * is complete, valid JSON.
 *
 * Event cap: counted events are admitted at flush time, in flush order, until
 * FUSEBOX_TRACE_MAX_EVENTS have been written; the rest are counted as dropped.
 * Once the cap is reached, recording threads drop counted events at once. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

enum {
  CHUNK_BYTES = 256 * 1024,      /* one buffer chunk (a larger record gets a chunk of its own) */
  BUDGET_BYTES = 64 * 1024 * 1024, /* all buffered chunks together: past it, the recorder flushes */
  POOL_BYTES = 32 * 1024 * 1024, /* chunks mapped and faulted in when the file opens, then recycled */
  WRITE_BYTES = 1024 * 1024,     /* formatted JSON is written in pieces of about this size */
  MAX_ARGS = 255,
};

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  int pooled;           /* part of the prefaulted pool: recycled, never freed */
  _Alignas(8) unsigned char data[];
} chunk;

typedef struct tbuf {
  int lk;               /* spin lock: head/tail */
  chunk *head, *tail;   /* records in recording order */
  int tid;
  struct tbuf *next;    /* g_list, under g_mu */
} tbuf;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* g_list, the file, g_fmt */
static tbuf *g_list = NULL;
static int g_fd = -1;
static long long g_body_end = 0;
static fbx__sbuf g_fmt = {0};  /* JSON being written, under g_mu */
static int64_t g_recorded = 0; /* counted events written (atomic reads) */
static int64_t g_dropped = 0;  /* counted events refused (atomic) */
static int g_full = 0;         /* the cap is reached: drop counted events at once (atomic) */
static int64_t g_buffered = 0; /* bytes in chunks holding records (atomic) */
static int g_pool_lk = 0;      /* spin lock: g_free */
static chunk *g_free = NULL;   /* empty CHUNK_BYTES chunks ready for reuse */
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static __thread tbuf *tl_buf = NULL;
static int g_pid = 0; /* getpid() is a system call: cached, refreshed in a forked child */

/* This module's read-only data segment: strings inside it are literals. */
static uintptr_t g_ro_lo = 0, g_ro_len = 0;
const char *fbx__trace_ro_base = NULL;
static const char k_ro_probe[] = "fusebox trace read-only probe";

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

static int ro_visit(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  (void)ctx;
  uintptr_t a = (uintptr_t)k_ro_probe;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    if (a - lo >= (uintptr_t)ph->p_memsz) continue;
    if (!(ph->p_flags & PF_W)) { /* never writable, never freed while we are loaded */
      g_ro_lo = lo;
      g_ro_len = (uintptr_t)ph->p_memsz;
    }
    return 1;
  }
  return 0;
}
static void ro_find(void) {
  dl_iterate_phdr(ro_visit, NULL);
  if (g_ro_len >= 0xffffffffu) g_ro_len = 0; /* offsets are 32-bit */
  fbx__trace_ro_base = (const char *)g_ro_lo;
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

/* Under g_mu: g_fmt -> file. */
static void fmt_write_locked(void) {
  if (g_fmt.len && g_fd >= 0 && !g_fmt.oom)
    if (write_all_at(g_fd, g_fmt.p, g_fmt.len, g_body_end) == 0) g_body_end += (long long)g_fmt.len;
  g_fmt.len = 0;
  g_fmt.oom = 0;
}

/* ============================ thread buffers =========================== */

static inline void spin_lock(int *lk) {
  while (__atomic_exchange_n(lk, 1, __ATOMIC_ACQUIRE))
    while (__atomic_load_n(lk, __ATOMIC_RELAXED)) sched_yield();
}
static inline void spin_unlock(int *lk) { __atomic_store_n(lk, 0, __ATOMIC_RELEASE); }

static inline void tb_lock(tbuf *tb) { spin_lock(&tb->lk); }
static inline void tb_unlock(tbuf *tb) { spin_unlock(&tb->lk); }

/* Page faults on fresh buffer memory would cost the recording threads more
 * than the recording itself: the pool is mapped and faulted in up front (only
 * when FUSEBOX_TRACE is set) and its chunks are recycled after each flush. */
static void pool_create(void) {
  size_t one = (sizeof(chunk) + CHUNK_BYTES + 4095) & ~(size_t)4095;
  size_t n = POOL_BYTES / CHUNK_BYTES;
  unsigned char *m = mmap(NULL, one * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) return;
  for (size_t i = 0; i < n; i++) {
    chunk *c = (chunk *)(m + i * one);
    c->cap = CHUNK_BYTES;
    c->pooled = 1;
    c->next = g_free;
    g_free = c;
  }
}

/* A chunk for at least `size` bytes of records, counted in g_buffered. */
static chunk *chunk_get(size_t size, bool *flush) {
  chunk *c = NULL;
  if (size <= CHUNK_BYTES && __atomic_load_n(&g_free, __ATOMIC_RELAXED)) {
    spin_lock(&g_pool_lk);
    c = g_free;
    if (c) g_free = c->next;
    spin_unlock(&g_pool_lk);
  }
  if (!c) {
    size_t cap = size > CHUNK_BYTES ? size : CHUNK_BYTES;
    c = fbx_malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->pooled = 0;
  }
  if (__atomic_add_fetch(&g_buffered, (int64_t)c->cap, __ATOMIC_RELAXED) > BUDGET_BYTES) *flush = true;
  c->next = NULL;
  c->used = 0;
  return c;
}

static void chunk_put(chunk *c) {
  __atomic_fetch_sub(&g_buffered, (int64_t)c->cap, __ATOMIC_RELAXED);
  if (!c->pooled) {
    fbx_free(c);
    return;
  }
  spin_lock(&g_pool_lk);
  c->next = g_free;
  g_free = c;
  spin_unlock(&g_pool_lk);
}

int fbx__trace_writer_open(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  fbx__sbuf h = {0};
  fbx__sbuf_puts(&h, "{\"traceEvents\":[\n");
  fbx__trace_append_meta(&h, "process_name", pid_get(), 0, "fusebox");
  if (h.oom || write_all_at(fd, h.p, h.len, 0)) {
    fbx__sbuf_free(&h);
    close(fd);
    return -1;
  }
  pthread_mutex_lock(&g_mu);
  g_fd = fd;
  g_body_end = (long long)h.len;
  spin_lock(&g_pool_lk);
  if (!g_free) pool_create();
  spin_unlock(&g_pool_lk);
  if (fbx__trace_max_events <= 0) __atomic_store_n(&g_full, 1, __ATOMIC_RELAXED);
  write_trailer_locked();
  pthread_mutex_unlock(&g_mu);
  fbx__sbuf_free(&h);
  return 0;
}

/* Under g_mu: formats and writes one buffer's records; the buffer's thread
 * keeps recording into fresh chunks meanwhile. */
static void drain_locked(tbuf *tb) {
  tb_lock(tb);
  chunk *c = tb->head;
  tb->head = tb->tail = NULL;
  tb_unlock(tb);
  if (!c) return;
  int pid = pid_get();
  int64_t max = fbx__trace_max_events;
  uint64_t base = fbx__trace_t0_ns;
  while (c) {
    for (size_t off = 0; off < c->used;) {
      const fbx__rec *r = (const fbx__rec *)(c->data + off);
      off += r->size;
      if (r->kind == FBX__REC_OP) { /* the site's counted events (1-4), and its statistics */
        fbx_trace_op_site *site;
        memcpy(&site, r + 1, sizeof site);
        fbx__trace_site_account(site, r->t1 - r->t0);
        int n = site->n_events, w = 0;
        if (g_recorded < max) {
          int64_t allow = max - g_recorded;
          w = fbx__trace_format_op(&g_fmt, r, pid, tb->tid, base, allow < n ? (int)allow : n);
          if (g_fmt.oom) { /* these events are lost; keep the rest */
            g_fmt.oom = 0;
            w = 0;
          }
          __atomic_store_n(&g_recorded, g_recorded + w, __ATOMIC_RELAXED);
        }
        if (n > w) __atomic_fetch_add(&g_dropped, n - w, __ATOMIC_RELAXED);
      } else if (r->counted) {
        if (g_recorded >= max) {
          __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
          continue;
        }
        size_t start = g_fmt.len;
        fbx__trace_format_rec(&g_fmt, r, pid, tb->tid, base);
        if (g_fmt.oom) { /* this event is lost; keep the rest */
          g_fmt.oom = 0;
          g_fmt.len = start;
          __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
          continue;
        }
        __atomic_store_n(&g_recorded, g_recorded + 1, __ATOMIC_RELAXED);
      } else {
        size_t start = g_fmt.len;
        fbx__trace_format_rec(&g_fmt, r, pid, tb->tid, base);
        if (g_fmt.oom) {
          g_fmt.oom = 0;
          g_fmt.len = start;
        }
      }
      if (g_fmt.len >= WRITE_BYTES) fmt_write_locked();
    }
    chunk *next = c->next;
    chunk_put(c);
    c = next;
  }
  fmt_write_locked();
  if (g_recorded >= max) __atomic_store_n(&g_full, 1, __ATOMIC_RELAXED);
}

/* Under g_mu (a flush's fbx__trace_gpu_process): one event formatted elsewhere, admitted
 * against the cap as drain_locked admits records. */
static void out_emit(const char *json, size_t n, bool counted) {
  if (!json || (counted && g_recorded >= fbx__trace_max_events)) {
    if (counted) __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  size_t start = g_fmt.len;
  fbx__sbuf_put(&g_fmt, ",\n", 2);
  fbx__sbuf_put(&g_fmt, json, n);
  if (g_fmt.oom) { /* this event is lost; keep the rest */
    g_fmt.oom = 0;
    g_fmt.len = start;
    if (counted) __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  if (counted) __atomic_store_n(&g_recorded, g_recorded + 1, __ATOMIC_RELAXED);
  if (g_fmt.len >= WRITE_BYTES) fmt_write_locked();
}

static bool out_room(void) { return g_recorded < fbx__trace_max_events; }

/* Under g_mu. */
static void flush_locked(bool gpu_final) {
  for (tbuf *tb = g_list; tb; tb = tb->next) drain_locked(tb);
  fbx__trace_out out = {out_emit, out_room, pid_get()};
  fbx__trace_gpu_process(g_fd >= 0 ? &out : NULL, gpu_final); /* device records: stored binary, formatted here */
  fmt_write_locked();
  if (g_recorded >= fbx__trace_max_events) __atomic_store_n(&g_full, 1, __ATOMIC_RELAXED);
  if (g_fd >= 0) write_trailer_locked();
  if (g_fmt.cap > 4 * WRITE_BYTES) fbx__sbuf_free(&g_fmt);
}

void fbx__trace_flush_all(bool gpu_final) {
  pthread_mutex_lock(&g_mu);
  flush_locked(gpu_final);
  pthread_mutex_unlock(&g_mu);
}
static void flush_all(void) { fbx__trace_flush_all(false); }

/* A recording thread found the buffers past BUDGET_BYTES: it flushes, unless
 * another thread is flushing already (then it records on: that flush or the
 * next takes its chunks), so a decode loop never waits for a flush that the
 * profiling library's thread (or another) started. */
static void flush_budget(void) {
  if (pthread_mutex_trylock(&g_mu)) return;
  flush_locked(false);
  pthread_mutex_unlock(&g_mu);
}

static void tbuf_thread_exit(void *p) {
  tbuf *tb = p;
  pthread_mutex_lock(&g_mu);
  drain_locked(tb);
  if (g_fd >= 0) write_trailer_locked();
  for (tbuf **pp = &g_list; *pp; pp = &(*pp)->next)
    if (*pp == tb) {
      *pp = tb->next;
      break;
    }
  pthread_mutex_unlock(&g_mu);
  fbx_free(tb);
  tl_buf = NULL;
}

static void key_create(void) {
  pthread_key_create(&g_key, tbuf_thread_exit);
  ro_find();
}

static void record_meta(tbuf *tb, const char *name);

static tbuf *tbuf_get(void) {
  if (__builtin_expect(tl_buf != NULL, 1)) return tl_buf;
  pthread_once(&g_key_once, key_create);
  tbuf *tb = fbx_calloc(1, sizeof *tb);
  if (!tb) return NULL;
  tb->tid = fbx__trace_tid();
  pthread_setspecific(g_key, tb);
  pthread_mutex_lock(&g_mu);
  tb->next = g_list;
  g_list = tb;
  pthread_mutex_unlock(&g_mu);
  tl_buf = tb;
  char name[64] = "";
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0 || !name[0])
    snprintf(name, sizeof name, "thread %d", tb->tid);
  record_meta(tb, name);
  return tb;
}

/* Under tb->lk: room for `size` bytes at the tail (a new chunk if needed);
 * NULL on OOM. *flush is set when the buffered total passed the budget. */
static unsigned char *tb_reserve(tbuf *tb, size_t size, bool *flush) {
  chunk *c = tb->tail;
  if (__builtin_expect(c && c->cap - c->used >= size, 1)) {
    unsigned char *p = c->data + c->used;
    c->used += size;
    return p;
  }
  c = chunk_get(size, flush);
  if (!c) return NULL;
  c->used = size;
  if (tb->tail) tb->tail->next = c;
  else tb->head = c;
  tb->tail = c;
  return c->data;
}

/* ============================== encoding =============================== */

static inline bool str_is_lit(const char *s) { return !s || (uintptr_t)s - g_ro_lo < g_ro_len; }

enum { LEN_LIT = 0xffffffffu }; /* str_size's *len for a literal (or NULL) */

/* Encoded size of s; *len = strlen for copied strings, LEN_LIT for literals. */
static inline size_t str_size(const char *s, uint32_t *len) {
  if (str_is_lit(s)) {
    *len = LEN_LIT;
    return 1 + 4;
  }
  size_t n = strlen(s);
  if (n > 0x7fffffff) n = 0x7fffffff;
  *len = (uint32_t)n;
  return 1 + 4 + n + 1;
}

/* s encoded as str_size decided (len from it). */
static inline unsigned char *str_put(unsigned char *o, const char *s, uint32_t len) {
  if (len == LEN_LIT) { /* offset + 1 into the read-only segment; 0 = NULL */
    uint32_t off = s ? (uint32_t)((uintptr_t)s - g_ro_lo + 1) : 0;
    *o = FBX__REC_STR_PTR;
    memcpy(o + 1, &off, 4);
    return o + 5;
  }
  *o++ = FBX__REC_STR_COPY;
  memcpy(o, &len, 4);
  memcpy(o + 4, s, len);
  o[4 + len] = 0;
  return o + 4 + len + 1;
}

/* Values of a FBX_TARG_SHAPES argument (0 without a pointer; at most 4096). */
static inline uint32_t shapes_n(const fbx_trace_arg *a) {
  if (!a->s || a->i <= 0) return 0;
  return a->i > 4096 ? 4096 : (uint32_t)a->i;
}

/* One string encoded at q if it fits before lim; NULL if not. lo/len: the read-only segment. */
static inline unsigned char *enc_str(unsigned char *q, const unsigned char *lim, const char *s, uintptr_t lo,
                                     uintptr_t len) {
  if (!s || (uintptr_t)s - lo < len) {
    if (lim - q < 5) return NULL;
    uint32_t off = s ? (uint32_t)((uintptr_t)s - lo + 1) : 0;
    *q = FBX__REC_STR_PTR;
    memcpy(q + 1, &off, 4);
    return q + 5;
  }
  size_t n = strlen(s);
  if (n > 0x7fffffff) n = 0x7fffffff;
  if ((size_t)(lim - q) < n + 6) return NULL;
  uint32_t n32 = (uint32_t)n;
  *q = FBX__REC_STR_COPY;
  memcpy(q + 1, &n32, 4);
  memcpy(q + 5, s, n);
  q[5 + n] = 0;
  return q + 6 + n;
}

/* The common case in one pass: the record is encoded straight into the
 * tail chunk's free space, each piece checked against its end. false (and
 * nothing recorded) when it does not fit there: record() then sizes it
 * first and takes a new chunk. */
static bool record_fast(tbuf *tb, int kind, bool counted, const char *name, const char *cat, uint64_t t0,
                        uint64_t t1, const fbx_trace_arg *args, int n_args) {
  uintptr_t lo = g_ro_lo, len = g_ro_len;
  bool ok = false;
  tb_lock(tb);
  chunk *c = tb->tail;
  if (!c || c->cap - c->used < sizeof(fbx__rec) + 64) goto out;
  unsigned char *o = c->data + c->used, *lim = c->data + c->cap - 8; /* - 8: room to pad */
  unsigned char *q = o + sizeof(fbx__rec);
  if (!(q = enc_str(q, lim, name, lo, len)) || !(q = enc_str(q, lim, cat, lo, len))) goto out;
  for (int i = 0; i < n_args; i++) {
    const fbx_trace_arg *a = &args[i];
    int type = a->type;
    if (type != FBX_TARG_INT && type != FBX_TARG_DBL && type != FBX_TARG_SHAPES) type = FBX_TARG_STR;
    if (lim - q < 1) goto out;
    *q++ = (unsigned char)type;
    if (!(q = enc_str(q, lim, a->key, lo, len))) goto out;
    if (type == FBX_TARG_INT || type == FBX_TARG_DBL) {
      if (lim - q < 8) goto out;
      if (type == FBX_TARG_INT) memcpy(q, &a->i, 8);
      else memcpy(q, &a->d, 8);
      q += 8;
    } else if (type == FBX_TARG_SHAPES) {
      uint32_t n = shapes_n(a);
      if ((size_t)(lim - q) < 4 + 8 * (size_t)n) goto out;
      memcpy(q, &n, 4);
      if (n) memcpy(q + 4, a->s, 8 * (size_t)n);
      q += 4 + 8 * (size_t)n;
    } else if (!(q = enc_str(q, lim, a->s, lo, len))) {
      goto out;
    }
  }
  size_t size = ((size_t)(q - o) + 7) & ~(size_t)7;
  memset(q, 0, (size_t)(o + size - q)); /* zero padding (trace_internal.h) */
  fbx__rec h = {(uint32_t)size, (uint8_t)kind, counted, (uint16_t)n_args, t0, t1};
  memcpy(o, &h, sizeof h);
  c->used += size;
  ok = true;
out:
  tb_unlock(tb);
  return ok;
}

static void record(int kind, bool counted, const char *name, const char *cat, uint64_t t0, uint64_t t1,
                   const fbx_trace_arg *args, int n_args) {
  if (counted && __builtin_expect(__atomic_load_n(&g_full, __ATOMIC_RELAXED), 0)) {
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  tbuf *tb = tbuf_get();
  if (__builtin_expect(!tb, 0)) {
    if (counted) __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  if (n_args < 0 || !args) n_args = 0;
  if (n_args > MAX_ARGS) n_args = MAX_ARGS;
  if (kind != FBX__REC_RAW && kind != FBX__REC_META && record_fast(tb, kind, counted, name, cat, t0, t1, args, n_args))
    return;
  uint32_t lens[2 + 2 * MAX_ARGS];
  size_t size = sizeof(fbx__rec) + str_size(name, &lens[0]);
  if (kind != FBX__REC_RAW && kind != FBX__REC_META) size += str_size(cat, &lens[1]);
  for (int i = 0; i < n_args; i++) {
    size += 1 + str_size(args[i].key, &lens[2 + 2 * i]);
    if (args[i].type == FBX_TARG_INT || args[i].type == FBX_TARG_DBL) size += 8;
    else if (args[i].type == FBX_TARG_SHAPES) size += 4 + 8 * (size_t)shapes_n(&args[i]);
    else size += str_size(args[i].s, &lens[3 + 2 * i]);
  }
  size = (size + 7) & ~(size_t)7;
  bool flush = false;
  tb_lock(tb);
  unsigned char *o = tb_reserve(tb, size, &flush);
  if (__builtin_expect(!o, 0)) {
    tb_unlock(tb);
    if (counted) __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  fbx__rec h = {(uint32_t)size, (uint8_t)kind, counted, (uint16_t)n_args, t0, t1};
  memcpy(o, &h, sizeof h);
  unsigned char *q = o + sizeof h;
  q = str_put(q, name, lens[0]);
  if (kind != FBX__REC_RAW && kind != FBX__REC_META) q = str_put(q, cat, lens[1]);
  for (int i = 0; i < n_args; i++) {
    int type = args[i].type;
    if (type != FBX_TARG_INT && type != FBX_TARG_DBL && type != FBX_TARG_SHAPES) type = FBX_TARG_STR;
    *q++ = (unsigned char)type;
    q = str_put(q, args[i].key, lens[2 + 2 * i]);
    if (type == FBX_TARG_INT) {
      memcpy(q, &args[i].i, 8);
      q += 8;
    } else if (type == FBX_TARG_DBL) {
      memcpy(q, &args[i].d, 8);
      q += 8;
    } else if (type == FBX_TARG_SHAPES) {
      uint32_t n = shapes_n(&args[i]);
      memcpy(q, &n, 4);
      if (n) memcpy(q + 4, args[i].s, 8 * (size_t)n);
      q += 4 + 8 * (size_t)n;
    } else {
      q = str_put(q, args[i].s, lens[3 + 2 * i]);
    }
  }
  memset(q, 0, (size_t)(o + size - q)); /* padding: a record's bytes are a pure function of the event */
  tb_unlock(tb);
  if (__builtin_expect(flush, 0)) flush_budget();
}

/* An op record that will not be written: its events count as dropped, its time still counts. */
static void op_dropped(fbx_trace_op_site *site, uint64_t t0, uint64_t t1) {
  fbx__trace_site_account(site, t1 - t0);
  __atomic_fetch_add(&g_dropped, site->n_events, __ATOMIC_RELAXED);
}

/* Touches nothing of the site (its statistics are kept at flush): one record into this thread's buffer. */
void fbx__trace_record_op(fbx_trace_op_site *site, uint64_t t0, uint64_t t1, const fbx_trace_op_run *r) {
  if (__builtin_expect(__atomic_load_n(&g_full, __ATOMIC_RELAXED), 0)) {
    op_dropped(site, t0, t1);
    return;
  }
  tbuf *tb = tbuf_get();
  if (__builtin_expect(!tb, 0)) {
    op_dropped(site, t0, t1);
    return;
  }
  int n_in = r->in && r->n_in > 0 ? (r->n_in > 255 ? 255 : r->n_in) : 0;
  int n_out = r->out && r->n_out > 0 ? (r->n_out > 255 ? 255 : r->n_out) : 0;
  uint32_t l_dt, l_var, l_rea;
  /* reserve the most it can take, then keep what was written (one pass over the tensors) */
  size_t most = sizeof(fbx__rec) + 16 + str_size(r->dtype, &l_dt) + str_size(r->variant, &l_var) +
                str_size(r->reason, &l_rea) + 8 + 8 * (size_t)(n_in + n_out) * (1 + FBX_TRACE_MAX_RANK) + 8;
  bool flush = false;
  tb_lock(tb);
  unsigned char *o = tb_reserve(tb, most, &flush);
  if (__builtin_expect(!o, 0)) {
    tb_unlock(tb);
    op_dropped(site, t0, t1);
    return;
  }
  unsigned char *q = o + sizeof(fbx__rec);
  memcpy(q, &site, 8);
  memcpy(q + 8, &r->flops, 8);
  q = str_put(q + 16, r->dtype, l_dt);
  q = str_put(q, r->variant, l_var);
  q = str_put(q, r->reason, l_rea);
  uint32_t counts[2] = {(uint32_t)n_in, (uint32_t)n_out};
  memcpy(q, counts, 8);
  q += 8;
  for (int k = 0; k < n_in + n_out; k++) { /* trace_internal.h: 4-byte head, then 32-bit dims unless wide */
    const fbx_trace_tensor *t = k < n_in ? &r->in[k] : &r->out[k - n_in];
    int32_t rank = t->rank > FBX_TRACE_MAX_RANK ? FBX_TRACE_MAX_RANK : t->rank < 0 ? -1 : t->rank;
    unsigned char *h = q;
    q += 4;
    uint64_t big = 0;
    for (int d = 0; d < rank; d++, q += 4) { /* narrow while checking */
      uint64_t v = (uint64_t)t->dims[d];
      big |= v;
      uint32_t v32 = (uint32_t)v;
      memcpy(q, &v32, 4);
    }
    uint32_t wide = big > 0x7fffffffu; /* a dim >= 2^31 (or negative): keep all 64 bits */
    if (__builtin_expect(wide, 0)) {
      q = h + 4;
      memcpy(q, t->dims, 8 * (size_t)rank);
      q += 8 * (size_t)rank;
    }
    uint32_t head = (uint32_t)(uint8_t)rank | (t->elem_bytes & 0xffffu) << 8 | wide << 31;
    memcpy(h, &head, 4);
  }
  memset(q, 0, 8); /* zero padding (trace_internal.h): at most 7 bytes of it are kept */
  size_t size = ((size_t)(q - o) + 7) & ~(size_t)7;
  tb->tail->used -= most - size;
  fbx__rec h = {(uint32_t)size, FBX__REC_OP, 1, 0, t0, t1};
  memcpy(o, &h, sizeof h);
  /* The buffer is written once and read back only at flush, so its lines are
   * never in cache: writing them stalls on their fetch. Ask for the next
   * record's lines now; the node that runs before the next record hides the
   * fetch. (A prefetch never faults, past the chunk's end included.) */
  for (int k = 0; k < 4; k++) __builtin_prefetch(o + size + 64 * k, 1, 3);
  tb_unlock(tb);
  if (__builtin_expect(flush, 0)) flush_budget();
}

/* An op.worker span (fbx_trace_slice) as the generic record of
 * fbx_trace_complete(name, "op.worker", t0, t1, {worker, begin, end}) would
 * encode it (same bytes, same JSON), without the generic encoder's per-argument work. */
static void record_slice(const char *name, uint64_t t0, uint64_t t1, const int64_t v[3]) {
  static const char *const keys[3] = {"worker", "begin", "end"};
  if (__builtin_expect(__atomic_load_n(&g_full, __ATOMIC_RELAXED), 0)) {
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  tbuf *tb = tbuf_get();
  if (__builtin_expect(!tb, 0)) {
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  uint32_t l_name;
  size_t most = sizeof(fbx__rec) + str_size(name, &l_name) + 5 + 3 * (1 + 5 + 8) + 8;
  bool flush = false;
  tb_lock(tb);
  unsigned char *o = tb_reserve(tb, most, &flush);
  if (__builtin_expect(!o, 0)) {
    tb_unlock(tb);
    __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  unsigned char *q = str_put(o + sizeof(fbx__rec), name, l_name);
  q = str_put(q, "op.worker", LEN_LIT);
  for (int i = 0; i < 3; i++) {
    *q++ = FBX_TARG_INT;
    q = str_put(q, keys[i], LEN_LIT);
    memcpy(q, &v[i], 8);
    q += 8;
  }
  memset(q, 0, 8);
  size_t size = ((size_t)(q - o) + 7) & ~(size_t)7;
  tb->tail->used -= most - size;
  fbx__rec h = {(uint32_t)size, FBX__REC_X, 1, 3, t0, t1};
  memcpy(o, &h, sizeof h);
  tb_unlock(tb);
  if (__builtin_expect(flush, 0)) flush_budget();
}

static void record_meta(tbuf *tb, const char *name) {
  (void)tb;
  record(FBX__REC_META, false, name ? name : "", NULL, 0, 0, NULL, 0);
}

/* ============================ entry points ============================= */

void fbx__trace_emit_raw(const char *json, size_t n, bool counted) {
  /* the JSON is copied as one string: it must be NUL-free, which formatted JSON is */
  char *tmp = fbx_malloc(n + 1);
  if (!tmp) {
    if (counted) __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  memcpy(tmp, json, n);
  tmp[n] = '\0';
  record(FBX__REC_RAW, counted, tmp, NULL, 0, 0, NULL, 0);
  fbx_free(tmp);
}

void fbx_trace_flush(void) {
  if (!(fbx_trace_flags() & FBX_TRACE_F_JSON)) return;
  flush_all();
}

void fbx_trace_thread_name_set(const char *name) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  tbuf *tb = tbuf_get();
  if (tb) record_meta(tb, name ? name : "");
}

void fbx_trace_complete(const char *name, const char *cat, uint64_t t0_ns, uint64_t t1_ns,
                        const fbx_trace_arg *args, int n_args) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_SUMMARY | FBX_TRACE_F_PROFILER)), 1)) return;
  if (f & FBX_TRACE_F_SUMMARY) fbx__trace_session_note_span(name, cat, args, n_args);
  if (f & FBX_TRACE_F_PROFILER) fbx__trace_profiler_record(name, cat, t0_ns, t1_ns, args, n_args);
  if (f & FBX_TRACE_F_JSON) record(FBX__REC_X, true, name, cat, t0_ns, t1_ns, args, n_args);
}

void fbx_trace_slice(const char *name, uint64_t t0_ns, uint64_t t1_ns, int64_t worker, int64_t begin, int64_t end) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_PROFILER)), 1)) return;
  if (f & FBX_TRACE_F_PROFILER) {
    fbx_trace_arg a[3] = {FBX_TARG_I("worker", worker), FBX_TARG_I("begin", begin), FBX_TARG_I("end", end)};
    fbx__trace_profiler_record(name, "op.worker", t0_ns, t1_ns, a, 3);
  }
  if (f & FBX_TRACE_F_JSON) record_slice(name, t0_ns, t1_ns, (const int64_t[3]){worker, begin, end});
}

void fbx_trace_instant(const char *name, const char *cat, const fbx_trace_arg *args, int n_args) {
  int f = fbx_trace_flags();
  if (__builtin_expect(!(f & (FBX_TRACE_F_JSON | FBX_TRACE_F_PROFILER)), 1)) return;
  uint64_t t = fbx_trace_now_ns();
  if (f & FBX_TRACE_F_PROFILER) fbx__trace_profiler_record(name, cat, t, t, args, n_args);
  if (f & FBX_TRACE_F_JSON) record(FBX__REC_I, true, name, cat, t, t, args, n_args);
}

void fbx_trace_counter(const char *name, double value) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  uint64_t t = fbx_trace_now_ns(), v;
  memcpy(&v, &value, sizeof v);
  record(FBX__REC_C, true, name, "counter", t, v, NULL, 0);
}

#else
typedef int fbx__trace_writer_compiled_out;
#endif
