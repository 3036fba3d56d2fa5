/* JSON text for the trace file: the growable string buffer, escaping, numbers,
 * and the formatting of one binary event record (trace_internal.h) into a
 * Chrome Trace Event object. Runs at flush time only (never per event). */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

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

void fbx__trace_format_rec(fbx__sbuf *b, const fbx__rec *r, int pid, int tid, uint64_t base) {
  const unsigned char *p = (const unsigned char *)(r + 1);
  const char *name, *cat;
  p = rec_str(p, &name);
  if (r->kind == FBX__REC_RAW) {
    fbx__sbuf_put(b, ",\n", 2);
    fbx__sbuf_puts(b, name);
    return;
  }
  if (r->kind == FBX__REC_META) {
    fbx__sbuf_put(b, ",\n", 2);
    fbx__trace_append_meta(b, "thread_name", pid, tid, name ? name : "");
    return;
  }
  p = rec_str(p, &cat);
  fbx__sbuf_puts(b, ",\n{\"name\":");
  fbx__sbuf_str(b, name);
  fbx__sbuf_puts(b, ",\"cat\":");
  fbx__sbuf_str(b, cat ? cat : "fusebox");
  static const char ph_x[] = ",\"ph\":\"X\",\"ts\":", ph_i[] = ",\"ph\":\"i\",\"s\":\"t\",\"ts\":",
                    ph_c[] = ",\"ph\":\"C\",\"ts\":";
  if (r->kind == FBX__REC_X) fbx__sbuf_put(b, ph_x, sizeof ph_x - 1);
  else if (r->kind == FBX__REC_I) fbx__sbuf_put(b, ph_i, sizeof ph_i - 1);
  else fbx__sbuf_put(b, ph_c, sizeof ph_c - 1);
  uint64_t t0 = r->t0;
  fbx__sbuf_ts(b, t0 >= base ? t0 - base : 0);
  if (r->kind == FBX__REC_X) {
    fbx__sbuf_puts(b, ",\"dur\":");
    fbx__sbuf_ts(b, r->t1 >= t0 ? r->t1 - t0 : 0);
  }
  fbx__sbuf_puts(b, ",\"pid\":");
  fbx__sbuf_i64(b, pid);
  fbx__sbuf_puts(b, ",\"tid\":");
  fbx__sbuf_i64(b, tid);
  if (r->kind == FBX__REC_C) {
    double v;
    memcpy(&v, &r->t1, sizeof v);
    fbx__sbuf_puts(b, ",\"args\":{\"value\":");
    fbx__sbuf_dbl(b, v);
    fbx__sbuf_puts(b, "}");
  } else if (r->n_args > 0) {
    fbx__sbuf_puts(b, ",\"args\":{");
    for (int i = 0; i < r->n_args; i++) {
      unsigned type = *p++;
      const char *key;
      p = rec_str(p, &key);
      if (i) fbx__sbuf_put(b, ",", 1);
      fbx__sbuf_str(b, key);
      fbx__sbuf_put(b, ":", 1);
      if (type == FBX_TARG_INT) {
        int64_t v;
        memcpy(&v, p, 8);
        p += 8;
        fbx__sbuf_i64(b, v);
      } else if (type == FBX_TARG_DBL) {
        double v;
        memcpy(&v, p, 8);
        p += 8;
        fbx__sbuf_dbl(b, v);
      } else {
        const char *s;
        p = rec_str(p, &s);
        fbx__sbuf_str(b, s);
      }
    }
    fbx__sbuf_puts(b, "}");
  }
  fbx__sbuf_put(b, "}", 1);
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
