// fz_pbmut.c — protobuf-aware in-place mutation of a raw model (see fz_pbmut.h).
#include "fz_pbmut.h"

#include <math.h>
#include <string.h>

#define FZ_PB_MAX_LEAVES 4096
#define FZ_PB_MAX_DEPTH 12

typedef struct fz_leaf {
  size_t off, len;  // the value's bytes (a varint's own bytes; a bytes payload)
  int wire;         // 0 varint, 1 fixed64, 2 bytes, 5 fixed32
} fz_leaf;

typedef struct fz_leaves {
  fz_leaf v[FZ_PB_MAX_LEAVES];
  size_t n;
} fz_leaves;

static int pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
  *v = 0;
  for (int s = 0; s < 64 && *i < n; s += 7) {
    uint8_t b = p[(*i)++];
    *v |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

// Walk the message p[lo..hi): 0 if it parses to its end (leaves appended), -1 if not.
static int pb_walk(const uint8_t *p, size_t lo, size_t hi, int depth, fz_leaves *out) {
  size_t i = lo, n0 = out->n;
  while (i < hi) {
    uint64_t key, len;
    if (pb_varint(p, hi, &i, &key) || (key >> 3) == 0) goto bad;
    int wire = (int)(key & 7);
    size_t start = i;
    if (wire == 0) {
      if (pb_varint(p, hi, &i, &len)) goto bad;
    } else if (wire == 1 || wire == 5) {
      i += wire == 1 ? 8 : 4;
      if (i > hi) goto bad;
    } else if (wire == 2) {
      if (pb_varint(p, hi, &i, &len) || len > hi - i) goto bad;
      start = i;
      i += len;
      // a nested message if it parses as one, else a leaf of bytes
      if (depth < FZ_PB_MAX_DEPTH && len > 0 && pb_walk(p, start, i, depth + 1, out) == 0) continue;
    } else {
      goto bad;
    }
    if (out->n < FZ_PB_MAX_LEAVES) out->v[out->n++] = (fz_leaf){start, i - start, wire};
  }
  return 0;
bad:
  out->n = n0;
  return -1;
}

static unsigned pb_rng(unsigned *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

// Write v as a varint of exactly len bytes (len >= its minimal length; 1..10).
static int pb_put_varint(uint8_t *p, size_t len, uint64_t v) {
  uint64_t t = v;
  size_t need = 1;
  while (t >>= 7) need++;
  if (need > len) return -1;
  for (size_t k = 0; k < len; k++) {
    p[k] = (uint8_t)(v & 0x7f) | (k + 1 < len ? 0x80 : 0);
    v >>= 7;
  }
  return 0;
}

int fz_pbmut(uint8_t *p, size_t n, unsigned seed) {
  static fz_leaves L;  // one mutation at a time (libFuzzer is single-threaded here)
  L.n = 0;
  if (pb_walk(p, 0, n, 0, &L) || L.n == 0) return 0;
  unsigned s = seed | 1;
  fz_leaf *f = &L.v[pb_rng(&s) % L.n];
  uint8_t *q = p + f->off;
  if (f->wire == 0) {
    static const int64_t vals[] = {0, 1, 2, 3, -1, -2, 7, 64, 127, 255, 1 << 16, INT32_MAX, INT32_MIN,
                                   INT64_MAX, INT64_MIN, ((int64_t)1 << 62) + 1, (int64_t)1 << 32};
    for (int tries = 0; tries < 8; tries++) {
      unsigned r = pb_rng(&s);
      uint64_t v;
      if (r & 1) {  // near the old value
        size_t i = 0;
        pb_varint(q, f->len, &i, &v);
        v += (uint64_t)(int64_t)((int)(r >> 8) % 5 - 2);
      } else {
        v = (uint64_t)vals[(r >> 8) % (sizeof vals / sizeof vals[0])];
      }
      if (pb_put_varint(q, f->len, v) == 0) return 1;
    }
    return pb_put_varint(q, f->len, pb_rng(&s) & 0x7f) == 0;
  }
  if (f->wire == 5) {  // mostly floats in ONNX: attribute values, float_data
    static const float vals[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-45f, 1e-38f, 3.4e38f, -3.4e38f, 88.8f, 1e4f};
    unsigned r = pb_rng(&s);
    float v = (r & 3) == 0 ? NAN : (r & 3) == 1 ? ((r & 4) ? INFINITY : -INFINITY)
                                                : vals[(r >> 3) % (sizeof vals / sizeof vals[0])];
    memcpy(q, &v, 4);
    return 1;
  }
  if (f->len == 0) return 0;
  q[pb_rng(&s) % f->len] ^= (uint8_t)(1u << (pb_rng(&s) & 7));  // fixed64 or bytes: a bit
  return 1;
}
