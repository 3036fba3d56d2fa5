/* The strided copy behind TRANSPOSE, SLICE, EXPAND, TILE, DEPTH_TO_SPACE...:
 * dims are coalesced once, then the innermost dim is a memcpy (stride 1), a
 * fill (stride 0) or a typed gather. 2-D transposes go through 32x32 tiles. */
#include <string.h>

#include "cpu_internal.h"

#define FBX__MAXR (2 * FBX_MAX_RANK)

typedef struct fbx__copy_job {
  unsigned char *dst;
  const unsigned char *src;
  size_t esz;
  int rank;
  int64_t dims[FBX__MAXR], st[FBX__MAXR];
} fbx__copy_job;

static void fbx__copy_run(unsigned char *d, const unsigned char *s, size_t esz, int64_t n, int64_t st) {
  if (st == 1) {
    memcpy(d, s, (size_t)n * esz);
    return;
  }
#define G(T)                                                  \
  do {                                                        \
    T *dd = (T *)d;                                           \
    const T *ss = (const T *)s;                               \
    for (int64_t i = 0; i < n; i++) memcpy(&dd[i], ss + i * st, sizeof(T)); \
  } while (0)
  switch (esz) {
    case 1: G(uint8_t); break;
    case 2: G(uint16_t); break;
    case 4: G(uint32_t); break;
    case 8: G(uint64_t); break;
    default:
      for (int64_t i = 0; i < n; i++) memcpy(d + i * esz, s + i * st * (int64_t)esz, esz);
  }
#undef G
}

/* Rows [r0, r1) of the (outer, inner) view. */
static void fbx__copy_task(void *arg, int64_t r0, int64_t r1, int worker) {
  const fbx__copy_job *j = arg;
  int r = j->rank;
  int64_t inner = j->dims[r - 1], ist = j->st[r - 1];
  int64_t idx[FBX__MAXR];
  int64_t rem = r0, off = 0;
  for (int d = r - 2; d >= 0; d--) {
    idx[d] = rem % j->dims[d];
    rem /= j->dims[d];
    off += idx[d] * j->st[d];
  }
  int64_t e = (int64_t)j->esz;
  for (int64_t row = r0; row < r1; row++) {
    fbx__copy_run(j->dst + row * inner * e, j->src + off * e, j->esz, inner, ist);
    for (int d = r - 2; d >= 0; d--) {
      off += j->st[d];
      if (++idx[d] < j->dims[d]) break;
      off -= idx[d] * j->st[d];
      idx[d] = 0;
    }
  }
}

/* 2-D transpose-like copy: dst (R, C) <- src[i*sr + k*1 ... ] with sc != 1, and
 * some dim with unit stride: tile it so both sides stay in cache. */
typedef struct fbx__tr_job {
  unsigned char *dst;
  const unsigned char *src;
  size_t esz;
  int64_t B, R, C;          /* batch, rows, cols of dst */
  int64_t sb, sr;           /* src strides of batch and rows; cols stride is 1... swapped */
} fbx__tr_job;

/* dst[b, i, j] = src[b*sb + j*sr + i]: src is (B, C, R) contiguous in its last dim */
static void fbx__tr_task(void *arg, int64_t t0, int64_t t1, int worker) {
  const fbx__tr_job *j = arg;
  int64_t tiles_r = (j->R + 31) / 32, tiles_c = (j->C + 31) / 32;
  for (int64_t t = t0; t < t1; t++) {
    int64_t b = t / (tiles_r * tiles_c), rt = (t / tiles_c) % tiles_r, ct = t % tiles_c;
    int64_t i0 = rt * 32, i1 = i0 + 32 < j->R ? i0 + 32 : j->R;
    int64_t c0 = ct * 32, c1 = c0 + 32 < j->C ? c0 + 32 : j->C;
#define TR(T)                                                                   \
    do {                                                                        \
      T *d = (T *)j->dst + b * j->R * j->C;                                     \
      const T *s = (const T *)j->src + b * j->sb;                               \
      for (int64_t i = i0; i < i1; i++)                                         \
        for (int64_t k = c0; k < c1; k++) d[i * j->C + k] = s[k * j->sr + i];   \
    } while (0)
    switch (j->esz) {
      case 1: TR(uint8_t); break;
      case 2: TR(uint16_t); break;
      case 4: TR(uint32_t); break;
      default: TR(uint64_t); break;
    }
#undef TR
  }
}

/* One coalesced dim (a contiguous copy: Reshape's 128 x 768 floats at
 * prefill, or one strided run): pieces of FBX__COPY_PIECE elements on the
 * pool, so it is not one thread's memcpy while 15 wait. */
#define FBX__COPY_PIECE ((int64_t)16384)
typedef struct fbx__copy1_job {
  unsigned char *dst;
  const unsigned char *src;
  size_t esz;
  int64_t n, st;
} fbx__copy1_job;

static void fbx__copy1_task(void *arg, int64_t p0, int64_t p1, int worker) {
  (void)worker;
  const fbx__copy1_job *j = arg;
  int64_t b = p0 * FBX__COPY_PIECE, e = p1 * FBX__COPY_PIECE < j->n ? p1 * FBX__COPY_PIECE : j->n;
  fbx__copy_run(j->dst + b * (int64_t)j->esz, j->src + b * j->st * (int64_t)j->esz, j->esz, e - b, j->st);
}

void fbx_cpu_strided_copy(fbx_cpu_ctx *c, void *dst, const void *src, size_t esz, int rank,
                          const int64_t *dims, const int64_t *sstrides) {
  fbx__copy_job j;
  j.dst = dst;
  j.src = src;
  j.esz = esz;
  int64_t total = 1;
  int r = 0;
  for (int d = 0; d < rank; d++) {
    total *= dims[d];
    if (dims[d] == 1) continue;
    if (r > 0 && j.st[r - 1] == sstrides[d] * dims[d]) {
      j.dims[r - 1] *= dims[d];
      j.st[r - 1] = sstrides[d];
    } else {
      j.dims[r] = dims[d];
      j.st[r] = sstrides[d];
      r++;
    }
  }
  if (total == 0) return;
  if (r == 0) {
    memcpy(dst, src, esz);
    return;
  }
  j.rank = r;
  bool big = (int64_t)esz * total >= (1 << 18);
  /* transpose of the last two dims (src unit stride on the second-to-last) */
  if ((r == 2 || r == 3) && j.st[r - 2] == 1 && j.st[r - 1] != 1 && j.st[r - 1] != 0 &&
      (esz == 1 || esz == 2 || esz == 4 || esz == 8)) {
    fbx__tr_job t = {.dst = dst, .src = src, .esz = esz, .B = r == 3 ? j.dims[0] : 1,
                     .R = j.dims[r - 2], .C = j.dims[r - 1], .sb = r == 3 ? j.st[0] : 0, .sr = j.st[r - 1]};
    int64_t ntiles = t.B * ((t.R + 31) / 32) * ((t.C + 31) / 32);
    if (big && c) fbx_cpu_par(c, ntiles, 4, fbx__tr_task, &t);
    else fbx__tr_task(&t, 0, ntiles, 0);
    return;
  }
  if (r == 1 && big && c) {
    fbx__copy1_job o = {.dst = dst, .src = src, .esz = esz, .n = j.dims[0], .st = j.st[0]};
    fbx_cpu_par(c, (o.n + FBX__COPY_PIECE - 1) / FBX__COPY_PIECE, 1, fbx__copy1_task, &o);
    return;
  }
  int64_t rows = total / j.dims[r - 1];
  if (big && c)
    fbx_cpu_par(c, rows, 1 + 16384 / j.dims[r - 1], fbx__copy_task, &j);
  else
    fbx__copy_task(&j, 0, rows, 0);
}
