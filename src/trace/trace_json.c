/* JSON text for the trace file: the growable string buffer, escaping, numbers,
 * and the formatting of one binary event record (trace_internal.h) into a
 * Chrome Trace Event object. Runs at flush time only (never per event). */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

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

/* Bytes copied as they are: printable ASCII except '"' and '\\'. */
static const unsigned char k_plain[256] = {[0x20 ... 0x21] = 1, [0x23 ... 0x5b] = 1, [0x5d ... 0x7f] = 1};

/* Bit i set where byte i of the 16 at p needs attention (control, '"', '\\', non-ASCII). */
static inline unsigned esc_mask16(const unsigned char *p) {
  __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i lt = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)); /* signed: also every byte >= 0x80 */
  __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
  __m128i bs = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
  return (unsigned)_mm_movemask_epi8(_mm_or_si128(lt, _mm_or_si128(q, bs)));
}

/* Escapes the one byte (or UTF-8 sequence) at *pp that is not plain; returns the new output end. */
static char *esc_one(char *o, const unsigned char **pp) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = *pp;
  unsigned c = *p;
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
    *pp = p + 1;
    return o;
  }
  int l = utf8_len(p);
  if (l) {
    memcpy(o, p, (size_t)l);
    *pp = p + l;
    return o + l;
  }
  memcpy(o, "\\ufffd", 6);
  *pp = p + 1;
  return o + 6;
}

/* The escaped body of s (n bytes, NUL-terminated) at o; o has room for 6n. */
static char *esc_body(char *o, const unsigned char *p, size_t n) {
  const unsigned char *e = p + n;
  while (e - p >= 16) { /* safe runs are copied 16 bytes at a time */
    unsigned m = esc_mask16(p);
    if (!m) {
      memcpy(o, p, 16);
      o += 16;
      p += 16;
      continue;
    }
    unsigned k = (unsigned)__builtin_ctz(m);
    memcpy(o, p, 16); /* the plain prefix (the rest is overwritten) */
    o += k;
    p += k;
    o = esc_one(o, &p);
  }
  while (p < e) {
    if (k_plain[*p]) {
      *o++ = (char)*p++;
      continue;
    }
    o = esc_one(o, &p);
  }
  return o;
}

/* JSON string: escapes '"', '\\' and control characters; valid UTF-8 passes
 * through; an invalid byte becomes U+FFFD so the file always parses. */
void fbx__sbuf_str(fbx__sbuf *b, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  if (sbuf_grow(b, n * 6 + 16)) return; /* worst case: every byte -> \u00XX; +16: block copies */
  char *o = b->p + b->len;
  *o++ = '"';
  o = esc_body(o, (const unsigned char *)s, n);
  *o++ = '"';
  b->len = (size_t)(o - b->p);
  b->p[b->len] = '\0';
}

/* Digits of u, right-aligned ending at e; returns the first. */
static inline char *u64_digits(char *e, uint64_t u) {
  static const char d2[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  char *q = e;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100);
    u /= 100;
    q -= 2;
    memcpy(q, d2 + 2 * r, 2);
  }
  if (u >= 10) {
    q -= 2;
    memcpy(q, d2 + 2 * u, 2);
  } else {
    *--q = (char)('0' + u);
  }
  return q;
}

void fbx__sbuf_i64(fbx__sbuf *b, int64_t v) {
  char tmp[24];
  char *e = tmp + sizeof tmp;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  char *q = u64_digits(e, u);
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
      case FBX_TARG_SHAPES:
        fbx__sbuf_put(b, "\"", 1);
        fbx__sbuf_shapes(b, (const int64_t *)(const void *)args[i].s, args[i].i);
        fbx__sbuf_put(b, "\"", 1);
        break;
      default: fbx__sbuf_str(b, args[i].s); break;
    }
  }
  fbx__sbuf_put(b, "}", 1);
}

/* ============================ event records ============================ */

/* Reads one encoded string (see trace_internal.h); returns the byte after it. */
static const unsigned char *rec_str(const unsigned char *p, const char **out) {
  if (*p == FBX__REC_STR_PTR) {
    uint32_t off;
    memcpy(&off, p + 1, 4);
    *out = off ? fbx__trace_ro_base + (off - 1) : NULL;
    return p + 5;
  }
  uint32_t n;
  memcpy(&n, p + 1, 4);
  *out = (const char *)p + 5;
  return p + 5 + n + 1;
}

/* ---- flush-path formatting: one capacity check per record, then a cursor ----
 * fbx__trace_format_rec reserves an upper bound of the record's JSON length
 * (rec_bound) and writes through a plain char pointer; only the rare paths
 * (a literal not yet memoized, a non-integral double) re-check capacity. */
static inline int room(fbx__sbuf *b, size_t n) {
  return __builtin_expect(b->len + n + 1 <= b->cap, 1) ? 0 : sbuf_grow(b, n);
}
#define W_LIT(o, lit) (memcpy((o), (lit), sizeof(lit) - 1), (o) + (sizeof(lit) - 1))

static inline unsigned u64_ndigits(uint64_t u) {
  unsigned n = 1;
  while (u >= 10000) {
    n += 4;
    u /= 10000;
  }
  if (u >= 100) {
    n += 2;
    u /= 100;
  }
  return n + (u >= 10);
}
static inline char *w_u64(char *o, uint64_t u) {
  unsigned n = u64_ndigits(u);
  u64_digits(o + n, u);
  return o + n;
}
static inline char *w_i64(char *o, int64_t v) {
  if (v < 0) {
    *o++ = '-';
    return w_u64(o, (uint64_t)0 - (uint64_t)v);
  }
  return w_u64(o, (uint64_t)v);
}
static inline char *w_ts(char *o, uint64_t ns) {
  o = w_u64(o, ns / 1000);
  unsigned r = (unsigned)(ns % 1000);
  o[0] = '.';
  o[1] = (char)('0' + r / 100);
  o[2] = (char)('0' + r / 10 % 10);
  o[3] = (char)('0' + r % 10);
  return o + 4;
}
/* An escaped JSON string of known length (room: 6n + 18). */
static inline char *w_str_n(char *o, const char *s, size_t n) {
  *o++ = '"';
  o = esc_body(o, (const unsigned char *)s, n);
  *o++ = '"';
  return o;
}

/* Read-only literals (event names, categories, argument keys, most values)
 * recur in every event: their escaped form is memoized by offset. The flush
 * runs under the writer's mutex, the only caller of fbx__trace_format_rec. */
enum { LIT_CACHE = 1024, LIT_MAX = 112, LIT_ROOM = LIT_MAX + 16 };
typedef struct lit_entry {
  uint32_t off;           /* 1 + offset; 0 = empty */
  uint32_t len;           /* escaped length, quotes included */
  char esc[LIT_ROOM];     /* padded: copied in whole 16-byte pieces */
} lit_entry;
static lit_entry g_lit[LIT_CACHE];

/* Cache miss: formats (and memoizes) the literal; may grow b. Returns the new cursor. */
static __attribute__((noinline)) char *w_lit_slow(fbx__sbuf *b, char *o, uint32_t off, size_t reserve) {
  b->len = (size_t)(o - b->p);
  const char *s = fbx__trace_ro_base + (off - 1);
  size_t n = strlen(s);
  if (room(b, n * 6 + 18 + reserve)) return b->p + b->len; /* OOM: the caller sees b->oom */
  o = b->p + b->len;
  char *e = w_str_n(o, s, n);
  size_t len = (size_t)(e - o);
  if (len <= LIT_MAX) {
    lit_entry *c = &g_lit[(off * 2654435761u) >> 22 & (LIT_CACHE - 1)];
    c->off = off;
    c->len = (uint32_t)len;
    memcpy(c->esc, o, len);
  }
  return e;
}

static inline char *w_lit(fbx__sbuf *b, char *o, uint32_t off, size_t reserve) {
  const lit_entry *c = &g_lit[(off * 2654435761u) >> 22 & (LIT_CACHE - 1)];
  if (__builtin_expect(c->off == off, 1)) {
    memcpy(o, c->esc, 32);
    for (uint32_t i = 32; i < c->len; i += 16) memcpy(o + i, c->esc + i, 16);
    return o + c->len;
  }
  return w_lit_slow(b, o, off, reserve);
}

/* One encoded string (see trace_internal.h), escaped; a NULL pointer writes
 * dflt (a plain literal) or "". Advances *pp past it. */
static inline char *w_rec_str(fbx__sbuf *b, char *o, const unsigned char **pp, size_t reserve, const char *dflt) {
  const unsigned char *p = *pp;
  uint32_t v;
  memcpy(&v, p + 1, 4);
  if (*p == FBX__REC_STR_PTR) {
    *pp = p + 5;
    if (__builtin_expect(v != 0, 1)) return w_lit(b, o, v, reserve);
    return dflt ? w_str_n(o, dflt, strlen(dflt)) : W_LIT(o, "\"\"");
  }
  *pp = p + 5 + v + 1;
  return w_str_n(o, (const char *)p + 5, v);
}

/* Shapes (FBX_TARG_SHAPES) as text "1x16x64,1x64" from the n int64s at p
 * (unaligned): n_tensors, then per tensor rank and dims (rank 0 -> "scalar",
 * < 0 -> "none"). At most 28 chars per value. */
static char *w_shapes(char *o, const unsigned char *p, size_t n) {
  const unsigned char *e = p + 8 * n;
  int64_t nt = 0;
  if (p < e) {
    memcpy(&nt, p, 8);
    p += 8;
  }
  for (int64_t t = 0; t < nt && p < e; t++) {
    if (t) *o++ = ',';
    int64_t rank;
    memcpy(&rank, p, 8);
    p += 8;
    if (rank == 0) o = W_LIT(o, "scalar");
    else if (rank < 0) o = W_LIT(o, "none");
    for (int64_t i = 0; i < rank && p < e; i++) {
      int64_t d;
      memcpy(&d, p, 8);
      p += 8;
      if (i) *o++ = 'x';
      o = w_u64(o, d < 0 ? 0 : (uint64_t)d);
    }
  }
  return o;
}

void fbx__sbuf_shapes(fbx__sbuf *b, const int64_t *v, int64_t n) {
  if (v && n > 0 && !room(b, 28 * (size_t)n + 8)) b->len = (size_t)(w_shapes(b->p + b->len, (const unsigned char *)v, (size_t)n) - b->p);
  if (b->p && !room(b, 0)) b->p[b->len] = '\0';
}

/* A double: integral values inline, others through fbx__sbuf_dbl (may grow b). */
static inline char *w_dbl(fbx__sbuf *b, char *o, double v, size_t reserve) {
  if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) return w_i64(o, (int64_t)v);
  b->len = (size_t)(o - b->p);
  fbx__sbuf_dbl(b, v);
  if (room(b, reserve)) return b->p + b->len;
  return b->p + b->len;
}

/* Whole-event memo: an op span's name, category and arguments repeat from one
 * decode step to the next (same node, same shapes); only the times differ. A
 * record's bytes after its header (zero-padded: trace_internal.h) determine
 * that text completely (literal offsets map to fixed strings), so the text
 * around the times is memoized by those bytes: hash, compare, copy. Under the
 * writer's mutex like the literal cache. */
enum { MEMO_N = 1024, MEMO_KEY_MAX = 1024, MEMO_JSON_MAX = 4096 };
typedef struct memo_entry {
  uint64_t h;
  uint32_t klen, jlen, split; /* json = text before the times [0, split) + after them */
  uint32_t kcap, jcap;
  uint8_t kind;
  unsigned char *key;         /* klen bytes of kcap */
  char *json;                 /* jlen bytes of jcap */
} memo_entry;
static memo_entry g_memo[MEMO_N];

static inline uint64_t memo_hash(const unsigned char *p, size_t n) { /* n: a multiple of 8 */
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    h = _mm_crc32_u64(h, v);
  }
  return h * 0x9e3779b97f4a7c15ull;
}

/* The times part: ts (and dur when t1 != NULL), pid, tid. */
static inline char *w_times_at(char *o, uint64_t t0, const uint64_t *t1, int pid, int tid, uint64_t base) {
  o = w_ts(o, t0 >= base ? t0 - base : 0);
  if (t1) {
    o = W_LIT(o, ",\"dur\":");
    o = w_ts(o, *t1 >= t0 ? *t1 - t0 : 0);
  }
  static char pt[48]; /* ,"pid":P,"tid":T of the last buffer formatted (under the writer's mutex) */
  static int pt_pid = 0, pt_tid = 0;
  static size_t pt_len = 0;
  if (__builtin_expect(!pt_len || pid != pt_pid || tid != pt_tid, 0)) {
    char *q = W_LIT(pt, ",\"pid\":");
    q = w_i64(q, pid);
    q = W_LIT(q, ",\"tid\":");
    q = w_i64(q, tid);
    pt_len = (size_t)(q - pt);
    pt_pid = pid;
    pt_tid = tid;
  }
  memcpy(o, pt, sizeof pt);
  return o + pt_len;
}
static inline char *w_times(char *o, const fbx__rec *r, int pid, int tid, uint64_t base) {
  bool dur = r->kind == FBX__REC_X || r->kind == FBX__REC_OP;
  return w_times_at(o, r->t0, dur ? &r->t1 : NULL, pid, tid, base);
}

static void format_rec_slow(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base, memo_entry *m,
                            uint64_t h);

void fbx__trace_format_rec(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base) {
  if (r->kind != FBX__REC_X && r->kind != FBX__REC_I) {
    format_rec_slow(b, r, pid, tid, base, NULL, 0);
    return;
  }
  const unsigned char *body = (const unsigned char *)(r + 1);
  size_t blen = r->size - sizeof *r;
  if (blen > MEMO_KEY_MAX) {
    format_rec_slow(b, r, pid, tid, base, NULL, 0);
    return;
  }
  uint64_t h = memo_hash(body, blen) ^ r->kind;
  memo_entry *m = &g_memo[h >> 54 & (MEMO_N - 1)];
  if (m->h == h && m->klen == blen && m->kind == r->kind && !memcmp(m->key, body, blen)) {
    if (room(b, m->jlen + 128)) return;
    char *o = b->p + b->len;
    memcpy(o, m->json, m->split);
    o = w_times(o + m->split, r, pid, tid, base);
    memcpy(o, m->json + m->split, m->jlen - m->split);
    o += m->jlen - m->split;
    b->len = (size_t)(o - b->p);
    b->p[b->len] = '\0';
    return;
  }
  format_rec_slow(b, r, pid, tid, base, m, h);
}

static void format_rec_slow(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base, memo_entry *m,
                            uint64_t h) {
  const unsigned char *p = (const unsigned char *)(r + 1);
  if (r->kind == FBX__REC_RAW || r->kind == FBX__REC_META) {
    const char *name;
    p = rec_str(p, &name);
    fbx__sbuf_put(b, ",\n", 2);
    if (r->kind == FBX__REC_RAW) fbx__sbuf_puts(b, name ? name : "");
    else fbx__trace_append_meta(b, "thread_name", pid, tid, name ? name : "");
    return;
  }
  /* Upper bound: fixed text 256; copied strings 6 bytes per record byte;
   * literals LIT_ROOM each; values (ints, shapes at <= 3.5 chars per record byte) */
  size_t bound = 256 + 6 * (size_t)r->size + (2 + 2 * (size_t)r->n_args) * (LIT_ROOM + 8);
  if (room(b, bound)) return;
  size_t start = b->len;
  char *o = b->p + start;
  o = W_LIT(o, ",\n{\"name\":");
  o = w_rec_str(b, o, &p, bound, NULL);
  o = W_LIT(o, ",\"cat\":");
  o = w_rec_str(b, o, &p, bound, "fusebox");
  if (r->kind == FBX__REC_X) o = W_LIT(o, ",\"ph\":\"X\",\"ts\":");
  else if (r->kind == FBX__REC_I) o = W_LIT(o, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
  else o = W_LIT(o, ",\"ph\":\"C\",\"ts\":");
  size_t split = (size_t)(o - (b->p + start));
  o = w_times(o, r, pid, tid, base);
  size_t after = (size_t)(o - (b->p + start));
  if (r->kind == FBX__REC_C) {
    double v;
    memcpy(&v, &r->t1, sizeof v);
    o = W_LIT(o, ",\"args\":{\"value\":");
    o = w_dbl(b, o, v, bound);
    *o++ = '}';
  } else if (r->n_args > 0) {
    o = W_LIT(o, ",\"args\":{");
    for (int i = 0; i < r->n_args; i++) {
      unsigned type = *p++;
      if (i) *o++ = ',';
      o = w_rec_str(b, o, &p, bound, NULL);
      *o++ = ':';
      if (type == FBX_TARG_INT) {
        int64_t v;
        memcpy(&v, p, 8);
        p += 8;
        o = w_i64(o, v);
      } else if (type == FBX_TARG_DBL) {
        double v;
        memcpy(&v, p, 8);
        p += 8;
        o = w_dbl(b, o, v, bound);
      } else if (type == FBX_TARG_SHAPES) {
        uint32_t n;
        memcpy(&n, p, 4);
        *o++ = '"';
        o = w_shapes(o, p + 4, n);
        *o++ = '"';
        p += 4 + 8 * (size_t)n;
      } else {
        o = w_rec_str(b, o, &p, bound, NULL);
      }
    }
    *o++ = '}';
  }
  *o++ = '}';
  if (b->oom) return;
  b->len = (size_t)(o - b->p);
  b->p[b->len] = '\0';
  /* memoize: the text without the times */
  size_t total = b->len - start, jlen = total - (after - split);
  if (!m || jlen > MEMO_JSON_MAX) return;
  uint32_t klen = r->size - (uint32_t)sizeof *r;
  m->h = 0; /* invalid until filled */
  if (m->kcap < klen) {
    uint32_t cap = klen < 256 ? 256 : klen;
    unsigned char *k = fbx_realloc(m->key, cap);
    if (!k) return;
    m->key = k;
    m->kcap = cap;
  }
  if (m->jcap < jlen) {
    uint32_t cap = jlen < 512 ? 512 : (uint32_t)jlen;
    char *j = fbx_realloc(m->json, cap);
    if (!j) return;
    m->json = j;
    m->jcap = cap;
  }
  const char *t = b->p + start;
  m->h = h;
  m->kind = r->kind;
  m->klen = klen;
  memcpy(m->key, r + 1, m->klen);
  m->split = (uint32_t)split;
  m->jlen = (uint32_t)jlen;
  memcpy(m->json, t, split);
  memcpy(m->json + split, t + after, total - after);
}

/* ---- op records (FBX__REC_OP): a site's constant text, built once ---- */
enum { P_OP_HEAD, P_OP_ARGS, P_FAST_HEAD, P_FAST_ARGS, P_FAST_POST, P_SUFFIX, P_COMP_HEAD, P_COMP_ARGS, P_N };
typedef struct site_text {
  uint32_t off[P_N], len[P_N];
  size_t total;
  char data[];
} site_text;

/* Under the writer's mutex: the site's JSON pieces (NULL on OOM).
 *   OP_HEAD   ,\n{"name":"<op>","cat":"op","ph":"X","ts":
 *   OP_ARGS   ,"args":{"node_id":N,"node":"..","domain":"..","device":"..","input_shapes":"
 *   FAST_HEAD ,\n{"name":"<fast span>","cat":"op.fast","ph":"X","ts":
 *   FAST_ARGS ,"args":{"kernel":["<fixed kernel>"]     (else the run's variant follows)
 *   FAST_POST ,"node_id":N}}
 *   SUFFIX    the variant suffix, escaped, unquoted
 *   COMP_HEAD ,\n{"name":"<op> [composed]","cat":"op.composed","ph":"X","ts":
 *   COMP_ARGS ,"args":{"reason":"..","node_id":N}} */
static site_text *site_text_get(fbx_trace_op_site *site) {
  if (site->json) return site->json;
  fbx__sbuf t = {0};
  uint32_t off[P_N], len[P_N];
  for (int i = 0; i < P_N; i++) {
    off[i] = (uint32_t)t.len;
    switch (i) {
      case P_OP_HEAD:
        fbx__sbuf_puts(&t, ",\n{\"name\":");
        fbx__sbuf_str(&t, site->op);
        fbx__sbuf_puts(&t, ",\"cat\":\"op\",\"ph\":\"X\",\"ts\":");
        break;
      case P_OP_ARGS:
        fbx__sbuf_puts(&t, ",\"args\":{\"node_id\":");
        fbx__sbuf_i64(&t, site->node_id);
        fbx__sbuf_puts(&t, ",\"node\":");
        fbx__sbuf_str(&t, site->node);
        fbx__sbuf_puts(&t, ",\"domain\":");
        fbx__sbuf_str(&t, site->domain);
        fbx__sbuf_puts(&t, ",\"device\":");
        fbx__sbuf_str(&t, site->device);
        fbx__sbuf_puts(&t, ",\"input_shapes\":\"");
        break;
      case P_FAST_HEAD:
        if (!site->fast_span) break;
        fbx__sbuf_puts(&t, ",\n{\"name\":");
        fbx__sbuf_str(&t, site->fast_span);
        fbx__sbuf_puts(&t, ",\"cat\":\"op.fast\",\"ph\":\"X\",\"ts\":");
        break;
      case P_FAST_ARGS:
        fbx__sbuf_puts(&t, ",\"args\":{\"kernel\":");
        if (site->fast_kernel) fbx__sbuf_str(&t, site->fast_kernel);
        break;
      case P_FAST_POST:
        fbx__sbuf_puts(&t, ",\"node_id\":");
        fbx__sbuf_i64(&t, site->node_id);
        fbx__sbuf_puts(&t, "}}");
        break;
      case P_SUFFIX:
        if (site->variant_suffix) { /* the escaped text without its quotes */
          fbx__sbuf q = {0};
          fbx__sbuf_str(&q, site->variant_suffix);
          if (q.oom) t.oom = 1;
          else fbx__sbuf_put(&t, q.p + 1, q.len - 2);
          fbx__sbuf_free(&q);
        }
        break;
      case P_COMP_HEAD:
        if (!site->composed_op) break;
        fbx__sbuf_puts(&t, ",\n{\"name\":");
        fbx__sbuf_str(&t, site->composed_op);
        if (!t.oom) t.len--; /* reopen the string: "<op> [composed]" */
        fbx__sbuf_puts(&t, " [composed]\",\"cat\":\"op.composed\",\"ph\":\"X\",\"ts\":");
        break;
      case P_COMP_ARGS:
        if (!site->composed_op) break;
        fbx__sbuf_puts(&t, ",\"args\":{\"reason\":");
        fbx__sbuf_str(&t, site->composed_reason);
        fbx__sbuf_puts(&t, ",\"node_id\":");
        fbx__sbuf_i64(&t, site->node_id);
        fbx__sbuf_puts(&t, "}}");
        break;
    }
    len[i] = (uint32_t)(t.len - off[i]);
  }
  site_text *st = t.oom ? NULL : fbx_malloc(sizeof *st + t.len + 1);
  if (st) {
    memcpy(st->off, off, sizeof off);
    memcpy(st->len, len, sizeof len);
    st->total = t.len;
    memcpy(st->data, t.p, t.len);
    site->json = st;
  }
  fbx__sbuf_free(&t);
  return st;
}

static inline char *w_piece(char *o, const site_text *st, int i) {
  memcpy(o, st->data + st->off[i], st->len[i]);
  return o + st->len[i];
}

/* The run's kernel variant (the encoded string at p) with the site's suffix, as one JSON string. */
static inline char *w_variant(fbx__sbuf *b, char *o, const unsigned char *p, const site_text *st, size_t reserve) {
  o = w_rec_str(b, o, &p, reserve, NULL);
  if (st->len[P_SUFFIX]) {
    o--; /* reopen the string */
    o = w_piece(o, st, P_SUFFIX);
    *o++ = '"';
  }
  return o;
}

/* The n tensors of an op record at *pp (FBX__REC_OP) as shape text "1x16x64,1x64"
 * (rank 0: "scalar", absent: "none"), advancing *pp; adds their bytes to
 * *bytes and sets *elements0 to the first one's element count. */
static char *w_tensors(char *o, const unsigned char **pp, uint32_t n, int64_t *bytes, int64_t *elements0) {
  const unsigned char *p = *pp;
  for (uint32_t t = 0; t < n; t++) {
    if (t) *o++ = ',';
    uint32_t head;
    memcpy(&head, p, 4);
    p += 4;
    int32_t rank = (int8_t)(head & 0xff);
    bool wide = head >> 31;
    int64_t e = 1;
    if (rank == 0) o = W_LIT(o, "scalar");
    else if (rank < 0) o = W_LIT(o, "none");
    for (int32_t i = 0; i < rank; i++) {
      int64_t d;
      if (wide) {
        memcpy(&d, p, 8);
        p += 8;
      } else {
        uint32_t d32;
        memcpy(&d32, p, 4);
        p += 4;
        d = d32;
      }
      if (i) *o++ = 'x';
      o = w_u64(o, d < 0 ? 0 : (uint64_t)d);
      e *= d;
    }
    if (rank >= 0) *bytes += e * (int64_t)(head >> 8 & 0xffff);
    if (t == 0 && elements0) *elements0 = rank >= 0 ? e : 0;
  }
  *pp = p;
  return o;
}

/* Args memo: the op span's text from its input shapes to its end depends only
 * on the record's bytes after the site pointer (flops, dtype, variant,
 * reason, tensors; zero-padded) when the site adds no variant suffix. Decode
 * steps repeat those bytes for most nodes, so that text is memoized by them:
 * hash, compare, copy. Under the writer's mutex. */
enum { OPM_N = 2048, OPM_KEY_MAX = 1024, OPM_TXT_MAX = 2048 };
typedef struct opm_entry {
  uint64_t h;
  uint32_t klen, tlen, kcap, tcap;
  unsigned char *key;
  char *txt;
} opm_entry;
static opm_entry g_opm[OPM_N];

static void opm_store(opm_entry *m, uint64_t h, const unsigned char *key, uint32_t klen, const char *txt, size_t tlen) {
  m->h = 0; /* invalid until filled */
  if (klen > OPM_KEY_MAX || tlen > OPM_TXT_MAX) return;
  if (m->kcap < klen) {
    unsigned char *k = fbx_realloc(m->key, klen);
    if (!k) return;
    m->key = k;
    m->kcap = klen;
  }
  if (m->tcap < tlen) {
    char *t = fbx_realloc(m->txt, tlen);
    if (!t) return;
    m->txt = t;
    m->tcap = (uint32_t)tlen;
  }
  memcpy(m->key, key, klen);
  memcpy(m->txt, txt, tlen);
  m->klen = klen;
  m->tlen = (uint32_t)tlen;
  m->h = h;
}

int fbx__trace_format_op(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base, int allow) {
  const unsigned char *p = (const unsigned char *)(r + 1);
  fbx_trace_op_site *site;
  double flops;
  memcpy(&site, p, 8);
  memcpy(&flops, p + 8, 8);
  p += 16;
  const site_text *st = site_text_get(site);
  if (!st) {
    b->oom = 1;
    return 0;
  }
  /* Upper bound: pieces; copied strings 6 bytes per record byte (they appear
   * at most twice); 4 literals; shapes <= 3.5 chars per record byte; numbers and times. */
  size_t bound = st->total + 12 * (size_t)r->size + 4 * (LIT_ROOM + 8) + 4 * 128 + 256;
  if (room(b, bound)) return 0;
  size_t start = b->len;
  char *o = b->p + start;
  const unsigned char *dtype = p;
  const char *skip;
  p = rec_str(p, &skip);
  const unsigned char *variant = p;
  p = rec_str(p, &skip);
  const unsigned char *reason = p;
  p = rec_str(p, &skip);
  uint32_t counts[2];
  memcpy(counts, p, 8);
  p += 8;
  int64_t bytes = 0, elements = 0;

  o = w_piece(o, st, P_OP_HEAD);
  o = w_times(o, r, pid, tid, base);
  o = w_piece(o, st, P_OP_ARGS);
  const unsigned char *key = (const unsigned char *)(r + 1) + 8;
  uint32_t klen = r->size - (uint32_t)sizeof *r - 8;
  uint64_t h = memo_hash(key, klen) | 1;
  opm_entry *m = st->len[P_SUFFIX] ? NULL : &g_opm[h >> 53 & (OPM_N - 1)];
  if (m && m->h == h && m->klen == klen && !memcmp(m->key, key, klen)) {
    memcpy(o, m->txt, m->tlen);
    o += m->tlen;
  } else {
    size_t args_at = (size_t)(o - b->p); /* an offset: the literal cache may grow the buffer */
    o = w_tensors(o, &p, counts[0], &bytes, NULL);
    o = W_LIT(o, "\",\"output_shapes\":\"");
    o = w_tensors(o, &p, counts[1], &bytes, &elements);
    o = W_LIT(o, "\",\"dtype\":");
    const unsigned char *q = dtype;
    o = w_rec_str(b, o, &q, bound, NULL);
    o = W_LIT(o, ",\"elements\":");
    o = w_i64(o, elements);
    o = W_LIT(o, ",\"bytes\":");
    o = w_i64(o, bytes);
    o = W_LIT(o, ",\"flops\":");
    o = w_dbl(b, o, flops, bound);
    o = W_LIT(o, ",\"kernel_variant\":");
    o = w_variant(b, o, variant, st, bound);
    o = W_LIT(o, ",\"kernel_variant_reason\":");
    q = reason;
    o = w_rec_str(b, o, &q, bound, NULL);
    o = W_LIT(o, "}}");
    if (m && !b->oom) opm_store(m, h, key, klen, b->p + args_at, (size_t)(o - b->p) - args_at);
  }
  int written = 1;
  if (site->fast_span && written < allow) {
    o = w_piece(o, st, P_FAST_HEAD);
    o = w_times(o, r, pid, tid, base);
    o = w_piece(o, st, P_FAST_ARGS);
    if (!site->fast_kernel) o = w_variant(b, o, variant, st, bound);
    o = w_piece(o, st, P_FAST_POST);
    written++;
  }
  if (site->composed_op && written < allow) {
    o = w_piece(o, st, P_COMP_HEAD);
    o = w_times(o, r, pid, tid, base);
    o = w_piece(o, st, P_COMP_ARGS);
    written++;
  }
  if (site->composed_op && site->session && written < allow) { /* the session's running composed count */
    o = W_LIT(o, ",\n{\"name\":\"fusebox.composed_path_count\",\"cat\":\"counter\",\"ph\":\"C\",\"ts\":");
    o = w_times_at(o, r->t0, NULL, pid, tid, base);
    o = W_LIT(o, ",\"args\":{\"value\":");
    o = w_i64(o, fbx__trace_session_composed_next(site->session));
    o = W_LIT(o, "}}");
    written++;
  }
  if (b->oom) {
    b->len = start;
    return 0;
  }
  b->len = (size_t)(o - b->p);
  b->p[b->len] = '\0';
  return written;
}

void fbx__trace_append_meta(fbx__sbuf *b, const char *kind, int pid, int tid, const char *name) {
  fbx__sbuf_puts(b, "{\"name\":");
  fbx__sbuf_str(b, kind);
  fbx__sbuf_puts(b, ",\"ph\":\"M\",\"pid\":");
  fbx__sbuf_i64(b, pid);
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, tid);
  fbx__sbuf_puts(b, ",\"args\":{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, "}}");
}

#else
typedef int fbx__trace_json_compiled_out;
#endif
